"""The record accumulator and the partitioners, sans-IO: plain values and a given ``now``."""

from __future__ import annotations

import gc
import os
import random
import weakref

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from trikafka.client.accumulator import RecordAccumulator, RecordFuture, record_size
from trikafka.client.cluster import TopicPartition
from trikafka.client.errors import KafkaError
from trikafka.client.partitioner import StickyPartitioner, murmur2, partition_for_key
from trikafka.errors import ErrorCode
from trikafka.protocol.native import native_extension

BATCH = 500
LINGER_MS = 20

appends = st.lists(
    st.tuples(st.integers(0, 2), st.integers(0, 300), st.integers(0, 30)),  # partition, size, ms later
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(appends)
def test_batches_keep_order_respect_batch_size_and_linger(steps):
    now = 0.0
    accumulator = RecordAccumulator(BATCH, LINGER_MS, 120_000, clock=lambda: now)
    sent: dict[int, list[int]] = {0: [], 1: [], 2: []}
    for number, (partition, size, later) in enumerate(steps):
        now += later / 1000
        accumulator.append(
            accumulator.queue(TopicPartition("t", partition)),
            (None, b"x" * size, (), number),
            record_size(None, b"x" * size, ()),
        )
        sent[partition].append(number)
    for tp, queue in accumulator.queues.items():
        batches = list(queue)
        # Order: the batches of a partition hold its records in append order.
        assert [r[3] for b in batches for r in b.records] == sent[tp.partition]
        for batch in batches[:-1]:  # only a batch's first record may overflow batch.size
            assert batch.size <= BATCH or len(batch.records) == 1
    ready, next_check = accumulator.ready(now)
    for tp, queue in accumulator.queues.items():
        head = queue[0]
        due = len(queue) > 1 or head.size >= BATCH or now >= head.created + LINGER_MS / 1000
        assert (tp in ready) == due
        if not due:
            assert next_check <= head.created + LINGER_MS / 1000
    assert next_check == float("inf") or next_check > now


def test_one_batch_per_partition_in_flight_and_retries_go_first():
    accumulator = RecordAccumulator(BATCH, 0, 120_000, clock=lambda: 0.0)
    tp = TopicPartition("t", 0)
    for i in range(3):
        accumulator.append(accumulator.queue(tp), (None, b"x" * 400, (), i), record_size(None, b"x" * 400, ()))
    assert accumulator.ready(0.0)[0] == [tp]
    first = accumulator.drain(tp)
    assert accumulator.ready(0.0)[0] == []  # in flight: the next batch waits
    accumulator.reenqueue(first, retry_at=0.1)
    ready, next_check = accumulator.ready(0.0)
    assert ready == [] and next_check == 0.1  # backing off
    assert accumulator.ready(0.1)[0] == [tp]
    assert accumulator.drain(tp) is first  # the retried batch keeps its place



def test_append_wakes_the_sender_for_a_new_batch_or_a_full_one():
    accumulator = RecordAccumulator(BATCH, LINGER_MS, 120_000, clock=lambda: 0.0)
    woken = []
    accumulator.wake = lambda: woken.append(len(accumulator.queues[tp]))
    tp = TopicPartition("t", 0)
    queue = accumulator.queue(tp)

    def append(value_size: int) -> None:
        accumulator.append(queue, (None, b"x" * value_size, (), 0), record_size(None, b"x" * value_size, ()))

    append(100)  # a new batch: a linger deadline to watch
    append(100)  # nothing new
    assert woken == [1]
    append(500 - queue[0].size - record_size(None, None, ()))  # exactly batch.size: full
    assert woken == [1, 1] and queue[0].size == BATCH
    append(1)  # the next one opens a second batch
    assert woken == [1, 1, 2]

def test_sticky_partitioner_switches_after_batch_size_bytes():
    sticky = StickyPartitioner(batch_size=1000, rng=random.Random(7))
    available = [0, 1, 2, 3]
    first = sticky.partition("t", 100, available, 4)
    for _ in range(9):  # the tenth record makes 1000 bytes: the one after it switches
        assert sticky.partition("t", 100, available, 4) == first
    assert sticky.partition("t", 100, available, 4) != first


# Utils.murmur2 values the Java client's own tests pin down.
JAVA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


def test_murmur2_is_javas():
    assert {key: murmur2(key) for key in JAVA_MURMUR2} == JAVA_MURMUR2


def _murmur2_byte_by_byte(data: bytes) -> int:
    """The algorithm as written down, one byte at a time (the fast one reads words)."""
    mask, m = 0xFFFFFFFF, 0x5BD1E995
    h = (0x9747B28C ^ len(data)) & mask
    whole = len(data) - len(data) % 4
    for i in range(0, whole, 4):
        k = data[i] | data[i + 1] << 8 | data[i + 2] << 16 | data[i + 3] << 24
        k = (k * m) & mask
        k = ((k ^ (k >> 24)) * m) & mask
        h = ((h * m) & mask) ^ k
    for shift, index in ((16, 2), (8, 1), (0, 0)):
        if len(data) % 4 > index:
            h ^= data[whole + index] << shift
    if len(data) % 4:
        h = (h * m) & mask
    h = ((h ^ (h >> 13)) * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=40), st.binary(min_size=250, max_size=600)), st.integers(1, 1000))
