"""The producer's record accumulator (Java's ``RecordAccumulator``): batches per partition.

Records are appended to the last open batch of their partition; a batch is *ready* to send
when it is full (``batch.size`` bytes, or another batch queued behind it), when it is
``linger.ms`` old, when a flush or close is under way, and never while a batch of the same
partition is in flight or waiting out its retry backoff. One batch per partition in flight
keeps per-partition order and makes an idempotent retry a plain resend of the same bytes with
the same sequence number (Java allows up to 5 with more bookkeeping; this producer pipelines
*across* partitions instead, up to ``max.in.flight.requests.per.connection`` requests per
broker).

Everything here runs on the ``now`` the caller passes (trio's clock in the sender), or on the
``clock`` it was given (read when an append opens a batch), so the linger and retry rules are
tested without trio's clock. A batch's encoded bytes are made once, at its first send, and
reused by every retry.

:meth:`RecordAccumulator.append` runs once per record, so it is kept to the bare minimum: the
producer hands it the partition's :class:`PartitionQueue` (looked up once per partition, not
hashed per record), the record's tuple and its size, and the sender is woken through a callback
only when there is something new to look at.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from typing import Any

import attrs
import trio

from trikafka.client.cluster import TopicPartition
from trikafka.protocol.compression import recompress_batches
from trikafka.protocol.headers import SEPARATE_BUFFER, Buffers
from trikafka.protocol.native import native_extension
from trikafka.protocol.record_builder import build_batch_parts
from trikafka.protocol.records import BATCH_HEADER_SIZE, parse_batch_header

__all__ = ["PartitionQueue", "ProducerBatch", "RecordAccumulator", "RecordFuture", "RecordMetadata", "record_size"]


@attrs.frozen
class RecordMetadata:
    """Where a record was written. ``offset`` is -1 with acks=0 (nobody told us)."""

    topic: str
    partition: int
    offset: int
    timestamp: int


_new_future = object.__new__
_time_ns = time.time_ns


class RecordFuture:
    """The outcome of one record: await :meth:`wait` for its metadata or its error.

    A view on its batch (one event per batch, not per record: at 100-byte records the
    per-record event was a tenth of the producer's time). :func:`new_future` makes it without
    calling ``__init__`` and out of the cyclic GC's sight while its batch is pending (see
    there): keep the two in step.
    """

    __slots__ = ("batch", "index")

    def __init__(self, batch: ProducerBatch, index: int) -> None:
        self.batch = batch
        self.index = index

    def done(self) -> bool:
        return self.batch.done.is_set()

    @property
    def error(self) -> BaseException | None:
        return self.batch.error

    @property
    def metadata(self) -> RecordMetadata | None:
        batch = self.batch
        if not batch.done.is_set() or batch.error is not None:
            return None
        offset = batch.base_offset + self.index if batch.base_offset >= 0 else -1
        stamp = batch.log_append_time if batch.log_append_time >= 0 else batch.records[self.index][3]
        return RecordMetadata(batch.tp.topic, batch.tp.partition, offset, stamp)

    async def wait(self) -> RecordMetadata:
        await self.batch.done.wait()
        if self.batch.error is not None:
            raise self.batch.error
        metadata = self.metadata
        assert metadata is not None
        return metadata


RECORD_OVERHEAD = 21  # a record's fixed fields, varints at their widest


def record_size(key: bytes | None, value: bytes | None, headers: Any) -> int:
    """Upper bound of a record's encoded size (varints at their widest)."""
    size = RECORD_OVERHEAD + (len(key) if key else 0) + (len(value) if value else 0)
    for name, header_value in headers:
        size += 10 + len(name) + (len(header_value) if header_value else 0)
    return size


class PartitionQueue(collections.deque):  # type: ignore[type-arg]  # of ProducerBatch; plain base
    """The batches of one partition, oldest first; knows its partition so that an append
    needs no hashing of a :class:`TopicPartition`."""

    __slots__ = ("tp",)

    def __init__(self, tp: TopicPartition) -> None:
        super().__init__()
        self.tp = tp


