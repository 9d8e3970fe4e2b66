"""Kafka's coarser spellings of time settings (``log.retention.hours``...), resolved to the
millisecond keys ``BrokerConfig`` holds. Kept apart from ``config.py`` so that module stays a
table of fields."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trikafka.errors import ConfigError

__all__ = ["TIME_ALIASES", "resolve_time_aliases"]


# Kafka's coarser spellings of two time settings: (alias, the key it sets, ms per unit, least
# allowed). The ms key wins over minutes, minutes over hours, as in Kafka's KafkaConfig; a
# negative retention means unlimited (-1). Stock server.properties files use
# log.retention.hours=168.
TIME_ALIASES: tuple[tuple[str, str, int, int], ...] = (
    ("log.retention.minutes", "log.retention.ms", 60_000, -(2**31)),
    ("log.retention.hours", "log.retention.ms", 3_600_000, -(2**31)),
    ("log.roll.hours", "log.roll.ms", 3_600_000, 1),
)


def resolve_time_aliases(items: Mapping[str, Any]) -> dict[str, Any]:
    """``items`` with Kafka's hour/minute aliases replaced by the millisecond key they set."""
    spelled = {raw.replace("_", "."): raw for raw in items}
    alias_keys = {alias for alias, *_ in TIME_ALIASES}
    out = {raw: value for raw, value in items.items() if raw.replace("_", ".") not in alias_keys}
    present = {raw.replace("_", ".") for raw in out}
    for alias, target, unit, lo in TIME_ALIASES:  # in precedence order
        raw = spelled.get(alias)
        if raw is None:
            continue
        value = items[raw]
        try:
            number = int(value.strip()) if isinstance(value, str) else value
        except ValueError:
            number = None
        if isinstance(number, bool) or not isinstance(number, int) or not lo <= number < 2**31:
            raise ConfigError(raw, value, f"an integer in [{lo}, {2**31 - 1}] is required")
        if target not in present:  # the millisecond key, or a finer alias, wins
            out[target] = -1 if number < 0 else number * unit
            present.add(target)
    return out
