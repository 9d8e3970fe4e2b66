"""Topic-level configuration at the broker: validation, and each key's effective value.

The keys, their types, ranges and defaults are the one table in :mod:`trikafka.config.topics`.
A topic config either overrides its broker default (source TOPIC_CONFIG in DescribeConfigs)
or inherits it (source DEFAULT_CONFIG, or STATIC_BROKER_CONFIG when the broker's own config
set it). Validation errors name the key, the value and what is allowed — the message Kafka
puts in CreateTopics' and AlterConfigs' error_message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from trikafka.config import BrokerConfig
from trikafka.config.topics import TOPIC_CONFIGS, TopicConfigDef, format_value, unknown_topic_config
from trikafka.errors import ConfigError
from trikafka.log.config import TOPIC_CONFIG_KEYS, LogConfig

__all__ = [
    "LogConfigs",
    "TOPIC_CONFIGS",
    "TopicConfigDef",
    "broker_default",
    "format_value",
    "parse_value",
    "resolve_topic_config",
    "validate_topic_configs",
]

#: Broker key → BrokerConfig attribute, from the fields' own metadata.
_BROKER_ATTRIBUTES = {f.metadata["key"]: f.name for f in attrs.fields(BrokerConfig)}


def parse_value(definition: TopicConfigDef, value: Any) -> Any:
    """The typed value of ``value`` (a string from the wire, or already typed)."""
    return definition.parse(value)


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, Any]:
    """Typed overrides from CreateTopics/AlterConfigs entries; raises ConfigError."""
    typed: dict[str, Any] = {}
    for key, value in configs.items():
        definition = TOPIC_CONFIGS.get(key)
        if definition is None:
            raise ConfigError(key, value, unknown_topic_config(key))
        if value is None:
            raise ConfigError(key, value, "a value is required")
        typed[key] = definition.parse(value)
    lo = typed.get("min.compaction.lag.ms", TOPIC_CONFIGS["min.compaction.lag.ms"].default)
    hi = typed.get("max.compaction.lag.ms", TOPIC_CONFIGS["max.compaction.lag.ms"].default)
    if lo > hi:  # Kafka's LogConfig.validateValues
        raise ConfigError(
            "min.compaction.lag.ms", lo, f"must not exceed max.compaction.lag.ms ({hi})"
        )
    return typed


def broker_default(definition: TopicConfigDef, broker: BrokerConfig) -> Any:
    """The value a topic without an override has: its broker key's, else Kafka's default."""
    if definition.broker_key is None:
        return definition.default
    return getattr(broker, _BROKER_ATTRIBUTES[definition.broker_key])


def resolve_topic_config(overrides: Mapping[str, Any], broker: BrokerConfig) -> dict[str, Any]:
    """Every topic config key → its effective typed value."""
    return {
        name: overrides[name] if name in overrides else broker_default(d, broker)
        for name, d in TOPIC_CONFIGS.items()
    }


class LogConfigs:
    """The LogConfig of each distinct set of topic overrides, built once: a broker reopening
    100,000 partitions of topics without overrides builds one, not one per topic. Emptied when
    the broker's config changes (:meth:`get` is given it each time)."""

    MAX = 1024

    def __init__(self) -> None:
        self._built: dict[tuple[Any, ...], LogConfig] = {}
        self._broker: BrokerConfig | None = None

    def clear(self) -> None:
        self._built.clear()

    def get(self, overrides: Mapping[str, Any], broker: BrokerConfig) -> LogConfig:
        if broker is not self._broker:
            self._built.clear()
            self._broker = broker
        try:
            key: tuple[Any, ...] | None = tuple(sorted(overrides.items()))
            built = self._built.get(key)  # type: ignore[arg-type]  # a tuple here; None only in the except
        except TypeError:  # an unhashable override value: built afresh
            key, built = None, None
        if built is None:
            effective = resolve_topic_config(overrides, broker)
            built = LogConfig.from_properties(
                {k: format_value(effective[k]) for k in TOPIC_CONFIG_KEYS if k in effective}
            )
            if key is not None:
                if len(self._built) >= self.MAX:
                    self._built.clear()
                self._built[key] = built
        return built
