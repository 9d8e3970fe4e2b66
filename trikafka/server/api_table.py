"""The API families a broker serves, named without importing them, and the API table it
advertises: what ``server/wiring.py`` builds a KafkaApis from.

Each family is a :class:`~trikafka.server.kafka_apis.LazyFamily`: its module is imported and
the family built when one of its APIs is first asked for (``server/kafka_apis.py``), so a
broker answers its first ApiVersions without importing the others. A family added in
``apis/`` is added here with the api keys its ``@handles`` methods answer;
``tests/server/test_wiring.py`` builds every family and holds each to its keys.
"""

from __future__ import annotations

import logging

from trikafka.config import BrokerConfig
from trikafka.config.kafka_versions import KafkaProfile, profile
from trikafka.protocol.registry import IMPLEMENTED_APIS, ApiKey, api_name
from trikafka.server.kafka_apis import LazyFamily

__all__ = ["API_FAMILIES", "CONSUMER_PROTOCOL_APIS", "TELEMETRY_APIS", "kafka_profile", "log_kafka_profile",
           "listed_min", "supported_apis"]

#: Every API family a broker serves (each node of an in-process cluster serves the same).
API_FAMILIES: tuple[LazyFamily, ...] = (
    LazyFamily("trikafka.server.apis.versions:ApiVersionsApis", (ApiKey.API_VERSIONS,)),
    LazyFamily("trikafka.server.apis.versions:FeatureApis", (ApiKey.UPDATE_FEATURES,)),
    LazyFamily("trikafka.server.apis.metadata:MetadataApis", (ApiKey.METADATA,)),
    LazyFamily(
        "trikafka.server.apis.topics:TopicAdminApis",
        (ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS),
    ),
    LazyFamily("trikafka.server.apis.produce:ProduceApis", (ApiKey.PRODUCE,)),
    LazyFamily("trikafka.server.apis.producers:ProducerApis", (ApiKey.INIT_PRODUCER_ID,), coordinators=True),
    LazyFamily("trikafka.server.apis.fetch:FetchApis", (ApiKey.FETCH,)),
    LazyFamily("trikafka.server.apis.offsets:OffsetApis", (ApiKey.LIST_OFFSETS, ApiKey.DELETE_RECORDS)),
    LazyFamily(
        "trikafka.server.apis.configs:ConfigApis",
        (ApiKey.DESCRIBE_CONFIGS, ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS),
    ),
    LazyFamily("trikafka.server.apis.configs:ClusterApis", (ApiKey.DESCRIBE_CLUSTER,)),
    LazyFamily(
        "trikafka.server.apis.groups:GroupApis",
        (ApiKey.FIND_COORDINATOR, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP,
         ApiKey.DESCRIBE_GROUPS, ApiKey.LIST_GROUPS, ApiKey.DELETE_GROUPS),
        coordinators=True,
    ),
    LazyFamily(
        "trikafka.server.apis.consumer_groups:ConsumerGroupApis",
        (ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE),
        coordinators=True,
    ),
    LazyFamily(
        "trikafka.server.apis.share_groups:ShareGroupApis",
        (ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.SHARE_GROUP_DESCRIBE),
        coordinators=True,
    ),
    LazyFamily(
        "trikafka.server.apis.share_fetch:ShareFetchApis",
        (ApiKey.SHARE_FETCH, ApiKey.SHARE_ACKNOWLEDGE),
        coordinators=True,
    ),
    LazyFamily(
        "trikafka.server.apis.share_offsets:ShareOffsetApis",
        (ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, ApiKey.ALTER_SHARE_GROUP_OFFSETS,
         ApiKey.DELETE_SHARE_GROUP_OFFSETS),
        coordinators=True,
    ),
    LazyFamily(
        "trikafka.server.apis.group_offsets:GroupOffsetApis",
        (ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH, ApiKey.OFFSET_DELETE),
        coordinators=True,
    ),
    LazyFamily(
        "trikafka.server.apis.transactions:TransactionApis",
        (ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.END_TXN, ApiKey.TXN_OFFSET_COMMIT,
         ApiKey.DESCRIBE_TRANSACTIONS, ApiKey.LIST_TRANSACTIONS),
        coordinators=True,
    ),
    LazyFamily(
        "trikafka.server.apis.partition_state:PartitionStateApis",
        (ApiKey.OFFSET_FOR_LEADER_EPOCH, ApiKey.DESCRIBE_LOG_DIRS, ApiKey.DESCRIBE_PRODUCERS,
         ApiKey.DESCRIBE_TOPIC_PARTITIONS),
    ),
    LazyFamily(
        "trikafka.server.apis.reassignments:ReassignmentApis",
        (ApiKey.ELECT_LEADERS, ApiKey.ALTER_PARTITION_REASSIGNMENTS, ApiKey.LIST_PARTITION_REASSIGNMENTS),
    ),
    LazyFamily("trikafka.server.apis.sasl:SaslApis", (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE,)),
    LazyFamily(
        "trikafka.server.apis.scram:ScramApis",
        (ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, ApiKey.ALTER_USER_SCRAM_CREDENTIALS),
    ),
    LazyFamily(
        "trikafka.server.apis.acls:AclApis",
        (ApiKey.DESCRIBE_ACLS, ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS),
    ),
    LazyFamily(
        "trikafka.server.apis.telemetry:TelemetryApis",
        (ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY, ApiKey.LIST_CONFIG_RESOURCES),
    ),
    LazyFamily(
        "trikafka.server.apis.quotas:ClientQuotaApis",
        (ApiKey.DESCRIBE_CLIENT_QUOTAS, ApiKey.ALTER_CLIENT_QUOTAS),
    ),
)

