"""Which version of each API the client speaks: the highest both sides have (sans-IO).

:data:`CLIENT_API_VERSIONS` is the range of every API the client's request builders and
response readers handle. Each connection asks the broker ApiVersions once and
:func:`negotiate` keeps, per API, the highest version inside both ranges. Some caps are below
what kio has on purpose:

* Produce ≤ 11, TxnOffsetCommit ≤ 3, AddOffsetsToTxn ≤ 3, EndTxn ≤ 3, InitProducerId ≤ 4: the next
  versions belong to KIP-890 part 2 (the broker adds partitions to a transaction implicitly and
  bumps the epoch per transaction), a protocol this producer does not implement.
* Fetch ≤ 12, DeleteTopics ≤ 5: later versions address topics by id only.
* FindCoordinator ≤ 4, ListGroups ≤ 4: newer versions add share groups and type filters the
  client does not send.
* JoinGroup ≤ 5, SyncGroup ≤ 3, LeaveGroup ≤ 3 (the last non-flexible versions; static
  membership is in all three): the flexible versions add only tagged fields, reasons and a
  protocol echo the consumer does not use, and librdkafka's mock cluster advertises them but
  misreads JoinGroup v6 / SyncGroup v4 and writes a LeaveGroup v4 answer that does not parse.
  Kafka 4.0 (KIP-896) still serves all three.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from trikafka.protocol.registry import ApiKey

__all__ = ["API", "CLIENT_API_VERSIONS", "negotiate"]


#: Kafka's api keys by name, for readable call sites (``API.PRODUCE``): the protocol
#: layer's one table, not a second one.
API = ApiKey


#: api key → (lowest, highest) version the client can build and read.
CLIENT_API_VERSIONS: dict[int, tuple[int, int]] = {
    API.PRODUCE: (3, 11),
    API.FETCH: (4, 12),
    API.LIST_OFFSETS: (1, 7),
    API.METADATA: (1, 12),
    API.OFFSET_COMMIT: (2, 8),
    API.OFFSET_FETCH: (1, 7),
    API.FIND_COORDINATOR: (1, 4),
    API.JOIN_GROUP: (0, 5),
    API.HEARTBEAT: (0, 4),
    API.LEAVE_GROUP: (0, 3),
    API.SYNC_GROUP: (0, 3),
    API.DESCRIBE_GROUPS: (0, 5),
    API.LIST_GROUPS: (0, 4),
    API.API_VERSIONS: (0, 3),
    API.CREATE_TOPICS: (2, 7),
    API.DELETE_TOPICS: (1, 5),
    API.DELETE_RECORDS: (0, 2),
    API.INIT_PRODUCER_ID: (0, 4),
    API.ADD_PARTITIONS_TO_TXN: (0, 3),
    API.ADD_OFFSETS_TO_TXN: (0, 3),
    API.END_TXN: (0, 3),
    API.TXN_OFFSET_COMMIT: (0, 3),
    API.DESCRIBE_CONFIGS: (1, 4),
    API.ALTER_CONFIGS: (0, 2),
    API.CREATE_PARTITIONS: (0, 3),
    API.DELETE_GROUPS: (0, 2),
    API.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    API.OFFSET_DELETE: (0, 0),
    API.DESCRIBE_CLUSTER: (0, 1),
    API.DESCRIBE_LOG_DIRS: (1, 4),
    API.CONSUMER_GROUP_DESCRIBE: (0, 1),
    API.SASL_HANDSHAKE: (1, 1),
    API.SASL_AUTHENTICATE: (0, 2),
    API.SHARE_GROUP_HEARTBEAT: (1, 1),
    API.SHARE_GROUP_DESCRIBE: (1, 1),
    API.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 1),
    API.ALTER_SHARE_GROUP_OFFSETS: (0, 0),
    API.SHARE_FETCH: (1, 2),
    API.SHARE_ACKNOWLEDGE: (1, 2),
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
