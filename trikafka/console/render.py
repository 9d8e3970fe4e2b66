"""Turning record bytes and protocol blobs into what a person reads (sans-IO).

Keys, values and header values are whatever producers sent. The console picks one view per
blob, the way kcat users pick ``-f``: JSON (pretty-printed) when the bytes are a JSON object
or array, text when they are printable UTF-8, hex otherwise — a binary value shown as text
would be mojibake, and control characters could hide what is really there. Escaping for
HTML is not done here: the templates autoescape every value (see ``app.py``).

A consumer group's member assignment is Kafka's ConsumerProtocol ``Assignment`` (version,
then topic → partitions, then user data); anything else (Connect, a protocol type we do not
know) is shown as its byte count, never guessed at.
"""

from __future__ import annotations

import datetime
import json
import struct

from trikafka.console.values import Shown

__all__ = [
    "HEX_LIMIT",
    "TEXT_LIMIT",
    "decode_assignment",
    "format_bytes",
    "format_timestamp",
    "hexdump",
    "show_bytes",
]

#: Bytes shown per blob; the rest is summarised ("… 12,345 more bytes") so one big value
#: cannot make a page of records megabytes long.
TEXT_LIMIT = 64 * 1024
HEX_LIMIT = 4 * 1024

_PRINTABLE_CONTROLS = frozenset("\t\n\r")


def _printable(text: str) -> bool:
    return all(c.isprintable() or c in _PRINTABLE_CONTROLS for c in text)


def hexdump(data: bytes) -> str:
    """Sixteen bytes per line, space-separated pairs: ``00 ff 10 …``."""
    return "\n".join(
        " ".join(f"{b:02x}" for b in data[i : i + 16]) for i in range(0, len(data), 16)
    )


def show_bytes(data: bytes | None) -> Shown:
    if data is None:
        return Shown("null", "null", 0)
    size = len(data)
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and _printable(text):
        stripped = text.lstrip()
        if stripped[:1] in ("{", "["):
            try:
                parsed = json.loads(text)
            except ValueError:
                pass
            else:
                return Shown("json", _cut(json.dumps(parsed, indent=2, ensure_ascii=False), TEXT_LIMIT), size)
        return Shown("text", _cut(text, TEXT_LIMIT), size)
    shown = hexdump(data[:HEX_LIMIT])
    if size > HEX_LIMIT:
        shown += f"\n… {size - HEX_LIMIT:,} more bytes"
    return Shown("hex", shown, size)


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… {len(text) - limit:,} more characters"


def decode_assignment(protocol_type: str, data: bytes) -> tuple[tuple[str, tuple[int, ...]], ...] | None:
    """A consumer member's assigned partitions, topic by topic; None when ``data`` is not a
    ConsumerProtocol assignment (another protocol type, or bytes that do not parse)."""
    if protocol_type != "consumer":
        return None
    if not data:
        return ()
    try:
        position = 2  # int16 version: every version starts with the same topic array
        (topics,) = struct.unpack_from(">i", data, position)
        position += 4
        out = []
        for _ in range(max(topics, 0)):
            (length,) = struct.unpack_from(">h", data, position)
            position += 2
            topic = bytes(data[position : position + length]).decode("utf-8")
            if len(topic.encode()) != length:
                return None
            position += length
            (count,) = struct.unpack_from(">i", data, position)
            position += 4
            partitions = struct.unpack_from(f">{max(count, 0)}i", data, position)
            position += 4 * max(count, 0)
            out.append((topic, tuple(sorted(partitions))))
        return tuple(sorted(out))
    except (struct.error, UnicodeDecodeError):
        return None


def format_bytes(size: int) -> str:
    """1536 → ``1.5 KiB``; sizes below 1 KiB in bytes."""
    if size < 0:
        return "—"
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def format_timestamp(ms: int) -> str:
    """Epoch milliseconds as UTC ISO 8601 with milliseconds; negative (no timestamp) as —."""
    if ms < 0:
        return "—"
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}Z"
