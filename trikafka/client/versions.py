"""Which version of each API the client speaks: the highest both sides have (sans-IO).

:data:`CLIENT_API_VERSIONS` is the range of every API the client's request builders and
response readers handle. Each connection asks the broker ApiVersions once and
:func:`negotiate` keeps, per API, the highest version inside both ranges. Some caps are below
what kio has on purpose:

* Produce ≤ 11, TxnOffsetCommit ≤ 3, AddOffsetsToTxn ≤ 3, EndTxn ≤ 3, InitProducerId ≤ 4: the next
  versions belong to KIP-890 part 2 (the broker adds partitions to a transaction implicitly and
  bumps the epoch per transaction), a protocol this producer does not implement.
* Fetch ≤ 12, DeleteTopics ≤ 5: later versions address topics by id only.
* FindCoordinator ≤ 4: newer versions add share groups the client does not look up.
  ListGroups goes to v5 for its ``group_type`` (classic, consumer, share: the admin's
  :class:`GroupListing` ``type``); its type filter is sent empty.
* JoinGroup ≤ 5, SyncGroup ≤ 3, LeaveGroup ≤ 3 (the last non-flexible versions; static
  membership is in all three): the flexible versions add only tagged fields, reasons and a
  protocol echo the consumer does not use, and librdkafka's mock cluster advertises them but
  misreads JoinGroup v6 / SyncGroup v4 and writes a LeaveGroup v4 answer that does not parse.
  Kafka 4.0 (KIP-896) still serves all three.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from trikafka.protocol.registry import ApiKey

__all__ = ["CLIENT_API_VERSIONS", "negotiate"]


#: api key → (lowest, highest) version the client can build and read.
CLIENT_API_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 11),
    ApiKey.FETCH: (4, 12),
    ApiKey.LIST_OFFSETS: (1, 7),
    ApiKey.METADATA: (1, 12),
    ApiKey.OFFSET_COMMIT: (2, 9),  # v9: a KIP-848 member commits with its member epoch
    ApiKey.OFFSET_FETCH: (1, 7),
    ApiKey.FIND_COORDINATOR: (1, 4),
    ApiKey.JOIN_GROUP: (0, 5),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 3),
    ApiKey.SYNC_GROUP: (0, 3),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 5),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 4),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 3),
    ApiKey.END_TXN: (0, 3),
    ApiKey.TXN_OFFSET_COMMIT: (0, 3),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: (0, 0),
    ApiKey.PUSH_TELEMETRY: (0, 0),
    ApiKey.LIST_CONFIG_RESOURCES: (1, 1),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    ApiKey.DESCRIBE_LOG_DIRS: (1, 4),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
    ApiKey.SASL_HANDSHAKE: (1, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.SHARE_GROUP_HEARTBEAT: (1, 1),
    ApiKey.SHARE_GROUP_DESCRIBE: (1, 1),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 1),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKey.SHARE_FETCH: (1, 2),
    ApiKey.SHARE_ACKNOWLEDGE: (1, 2),
}


def negotiate(
    broker: Iterable[tuple[int, int, int]],
    client: Mapping[int, tuple[int, int]] = CLIENT_API_VERSIONS,
) -> dict[int, int]:
    """api key → the version to use, from the broker's (api key, min, max) ranges.

    An API missing from the answer — or whose ranges do not overlap — is missing from the
    result; using it raises UnsupportedVersionError at the call, not at connect.
    """
    chosen: dict[int, int] = {}
    for api_key, broker_lo, broker_hi in broker:
        if api_key not in client:
            continue
        lo, hi = client[api_key]
        version = min(hi, broker_hi)
        if version >= max(lo, broker_lo):
            chosen[api_key] = version
    return chosen
