"""Broker configuration with Kafka's key names and defaults.

``BrokerConfig`` is frozen; every field carries its Kafka key (``num.network.threads``), a
parser for the string form found in ``server.properties`` and a validator. Python code may use
either spelling (``num_network_threads=3`` or ``{"num.network.threads": "3"}``). Kafka's keys it
lacks are accepted with an INFO line (``kafka_keys``), others refused with the closest known key
suggested; a bad value names the key, the value and what is allowed.
"""

from __future__ import annotations

import difflib
import logging
import os
from collections.abc import Iterable, Mapping
from typing import Any, cast

import attrs

from trikafka.config import groups as group_configs
from trikafka.config import racks as rack_configs
from trikafka.config import share as share_configs
from trikafka.config.dev import with_dev_defaults
from trikafka.config.fields import (
    ListenerSpec,
    advertised_listeners_field,
    cluster_id_field,
    connection_overrides_field,
    listeners_field,
    log_dirs_field,
    parse_listeners,
)
from trikafka.config.fields import bool_field as _bool_field
from trikafka.config.fields import check_host as _check_host
from trikafka.config.fields import check_queued_max_request_bytes as _check_queued_max_request_bytes
from trikafka.config.fields import field as _field
from trikafka.config.fields import int_bounds as _int
from trikafka.config.fields import int_field as _int_field
from trikafka.config.fields import topic_default as _topic_default
from trikafka.config.kafka_keys import KAFKA_BROKER_KEYS, no_effect_reason
from trikafka.config.kafka_versions import kafka_version_field
from trikafka.config.properties import TIME_ALIASES, read_properties_file, resolve_time_aliases
from trikafka.config.topics import INT32_MAX, INT64_MAX
from trikafka.errors import ConfigError
from trikafka.security import config as security

__all__ = [
    "BrokerConfig", "changed_from_defaults", "config_keys", "parse_listeners", "read_properties_file", "ListenerSpec",
]


class _PropertiesForm:
    """``BrokerConfig``'s construction from Kafka keys and ``server.properties``, and its way back."""

    __slots__ = ()

    @classmethod
    def from_properties(
        cls, source: Mapping[str, Any] | str | os.PathLike | None = None, **overrides: Any
    ) -> BrokerConfig:
        """Build from a mapping or a ``server.properties`` file; ``overrides`` win."""
        items = source if source is None or isinstance(source, Mapping) else read_properties_file(source)
        return cls.from_mapping({**(items or {}), **overrides})

    @classmethod
    def coerce(
        cls, config: BrokerConfig | Mapping[str, Any] | None = None, *, kafka_defaults: bool = False,
        **overrides: Any,
    ) -> BrokerConfig:
        """What ``open_broker`` and ``open_cluster`` take: a BrokerConfig (taken as it is), or
        Kafka keys or None (one listener on a free port of 127.0.0.1) under the dev defaults
        (``trikafka.config.dev``; ``kafka_defaults=True``: Kafka's own); overrides in either
        spelling win."""
        if isinstance(config, BrokerConfig):
            return config.with_overrides(**overrides) if overrides else config
        items = {**(config or {"listeners": "PLAINTEXT://127.0.0.1:0"}), **overrides}
        return cls.from_mapping(items if kafka_defaults else with_dev_defaults(items)[0])

    @classmethod
    def from_mapping(cls, items: Mapping[str, object]) -> BrokerConfig:
        items, secure = security.split_security_keys(resolve_time_aliases(items))
        return cast("type[BrokerConfig]", cls)(security=secure, **_typed_fields(items))  # type: ignore[arg-type]  # its converter builds the SecurityConfig

    def with_overrides(self, **changes: Any) -> BrokerConfig:
        config_class = cast("type[BrokerConfig]", type(self))  # this mixin is BrokerConfig's alone
        merged = {f.name: getattr(self, f.name) for f in attrs.fields(config_class)}
        changes, secure = security.split_security_keys(resolve_time_aliases(changes))
        merged["security"] = merged["security"].merged(secure)
        merged.update(_typed_fields(changes))
        return config_class(**merged)

    def as_properties(self) -> dict[str, str]:
        """Kafka key → string value, as DescribeConfigs and the CLI banner show them."""
        out: dict[str, str] = {}
        for field in attrs.fields(cast("type[BrokerConfig]", type(self))):
            value = getattr(self, field.name)
            if isinstance(value, security.SecurityConfig):
                out.update(value.as_properties())
                continue
            if value is None:
                text = ""
            elif isinstance(value, tuple) and value and isinstance(value[0], ListenerSpec):
                text = ",".join(map(str, value))
            elif isinstance(value, tuple):
                text = ",".join(value)
            elif isinstance(value, Mapping):
                text = ",".join(f"{k}:{v}" for k, v in value.items())
            elif isinstance(value, bool):
                text = str(value).lower()
            else:
                text = str(value)
            out[field.metadata["key"]] = text
        return out


