"""What of Kafka's API the broker does not serve: the one table ``python -m trikafka --help``
and docs/features.md are written from (``tests/test_served_table.py`` holds both, and the
table itself, to what the broker implements).

Pure data, so ``--help`` reads it without loading the protocol layer.
"""

from __future__ import annotations

__all__ = ["NOT_SERVED", "not_served_summary", "not_served_table"]

#: (what, Kafka's API names, why): each group of Kafka's APIs trikafka does not serve.
NOT_SERVED: tuple[tuple[str, tuple[str, ...], str], ...] = (
    (
        "delegation tokens",
        ("CreateDelegationToken", "RenewDelegationToken", "ExpireDelegationToken", "DescribeDelegationToken"),
        "token authentication (KIP-48); the SASL mechanisms of docs/security.md are served",
    ),
    ("AlterReplicaLogDirs", ("AlterReplicaLogDirs",), "replicas do not move between data directories"),
    (
        "DescribeQuorum and the KRaft voter",
        ("DescribeQuorum", "AddRaftVoter", "RemoveRaftVoter", "UnregisterBroker", "UnregisterController"),
        "there is no KRaft controller quorum: a cluster lives in one process",
    ),
    (
        "share-group state",
        ("InitializeShareGroupState", "ReadShareGroupState", "WriteShareGroupState", "DeleteShareGroupState",
         "ReadShareGroupStateSummary"),
        "broker-to-share-coordinator APIs; share groups themselves are served",
    ),
    (
        "streams groups",
        ("StreamsGroupHeartbeat", "StreamsGroupDescribe", "StreamsGroupTopologyDescriptionUpdate"),
        "KIP-1071's streams rebalance protocol",
    ),
    ("WriteTxnMarkers", ("WriteTxnMarkers",), "broker-to-broker: the transaction markers are written in-process"),
)


def not_served_summary() -> str:
    """One line for ``--help``: what a version profile lacks of a Kafka release."""
    return ", ".join(what for what, _, _ in NOT_SERVED) + ", the oldest versions of some APIs"


def not_served_table() -> str:
    """docs/features.md's table (a Markdown table), generated when the site is built."""
    lines = ["| not served | Kafka's APIs | why |", "|---|---|---|"]
    lines += [f"| {what} | {', '.join(names)} | {why} |" for what, names, why in NOT_SERVED]
    return "\n".join(lines) + "\n"
