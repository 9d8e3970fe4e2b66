"""Per-topic log settings with Kafka's names and defaults.

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

from trikafka.errors import ConfigError

__all__ = ["LogConfig", "INT64_MAX", "TOPIC_CONFIG_KEYS"]

INT64_MAX = 2**63 - 1
_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
_CLEANUP_POLICIES = ("delete", "compact")


def _int_between(lo: int, hi: int = INT64_MAX) -> Any:
    def check(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise ConfigError(
                attribute.metadata["key"], value, f"an integer in [{lo}, {hi}] is required"
            )

    return check


def _field(key: str, default: Any, validator: Any) -> Any:
    return attrs.field(default=default, validator=validator, metadata={"key": key})


def _check_timestamp_type(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value not in _TIMESTAMP_TYPES:
        raise ConfigError(attribute.metadata["key"], value, f"one of {', '.join(_TIMESTAMP_TYPES)}")


def _cleanup_converter(value: Any) -> Any:
    if isinstance(value, str):
        return tuple(sorted({p.strip() for p in value.split(",") if p.strip()}))
    return tuple(sorted(set(value)))


def _check_cleanup(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if not value or any(p not in _CLEANUP_POLICIES for p in value):
        raise ConfigError(
            attribute.metadata["key"], value, "a comma-separated list of delete and compact"
        )


@attrs.frozen(kw_only=True)
class LogConfig:
    """A topic's log settings. Field names are Kafka's topic keys with ``_`` for ``.``."""

    segment_bytes: int = _field("segment.bytes", 1073741824, _int_between(14, 2**31 - 1))
    segment_ms: int = _field("segment.ms", 604800000, _int_between(1))
    retention_ms: int = _field("retention.ms", 604800000, _int_between(-1))
    retention_bytes: int = _field("retention.bytes", -1, _int_between(-1))
    flush_messages: int = _field("flush.messages", INT64_MAX, _int_between(1))
    flush_ms: int = _field("flush.ms", INT64_MAX, _int_between(0))
    index_interval_bytes: int = _field("index.interval.bytes", 4096, _int_between(0, 2**31 - 1))
    max_message_bytes: int = _field("max.message.bytes", 1048588, _int_between(0, 2**31 - 1))
    message_timestamp_type: str = _field(
        "message.timestamp.type", "CreateTime", _check_timestamp_type
    )
    cleanup_policy: tuple[str, ...] = attrs.field(
        default=("delete",),
        converter=_cleanup_converter,
        validator=_check_cleanup,
        metadata={"key": "cleanup.policy"},
    )

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
            changes[name] = _parse(_FIELDS[name], value)
        return attrs.evolve(base or cls(), **changes)

    def to_properties(self) -> dict[str, str]:
        """Kafka keys and string values, as DescribeConfigs shows them."""
        out = {}
        for attribute in attrs.fields(LogConfig):
            value = getattr(self, attribute.name)
            out[attribute.metadata["key"]] = (
                ",".join(value) if isinstance(value, tuple) else str(value)
            )
        return out


_FIELDS = {a.name: a for a in attrs.fields(LogConfig)}
TOPIC_CONFIG_KEYS = {a.metadata["key"]: a.name for a in attrs.fields(LogConfig)}


def _parse(attribute: attrs.Attribute, value: Any) -> Any:
    if attribute.type in ("int", int) and isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            raise ConfigError(attribute.metadata["key"], value, "an integer is required") from None
    return value
