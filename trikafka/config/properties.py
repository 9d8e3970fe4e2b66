"""``server.properties`` files: the subset of Java's properties format Kafka's configs use.

``key=value`` or ``key: value``, ``#``/``!`` comments, and — since JAAS values are long —
Java's line continuation: a line ending in an odd number of backslashes goes on with the
next line, whose leading blanks are dropped (``sasl.jaas.config=… required \\`` ⏎
``user_alice="alice-secret";``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trikafka.errors import ConfigError

__all__ = ["TIME_ALIASES", "read_properties_file", "resolve_time_aliases"]


def _logical_lines(text: str) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    pending: str | None = None
    start = 0
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip() if pending is None else line.lstrip()
        if pending is None:
            start = number
            if not stripped or stripped[0] in "#!":
                continue
        body = stripped.rstrip()
        trailing = len(body) - len(body.rstrip("\\"))
        joined = (pending or "") + (body[:-1] if trailing % 2 else body)
        if trailing % 2:
            pending = joined
            continue
        pending = None
        out.append((start, joined))
    if pending is not None:
        out.append((start, pending))
    return out


def read_properties_file(path: str | os.PathLike) -> dict[str, str]:
    """Java-properties subset: ``key=value`` or ``key: value``, ``#``/``!`` comments,
    backslash line continuation."""
    items: dict[str, str] = {}
    text = Path(path).read_text(encoding="utf-8")
    for number, stripped in _logical_lines(text):
        positions = [p for p in (stripped.find("="), stripped.find(":")) if p > 0]
        if not positions:
            raise ConfigError(f"{path}:{number}", stripped, "lines must look like key=value")
        cut = min(positions)
        items[stripped[:cut].strip()] = stripped[cut + 1 :].strip()
    return items


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
