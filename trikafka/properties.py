"""``server.properties`` files: the subset of Java's properties format Kafka's configs use.

``key=value`` or ``key: value``, ``#``/``!`` comments, and — since JAAS values are long —
Java's line continuation: a line ending in an odd number of backslashes goes on with the
next line, whose leading blanks are dropped (``sasl.jaas.config=… required \\`` ⏎
``user_alice="alice-secret";``).
"""

from __future__ import annotations

import os
from pathlib import Path

from trikafka.errors import ConfigError

__all__ = ["read_properties_file"]


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
