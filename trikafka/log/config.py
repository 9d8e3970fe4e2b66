"""Per-topic log settings with Kafka's names and defaults.

``LogConfig`` has one field per row of the topic-config table
(:data:`trikafka.config.topics.TOPIC_CONFIGS`): its Kafka key, default, type and allowed range
all come from there, so the log, the admin APIs and the README cannot disagree.

``LogConfig`` is frozen: a topic whose settings change (AlterConfigs) gets a new value and
``Log.config`` is replaced, so nothing ever sees a half-updated configuration. Python code uses
field names (``retention_ms=...``); :meth:`LogConfig.from_properties` also takes Kafka's dotted
keys (``{"retention.ms": "60000"}``), the spelling of ``kafka-configs.sh`` and CreateTopics.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

import attrs

from trikafka.config.topics import INT64_MAX, TOPIC_CONFIGS, format_value
from trikafka.errors import ConfigError

__all__ = ["LogConfig", "INT64_MAX", "TOPIC_CONFIG_KEYS"]


def _check(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    definition = TOPIC_CONFIGS[attribute.metadata["key"]]
    problem = definition.check(value)
    if problem:
        raise ConfigError(definition.name, value, problem)


def _cleanup_converter(value: Any) -> Any:
    if isinstance(value, str):
        return tuple(sorted({p.strip() for p in value.split(",") if p.strip()}))
    return tuple(sorted(set(value)))


def _list_converter(value: Any) -> Any:
    if isinstance(value, str):
        return tuple(p.strip() for p in value.split(",") if p.strip())
    return tuple(value)


def _topic(key: str, **extra: Any) -> Any:
    """The field for topic config ``key``, from its row of the table."""
    return attrs.field(
        default=TOPIC_CONFIGS[key].default, validator=_check, metadata={"key": key}, **extra
    )


@attrs.frozen(kw_only=True)
class LogConfig:
    """A topic's log settings. Field names are Kafka's topic keys with ``_`` for ``.``."""

    cleanup_policy: tuple[str, ...] = _topic("cleanup.policy", converter=_cleanup_converter)
    compression_type: str = _topic("compression.type")
    confluent_key_schema_validation: bool = _topic("confluent.key.schema.validation")
    confluent_key_subject_name_strategy: str = _topic("confluent.key.subject.name.strategy")
    confluent_value_schema_validation: bool = _topic("confluent.value.schema.validation")
    confluent_value_subject_name_strategy: str = _topic("confluent.value.subject.name.strategy")
    delete_retention_ms: int = _topic("delete.retention.ms")
    file_delete_delay_ms: int = _topic("file.delete.delay.ms")
    flush_messages: int = _topic("flush.messages")
    flush_ms: int = _topic("flush.ms")
    follower_replication_throttled_replicas: tuple[str, ...] = _topic(
        "follower.replication.throttled.replicas", converter=_list_converter
    )
    index_interval_bytes: int = _topic("index.interval.bytes")
    leader_replication_throttled_replicas: tuple[str, ...] = _topic(
        "leader.replication.throttled.replicas", converter=_list_converter
    )
    max_compaction_lag_ms: int = _topic("max.compaction.lag.ms")
    max_message_bytes: int = _topic("max.message.bytes")
    message_downconversion_enable: bool = _topic("message.downconversion.enable")
    message_format_version: str = _topic("message.format.version")
    message_timestamp_after_max_ms: int = _topic("message.timestamp.after.max.ms")
    message_timestamp_before_max_ms: int = _topic("message.timestamp.before.max.ms")
    message_timestamp_difference_max_ms: int = _topic("message.timestamp.difference.max.ms")
    message_timestamp_type: str = _topic("message.timestamp.type")
    min_cleanable_dirty_ratio: float = _topic("min.cleanable.dirty.ratio")
    min_compaction_lag_ms: int = _topic("min.compaction.lag.ms")
    min_insync_replicas: int = _topic("min.insync.replicas")
    preallocate: bool = _topic("preallocate")
    retention_bytes: int = _topic("retention.bytes")
    retention_ms: int = _topic("retention.ms")
    segment_bytes: int = _topic("segment.bytes")
    segment_index_bytes: int = _topic("segment.index.bytes")
    segment_jitter_ms: int = _topic("segment.jitter.ms")
    segment_ms: int = _topic("segment.ms")
    unclean_leader_election_enable: bool = _topic("unclean.leader.election.enable")

    @property
    def compact_enabled(self) -> bool:
        """Whether the log cleaner compacts this log (cleanup.policy contains compact)."""
        return "compact" in self.cleanup_policy

    @property
    def delete_enabled(self) -> bool:
        """Whether retention deletes old segments (cleanup.policy contains delete)."""
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @classmethod
    def from_properties(
        cls, properties: Mapping[str, Any] | None = None, *, base: LogConfig | None = None
    ) -> LogConfig:
        """Build from Kafka keys or field names, strings or values, on top of ``base``.

        An unknown key is refused with the closest known key suggested.
        """
        changes: dict[str, Any] = {}
        for key, value in (properties or {}).items():
            name = TOPIC_CONFIG_KEYS.get(key) or (key if key in _FIELDS else None)
            if name is None:
                close = difflib.get_close_matches(key, [*TOPIC_CONFIG_KEYS, *_FIELDS], n=1)
                hint = f"did you mean {close[0]!r}?" if close else "not a topic log setting"
                raise ConfigError(key, value, f"unknown key: {hint}")
            definition = TOPIC_CONFIGS[_FIELDS[name].metadata["key"]]
            changes[name] = definition.parse(value) if isinstance(value, str) else value
        return attrs.evolve(base or cls(), **changes)

    def to_properties(self) -> dict[str, str]:
        """Kafka keys and string values, as DescribeConfigs shows them."""
        return {
            attribute.metadata["key"]: format_value(getattr(self, attribute.name))
            for attribute in attrs.fields(LogConfig)
        }


_FIELDS = {a.name: a for a in attrs.fields(LogConfig)}
TOPIC_CONFIG_KEYS = {a.metadata["key"]: a.name for a in attrs.fields(LogConfig)}
