"""A log segment: a run of record batches in one store, with its sparse indexes.

Theory of operation
-------------------
A :class:`Segment` does not care where its bytes live. It talks to a :class:`SegmentStore`
(a list of ``bytes`` in memory, or a ``.log`` file with its ``.index`` and ``.timeindex``) and
owns the logic both backends share: indexing appended batches, finding the batch holding an
offset or a timestamp through the indexes plus a bounded scan, cutting a read at whole batches,
and recovery.

*Appends* arrive validated and patched (offsets assigned). Every ``index.interval.bytes`` of
log gets one offset-index entry and, when the max timestamp rose, one time-index entry (see
:mod:`trikafka.log.index`).

*Reads* find the first batch through the offset index and scan forward; to end the reply at a
batch boundary within ``max_bytes`` they look up the greatest indexed batch start at or below
the limit and scan from there, so neither end costs more than about one index interval of
header reads. Scans read the store in blocks, not one header at a time, because a header read
from a file is a system call.

*Recovery* (:meth:`Segment.recover`) forgets the indexes and walks the whole store from
position 0, checking each batch as a Produce request is checked (sizes, magic, CRC-32C, record
count) plus that offsets only rise. The first batch that is cut short (a torn write: the
process or machine died mid-append) or fails a check ends the segment: the store is truncated
there and the indexes are rebuilt from what was kept. :meth:`Segment.load` is the fast path for
segments known to be flushed: it trusts the persisted indexes after checking their last
entries against the log and scans only the tail after the last offset-index entry.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Protocol

from trikafka.errors import KafkaProtocolError
from trikafka.log.index import IndexCorruptError, OffsetIndex, TimeIndex
from trikafka.protocol.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    BatchHeader,
    Compression,
    TimestampType,
    iter_batches,
    iter_records,
    parse_batch_header,
)

__all__ = ["Segment", "SegmentStore", "SyncHandle", "MAX_RELATIVE_OFFSET"]

MAX_RELATIVE_OFFSET = 2**31 - 1  # relative offsets are int32 in the index files
SCAN_BLOCK_SIZE = 16 * 1024  # header scans: a few index intervals per read
_BASE_AND_LENGTH = struct.Struct(">qi")
_INT32 = struct.Struct(">i")
RECOVERY_BLOCK_SIZE = 1024 * 1024  # recovery reads everything: large reads
_BATCH_LENGTH = struct.Struct(">i")


class SyncHandle(Protocol):
    """What a flush needs to make a segment durable, safe to use from a worker thread."""

    def sync(self) -> None: ...

    def close(self) -> None: ...


class SegmentStore(Protocol):
    """Where a segment's bytes live. Positions are byte offsets from the segment's start."""

    @property
    def size(self) -> int: ...

    def append(self, data: bytes | bytearray | memoryview) -> None: ...

    def append_parts(self, parts: list[bytearray | memoryview]) -> None:
        """Append the parts, in order, as one (all of them or, on failure, none)."""
        ...

    def read(self, position: int, size: int) -> list[bytes | memoryview]:
        """The bytes in ``[position, position + size)`` as one or more chunks."""
        ...

    def pread(self, position: int, size: int) -> bytes | memoryview:
        """Up to ``size`` contiguous bytes from ``position`` (fewer at the end)."""
        ...

    def truncate(self, size: int) -> None: ...

    def persist_indexes(self, offset_index: OffsetIndex, time_index: TimeIndex) -> None: ...

    def sync_handle(self) -> SyncHandle | None: ...

    def close(self) -> None: ...

    def mark_deleted(self) -> None:
        """Detach the segment's storage so a restart will not load it (cheap)."""
        ...

    def delete(self) -> None:
        """Free the storage for good (may be slow: run it in a thread)."""
        ...


class _BlockReader:
    """Serves small reads from one cached block, so scans read a store in few large reads."""

    __slots__ = ("_store", "_block_size", "_block", "_start")

    def __init__(self, store: SegmentStore, block_size: int) -> None:
        self._store = store
        self._block_size = block_size
        self._block = memoryview(b"")
        self._start = 0

    def get(self, position: int, size: int) -> memoryview:
        """``size`` bytes at ``position``, or fewer at the end of the store."""
        offset = position - self._start
        if 0 <= offset and offset + size <= len(self._block):
            return self._block[offset : offset + size]
        if size > self._block_size:
            return memoryview(self._store.pread(position, size))
        self._block = memoryview(self._store.pread(position, self._block_size))
        self._start = position
        return self._block[:size]


