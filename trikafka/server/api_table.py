"""The API families a broker serves, named without importing them, and the API table it
advertises: what ``server/wiring.py`` builds a KafkaApis from.

Each family is a :class:`~trikafka.server.kafka_apis.LazyFamily`: a function that imports its
class (below, one per family, so every import of ``apis/`` is written here) and the api keys
it answers. KafkaApis calls the function and builds the family when one of its APIs is first
asked for, so a broker answers its first ApiVersions without importing the others. A family
added in ``apis/`` is added here with the api keys its ``@handles`` methods answer;
``tests/server/test_wiring.py`` imports every family and holds each to its keys.
"""

from __future__ import annotations

import logging

from trikafka.config import BrokerConfig
from trikafka.config.kafka_versions import KafkaProfile, profile
from trikafka.protocol.registry import IMPLEMENTED_APIS, ApiKey, api_name
from trikafka.server.kafka_apis import ApiFamily, LazyFamily

__all__ = ["API_FAMILIES", "CONSUMER_PROTOCOL_APIS", "TELEMETRY_APIS", "kafka_profile", "log_kafka_profile",
           "listed_min", "supported_apis"]

# Each family's class, imported when KafkaApis first needs it (an import inside a function runs
# when it is called): a fresh broker answers its first ApiVersions without importing the rest.


def _api_versions_apis() -> type[ApiFamily]:
    from trikafka.server.apis.versions import ApiVersionsApis

    return ApiVersionsApis


def _feature_apis() -> type[ApiFamily]:
    from trikafka.server.apis.versions import FeatureApis

    return FeatureApis


def _metadata_apis() -> type[ApiFamily]:
    from trikafka.server.apis.metadata import MetadataApis

    return MetadataApis


def _topic_admin_apis() -> type[ApiFamily]:
    from trikafka.server.apis.topics import TopicAdminApis

    return TopicAdminApis


def _produce_apis() -> type[ApiFamily]:
    from trikafka.server.apis.produce import ProduceApis

    return ProduceApis


def _producer_apis() -> type[ApiFamily]:
    from trikafka.server.apis.producers import ProducerApis

    return ProducerApis


def _fetch_apis() -> type[ApiFamily]:
    from trikafka.server.apis.fetch import FetchApis

    return FetchApis


def _offset_apis() -> type[ApiFamily]:
    from trikafka.server.apis.offsets import OffsetApis

    return OffsetApis


def _config_apis() -> type[ApiFamily]:
    from trikafka.server.apis.configs import ConfigApis

    return ConfigApis


def _cluster_apis() -> type[ApiFamily]:
    from trikafka.server.apis.configs import ClusterApis

    return ClusterApis


def _group_apis() -> type[ApiFamily]:
    from trikafka.server.apis.groups import GroupApis

    return GroupApis


def _consumer_group_apis() -> type[ApiFamily]:
    from trikafka.server.apis.consumer_groups import ConsumerGroupApis

    return ConsumerGroupApis


def _share_group_apis() -> type[ApiFamily]:
    from trikafka.server.apis.share_groups import ShareGroupApis

    return ShareGroupApis


def _share_fetch_apis() -> type[ApiFamily]:
    from trikafka.server.apis.share_fetch import ShareFetchApis

    return ShareFetchApis


def _share_offset_apis() -> type[ApiFamily]:
    from trikafka.server.apis.share_offsets import ShareOffsetApis

    return ShareOffsetApis


def _group_offset_apis() -> type[ApiFamily]:
    from trikafka.server.apis.group_offsets import GroupOffsetApis

    return GroupOffsetApis


def _transaction_apis() -> type[ApiFamily]:
    from trikafka.server.apis.transactions import TransactionApis

    return TransactionApis


def _partition_state_apis() -> type[ApiFamily]:
    from trikafka.server.apis.partition_state import PartitionStateApis

    return PartitionStateApis


def _reassignment_apis() -> type[ApiFamily]:
    from trikafka.server.apis.reassignments import ReassignmentApis

    return ReassignmentApis


def _sasl_apis() -> type[ApiFamily]:
    from trikafka.server.apis.sasl import SaslApis

    return SaslApis


