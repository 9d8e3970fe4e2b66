"""The record accumulator and the partitioners, sans-IO: plain values and a given ``now``."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from trikafka.client.accumulator import RecordAccumulator
from trikafka.client.cluster import TopicPartition
from trikafka.client.partitioner import StickyPartitioner

BATCH = 500
LINGER_MS = 20

appends = st.lists(
    st.tuples(st.integers(0, 2), st.integers(0, 300), st.integers(0, 30)),  # partition, size, ms later
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(appends)
def test_batches_keep_order_respect_batch_size_and_linger(steps):
    accumulator = RecordAccumulator(BATCH, LINGER_MS, 120_000)
    now = 0.0
    sent: dict[int, list[int]] = {0: [], 1: [], 2: []}
    for number, (partition, size, later) in enumerate(steps):
        now += later / 1000
        accumulator.append(TopicPartition("t", partition), None, b"x" * size, [], number, now)
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
    accumulator = RecordAccumulator(BATCH, 0, 120_000)
    tp = TopicPartition("t", 0)
    for i in range(3):
        accumulator.append(tp, None, b"x" * 400, [], i, 0.0)
    assert accumulator.ready(0.0)[0] == [tp]
    first = accumulator.drain(tp)
    assert accumulator.ready(0.0)[0] == []  # in flight: the next batch waits
    accumulator.reenqueue(first, retry_at=0.1)
    ready, next_check = accumulator.ready(0.0)
    assert ready == [] and next_check == 0.1  # backing off
    assert accumulator.ready(0.1)[0] == [tp]
    assert accumulator.drain(tp) is first  # the retried batch keeps its place


def test_sticky_partitioner_switches_after_batch_size_bytes():
    sticky = StickyPartitioner(batch_size=1000, rng=random.Random(7))
    available = [0, 1, 2, 3]
    first = sticky.partition("t", available, 4)
    for _ in range(9):
        sticky.record_appended("t", 100, available, 4)
        assert sticky.partition("t", available, 4) == first
    sticky.record_appended("t", 100, available, 4)  # 1000 bytes: switch
    assert sticky.partition("t", available, 4) != first