def _py_new_future(
    batch: ProducerBatch, records: list[Any], futures: list[RecordFuture], key: bytes | None,
    value: bytes | None, headers: Any, timestamp: int | None,
) -> RecordFuture:
    """The reference of the native ``new_future`` (tracked by the GC, as any object)."""
    future = _new_future(RecordFuture)  # no __init__ call: this is per record
    future.batch = batch
    future.index = len(records)
    records.append((key, value, headers, _time_ns() // 1_000_000 if timestamp is None else timestamp))
    futures.append(future)
    return future


def _py_gc_track(obj: object) -> None:
    pass


_native = native_extension()
if _native is not None and hasattr(_native, "new_future"):
    _native.future_type(RecordFuture, *(getattr(RecordFuture, slot) for slot in ("batch", "index")))
#: ``new_future(batch, records, futures, key, value, headers, timestamp)``: append the record
#: ``(key, value, headers, timestamp)`` to ``records`` (``timestamp`` None: now, in epoch ms,
#: Kafka's CreateTime) and a new :class:`RecordFuture` for it to ``futures``, and return that
#: future: one call per record. Natively the future is
#: not tracked by the cyclic GC: a caller holding 200,000 of them set off full collections over
#: every object of the process, half of the producer's per-record time at 100-byte records. Safe
#: because nothing reachable from a pending or succeeded batch leads back to a future (records
#: are bytes, ints and tuples of those; the batch's event holds only the tasks waiting on it);
#: a *failed* batch's error gets tracebacks whose frames may hold its futures, so
#: :meth:`ProducerBatch.fail` hands every future back to the GC (``gc_track``) before it keeps
#: the error, and :meth:`ProducerBatch.complete` lets go of the list.
new_future: Callable[..., RecordFuture] = getattr(_native, "new_future", None) or _py_new_future
gc_track: Callable[[object], None] = getattr(_native, "gc_track", None) or _py_gc_track


@attrs.define(eq=False)
class ProducerBatch:
    tp: TopicPartition
    created: float
    deadline: float
    records: list[tuple[bytes | None, bytes | None, Any, int]] = attrs.field(factory=list)
    #: The records' futures until the batch is done (:func:`new_future`), then None.
    futures: list[RecordFuture] | None = attrs.field(factory=list)
    size: int = BATCH_HEADER_SIZE
    done: trio.Event = attrs.field(factory=trio.Event)
    base_offset: int = -1
    log_append_time: int = -1
    error: BaseException | None = None
    attempts: int = 0
    retry_at: float = 0.0
    base_sequence: int = -1
    encoded: bytes | Buffers | None = None
    last_error: BaseException | None = None  # its last failed attempt's, for delivery.timeout.ms's error

    def encode(self, producer_id: int, epoch: int, transactional: bool, codec: int) -> bytes | Buffers:
        """The batch's bytes, made at its first send and kept for its retries: uncompressed,
        its header and records as buffers (written with one scatter write, not joined), each
        value of 4 KB or more the caller's own bytes object, not a copy."""
        if self.encoded is None:
            parts = build_batch_parts(
                self.records,
                producer_id=producer_id,
                producer_epoch=epoch,
                base_sequence=self.base_sequence,
                transactional=transactional,
                separate=None if codec else SEPARATE_BUFFER,  # large values written from where they are
            )
            if codec:
                data = b"".join(parts)
                self.encoded = bytes(recompress_batches(data, [parse_batch_header(data)], codec))
            else:
                self.encoded = Buffers(*parts)
        return self.encoded

    def complete(self, base_offset: int, log_append_time: int) -> None:
        self.base_offset, self.log_append_time = base_offset, log_append_time
        self.futures = None  # the only path from the batch back to its futures
        self.done.set()

    def fail(self, error: BaseException) -> None:
        futures = self.futures
        if futures is not None:
            # Raised by wait(), the error's traceback holds frames holding futures: a cycle
            # through them, which only the cyclic GC can collect once they are in its sight.
            for future in futures:
                gc_track(future)
            self.futures = None
        self.error = error
        self.done.set()


def _no_wake() -> None:
    pass


class RecordAccumulator:
    def __init__(
        self, batch_size: int, linger_ms: int, delivery_timeout_ms: int, clock: Callable[[], float] = trio.current_time
    ) -> None:
        self.batch_size = batch_size
        self.linger = linger_ms / 1000
        self.delivery_timeout = delivery_timeout_ms / 1000
        self.clock = clock
        self.wake: Callable[[], None] = _no_wake  # the sender's wake-up, once there is one
        self.queues: dict[TopicPartition, PartitionQueue] = {}
        self.in_flight: set[TopicPartition] = set()
        self.incomplete: set[ProducerBatch] = set()
        self.flushing = 0
        self.queued_bytes = 0

    def queue(self, tp: TopicPartition) -> PartitionQueue:
        """The partition's queue (made on first use; it lives as long as the accumulator, so
        the producer keeps it per partition)."""
        queue = self.queues.get(tp)
        if queue is None:
            queue = self.queues[tp] = PartitionQueue(tp)
        return queue

    def append(
        self, queue: PartitionQueue, record: tuple[bytes | None, bytes | None, Any, int], size: int
    ) -> RecordFuture:
        """Add ``record`` — ``(key, value, headers, timestamp)``, ``size`` bytes as
        :func:`record_size` counts them — to the partition's last batch, or to a new one.
        Wakes the sender when a new batch has a linger deadline to watch, or a batch is full."""
        batch = queue[-1] if queue else None
        if (
            batch is None
            or batch.attempts
            or batch.encoded is not None
            or (batch.size + size > self.batch_size and batch.records)
        ):
            now = self.clock()
            batch = ProducerBatch(queue.tp, now, now + self.delivery_timeout)
            queue.append(batch)
            self.incomplete.add(batch)
            created = True
        else:
            created = False
        future = new_future(batch, batch.records, batch.futures, *record)
        batch.size += size
        self.queued_bytes += size
        if created or batch.size >= self.batch_size:
            self.wake()
        return future

    def ready(self, now: float) -> tuple[list[TopicPartition], float]:
        """Partitions whose first batch may be sent now, and when to look again."""
        ready = []
        next_check = float("inf")
        for tp, queue in self.queues.items():
            if not queue or tp in self.in_flight:
                continue
            batch = queue[0]
            if batch.retry_at > now:
                next_check = min(next_check, batch.retry_at)
                continue
            send_at = batch.created + self.linger
            if self.flushing or len(queue) > 1 or batch.size >= self.batch_size or batch.attempts or now >= send_at:
                ready.append(tp)
            else:
                next_check = min(next_check, send_at)
        return ready, next_check

    def drain(self, tp: TopicPartition) -> ProducerBatch:
        batch = self.queues[tp].popleft()
        self.in_flight.add(tp)
        result: ProducerBatch = batch
        return result

    def done(self, batch: ProducerBatch) -> None:
        """The batch succeeded or failed for good."""
        self.in_flight.discard(batch.tp)
        self.incomplete.discard(batch)
        self.queued_bytes -= batch.size - BATCH_HEADER_SIZE

    def reenqueue(self, batch: ProducerBatch, retry_at: float) -> None:
        """Put a batch that failed retriably back at the head of its partition."""
        batch.attempts += 1
        batch.retry_at = retry_at
        self.queues[batch.tp].appendleft(batch)
        self.in_flight.discard(batch.tp)

    def expired(self, now: float) -> list[ProducerBatch]:
        """Queued (not in-flight) batches past delivery.timeout.ms, removed from the queues."""
        out = []
        for queue in self.queues.values():
            while queue and queue[0].deadline <= now:
                out.append(queue.popleft())
        return out

    def abort_all(self) -> list[ProducerBatch]:
        """Every queued batch, removed (for abort and close-on-error)."""
        out = [batch for queue in self.queues.values() for batch in queue]
        for queue in self.queues.values():
            queue.clear()
        return out