def test_murmur2_of_any_key_and_its_partition(key, partitions):
    # Keys past 256 bytes take another path to their words: short and long keys cover both.
    expected = _murmur2_byte_by_byte(key)
    assert murmur2(key) == expected
    assert partition_for_key(key, partitions) == (expected & 0x7FFFFFFF) % partitions


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.one_of(st.binary(max_size=40), st.binary(min_size=250, max_size=600)))
def test_the_native_murmur2_and_the_python_one_agree(key):
    """Both are tested whatever runs: the native one (``_recordwalk.murmur2``) when built."""
    from trikafka.client import partitioner

    native = getattr(native_extension(), "murmur2", None)
    if os.environ.get("TRIKAFKA_PURE_PYTHON", "") in ("", "0"):
        assert native is not None and partitioner._murmur2_unsigned is native
    reference = partitioner._py_murmur2_unsigned(key)
    assert (_murmur2_byte_by_byte(key) & 0xFFFFFFFF) == reference
    if native is not None:
        assert native(key) == reference


def _native_expected() -> bool:
    return os.environ.get("TRIKAFKA_PURE_PYTHON", "") in ("", "0")


def _filled_batch(count: int) -> tuple[RecordAccumulator, list[RecordFuture]]:
    accumulator = RecordAccumulator(1_000_000, 0, 120_000, clock=lambda: 0.0)
    queue = accumulator.queue(TopicPartition("t", 0))
    futures = [accumulator.append(queue, (None, b"v", (), i), record_size(None, b"v", ())) for i in range(count)]
    return accumulator, futures


def test_record_futures_stay_out_of_the_gc_while_their_batch_is_pending_or_succeeded():
    """A caller holding many futures must not set off full collections over the process (half
    the producer's per-record time at 100 B): the native ``new_future`` makes them untracked;
    they still answer as futures do."""
    accumulator, futures = _filled_batch(3)
    batch = futures[0].batch
    assert [f.index for f in futures] == [0, 1, 2] and batch.futures == futures
    assert [r[3] for r in batch.records] == [0, 1, 2]
    if _native_expected():
        assert not any(gc.is_tracked(f) for f in futures)
        # A record of atoms (no headers) is out of sight too; one holding a list is not.
        futures.append(accumulator.append(
            accumulator.queue(TopicPartition("t", 0)), (None, b"v", [("h", b"1")], 3), record_size(None, b"v", ())
        ))
        assert [gc.is_tracked(r) for r in batch.records] == [False, False, False, True]
    batch.complete(40, -1)
    assert batch.futures is None  # nothing leads from the batch back to its futures any more
    expected = [40, 41, 42, 43][: len(futures)]
    assert [f.metadata.offset for f in futures] == expected
    assert [trio.run(f.wait).offset for f in futures] == expected
    gone = weakref.ref(batch)
    del accumulator, futures, batch
    assert gone() is None  # freed by reference counting alone


def test_a_failed_batch_whose_error_holds_its_futures_is_collected():
    """The error a failed batch raises gets a traceback whose frames hold its futures — a cycle
    through them that only the cyclic GC can free: failing the batch puts every future back in
    its sight, so the batch, its records and the error do not leak."""
    accumulator, futures = _filled_batch(3)
    batch = futures[0].batch
    error = KafkaError(ErrorCode.request_timed_out, "produce to t-0 timed out")
    batch.fail(error)
    assert batch.futures is None and all(gc.is_tracked(f) for f in futures)

    async def wait_all(held: list[RecordFuture]) -> None:
        for future in held:  # this frame (held, future) ends up in the error's traceback
            await future.wait()

    with pytest.raises(KafkaError) as raised:
        trio.run(wait_all, futures)
    assert raised.value is error and futures[2].error is error
    gone = weakref.ref(batch)
    del accumulator, futures, batch, error, raised
    gc.collect()
    assert gone() is None
