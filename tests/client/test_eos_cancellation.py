"""A transactional consume → process → produce loop cancelled at every await point in turn.

The loop (the shape of ``examples/trio_pipeline.py``) reads a poll's records, writes their
transformed values and the consumer's offsets in one transaction. A Trio instrument counts the
loop task's steps — each step ends at an await that yielded — and cancels the loop at step k,
for every k from the first until the loop finishes without reaching k. After each cancellation
a fresh instance (same ``transactional.id``, same group) runs to the end; a read_committed
reader of the output must then see every input record transformed exactly once. Whatever the
cancelled instance had done — joined, fetched, begun, written, sent offsets, half-committed —
the transaction either committed with its offsets or aborted without them.
"""

from __future__ import annotations

import trio

from trikafka.client.cluster import TopicPartition
from trikafka.client.consumer import open_consumer
from trikafka.client.errors import TransactionAbortedError
from trikafka.client.producer import open_producer
from trikafka.testing import open_test_broker

from .consumer_kit import open_writer

INPUT = [(p, b"r%d-%d" % (p, i)) for i in range(3) for p in range(2)]


class CancelAtStep(trio.abc.Instrument):
    """Counts the steps of one task; cancels ``scope`` when the count reaches ``cancel_at``."""

    def __init__(self, task: trio.lowlevel.Task, scope: trio.CancelScope, cancel_at: int | None) -> None:
        self.task, self.scope, self.cancel_at = task, scope, cancel_at
        self.steps = 0

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        if task is self.task:
            self.steps += 1
            if self.steps == self.cancel_at:
                self.scope.cancel()


async def pipeline(tb) -> None:
    async with (
        open_consumer(tb, group_id="eos", isolation_level="read_committed", enable_auto_commit=False,
                      auto_offset_reset="earliest", client_id="eos-consumer") as consumer,
        open_producer(tb, transactional_id="eos-1", client_id="eos-producer") as producer,
    ):
        consumer.subscribe(["in"])
        idle_since = None  # idle is counted from the first assignment (the join takes 3 s)
        while idle_since is None or trio.current_time() - idle_since < 3:
            batches = await consumer.getmany(timeout_ms=500, max_records=3)
            if idle_since is None and consumer.assignment():
                idle_since = trio.current_time()
            if not batches:
                continue
            idle_since = trio.current_time()
            try:
                async with producer.transaction():
                    for records in batches.values():
                        for record in records:
                            await producer.enqueue("out", record.value.upper(), key=record.key)
                    offsets = {tp: records[-1].offset + 1 for tp, records in batches.items()}
                    await producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
            except TransactionAbortedError:
                for tp, records in batches.items():
                    consumer.seek(tp, records[0].offset)


async def run_once(tb, cancel_at: int | None) -> tuple[bool, int]:
    """(was it cancelled, steps taken)."""
    with trio.CancelScope() as scope:
        instrument = CancelAtStep(trio.lowlevel.current_task(), scope, cancel_at)
        trio.lowlevel.add_instrument(instrument)
        try:
            await pipeline(tb)
        finally:
            trio.lowlevel.remove_instrument(instrument)
    return scope.cancelled_caught, instrument.steps


async def committed_output(tb) -> list[bytes]:
    out: list[bytes] = []
    async with open_consumer(tb, isolation_level="read_committed", auto_offset_reset="earliest") as reader:
        reader.assign([TopicPartition("out", p) for p in range(2)])
        for _ in range(5):
            batches = await reader.getmany(timeout_ms=500)
            out += [r.value for records in batches.values() for r in records]
    return out


async def world(cancel_at: int | None) -> tuple[bool, int, list[bytes]]:
    async with open_test_broker() as tb:
        async with open_writer(tb) as writer:
            await writer.create_topic("in", 2)
            await writer.create_topic("out", 2)
            for partition, value in INPUT:
                await writer.send("in", partition, [value])
        cancelled, steps = await run_once(tb, cancel_at)
        if cancelled:
            await pipeline(tb)  # the restarted instance finishes the work
        return cancelled, steps, await committed_output(tb)


async def test_cancelled_at_every_await_point_output_is_exactly_once(autojump_clock):
    expected = sorted(value.upper() for _, value in INPUT)
    cancelled, total_steps, out = await world(None)
    assert not cancelled and sorted(out) == expected
    assert total_steps > 50  # the loop really awaits: join, fetch, transaction, commit…
    for k in range(1, total_steps + 1):
        cancelled, _, out = await world(k)
        assert sorted(out) == expected, f"cancelled at step {k} of {total_steps}: {sorted(out)}"