class Segment:
    """One segment of a partition's log; see the module docstring."""

    def __init__(
        self,
        base_offset: int,
        store: SegmentStore,
        *,
        index_interval_bytes: int,
        offset_index: OffsetIndex | None = None,
        time_index: TimeIndex | None = None,
    ) -> None:
        self.base_offset = base_offset
        self.store = store
        self.index_interval_bytes = index_interval_bytes
        self.offset_index = offset_index or OffsetIndex(base_offset)
        self.time_index = time_index or TimeIndex(base_offset)
        self.next_offset = base_offset  # one past the last offset held
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = base_offset
        self.rolling_base_ms: float | None = None  # "now" at the first append, for segment.ms
        self.last_modified_ms: float = 0.0
        self.dirty = False  # holds bytes or index entries not yet flushed
        self._bytes_since_last_index_entry = 0
        # (base offset, start, end) of the last batch appended: a consumer that has caught up
        # fetches from it, and a scan from the sparse index would walk up to
        # log.index.interval.bytes of batches before it (~7 µs for 150-byte batches). An end
        # of -1: no batch appended since the segment was opened or recovered.
        self._tail = (base_offset, 0, -1)

    def __repr__(self) -> str:
        return f"<Segment base={self.base_offset} next={self.next_offset} size={self.size}>"

    @property
    def size(self) -> int:
        return self.store.size

    @property
    def largest_timestamp(self) -> float:
        """What retention.ms compares with: the max record timestamp, else the last append."""
        return self.max_timestamp if self.max_timestamp >= 0 else self.last_modified_ms

    # --- writing ---------------------------------------------------------------------------

    def append(
        self,
        data: bytes | bytearray | memoryview | list[bytearray | memoryview],
        headers: list[BatchHeader],
        now_ms: float,
    ) -> None:
        """Append validated, patched batches; ``headers`` have positions relative to ``data``
        (one buffer, or a list of parts whose concatenation it is)."""
        position = self.store.size
        # Bytes first: a write that fails (a full disk) must leave the indexes untouched.
        if isinstance(data, list):
            self.store.append_parts(data)
        else:
            self.store.append(data)
        for header in headers:
            self._track(header, position + header.position)
        last = headers[-1]
        self._tail = (last.base_offset, position + last.position, position + last.position + last.size)
        self.next_offset = headers[-1].next_offset
        if self.rolling_base_ms is None:
            self.rolling_base_ms = now_ms
        self.last_modified_ms = now_ms
        self.dirty = True

    def _track(self, header: BatchHeader, position: int) -> None:
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = header.last_offset
        if self._bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(header.last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += header.size

    def on_become_inactive(self) -> None:
        """A roll made this segment read-only: record its max timestamp in the time index."""
        before = len(self.time_index)
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        if len(self.time_index) != before:
            self.dirty = True

    def fits_relative(self, last_offset: int) -> bool:
        """Whether ``last_offset`` still fits the int32 relative offsets of the index files."""
        return last_offset - self.base_offset <= MAX_RELATIVE_OFFSET

    # --- reading ---------------------------------------------------------------------------

    def scan(self, position: int = 0) -> Iterator[BatchHeader]:
        """Headers of the batches from ``position`` (a batch boundary) to the end."""
        reader = _BlockReader(self.store, SCAN_BLOCK_SIZE)
        end = self.store.size
        while position + BATCH_HEADER_SIZE <= end:
            header = parse_batch_header(reader.get(position, BATCH_HEADER_SIZE), origin=position)
            if header.size < BATCH_HEADER_SIZE:  # never for a recovered segment; do not spin
                return
            yield header
            position += header.size

    def scan_bounds(self, position: int = 0) -> Iterator[tuple[int, int, int]]:
        """``(position, end, last offset)`` of the batches from ``position`` to the end.

        What a fetch needs to find its batches, unpacked with two struct reads instead of a
        whole :class:`BatchHeader` (building one was most of a small fetch's time).
        """
        reader = _BlockReader(self.store, SCAN_BLOCK_SIZE)
        end = self.store.size
        while position + BATCH_HEADER_SIZE <= end:
            head = reader.get(position, BATCH_HEADER_SIZE)
            base_offset, length = _BASE_AND_LENGTH.unpack_from(head, 0)
            size = length + 12  # the offset and length fields themselves
            if size < BATCH_HEADER_SIZE:  # never for a recovered segment; do not spin
                return
            yield position, position + size, base_offset + _INT32.unpack_from(head, 23)[0]
            position += size

    def find_batch(self, offset: int) -> BatchHeader | None:
        """The first batch whose last offset is ``>= offset``, or None if there is none here."""
        for header in self.scan(self.offset_index.lookup(offset)):
            if header.last_offset >= offset:
                return header
        return None

    def read(
        self, offset: int, max_bytes: int, min_one_batch: bool, file_slices: bool = False
    ) -> list | None:
        """Whole batches from the one holding ``offset``, at most ``max_bytes`` of them unless
        ``min_one_batch`` lets the first one exceed it (KIP-74). None if nothing here is at or
        after ``offset``. With ``file_slices`` a store that can (files) answers with a
        :class:`~trikafka.log.slices.FileSlice` instead of the bytes."""
        tail_base, tail_start, tail_end = self._tail
        if tail_base <= offset < self.next_offset and tail_end == self.store.size:
            first: tuple[int, int] | None = (tail_start, tail_end)  # the last batch holds it
        else:
            position = self.offset_index.lookup(offset)
            if offset >= tail_base and tail_start > position:
                position = tail_start  # nothing before the last batch holds ``offset``
            batches = self.scan_bounds(position)
            first = next(((start, end) for start, end, last in batches if last >= offset), None)
        if first is None:
            return None
        start, first_end = first
        limit = start + max(max_bytes, 0)
        if first_end > limit:
            if not min_one_batch:
                return []
            end = first_end
        elif first_end == tail_end:
            end = first_end  # the last batch: nothing follows it
        else:
            # Batches before the greatest indexed batch start within the limit all fit.
            end = max(first_end, self.offset_index.lookup_position(limit))
            for _, batch_end, _ in self.scan_bounds(end):
                if batch_end > limit:
                    break
                end = batch_end
        slice_of = getattr(self.store, "slice", None) if file_slices else None
        if slice_of is not None:
            try:
                return [slice_of(start, end - start)]
            except OSError:  # no descriptor to spare for the slice: read the bytes
                pass
        return self.store.read(start, end - start)

    def find_timestamp(self, timestamp: int, min_offset: int) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record at or after ``timestamp`` and at or
        after ``min_offset``, or None.

        Exact for uncompressed CreateTime batches; for LogAppendTime batches every record has
        the batch's max timestamp; for compressed CreateTime batches (not decompressed here) the
        answer is the batch's first offset with its max timestamp, which may be early: a
        consumer seeking there skips nothing it asked for.
        """
        entry = self.time_index.lookup(timestamp)
        start = max(entry[1] if entry else self.base_offset, min_offset)
        for header in self.scan(self.offset_index.lookup(start)):
            if (
                header.last_offset < min_offset
                or header.max_timestamp < timestamp
                or header.record_count == 0
            ):
                continue
            if (
                header.compression == Compression.NONE
                and header.timestamp_type == TimestampType.CREATE_TIME
            ):
                data = self.store.pread(header.position, header.size)
                for record in iter_records(data, parse_batch_header(data)):
                    if record.offset >= min_offset and record.timestamp >= timestamp:
                        return record.offset, record.timestamp
                continue
            return max(header.base_offset, min_offset), header.max_timestamp
        return None

    def exact_offset_of_max_timestamp(self) -> int:
        """The first record holding :attr:`max_timestamp`. The segment tracks the batch
        ("shallow") offset only; this reads that one batch to find the record."""
        shallow = self.offset_of_max_timestamp
        header = self.find_batch(shallow)
        if header is None or header.max_timestamp != self.max_timestamp:
            return shallow
        if header.timestamp_type == TimestampType.LOG_APPEND_TIME:
            return header.base_offset  # every record has the batch's timestamp
        if header.compression != Compression.NONE:
            return shallow
        data = self.store.pread(header.position, header.size)
        for record in iter_records(data, parse_batch_header(data)):
            if record.timestamp == self.max_timestamp:
                return record.offset
        return shallow

    # --- recovery --------------------------------------------------------------------------

    def recover(self, min_offset: int) -> tuple[int, str | None]:
        """Re-validate every batch, truncate at the first bad one, rebuild the indexes.

        ``min_offset`` is where the previous segment ended: offsets must not go below it.
        Returns ``(bytes cut, why)``; ``why`` is None when the whole segment was intact.
        """
        self.offset_index.clear()
        self.time_index.clear()
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = self.base_offset
        self.rolling_base_ms = None
        self._bytes_since_last_index_entry = 0
        self._tail = (self.base_offset, 0, -1)
        expected = max(min_offset, self.base_offset)
        reader = _BlockReader(self.store, RECOVERY_BLOCK_SIZE)
        size = self.store.size
        position = 0
        reason: str | None = None
        while position < size:
            head = reader.get(position, BATCH_HEADER_SIZE)
            if len(head) < BATCH_HEADER_SIZE:
                reason = f"a torn batch header of {len(head)} bytes"
                break
            batch_size = _BATCH_LENGTH.unpack_from(head, 8)[0] + LOG_OVERHEAD
            if batch_size < BATCH_HEADER_SIZE or position + batch_size > size:
                reason = f"a torn batch declaring {batch_size} bytes"
                break
            try:
                header = next(
                    iter_batches(reader.get(position, batch_size), validate_records=False)
                )
            except KafkaProtocolError as exc:
                reason = str(exc)
                break
            if header.base_offset < expected or not self.fits_relative(header.last_offset):
                reason = f"batch offset {header.base_offset} where {expected} or more was due"
                break
            if self.rolling_base_ms is None and header.max_timestamp >= 0:
                self.rolling_base_ms = header.max_timestamp
            self._track(header, position)
            expected = header.next_offset
            position += batch_size
        self.next_offset = expected if position else self.base_offset
        cut = size - position
        if cut:
            self.store.truncate(position)
        self.dirty = True
        return cut, reason

    def load(self) -> None:
        """Trust persisted indexes; find the end by scanning from the last index entry.

        Raises :class:`IndexCorruptError` when the indexes do not match the log or the tail is
        not whole batches; the caller then recovers the segment instead.
        """
        size = self.store.size
        entry = self.offset_index.last_entry
        position = entry[1] if entry else 0
        if entry is not None:
            if position + BATCH_HEADER_SIZE > size:
                raise IndexCorruptError(f"last index entry {entry} is past the log end {size}")
            header = parse_batch_header(self.store.pread(position, BATCH_HEADER_SIZE))
            if header.last_offset != entry[0]:
                raise IndexCorruptError(f"last index entry {entry} does not match the log")
        time_entry = self.time_index.last_entry
        if time_entry is not None:
            self.max_timestamp, self.offset_of_max_timestamp = time_entry
        next_offset = self.base_offset
        bytes_since = 0
        for header in self.scan(position):
            if header.end > size or header.base_offset < next_offset:
                raise IndexCorruptError(f"segment {self.base_offset} has a bad tail")
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.last_offset
            next_offset = header.next_offset
            bytes_since += header.size
            position = header.end
        if position != size:
            raise IndexCorruptError(f"segment {self.base_offset} ends inside a batch")
        if time_entry is not None and time_entry[1] >= next_offset:
            raise IndexCorruptError(f"time index entry {time_entry} is past the log end")
        self.next_offset = next_offset
        self._bytes_since_last_index_entry = bytes_since
        if size >= BATCH_HEADER_SIZE:
            first = parse_batch_header(self.store.pread(0, BATCH_HEADER_SIZE))
            if first.max_timestamp >= 0:
                self.rolling_base_ms = first.max_timestamp