#: KIP-848's consumer-group APIs, advertised only with ``consumer`` in
#: ``group.coordinator.rebalance.protocols``.
CONSUMER_PROTOCOL_APIS = (ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE)


#: KIP-714's client telemetry APIs, advertised only with ``client.telemetry.enable``.
TELEMETRY_APIS = (ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY)
#: The first Kafka release with them (KIP-714, 3.7): a profile of it or later, with
#: ``client.telemetry.enable``, advertises them as that Kafka with a receiver would.
TELEMETRY_SINCE = (3, 7)


def _own_apis(config: BrokerConfig) -> dict[int, tuple[int, int]]:
    apis = dict(IMPLEMENTED_APIS)
    if "consumer" not in config.group_coordinator_rebalance_protocols:
        for key in CONSUMER_PROTOCOL_APIS:
            apis.pop(key, None)
    return apis


def kafka_profile(config: BrokerConfig) -> KafkaProfile | None:
    """``kafka.version``'s profile over what this broker serves, or None without one."""
    if config.kafka_version is None:
        return None
    return profile(config.kafka_version, _own_apis(config), api_name)


def log_kafka_profile(config: BrokerConfig, logger: logging.Logger) -> None:
    """The one INFO line a broker or cluster with ``kafka.version`` writes at start."""
    found = kafka_profile(config)
    if found is not None:
        logger.info("%s", found.summary())


def listed_min(config: BrokerConfig) -> dict[int, int]:
    """api key → the min version ApiVersions lists below the min served: with a Kafka 4
    ``kafka.version``, Produce from v0 (refused at v0-2, as Kafka 4 does: KAFKA-18659)."""
    found = kafka_profile(config)
    return dict(found.listed_min) if found is not None else {}


def supported_apis(config: BrokerConfig) -> dict[int, tuple[int, int]]:
    """The API table this broker advertises: the consumer protocol's APIs only when
    ``group.coordinator.rebalance.protocols`` lists ``consumer``; with ``kafka.version``,
    that release's ranges cut to what trikafka serves; the telemetry APIs only with
    ``client.telemetry.enable`` (as Kafka advertises them only with a telemetry receiver:
    a request for an API not advertised closes the connection, Kafka's answer)."""
    found = kafka_profile(config)
    apis = dict(found.apis) if found is not None else _own_apis(config)
    for key in TELEMETRY_APIS:
        if not config.client_telemetry_enable:
            apis.pop(key, None)
        elif found is not None and _release(found.release) >= TELEMETRY_SINCE:
            # A profile's tables are Kafka's without a telemetry receiver, which leaves them out.
            apis[key] = IMPLEMENTED_APIS[key]
    return apis


def _release(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in release.split("."))