@attrs.frozen(kw_only=True)
class BrokerConfig(_PropertiesForm, share_configs.ShareGroupKeys):
    """The broker's settings. Field names are Kafka's keys with ``_`` for ``.``."""

    node_id: int = _int_field("node.id", 1, "This broker's id in Metadata responses.", 0, INT32_MAX)
    listeners: tuple[ListenerSpec, ...] = listeners_field()
    advertised_listeners: tuple[ListenerSpec, ...] | None = advertised_listeners_field()
    cluster_id: str | None = cluster_id_field()
    broker_rack: str | None = rack_configs.rack_field(
        "This broker's rack (KIP-36), in Metadata and DescribeCluster; with --brokers N a "
        "comma-separated list gives broker i entry i mod len."
    )
    replica_selector_class: str | None = rack_configs.selector_field(
        "KIP-392: org.apache.kafka.common.replica.RackAwareReplicaSelector sends a consumer with "
        "client.rack to an in-sync replica in its rack."
    )
    kafka_version: str | None = kafka_version_field(
        "Advertise the API versions and features this Kafka release served (2.8 .. 4.4), cut to what "
        "trikafka serves (docs/version-profiles.md); unset: everything trikafka serves."
    )
    log_dirs: tuple[str, ...] | None = log_dirs_field()
    num_network_threads: int = _int_field(
        "num.network.threads", 3, "Processor tasks per listener.", 1, 1024
    )
    num_io_threads: int = _int_field("num.io.threads", 8, "Request handler tasks.", 1, 1024)
    queued_max_requests: int = _int_field(
        "queued.max.requests", 500, "Capacity of the shared request channel.", 1, INT32_MAX
    )
    socket_request_max_bytes: int = _int_field(
        "socket.request.max.bytes", 104857600, "Largest request frame accepted.", 1, INT32_MAX
    )
    queued_max_request_bytes: int = _field(
        "queued.max.request.bytes",
        -1,
        _int(-(2**63))[0],
        _check_queued_max_request_bytes,
        "Bytes of requests read but not yet handled, broker-wide, before no more are read; "
        "<= 0 is unbounded.",
    )
    socket_send_buffer_bytes: int = _int_field(
        "socket.send.buffer.bytes", 102400, "SO_SNDBUF of accepted sockets; -1 keeps the OS's.", -1, INT32_MAX
    )
    socket_receive_buffer_bytes: int = _int_field(
        "socket.receive.buffer.bytes", 102400, "SO_RCVBUF of accepted sockets; -1 keeps the OS's.", -1, INT32_MAX
    )
    connections_max_idle_ms: int = _int_field(
        "connections.max.idle.ms", 600000, "Idle connections are closed after this long.", 1
    )
    max_connections: int = _int_field(
        "max.connections", INT32_MAX, "Connections accepted across all listeners.", 0, INT32_MAX
    )
    max_connections_per_ip: int = _int_field(
        "max.connections.per.ip", INT32_MAX, "Connections accepted from one address.", 0, INT32_MAX
    )
    max_connections_per_ip_overrides: Mapping[str, int] = connection_overrides_field()
    max_connection_creation_rate: int = _int_field(
        "max.connection.creation.rate",
        INT32_MAX,
        "New connections per second across listeners; over it the acceptor waits (KIP-612).",
        0,
        INT32_MAX,
    )
    quota_window_num: int = _int_field(
        "quota.window.num", 11, "Samples a client quota's rate is measured over.", 1, INT32_MAX
    )
    quota_window_size_seconds: int = _int_field(
        "quota.window.size.seconds", 1, "Seconds each quota sample spans.", 1, INT32_MAX
    )
    client_telemetry_enable: bool = _bool_field(
        "client.telemetry.enable", False,
        "Receive client telemetry (KIP-714): advertise GetTelemetrySubscriptions and PushTelemetry, "
        "as Kafka does once a telemetry receiver is configured; off, clients never start the exchange.",
    )
    telemetry_max_bytes: int = _int_field(
        "telemetry.max.bytes", 1_048_576, "The largest PushTelemetry metrics payload a client may send (KIP-714).",
        1, INT32_MAX,
    )
    max_incremental_fetch_session_cache_slots: int = _int_field(
        "max.incremental.fetch.session.cache.slots", 1000, "Incremental fetch sessions kept (KIP-227).", 0, INT32_MAX
    )
    max_broker_partitions: int = _int_field(
        "max.broker.partitions",
        200_000,
        "Partitions of all topics together (internal ones too) this broker holds; CreateTopics and "
        "CreatePartitions beyond it get POLICY_VIOLATION (trikafka's; KIP-578's proposed name).",
        1,
        INT32_MAX,
    )
    # --- topics and logs (Kafka's broker-level defaults for topic configs) -----------------
    auto_create_topics_enable: bool = _bool_field(
        "auto.create.topics.enable", True, "Metadata and Produce create unknown topics."
    )
    num_partitions: int = _int_field("num.partitions", 1, "Partitions of auto-created topics.", 1, 1_000_000)
    default_replication_factor: int = _int_field(
        "default.replication.factor", 1, "Replication factor of topics created without one.", 1, INT32_MAX
    )
    min_insync_replicas: int = _topic_default("min.insync.replicas")
    delete_topic_enable: bool = _bool_field("delete.topic.enable", True, "DeleteTopics is allowed.")
    message_max_bytes: int = _topic_default("max.message.bytes")
    compression_type: str = _topic_default("compression.type")
    log_message_timestamp_type: str = _topic_default("message.timestamp.type")
    log_segment_bytes: int = _topic_default("segment.bytes")
    log_roll_ms: int = _topic_default("segment.ms")
    log_retention_ms: int = _topic_default("retention.ms")
    log_retention_bytes: int = _topic_default("retention.bytes")
    log_retention_check_interval_ms: int = _int_field(
        "log.retention.check.interval.ms", 300000, "How often retention runs.", 1
    )
    log_cleaner_enable: bool = _bool_field(
        "log.cleaner.enable", True, "Run the log cleaner: compaction of cleanup.policy=compact topics."
    )
    log_cleaner_backoff_ms: int = _int_field(
        "log.cleaner.backoff.ms", 15000, "How long the cleaner sleeps when no log needs cleaning.", 0
    )
    log_cleaner_dedupe_buffer_size: int = _int_field(
        "log.cleaner.dedupe.buffer.size", 134217728, "Memory for the cleaner's key map (24 bytes a key).", 1024 * 1024
    )
    log_cleaner_delete_retention_ms: int = _topic_default("delete.retention.ms")
    log_cleaner_min_cleanable_ratio: float = _topic_default("min.cleanable.dirty.ratio")
    log_cleaner_min_compaction_lag_ms: int = _topic_default("min.compaction.lag.ms")
    log_cleaner_max_compaction_lag_ms: int = _topic_default("max.compaction.lag.ms")
    log_flush_interval_messages: int = _topic_default("flush.messages")
    log_flush_interval_ms: int = _topic_default("flush.ms")
    log_flush_scheduler_interval_ms: int = _int_field(
        "log.flush.scheduler.interval.ms", INT64_MAX, "How often the time-based flush is checked.", 1
    )
    log_flush_offset_checkpoint_interval_ms: int = _int_field(
        "log.flush.offset.checkpoint.interval.ms", 60000, "How often recovery points are checkpointed.", 0, INT32_MAX
    )
    log_index_interval_bytes: int = _topic_default("index.interval.bytes")
    # --- consumer groups ---------------------------------------------------------------
    group_initial_rebalance_delay_ms: int = _int_field(
        "group.initial.rebalance.delay.ms",
        3000,
        "How long the first rebalance of an empty group waits for more members.",
        0,
        INT32_MAX,
    )
    group_min_session_timeout_ms: int = _int_field(
        "group.min.session.timeout.ms", 6000, "Smallest session timeout a member may ask for.", 0, INT32_MAX
    )
    group_max_session_timeout_ms: int = _int_field(
        "group.max.session.timeout.ms", 1800000, "Largest session timeout a member may ask for.", 0, INT32_MAX
    )
    group_max_size: int = _int_field("group.max.size", INT32_MAX, "Members one group may have.", 1, INT32_MAX)
    group_coordinator_rebalance_protocols: tuple[str, ...] = group_configs.list_field(
        "group.coordinator.rebalance.protocols",
        group_configs.REBALANCE_PROTOCOLS,
        {p: p for p in group_configs.REBALANCE_PROTOCOLS},
        "Group protocols served: classic (JoinGroup...) and consumer (KIP-848).",
        ("classic",),
    )
    group_consumer_assignors: tuple[str, ...] = group_configs.list_field(
        "group.consumer.assignors",
        ("uniform", "range"),
        {**{n: n for n in group_configs.ASSIGNOR_CLASSES}, **{c: n for n, c in group_configs.ASSIGNOR_CLASSES.items()}},
        "Server-side assignors of consumer groups; the first is the default.",
    )
    group_consumer_heartbeat_interval_ms: int = _int_field(
        "group.consumer.heartbeat.interval.ms",
        5000,
        "Heartbeat interval given to consumer-protocol members.",
        1,
        INT32_MAX,
    )
    group_consumer_min_heartbeat_interval_ms: int = _int_field(
        "group.consumer.min.heartbeat.interval.ms",
        5000,
        "Lower bound of group.consumer.heartbeat.interval.ms.",
        1,
        INT32_MAX,
    )
    group_consumer_max_heartbeat_interval_ms: int = _int_field(
        "group.consumer.max.heartbeat.interval.ms",
        15000,
        "Upper bound of group.consumer.heartbeat.interval.ms.",
        1,
        INT32_MAX,
    )
    group_consumer_session_timeout_ms: int = _int_field(
        "group.consumer.session.timeout.ms",
        45000,
        "A consumer-protocol member missing heartbeats this long is removed.",
        1,
        INT32_MAX,
    )
    group_consumer_min_session_timeout_ms: int = _int_field(
        "group.consumer.min.session.timeout.ms",
        45000,
        "Lower bound of group.consumer.session.timeout.ms.",
        1,
        INT32_MAX,
    )
    group_consumer_max_session_timeout_ms: int = attrs.field(
        default=60000,
        validator=[_int(1, INT32_MAX)[1], group_configs.check_consumer_group_keys],
        metadata={
            "key": "group.consumer.max.session.timeout.ms",
            "parse": _int(1, INT32_MAX)[0],
            "doc": "Upper bound of group.consumer.session.timeout.ms.",
        },
    )
    group_consumer_max_size: int = _int_field(
        "group.consumer.max.size", INT32_MAX, "Members one consumer group may have.", 1, INT32_MAX
    )
    group_consumer_regex_refresh_interval_ms: int = _int_field(
        "group.consumer.regex.refresh.interval.ms",
        600000,
        "How often a consumer group's subscribed regular expressions are resolved again (also when topics change).",
        10000,
        INT32_MAX,
    )
    group_consumer_migration_policy: str = group_configs.choice_field(
        "group.consumer.migration.policy",
        "bidirectional",
        group_configs.MIGRATION_POLICIES,
        "Online conversion of non-empty groups: disabled, downgrade (consumer to classic), upgrade "
        "(classic to consumer) or bidirectional.",
    )
    offsets_topic_num_partitions: int = _int_field(
        "offsets.topic.num.partitions", 50, "Partitions of __consumer_offsets.", 1, 1000
    )
    offsets_topic_replication_factor: int = _int_field(
        "offsets.topic.replication.factor", 3, "Replicas of __consumer_offsets (capped at the cluster size).", 1, 32767
    )
    offsets_topic_segment_bytes: int = _int_field(
        "offsets.topic.segment.bytes", 104857600, "segment.bytes of __consumer_offsets (compacted).", 1, INT32_MAX
    )
    offsets_retention_minutes: int = _int_field(
        "offsets.retention.minutes", 10080, "Committed offsets of an empty group expire after this long.", 1, INT32_MAX
    )
    offsets_retention_check_interval_ms: int = _int_field(
        "offsets.retention.check.interval.ms", 600000, "How often expired offsets are removed.", 1
    )
    offset_metadata_max_bytes: int = _int_field(
        "offset.metadata.max.bytes", 4096, "Largest metadata string stored with a committed offset.", 0, INT32_MAX
    )
    # --- transactions -------------------------------------------------------------------
    transaction_max_timeout_ms: int = _int_field(
        "transaction.max.timeout.ms",
        900000,
        "Largest transaction timeout a producer may ask for; above it InitProducerId answers "
        "INVALID_TRANSACTION_TIMEOUT.",
        1,
        INT32_MAX,
    )
    shutdown_grace_ms: int = _int_field(
        "shutdown.grace.ms", 5000, "trikafka: how long a graceful stop waits for in-flight responses.", 0
    )
    metrics_port: int = _int_field(
        "metrics.port",
        -1,
        "trikafka: HTTP port of /metrics (Prometheus) and the console; -1: off, 0: a free port.",
        -1,
        65535,
    )
    metrics_host: str = _field(
        "metrics.host", "127.0.0.1", lambda v, k: v, _check_host, "trikafka: address the HTTP server binds."
    )
    metrics_allow_remote: bool = _bool_field(
        "metrics.allow.remote",
        False,
        "trikafka: /metrics and the console (metrics.port) are test tools served on loopback; true lets "
        "metrics.host be another address.",
    )
    schema_registry_port: int = _int_field(
        "schema.registry.port",
        -1,
        "trikafka: HTTP port of the Schema Registry (Confluent's REST API, on metrics.host); -1: off, 0: a free port.",
        -1,
        65535,
    )
    rest_proxy_port: int = _int_field(
        "rest.proxy.port",
        -1,
        "trikafka: HTTP port of the HTTP proxy (Confluent's REST Proxy API v2 and v3, on metrics.host); "
        "-1: off, 0: a free port.",
        -1,
        65535,
    )
    consumer_instance_timeout_ms: int = _int_field(
        "consumer.instance.timeout.ms",
        300000,
        "trikafka: how long an HTTP proxy consumer instance lives unused before it is closed "
        "(Confluent REST Proxy's key and default).",
        1,
    )
    security: security.SecurityConfig = security.security_field()  # ssl.*, sasl.*, listener.name.*


