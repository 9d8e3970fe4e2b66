"""Topic-level configuration: Kafka's keys, their broker-level defaults, and validation.

A topic config either overrides its broker default (source TOPIC_CONFIG in DescribeConfigs)
or inherits it (source DEFAULT_CONFIG, or STATIC_BROKER_CONFIG when the broker's own config
set it). Validation errors name the key, the value and what is allowed — the message Kafka
puts in CreateTopics' and AlterConfigs' error_message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from trikafka.config import INT32_MAX, INT64_MAX, BrokerConfig
from trikafka.errors import ConfigError

__all__ = ["TopicConfigDef", "TOPIC_CONFIGS", "resolve_topic_config", "validate_topic_configs"]


@attrs.frozen
class TopicConfigDef:
    name: str
    broker_key: str | None  # the broker config supplying the default
    default: Any  # used when broker_key is None
    kind: str  # "long", "int", "string", "list", "boolean", "double"
    check: Callable[[Any], str | None]  # returns what is allowed when the value is not
    doc: str = ""


def _range(lo: int, hi: int = INT64_MAX) -> Callable[[Any], str | None]:
    return lambda v: None if lo <= v <= hi else f"a value in [{lo}, {hi}] is required"


def _one_of(*allowed: str) -> Callable[[Any], str | None]:
    return lambda v: None if v in allowed else f"allowed values are {', '.join(allowed)}"


def _list_of(*allowed: str) -> Callable[[Any], str | None]:
    return lambda v: (
        None
        if v and all(item in allowed for item in v)
        else f"a non-empty list of {', '.join(allowed)} is required"
    )


def _any(_: Any) -> None:
    return None


_DEFS = [
    TopicConfigDef("cleanup.policy", None, ("delete",), "list", _list_of("delete", "compact")),
    TopicConfigDef(
        "compression.type",
        "compression.type",
        None,
        "string",
        _one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    ),
    TopicConfigDef("delete.retention.ms", None, 86400000, "long", _range(0)),
    TopicConfigDef("file.delete.delay.ms", None, 60000, "long", _range(0)),
    TopicConfigDef("flush.messages", "log.flush.interval.messages", None, "long", _range(1)),
    TopicConfigDef("flush.ms", "log.flush.interval.ms", None, "long", _range(0)),
    TopicConfigDef("index.interval.bytes", "log.index.interval.bytes", None, "int", _range(0, INT32_MAX)),
    TopicConfigDef("max.compaction.lag.ms", None, INT64_MAX, "long", _range(1)),
    TopicConfigDef("max.message.bytes", "message.max.bytes", None, "int", _range(0, INT32_MAX)),
    TopicConfigDef("message.timestamp.after.max.ms", None, 3600000, "long", _range(0)),
    TopicConfigDef("message.timestamp.before.max.ms", None, INT64_MAX, "long", _range(0)),
    TopicConfigDef(
        "message.timestamp.type",
        "log.message.timestamp.type",
        None,
        "string",
        _one_of("CreateTime", "LogAppendTime"),
    ),
    TopicConfigDef("min.cleanable.dirty.ratio", None, 0.5, "double", lambda v: None if 0 <= v <= 1 else "a value in [0, 1] is required"),
    TopicConfigDef("min.compaction.lag.ms", None, 0, "long", _range(0)),
    TopicConfigDef("min.insync.replicas", "min.insync.replicas", None, "int", _range(1, INT32_MAX)),
    TopicConfigDef("preallocate", None, False, "boolean", _any),
    TopicConfigDef("retention.bytes", "log.retention.bytes", None, "long", _range(-1)),
    TopicConfigDef("retention.ms", "log.retention.ms", None, "long", _range(-1)),
    TopicConfigDef("segment.bytes", "log.segment.bytes", None, "int", _range(14, INT32_MAX)),
    TopicConfigDef("segment.index.bytes", None, 10485760, "int", _range(4, INT32_MAX)),
    TopicConfigDef("segment.jitter.ms", None, 0, "long", _range(0)),
    TopicConfigDef("segment.ms", "log.roll.ms", None, "long", _range(1)),
    TopicConfigDef("unclean.leader.election.enable", None, False, "boolean", _any),
]

TOPIC_CONFIGS: dict[str, TopicConfigDef] = {d.name: d for d in _DEFS}


def parse_value(definition: TopicConfigDef, value: Any) -> Any:
    """The typed value of ``value`` (a string from the wire, or already typed)."""
    key = definition.name
    if not isinstance(value, str):
        parsed = value
    elif definition.kind in ("long", "int"):
        try:
            parsed = int(value.strip())
        except ValueError:
            raise ConfigError(key, value, "an integer is required") from None
    elif definition.kind == "double":
        try:
            parsed = float(value.strip())
        except ValueError:
            raise ConfigError(key, value, "a number is required") from None
    elif definition.kind == "boolean":
        if value.strip().lower() not in ("true", "false"):
            raise ConfigError(key, value, "allowed values are true and false")
        parsed = value.strip().lower() == "true"
    elif definition.kind == "list":
        parsed = tuple(item.strip() for item in value.split(",") if item.strip())
    else:
        parsed = value.strip()
    problem = definition.check(parsed)
    if problem:
        raise ConfigError(key, value, problem)
    return parsed


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, Any]:
    """Typed overrides from CreateTopics/AlterConfigs entries; raises ConfigError."""
    typed: dict[str, Any] = {}
    for key, value in configs.items():
        definition = TOPIC_CONFIGS.get(key)
        if definition is None:
            raise ConfigError(key, value, "unknown topic configuration")
        if value is None:
            raise ConfigError(key, value, "a value is required")
        typed[key] = parse_value(definition, value)
    return typed


def broker_default(definition: TopicConfigDef, broker: BrokerConfig) -> Any:
    if definition.broker_key is None:
        return definition.default
    return getattr(broker, definition.broker_key.replace(".", "_"))


def resolve_topic_config(overrides: Mapping[str, Any], broker: BrokerConfig) -> dict[str, Any]:
    """Every topic config key → its effective typed value."""
    return {
        name: overrides[name] if name in overrides else broker_default(d, broker)
        for name, d in TOPIC_CONFIGS.items()
    }


def format_value(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)
