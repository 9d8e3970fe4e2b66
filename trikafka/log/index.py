"""Sparse offset and time indexes of one log segment.

Theory of operation
-------------------
A segment is a run of record batches, found by byte position. To serve "the batch holding
offset N" without scanning from the start, a segment keeps an :class:`OffsetIndex`: every
``index.interval.bytes`` (4096) of appended log it records one entry ``(offset, position)``,
where ``offset`` is the *last* offset of the batch starting at ``position`` (as Kafka does).
Entries rise strictly in both columns, so a lookup is one bisection for the greatest entry
``<= N``; the batch holding ``N`` starts at that position or a little after, and the bounded
scan that finds it reads at most about one index interval plus one batch. With no entry below
``N`` the scan starts at position 0, which is also less than one interval away.

A :class:`TimeIndex` entry ``(timestamp, offset)`` says "up to ``offset``, no record has a
timestamp above ``timestamp``"; entries are appended with the offset entries, and only when the
segment's max timestamp has risen, so timestamps rise strictly. To find the first record at or
after time ``T`` we take the greatest entry whose timestamp is *strictly below* ``T``: nothing up
to its offset can qualify, so the scan may start at that offset's batch. (Kafka takes ``<=``; the
strict form also stays right when several records share the timestamp ``T``.) When a segment
stops being active it gets one last time entry for its max timestamp, so the last entry of a
closed segment's time index is that segment's max timestamp and a reopened log knows it without
reading the segment.

Both indexes live in memory as two ``array`` columns; the file backend persists them in Kafka's
format (``.index``: relative offset int32 and position int32; ``.timeindex``: timestamp int64
and relative offset int32, big-endian) when the log is flushed or closed. ``dirty_from`` is the
first entry not known to be on disk, so a flush writes only what is new, and a truncation (only
in recovery) rewrites from the cut.
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_left, bisect_right

__all__ = ["OffsetIndex", "TimeIndex", "IndexCorruptError"]

_OFFSET_ENTRY = struct.Struct(">ii")  # relative offset, position
_TIME_ENTRY = struct.Struct(">qi")  # timestamp, relative offset


class IndexCorruptError(ValueError):
    """An index file whose entries are not sane; the segment is rebuilt from its log instead."""


class OffsetIndex:
    """Sparse map from offsets to the byte positions of the batches ending at them."""

    __slots__ = ("base_offset", "_offsets", "_positions", "dirty_from")

    entry_size = _OFFSET_ENTRY.size
    suffix = ".index"

    def __init__(self, base_offset: int) -> None:
        self.base_offset = base_offset
        self._offsets = array("q")  # relative offsets
        self._positions = array("q")
        self.dirty_from = 0

    def __len__(self) -> int:
        return len(self._offsets)

    def entries(self) -> list[tuple[int, int]]:
        """All ``(absolute offset, position)`` entries, for tests and debugging."""
        return [
            (self.base_offset + o, p) for o, p in zip(self._offsets, self._positions, strict=True)
        ]

    @property
    def last_entry(self) -> tuple[int, int] | None:
        if not self._offsets:
            return None
        return self.base_offset + self._offsets[-1], self._positions[-1]

    def append(self, offset: int, position: int) -> None:
        relative = offset - self.base_offset
        if self._offsets and (relative <= self._offsets[-1] or position <= self._positions[-1]):
            raise ValueError(
                f"offset index entry ({offset}, {position}) does not follow {self.last_entry}"
            )
        self._offsets.append(relative)
        self._positions.append(position)

    def lookup(self, offset: int) -> int:
        """Position of the greatest entry with offset ``<= offset``; 0 when there is none."""
        i = bisect_right(self._offsets, offset - self.base_offset) - 1
        return self._positions[i] if i >= 0 else 0

    def lookup_position(self, position: int) -> int:
        """The greatest indexed batch position ``<= position``; 0 when there is none."""
        i = bisect_right(self._positions, position) - 1
        return self._positions[i] if i >= 0 else 0

    def truncate_to(self, offset: int) -> None:
        """Drop entries for ``offset`` and above."""
        keep = bisect_left(self._offsets, offset - self.base_offset)
        del self._offsets[keep:]
        del self._positions[keep:]
        self.dirty_from = min(self.dirty_from, keep)

    def clear(self) -> None:
        self.truncate_to(self.base_offset)

    def to_bytes(self, start: int = 0) -> bytes:
        out = bytearray()
        for i in range(start, len(self._offsets)):
            out += _OFFSET_ENTRY.pack(self._offsets[i], self._positions[i])
        return bytes(out)

    @classmethod
    def from_bytes(cls, base_offset: int, data: bytes, log_size: int) -> OffsetIndex:
        """Load an ``.index`` file; raise :class:`IndexCorruptError` unless every entry is sane."""
        if len(data) % cls.entry_size:
            raise IndexCorruptError(f"index size {len(data)} is not a multiple of {cls.entry_size}")
        index = cls(base_offset)
        for relative, position in _OFFSET_ENTRY.iter_unpack(data):
            if relative < 0 or position >= log_size:
                raise IndexCorruptError(f"index entry ({relative}, {position}) out of range")
            try:
                index.append(base_offset + relative, position)
            except ValueError as exc:
                raise IndexCorruptError(str(exc)) from None
        index.dirty_from = len(index)
        return index


class TimeIndex:
    """Sparse map from max-timestamp-so-far to the offset where it was reached."""

    __slots__ = ("base_offset", "_timestamps", "_offsets", "dirty_from")

    entry_size = _TIME_ENTRY.size
    suffix = ".timeindex"

    def __init__(self, base_offset: int) -> None:
        self.base_offset = base_offset
        self._timestamps = array("q")
        self._offsets = array("q")  # relative offsets
        self.dirty_from = 0

    def __len__(self) -> int:
        return len(self._timestamps)

    def entries(self) -> list[tuple[int, int]]:
        """All ``(timestamp, absolute offset)`` entries, for tests and debugging."""
        return [
            (t, self.base_offset + o) for t, o in zip(self._timestamps, self._offsets, strict=True)
        ]

    @property
    def last_entry(self) -> tuple[int, int] | None:
        if not self._timestamps:
            return None
        return self._timestamps[-1], self.base_offset + self._offsets[-1]

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Append unless ``timestamp`` is no higher than the last entry's (Kafka's rule)."""
        if timestamp < 0 or (self._timestamps and timestamp <= self._timestamps[-1]):
            return
        relative = offset - self.base_offset
        if self._offsets and relative < self._offsets[-1]:
            raise ValueError(f"time index entry ({timestamp}, {offset}) goes back in offsets")
        self._timestamps.append(timestamp)
        self._offsets.append(relative)

    def lookup(self, timestamp: int) -> tuple[int, int] | None:
        """The greatest entry with timestamp strictly below ``timestamp``, or None."""
        i = bisect_left(self._timestamps, timestamp) - 1
        if i < 0:
            return None
        return self._timestamps[i], self.base_offset + self._offsets[i]

    def truncate_to(self, offset: int) -> None:
        """Drop entries for ``offset`` and above."""
        keep = bisect_left(self._offsets, offset - self.base_offset)
        del self._timestamps[keep:]
        del self._offsets[keep:]
        self.dirty_from = min(self.dirty_from, keep)

    def clear(self) -> None:
        self.truncate_to(self.base_offset)

    def to_bytes(self, start: int = 0) -> bytes:
        out = bytearray()
        for i in range(start, len(self._timestamps)):
            out += _TIME_ENTRY.pack(self._timestamps[i], self._offsets[i])
        return bytes(out)

    @classmethod
    def from_bytes(cls, base_offset: int, data: bytes) -> TimeIndex:
        """Load a ``.timeindex`` file; raise :class:`IndexCorruptError` unless it is sane."""
        if len(data) % cls.entry_size:
            raise IndexCorruptError(
                f"time index size {len(data)} is not a multiple of {cls.entry_size}"
            )
        index = cls(base_offset)
        for timestamp, relative in _TIME_ENTRY.iter_unpack(data):
            if relative < 0 or timestamp < 0 or (index and timestamp <= index._timestamps[-1]):
                raise IndexCorruptError(f"time index entry ({timestamp}, {relative}) not sane")
            try:
                index.maybe_append(timestamp, base_offset + relative)
            except ValueError as exc:
                raise IndexCorruptError(str(exc)) from None
        index.dirty_from = len(index)
        return index
