"""A partition's log: the one interface both storage backends implement.

Theory of operation
-------------------
A :class:`Log` is a list of :class:`~trikafka.log.segment.Segment`, oldest first; the last one
is *active* and takes appends. Its base class holds all the rules and the backends
(:class:`~trikafka.log.memory.MemoryLog`, :class:`~trikafka.log.file.FileLog`) only say where a
new segment's bytes live, so the two cannot drift apart; ``tests/log`` runs one conformance
suite against both.

* **Append** validates the Produce request's batches (``records.iter_batches``), enforces
  ``max.message.bytes``, rolls the active segment when ``segment.bytes`` or ``segment.ms``
  says so, patches offsets, leader epoch and (LogAppendTime topics) timestamps in place, and
  stores the bytes as they are. Records are never re-encoded.
* **Read** bisects the segments by base offset, then lets the segment find the batch through
  its sparse index. It returns whole batches, and at least one when ``min_one_batch`` (KIP-74).
* **Offsets**: ``log_start_offset`` rises through DeleteRecords and retention;
  ``log_end_offset`` is the next offset to assign. With one replica the high watermark is the
  log end offset. Both are :class:`EndOffset` s, so a long-poll Fetch waits on
  ``high_watermark.wait_value(...)`` (or a watcher) instead of polling.
* **Transactions** (:mod:`trikafka.log.transactions`): the log tracks the open transactions
  of its producers and the aborted ones; ``last_stable_offset`` (an ``EndOffset`` too) is
  the first offset of the oldest open transaction, else the high watermark.
  ``read(..., max_offset=lso)`` serves ``read_committed`` fetches.
* **Time** comes in as arguments (milliseconds) or from the injected ``clock``, never from a
  wall clock read here, so tests drive retention and rolling with a fake clock.
* **Durability**: appends go to the store (the OS page cache for files) without fsync.
  ``flush()`` makes everything durable and advances the recovery point; it is split into
  :meth:`Log.prepare_flush` (fast, on the caller's thread), :meth:`FlushJob.run` (the fsyncs,
  safe in a worker thread) and :meth:`Log.complete_flush`, so the manager can keep the event
  loop free while the disk works.

The API is synchronous on purpose: every method finishes without waiting, which keeps the
log's invariants simple (no method interleaves with another) and the tests free of await.
"""

from __future__ import annotations

import struct
from bisect import bisect_right

import attrs

from trikafka.clock import Clock, now_ms
from trikafka.errors import ErrorCode, InvalidRecordError, KafkaProtocolError
from trikafka.log.config import LogConfig
from trikafka.log.durability import FlushJob, LogDurability
from trikafka.log.offsets import EndOffset, LogOffsets
from trikafka.log.retention import LogRetention
from trikafka.log.segment import Segment, SegmentStore
from trikafka.log.slices import FileSlice, materialize
from trikafka.log.storage import storage_error
from trikafka.log.transactions import LogTransactions, TransactionTracker
from trikafka.protocol.records import (
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    BatchHeader,
    iter_batches,
    rebase_batch_parts,
    rebase_batches,
)

__all__ = ["AppendInfo", "EndOffset", "FetchData", "FlushJob", "Log", "wall_clock_ms"]

_OFFSET_LENGTH = struct.Struct(">qi")  # baseOffset, batchLength
#: Batches written as parts average at least this many bytes: a header copy per batch costs
#: more than one copy of the whole when the batches are tiny.
_PARTS_MIN_BATCH = 4096


def wall_clock_ms() -> float:
    """The default clock: wall time in milliseconds."""
    return now_ms()  # the broker's one wall clock (trikafka/clock.py)


@attrs.frozen
class AppendInfo:
    """What a Produce response reports for one partition."""

    first_offset: int
    last_offset: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int


@attrs.frozen
class FetchData:
    """Whole batches for a Fetch response, as the store's chunks (not joined: no copy)."""

    chunks: tuple[bytes | memoryview | FileSlice, ...]
    high_watermark: int
    log_start_offset: int

    @property
    def size(self) -> int:
        return sum(len(c) for c in self.chunks)

    @property
    def records(self) -> bytes:
        """The batches as one ``bytes`` (a copy unless there is exactly one bytes chunk)."""
        if len(self.chunks) == 1 and isinstance(self.chunks[0], bytes):
            return self.chunks[0]
        return b"".join(map(materialize, self.chunks))