def _typed_fields(items: Mapping[str, Any]) -> dict[str, Any]:
    """Field name → typed value for each key; Kafka's keys trikafka lacks: one INFO line each."""
    by_key, typed = _fields_by_key(), {}
    for raw_key, value in items.items():
        key = raw_key.replace("_", ".")
        field = by_key.get(key)
        if field is None and raw_key in KAFKA_BROKER_KEYS:
            logging.getLogger("trikafka.config").info(
                "%s=%s: a Kafka broker key with no effect here (%s)", raw_key, value, no_effect_reason(raw_key)
            )
        elif field is None:
            raise ConfigError(raw_key, value, _unknown_key_hint(raw_key))
        else:
            typed[field.name] = field.metadata["parse"](value.strip(), key) if isinstance(value, str) else value
    return typed


def _fields_by_key() -> dict[str, attrs.Attribute]:
    return {f.metadata["key"]: f for f in attrs.fields(BrokerConfig)}


def config_keys() -> Iterable[tuple[str, str, str]]:
    """(key, default, doc) for every supported key — README's table comes from here."""
    defaults = BrokerConfig().as_properties()
    for field in attrs.fields(BrokerConfig):
        key = field.metadata["key"]
        if field.name != "security":
            yield key, defaults[key], field.metadata["doc"]
    yield from security.security_config_keys()


def _unknown_key_hint(key: str) -> str:
    keys = [*_fields_by_key(), *security.SECURITY_KEYS, *(alias for alias, *_ in TIME_ALIASES)]
    close = difflib.get_close_matches(key.replace("_", "."), keys, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown configuration key{hint}"


def changed_from_defaults(config: BrokerConfig, reasons: dict[str, str]) -> dict[str, tuple[str, str]]:
    """key → (value, why) for each key whose value is not the default (listeners and
    log.dirs, shown on their own lines, left out)."""
    defaults = BrokerConfig().as_properties()
    return {
        key: (value, reasons.get(key, ""))
        for key, value in config.as_properties().items()
        if key not in ("listeners", "log.dirs") and (key not in defaults or value != defaults[key])
    }
