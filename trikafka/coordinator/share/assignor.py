"""Kafka's simple assignor for share groups: every partition to at least one member, every
member at least one partition when there are any, and a partition to many members when the
members outnumber the partitions (records, not partitions, are what a share group shares).

Per topic, the members subscribed to it (sorted by id) and its partitions are laid side by
side and paired round-robin over the longer of the two: with 2 partitions and 5 members, each
partition goes to 2 or 3 members; with 5 partitions and 2 members, each member gets 2 or 3
partitions. The result depends only on the members and the partition counts, so it is the
same after a restart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["assign_simple"]


def assign_simple(
    subscriptions: Mapping[str, tuple[str, ...]], partitions: Mapping[str, Sequence[int]]
) -> dict[str, dict[str, frozenset[int]]]:
    """member id → {topic: partitions} for ``subscriptions`` (member → topics) over
    ``partitions`` (topic → the partitions that may be assigned, sorted: those whose share
    state is initialized; a topic missing there is not assigned)."""
    result: dict[str, dict[str, set[int]]] = {m: {} for m in subscriptions}
    for topic, parts in sorted(partitions.items()):
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if not members or not parts:
            continue
        for i in range(max(len(members), len(parts))):
            result[members[i % len(members)]].setdefault(topic, set()).add(parts[i % len(parts)])
    return {m: {t: frozenset(p) for t, p in topics.items()} for m, topics in result.items()}