class Log(LogOffsets, LogRetention, LogDurability, LogTransactions):
    """A partition's log. Subclasses provide :meth:`_new_store`; see the module docstring.

    Retention (:mod:`trikafka.log.retention`), durability (:mod:`trikafka.log.durability`)
    and the transaction state (:class:`~trikafka.log.transactions.LogTransactions`) are
    mixed in from their own modules."""

    def __init__(
        self,
        topic: str,
        partition: int,
        config: LogConfig | None = None,
        *,
        clock: Clock | None = None,
        segments: list[Segment] | None = None,
        log_start_offset: int = 0,
        recovery_point: int = 0,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.config = config or LogConfig()
        self._clock = clock or wall_clock_ms
        self._segments: list[Segment] = segments or [self._new_segment(log_start_offset)]
        end = self._segments[-1].next_offset
        self._log_start_offset = min(max(log_start_offset, self._segments[0].base_offset), end)
        self.recovery_point = min(recovery_point, end)
        self.high_watermark: EndOffset = EndOffset(end)
        self.transactions = TransactionTracker()
        self.last_stable_offset: EndOffset = EndOffset(end)
        self._unflushed_messages = 0
        self._rolled_since_flush = False
        self._last_flush_ms = self._clock()
        self._closed = False

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} {self.name} [{self._log_start_offset}, "
            f"{self.log_end_offset}) segments={len(self._segments)}>"
        )

    # --- backend hooks -----------------------------------------------------------------------

    def _new_store(self, base_offset: int) -> SegmentStore:
        raise NotImplementedError

    def _new_segment(self, base_offset: int) -> Segment:
        return Segment(
            base_offset,
            self._new_store(base_offset),
            index_interval_bytes=self.config.index_interval_bytes,
        )

    # --- state -------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def segments(self) -> tuple[Segment, ...]:
        return tuple(self._segments)

    @property
    def active_segment(self) -> Segment:
        return self._segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def max_timestamp(self) -> int:
        """The largest record timestamp in the log (ListOffsets MAX_TIMESTAMP), or -1."""
        return max(s.max_timestamp for s in self._segments)

    @property
    def offset_of_max_timestamp(self) -> int:
        """The offset of the first record holding :attr:`max_timestamp`; -1 if none.

        Exact except in a compressed CreateTime batch, where it is the batch's last offset.
        """
        best = max(self._segments, key=lambda s: s.max_timestamp)  # the first one, on ties
        if best.max_timestamp == NO_TIMESTAMP:
            return -1
        return best.exact_offset_of_max_timestamp()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"log {self.name} is closed")

    # --- append ------------------------------------------------------------------------------

    def append(
        self,
        batches: bytearray | bytes | memoryview,
        *,
        leader_epoch: int,
        log_append_time_ms: int | None = None,
        flush_inline: bool = True,
        validated: list[BatchHeader] | None = None,
    ) -> AppendInfo:
        """Validate and append a Produce request's batches for this partition.

        ``validated``: the headers ``records.iter_batches(batches)`` yielded (records walked),
        when the caller has validated these very bytes already — the produce path does, for
        its producer-state checks — so the log does not compute each CRC and walk each record
        a second time. Without it the log validates.

        When flush.messages is reached the log flushes before returning; with
        ``flush_inline=False`` it leaves that to the caller (``flush_messages_due``), so the
        broker can run the fsync in a worker thread and keep the event loop free.

        ``batches`` is patched in place when it is a ``bytearray`` (else copied, once
        accepted, by :meth:`_writable_copy`), and then belongs to the log: the in-memory
        backend keeps that very buffer, so a caller must not reuse it.
        ``log_append_time_ms`` is "now" (defaults to the clock): it is stamped into the
        batches when the topic uses LogAppendTime and it drives segment.ms rolling. Raises
        :class:`KafkaProtocolError` (CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE,
        RECORD_LIST_TOO_LARGE, ...) and appends nothing if any batch is refused; a disk that
        refuses the write is a :class:`~trikafka.log.storage.KafkaStorageError` and leaves
        the log exactly as it was (:mod:`trikafka.log.storage`).
        """
        if self._closed:
            self._check_open()
        headers = validated if validated is not None else list(iter_batches(batches))
        if not headers:
            raise InvalidRecordError(f"a produce to {self.name} must hold at least one batch")
        config = self.config
        limit = config.max_message_bytes
        spans = 0  # offsets the batches take
        for header in headers:
            if header.size > limit:
                why = f"batch of {header.size} bytes to {self.name} exceeds max.message.bytes"
                raise KafkaProtocolError(f"{why} {limit}", ErrorCode.message_too_large)
            spans += header.last_offset_delta + 1
        if len(batches) > config.segment_bytes:
            raise KafkaProtocolError(
                f"{len(batches)} bytes to {self.name} exceed segment.bytes {config.segment_bytes}",
                ErrorCode.record_list_too_large,
            )
        now = self._clock() if log_append_time_ms is None else log_append_time_ms
        append_time = int(now) if config.log_append_time else None
        first = self._segments[-1].next_offset  # the log end offset
        last = first + spans - 1
        # The headers validation parsed, patched along with the bytes: no second parse.
        data: bytes | bytearray | memoryview  # the batches as the log keeps them
        written: bytearray | memoryview | list[bytearray | memoryview]  # what the store gets
        if isinstance(batches, bytearray):
            data = written = batches
            patched = rebase_batches(data, headers, first, leader_epoch=leader_epoch, log_append_time_ms=append_time)
        elif self._writes_parts and len(batches) >= len(headers) * _PARTS_MIN_BATCH:
            # A store that writes parts (a file) gets each batch's patched header copy and its
            # records where they are: no copy of the records on their way to the page cache.
            data = batches
            patched, written = rebase_batch_parts(
                data, headers, first, leader_epoch=leader_epoch, log_append_time_ms=append_time
            )
        else:
            data = written = self._writable_copy(batches)
            patched = rebase_batches(data, headers, first, leader_epoch=leader_epoch, log_append_time_ms=append_time)
        next_offset = patched[-1].next_offset
        count = len(self._segments)
        try:
            segment = self._maybe_roll(len(data), now, last)
            segment.append(written, patched, now)  # nothing moves unless the bytes were written
        except OSError as exc:
            if len(self._segments) > count:  # rolled for this append: take the roll back
                self._segments.pop().store.delete()
            raise storage_error(f"append of {len(data)} bytes to {self.name}", exc) from None
        if TransactionTracker.concerns(patched):
            self._track_transactions(data, patched)
        self._unflushed_messages += next_offset - first
        self._set_end(next_offset)
        if flush_inline and self.flush_messages_due:
            # Kafka flushes inline too: flush.messages is for users who want each produce
            # durable before its response, and pay for it.
            self.flush()
        return AppendInfo(
            first_offset=first,
            last_offset=next_offset - 1,
            log_append_time=append_time if append_time is not None else -1,
            log_start_offset=self._log_start_offset,
        )

    #: Whether the store takes an append as parts (``SegmentStore.append_parts``) instead
    #: of one buffer: a backend that writes the bytes out rather than keeping them.
    _writes_parts = False

    def _writable_copy(self, batches: bytes | memoryview) -> bytearray | memoryview:
        """The copy of a caller's batches to patch and store (where: the backend's call)."""
        return bytearray(batches)

    def _maybe_roll(self, size: int, now_ms: float, last_offset: int) -> Segment:
        active = self._segments[-1]
        if active.size and (
            active.size + size > self.config.segment_bytes
            or (
                active.rolling_base_ms is not None
                and now_ms - active.rolling_base_ms > self.config.segment_ms
            )
            or not active.fits_relative(last_offset)
        ):
            return self.roll()
        return active

    def roll(self) -> Segment:
        """Start a new active segment at the log end offset (no-op if the active is empty)."""
        self._check_open()
        active = self._segments[-1]
        if not active.size:
            return active
        segment = self._new_segment(self.log_end_offset)  # may fail (EMFILE): nothing moved
        active.on_become_inactive()
        self._segments.append(segment)
        self._rolled_since_flush = True
        return segment

    # --- read --------------------------------------------------------------------------------

    def _check_offset(self, offset: int) -> None:
        if not self._log_start_offset <= offset <= self.log_end_offset:
            raise KafkaProtocolError(
                f"offset {offset} is outside [{self._log_start_offset}, {self.log_end_offset}] "
                f"of {self.name}",
                ErrorCode.offset_out_of_range,
            )

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        min_one_batch: bool = True,
        max_offset: int | None = None,
        file_slices: bool = False,
    ) -> FetchData:
        """Whole batches from the one holding ``offset``, up to ``max_bytes`` (one segment).

        Raises OFFSET_OUT_OF_RANGE outside ``[log_start_offset, log_end_offset]``; at the log
        end offset the answer is empty. With ``max_offset`` (the last stable offset, for
        read_committed) only batches starting below it are returned. With ``file_slices``
        a file log answers with :class:`~trikafka.log.slices.FileSlice` references, read
        only when sent, so a slow reader holds no copy of the log (see slices.py).
        """
        self._check_open()
        self._check_offset(offset)
        chunks: list[bytes | memoryview] = []
        end = self.log_end_offset
        if max_offset is not None and max_offset < end:  # cut at batch starts: bytes needed
            if offset >= max_offset:
                return FetchData((), self.high_watermark.value, self._log_start_offset)
            found = self.read(offset, max_bytes, min_one_batch=min_one_batch)
            return FetchData(
                _cut_at(found.chunks, max_offset),  # type: ignore[arg-type]  # read without file_slices: no FileSlice
                found.high_watermark,
                found.log_start_offset,
            )
        if offset < end:
            i = max(bisect_right(self._segments, offset, key=_base_offset) - 1, 0)
            try:
                for segment in self._segments[i:]:
                    segment_chunks = segment.read(offset, max_bytes, min_one_batch, file_slices)
                    if segment_chunks is not None:
                        chunks = segment_chunks
                        break
            except OSError as exc:
                raise storage_error(f"read of {self.name} at offset {offset}", exc) from None
        return FetchData(tuple(chunks), self.high_watermark.value, self._log_start_offset)

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record at or after ``timestamp_ms`` (and the
        log start offset), as ListOffsets wants; None when every record is earlier."""
        self._check_open()
        try:
            for segment in self._segments:
                if (
                    segment.next_offset <= self._log_start_offset
                    or segment.max_timestamp < timestamp_ms
                ):
                    continue
                found = segment.find_timestamp(timestamp_ms, self._log_start_offset)
                if found is not None:
                    return found
        except OSError as exc:
            raise storage_error(f"timestamp lookup in {self.name}", exc) from None
        return None

    def close(self) -> None:
        """Write out indexes and release the stores. Does not fsync: call :meth:`flush` first
        for durability (the manager does)."""
        if self._closed:
            return
        self._closed = True
        failed: OSError | None = None
        for segment in self._segments:
            segment.on_become_inactive()
            try:
                segment.store.persist_indexes(segment.offset_index, segment.time_index)
            except OSError as exc:  # the next start rebuilds them from the log
                failed = failed or exc
            segment.store.close()
        if failed is not None:
            raise storage_error(f"writing the indexes of {self.name}", failed)


def _base_offset(segment: Segment) -> int:
    return segment.base_offset


def _cut_at(chunks: tuple[bytes | memoryview, ...], max_offset: int) -> tuple[bytes | memoryview, ...]:
    """The whole batches of ``chunks`` that start below ``max_offset``."""
    if not chunks:
        return chunks
    data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    view = memoryview(data)
    position = 0
    while position + LOG_OVERHEAD <= len(view):
        base_offset, length = _OFFSET_LENGTH.unpack_from(view, position)
        if base_offset >= max_offset:
            break
        position += length + LOG_OVERHEAD
    if position >= len(view):
        return chunks
    return (view[:position],) if position else ()
