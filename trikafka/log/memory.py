"""The in-memory backend: each segment's bytes are the appended ``bytes`` objects, in a list.

The default for embedded use and tests. Everything but the store comes from
:class:`~trikafka.log.log.Log`, so offsets, sparse indexes, rolling and retention behave
exactly as with files; only durability is missing (flush is a no-op beyond bookkeeping).
A read that falls within one appended chunk is a ``memoryview`` of it, not a copy.
"""

from __future__ import annotations

from bisect import bisect_right

from trikafka.log.index import OffsetIndex, TimeIndex
from trikafka.log.log import Log
from trikafka.log.segment import SegmentStore, SyncHandle

__all__ = ["MemoryLog", "MemoryStore"]


class MemoryStore:
    """A :class:`~trikafka.log.segment.SegmentStore` over a list of immutable chunks."""

    __slots__ = ("_chunks", "_starts", "_size")

    def __init__(self) -> None:
        self._chunks: list[bytes] = []
        self._starts: list[int] = []  # position of each chunk, for bisection
        self._size = 0

    @property
    def size(self) -> int:
        return self._size

    def append(self, data: bytes | bytearray) -> None:
        """Keep ``data`` itself: the log hands over the buffer it validated and patched.

        Copying it once more was a fifth of the produce path for 10 KB messages: each
        retained MiB is first-touched memory (~0.45 ms per MiB in page faults here).
        """
        if not data:
            return
        self._chunks.append(data)
        self._starts.append(self._size)
        self._size += len(data)

    def read(self, position: int, size: int) -> list[bytes | memoryview]:
        end = min(position + size, self._size)
        out: list[bytes | memoryview] = []
        i = bisect_right(self._starts, position) - 1
        while position < end:
            chunk, start = self._chunks[i], self._starts[i]
            lo, hi = position - start, min(end - start, len(chunk))
            out.append(chunk if lo == 0 and hi == len(chunk) else memoryview(chunk)[lo:hi])
            position = start + hi
            i += 1
        return out

    def pread(self, position: int, size: int) -> bytes | memoryview:
        chunks = self.read(position, size)
        if len(chunks) == 1:
            return chunks[0]
        return b"".join(chunks)

    def truncate(self, size: int) -> None:
        if size >= self._size:
            return
        i = bisect_right(self._starts, size) - 1
        if i >= 0 and size > self._starts[i]:
            self._chunks[i] = self._chunks[i][: size - self._starts[i]]
            i += 1
        del self._chunks[max(i, 0) :]
        del self._starts[max(i, 0) :]
        self._size = size

    def persist_indexes(self, offset_index: OffsetIndex, time_index: TimeIndex) -> None:
        offset_index.dirty_from = len(offset_index)
        time_index.dirty_from = len(time_index)

    def sync_handle(self) -> SyncHandle | None:
        return None

    def close(self) -> None:
        pass

    def mark_deleted(self) -> None:
        pass

    def delete(self) -> None:
        self._chunks.clear()
        self._starts.clear()
        self._size = 0


class MemoryLog(Log):
    """A partition log held in memory."""

    def _new_store(self, base_offset: int) -> SegmentStore:
        return MemoryStore()