def _scram_apis() -> type[ApiFamily]:
    from trikafka.server.apis.scram import ScramApis

    return ScramApis


def _acl_apis() -> type[ApiFamily]:
    from trikafka.server.apis.acls import AclApis

    return AclApis


def _telemetry_apis() -> type[ApiFamily]:
    from trikafka.server.apis.telemetry import TelemetryApis

    return TelemetryApis


def _client_quota_apis() -> type[ApiFamily]:
    from trikafka.server.apis.quotas import ClientQuotaApis

    return ClientQuotaApis


#: Every API family a broker serves and the api keys it answers (each node of an in-process
#: cluster serves the same): the one declaration of which family serves which API;
#: ``tests/server/test_wiring.py`` holds it to the families' ``@handles`` methods.
API_FAMILIES: tuple[LazyFamily, ...] = (
    LazyFamily(_api_versions_apis, (ApiKey.API_VERSIONS,)),
    LazyFamily(_feature_apis, (ApiKey.UPDATE_FEATURES,)),
    LazyFamily(_metadata_apis, (ApiKey.METADATA,)),
    LazyFamily(_topic_admin_apis, (ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS)),
    LazyFamily(_produce_apis, (ApiKey.PRODUCE,)),
    LazyFamily(_producer_apis, (ApiKey.INIT_PRODUCER_ID,), coordinators=True),
    LazyFamily(_fetch_apis, (ApiKey.FETCH,)),
    LazyFamily(_offset_apis, (ApiKey.LIST_OFFSETS, ApiKey.DELETE_RECORDS)),
    LazyFamily(_config_apis, (ApiKey.DESCRIBE_CONFIGS, ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS)),
    LazyFamily(_cluster_apis, (ApiKey.DESCRIBE_CLUSTER,)),
    LazyFamily(
        _group_apis,
        (ApiKey.FIND_COORDINATOR, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP,
         ApiKey.DESCRIBE_GROUPS, ApiKey.LIST_GROUPS, ApiKey.DELETE_GROUPS),
        coordinators=True,
    ),
    LazyFamily(
        _consumer_group_apis,
        (ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE),
        coordinators=True,
    ),
    LazyFamily(_share_group_apis, (ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.SHARE_GROUP_DESCRIBE), coordinators=True),
    LazyFamily(_share_fetch_apis, (ApiKey.SHARE_FETCH, ApiKey.SHARE_ACKNOWLEDGE), coordinators=True),
    LazyFamily(
        _share_offset_apis,
        (ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, ApiKey.ALTER_SHARE_GROUP_OFFSETS, ApiKey.DELETE_SHARE_GROUP_OFFSETS),
        coordinators=True,
    ),
    LazyFamily(
        _group_offset_apis,
        (ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH, ApiKey.OFFSET_DELETE),
        coordinators=True,
    ),
    LazyFamily(
        _transaction_apis,
        (ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.END_TXN, ApiKey.TXN_OFFSET_COMMIT,
         ApiKey.DESCRIBE_TRANSACTIONS, ApiKey.LIST_TRANSACTIONS),
        coordinators=True,
    ),
    LazyFamily(
        _partition_state_apis,
        (ApiKey.OFFSET_FOR_LEADER_EPOCH, ApiKey.DESCRIBE_LOG_DIRS, ApiKey.DESCRIBE_PRODUCERS,
         ApiKey.DESCRIBE_TOPIC_PARTITIONS),
    ),
    LazyFamily(
        _reassignment_apis,
        (ApiKey.ELECT_LEADERS, ApiKey.ALTER_PARTITION_REASSIGNMENTS, ApiKey.LIST_PARTITION_REASSIGNMENTS),
    ),
    LazyFamily(_sasl_apis, (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)),
    LazyFamily(_scram_apis, (ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, ApiKey.ALTER_USER_SCRAM_CREDENTIALS)),
    LazyFamily(_acl_apis, (ApiKey.DESCRIBE_ACLS, ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS)),
    LazyFamily(
        _telemetry_apis,
        (ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY, ApiKey.LIST_CONFIG_RESOURCES),
    ),
    LazyFamily(_client_quota_apis, (ApiKey.DESCRIBE_CLIENT_QUOTAS, ApiKey.ALTER_CLIENT_QUOTAS)),
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
