"""The embedded consumer protocol, as the coordinator reads and writes it.

Classic members of a KIP-848 consumer group still speak JoinGroup/SyncGroup: their
subscription (topics, owned partitions, rack) arrives as JoinGroup protocol metadata — Kafka's
``ConsumerProtocolSubscription``, an int16 version then the body — and their assignment leaves
as SyncGroup bytes, a ``ConsumerProtocolAssignment``. The coordinator must read and write these
itself when it converts a group or serves a classic member of a consumer group (the client
package has its own codec; the layers keep the coordinator from importing it).

All versions are non-flexible; a version newer than 3 is read as 3 (new fields are only ever
appended), a negative one or truncated bytes raise :class:`ValueError`.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

import attrs

__all__ = ["EmbeddedSubscription", "decode_assignment", "decode_subscription", "encode_assignment", "protocol_version"]

_I16, _I32 = struct.Struct(">h"), struct.Struct(">i")
LATEST_VERSION = 3


@attrs.frozen
class EmbeddedSubscription:
    topics: tuple[str, ...]
    owned: dict[str, frozenset[int]]
    rack_id: str | None = None


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def _take(self, fmt: struct.Struct) -> int:
        if self.at + fmt.size > len(self.data):
            raise ValueError(f"consumer protocol bytes end at {len(self.data)}, {fmt.size} more expected at {self.at}")
        (value,) = fmt.unpack_from(self.data, self.at)
        self.at += fmt.size
        return value

    def i16(self) -> int:
        return self._take(_I16)

    def i32(self) -> int:
        return self._take(_I32)

    def raw(self, n: int) -> bytes:
        if n < 0 or self.at + n > len(self.data):
            raise ValueError(f"consumer protocol field of {n} bytes does not fit at {self.at}")
        self.at += n
        return self.data[self.at - n:self.at]

    def string(self) -> str | None:
        n = self.i16()
        return None if n < 0 else self.raw(n).decode()

    def partitions(self) -> dict[str, frozenset[int]]:
        out: dict[str, frozenset[int]] = {}
        for _ in range(max(self.i32(), 0)):
            topic = self.string() or ""
            parts = frozenset(self.i32() for _ in range(max(self.i32(), 0)))
            out[topic] = out.get(topic, frozenset()) | parts
        return {t: ps for t, ps in out.items() if ps}


def protocol_version(data: bytes) -> int:
    """The version a member wrote its subscription in (what its assignment is written in)."""
    version = _Reader(data).i16()
    if version < 0:
        raise ValueError(f"consumer protocol version {version} is negative")
    return min(version, LATEST_VERSION)


def decode_subscription(data: bytes) -> EmbeddedSubscription:
    version = protocol_version(data)
    reader = _Reader(data)
    reader.at = 2
    topics = tuple(reader.string() or "" for _ in range(max(reader.i32(), 0)))
    size = reader.i32()
    if size > 0:
        reader.raw(size)  # the client assignor's user data: not the coordinator's business
    owned = reader.partitions() if version >= 1 else {}
    if version >= 2:
        reader.i32()  # generation id
    rack = reader.string() if version >= 3 else None
    return EmbeddedSubscription(topics, owned, rack)


def decode_assignment(data: bytes) -> dict[str, frozenset[int]]:
    """A SyncGroup assignment's partitions; empty bytes are "nothing" (Kafka's rule)."""
    if not data:
        return {}
    protocol_version(data)
    reader = _Reader(data)
    reader.at = 2
    return reader.partitions()


def encode_assignment(assignment: Mapping[str, frozenset[int]], version: int) -> bytes:
    """``ConsumerProtocolAssignment`` bytes (no user data; the body is the same in v0..v3)."""
    out = [_I16.pack(version), _I32.pack(len(assignment))]
    for topic, partitions in sorted(assignment.items()):
        name = topic.encode()
        out += [_I16.pack(len(name)), name, _I32.pack(len(partitions)), *(_I32.pack(p) for p in sorted(partitions))]
    out.append(_I32.pack(-1))
    return b"".join(out)
