"""The in-memory backend: each segment's bytes are the appended chunks, in a list.

The default for embedded use and tests. Everything but the store comes from
:class:`~trikafka.log.log.Log`, so offsets, sparse indexes, rolling and retention behave
exactly as with files; only durability is missing (flush is a no-op beyond bookkeeping).
A read that falls within one appended chunk is a ``memoryview`` of it, not a copy.

Large appends are copied once, into an :class:`Arena`: memory whose pages are put in place a
copy's worth at a time (``MADV_POPULATE_WRITE``; ``MAP_POPULATE`` of a whole block where the
kernel lacks it), where each byte kept would otherwise be first-touched through a page fault
per 4 KiB (README, Performance: the memory log's cost per byte kept). Full-size
blocks that retention lets go of wait in :data:`BLOCKS` for the next block any arena needs.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import sys
import weakref
from bisect import bisect_right
from collections.abc import Iterator

from trikafka.log.index import OffsetIndex, TimeIndex
from trikafka.log.log import Log
from trikafka.log.segment import SegmentStore, SyncHandle

__all__ = ["BLOCKS", "Arena", "BlockPool", "MemoryLog", "MemoryStore"]

#: Linux maps the block's pages at once; other POSIX systems map them lazily (then the arena
#: saves nothing, costs nothing); Windows' mmap takes no flags: there the log keeps bytearrays.
_MAPPED = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS if hasattr(mmap, "MAP_ANONYMOUS") else None
_POPULATED = _MAPPED | getattr(mmap, "MAP_POPULATE", 0) if _MAPPED is not None else None


def _probe_populate_write() -> int | None:
    if _MAPPED is None or not sys.platform.startswith("linux"):
        return None
    option = getattr(mmap, "MADV_POPULATE_WRITE", 23)
    try:
        probe = mmap.mmap(-1, mmap.PAGESIZE, flags=_MAPPED)
    except OSError:
        return None
    try:
        probe.madvise(option, 0, mmap.PAGESIZE)
    except (OSError, ValueError):  # EINVAL: a kernel before 5.14
        return None
    finally:
        probe.close()
    return option


#: ``madvise(MADV_POPULATE_WRITE)`` (Linux 5.14): the pages of a range faulted in in one go,
#: so a block can be populated as it is used instead of all at once (not in Python's mmap
#: module before 3.13, hence the number). None where the kernel refuses it.
_MADV_POPULATE_WRITE = _probe_populate_write()


class BlockPool:
    """Arena blocks whose chunks are all gone, mapped and populated still, for the next arena.

    Why: a broker under retention lets go of as many bytes as it takes in. Unmapped and mapped
    again, each of them is new memory once more: a dev broker taking 3 GB of 10 KB messages
    past its window spent 1.6–1.8 s of CPU per GB and faulted every 4 KiB; reusing blocks,
    1.2 s/GB with under half the faults (``python -m benchmarks.produce_cpu --sustained 3``).
    A reused block costs nothing but the copy into it.

    A block comes back (:meth:`give_back`) when the last view of it dies: the arena carves
    its chunks from a ctypes array laid over the mapping, and a finalizer on that array hands
    the mapping here. :meth:`trim`, run by the log manager with each retention check, lets go
    of the blocks that waited a whole interval unused, so a broker whose produce stopped
    returns the memory within two checks; :attr:`limit` bounds what waits at any time (a
    deleted topic's blocks). Blocks wait only while a log manager runs (:meth:`in_use`): a
    process whose brokers all stopped keeps none. Only full-size blocks are kept: smaller
    ones start a partition's arena and are few.
    """

    __slots__ = ("_recent", "_older", "_users", "limit")

    def __init__(self, limit: int = 512 * 1024 * 1024) -> None:
        self.limit = limit
        self._users = 0
        self._recent: list[mmap.mmap] = []  # came back since the last trim
        self._older: list[mmap.mmap] = []  # waited since the trim before

    @property
    def size(self) -> int:
        """Bytes of blocks waiting."""
        return sum(len(block) for block in self._recent) + sum(len(block) for block in self._older)

    def take(self, size: int) -> mmap.mmap | None:
        """A waiting block of exactly ``size`` bytes, the most recently used first; else None."""
        for waiting in (self._recent, self._older):
            while waiting:
                block = waiting.pop()
                if len(block) == size:
                    return block
                _let_go(block)  # another size (Arena.largest changed since): not ours to keep
        return None

    def give_back(self, block: mmap.mmap) -> None:
        """The last chunk of ``block`` is gone (a finalizer: called wherever that happened)."""
        if self._users and len(block) == Arena.largest and self.size + len(block) <= self.limit:
            self._recent.append(block)
        # else: dropped here; the mapping goes once the dying array lets go of it

    def trim(self) -> None:
        """Let go of the blocks that waited since the last trim."""
        older, self._older, self._recent = self._older, self._recent, []
        for block in older:
            _let_go(block)

    def clear(self) -> None:
        """Let go of every waiting block."""
        self.trim()
        self.trim()

    @contextlib.contextmanager
    def in_use(self) -> Iterator[None]:
        """Keep blocks while this runs (a log manager's life); the last user out clears."""
        self._users += 1
        try:
            yield
        finally:
            self._users -= 1
            if not self._users:
                self.clear()


def _let_go(block: mmap.mmap) -> None:
    try:
        block.close()
    except BufferError:  # its array still dying in another thread: unmapped when that is done
        pass


#: The process's pool: brokers in one process (a cluster, a test suite) share their blocks.
BLOCKS = BlockPool()


def _carve_from(block: mmap.mmap) -> memoryview:
    """A writable view of all of ``block`` that sends it to :data:`BLOCKS` when the last view
    of it (every chunk sliced from this one) is gone."""
    array = (ctypes.c_ubyte * len(block)).from_buffer(block)
    weakref.finalize(array, BLOCKS.give_back, block).atexit = False
    return memoryview(array).cast("B")


class Arena:
    """Where a memory log copies its large appends: populated anonymous mappings, carved up.

    Why: the in-memory log keeps every byte it is given, and memory the process has not
    touched costs a page fault per 4 KiB on first write (the kernel zeroes and maps each page
    on its own). ``MAP_POPULATE`` maps a whole block in one go: measured here, bytes kept cost
    0.49 s/GB as fresh ``bytearray`` copies against 0.32 s/GB copied into populated blocks
    (``python -m benchmarks.first_touch``), and the broker's CPU per GB produced with 10 KB
    messages fell by a fifth.

    Blocks grow from ``first`` to ``largest`` by doubling, so a partition that gets one
    large batch holds little; a chunk larger than a block gets a block of its own. Where the
    kernel has ``MADV_POPULATE_WRITE`` a block is populated as it is used, each copy's pages
    in one go, so a partition's mostly empty last block costs neither CPU nor memory: the dev
    broker's RSS grew by 1.24× the bytes of 20,000 × 10 KB produced over 48 partitions with
    blocks populated whole, 1.01× populated as used (200,000 × 100 B over 6: 1.47× → 1.19×),
    and page faults per GB fell by a fifth (``python -m benchmarks.produce_cpu``). A block
    goes to :data:`BLOCKS` when the last chunk carved from it is gone (retention deletes the
    segments that hold its views, and fetch answers in flight let go of theirs). Appends below
    ``smallest`` are not worth a mapping: the caller keeps those as ``bytearray``.
    """

    __slots__ = ("_view", "_used", "_next", "_mapping", "_populated")

    smallest = 64 * 1024
    first = 256 * 1024
    largest = 8 * 1024 * 1024

    def __init__(self) -> None:
        self._view: memoryview | None = None
        self._used = 0
        self._next = self.first
        self._mapping: mmap.mmap | None = None
        self._populated = 0  # bytes of the block from its start known to be in place

    def copy(self, data: bytes | bytearray | memoryview) -> memoryview:
        """A writable copy of ``data`` in the arena (the log patches offsets into it)."""
        size = len(data)
        view = self._view
        if view is None or self._used + size > len(view):
            block = max(size, self._next)
            self._next = min(self.largest, self._next * 2)
            # Populated already: a block mapped whole, or one another arena filled and let go of.
            mapping = BLOCKS.take(block) if block == self.largest else None
            populated = mapping is not None or _MADV_POPULATE_WRITE is None
            if mapping is None:
                flags = _POPULATED if populated else _MAPPED
                mapping = mmap.mmap(-1, block, flags=flags)  # type: ignore[arg-type]  # None: no MAP_ANONYMOUS, no arena
            view = self._view = _carve_from(mapping)
            self._mapping = mapping
            self._populated = block if populated else 0
            self._used = 0
        start = self._used
        end = start + size
        if end > self._populated:
            self._populate(end)
        chunk = view[start:end]
        chunk[:] = data
        self._used = end
        return chunk

    def _populate(self, end: int) -> None:
        """Fault in the block's pages up to ``end`` in one system call, as ``MAP_POPULATE``
        does for a whole block (the copy alone would fault each page on its own). If the
        kernel refuses (ENOMEM), the copy faults them in itself."""
        mapping = self._mapping
        assert mapping is not None and _MADV_POPULATE_WRITE is not None
        page = mmap.PAGESIZE
        start = self._populated
        stop = min(len(mapping), -(-end // page) * page)
        try:
            mapping.madvise(_MADV_POPULATE_WRITE, start, stop - start)
        except OSError:
            pass
        self._populated = stop


class MemoryStore:
    """A :class:`~trikafka.log.segment.SegmentStore` over a list of immutable chunks."""

    __slots__ = ("_chunks", "_starts", "_size")

    def __init__(self) -> None:
        self._chunks: list[bytes | bytearray | memoryview] = []
        self._starts: list[int] = []  # position of each chunk, for bisection
        self._size = 0

    @property
    def size(self) -> int:
        return self._size

    def append(self, data: bytes | bytearray | memoryview) -> None:
        """Keep ``data`` itself: the log hands over the buffer it validated and patched
        (a ``bytearray``, or a chunk of the log's :class:`Arena`).

        Copying it once more was a fifth of the produce path for 10 KB messages: each
        retained MiB is first-touched memory (~0.45 ms per MiB in page faults here).
        """
        if not data:
            return
        self._chunks.append(data)
        self._starts.append(self._size)
        self._size += len(data)

    def append_parts(self, parts: list[bytearray | memoryview]) -> None:
        """Keep the parts as one chunk (the memory log appends one buffer; parts are a file's)."""
        self.append(bytearray().join(parts))

    def read(self, position: int, size: int) -> list[bytes | memoryview]:
        end = min(position + size, self._size)
        out: list[bytes | memoryview] = []
        i = bisect_right(self._starts, position) - 1
        while position < end:
            chunk, start = self._chunks[i], self._starts[i]
            lo, hi = position - start, min(end - start, len(chunk))
            out.append(chunk if lo == 0 and hi == len(chunk) else memoryview(chunk)[lo:hi])  # type: ignore[arg-type]  # a bytearray chunk is sent as bytes are
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

    _arena: Arena | None = None

    def _new_store(self, base_offset: int) -> SegmentStore:
        return MemoryStore()

    def _writable_copy(self, batches: bytes | memoryview) -> bytearray | memoryview:
        if len(batches) < Arena.smallest or _POPULATED is None:
            return bytearray(batches)
        if self._arena is None:
            self._arena = Arena()
        try:
            return self._arena.copy(batches)
        except OSError:  # no mapping to be had (vm.max_map_count, ENOMEM): keep it as before
            return bytearray(batches)
