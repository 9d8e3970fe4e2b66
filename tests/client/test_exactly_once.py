"""A transactional read-process-write step, cancelled at every await point in turn.

The "application" turns input offset n into output record ``n`` and commits input offset n+1
with the output, in one transaction (``send_offsets_to_transaction``). Each run is a fresh
producer with the same transactional.id, resuming from the committed offset — as a restarted
process would. The run is cancelled at its k-th scheduling step, for every k a clean run
takes; whatever was in flight, read_committed output must hold every record exactly once,
in order.
"""

from __future__ import annotations

import trio

from trikafka.client import TopicPartition, open_admin, open_producer
from trikafka.errors import ErrorCode
from trikafka.protocol.entities import build
from trikafka.protocol.registry import ApiVersionSpec
from trikafka.testing import open_test_broker

from .support import committed_view, fetch

RECORDS = 3
OFFSET_FETCH = ApiVersionSpec.resolve(9, 7)


async def committed(broker) -> int:
    """The group's committed input offset, once no transaction holds it (require_stable)."""
    while True:
        async with broker.client() as connection:
            answer = await connection.request(build(
                OFFSET_FETCH.request_type, group_id="app", require_stable=True,
                topics=[{"name": "in", "partition_indexes": [0]}],
            ))
        partition = answer.topics[0].partitions[0]
        if partition.error_code == ErrorCode.none:
            return max(0, int(partition.committed_offset))
        assert partition.error_code == ErrorCode.unstable_offset_commit, partition
        await trio.sleep(0.1)  # a transaction is still open: its coordinator will end it


async def app(broker) -> None:
    async with open_producer(broker, transactional_id="app", linger_ms=1, transaction_timeout_ms=10_000) as producer:
        while (position := await committed(broker)) < RECORDS:
            async with producer.transaction():
                await producer.send("out", str(position).encode())
                await producer.send_offsets_to_transaction({TopicPartition("in", 0): position + 1}, "app")


class StepCounter(trio.abc.Instrument):
    """Counts scheduling steps of one task; cancels a scope at step ``limit``."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.steps = 0
        self.task = None
        self.scope: trio.CancelScope | None = None

    def before_task_step(self, task) -> None:
        if task is self.task:
            self.steps += 1
            if self.limit is not None and self.steps == self.limit and self.scope is not None:
                self.scope.cancel()


async def run_cancelled_at(broker, limit: int | None) -> int:
    counter = StepCounter(limit)
    trio.lowlevel.add_instrument(counter)
    try:
        async with trio.open_nursery() as nursery:

            async def one_run():
                counter.task = trio.lowlevel.current_task()
                with trio.CancelScope() as scope:
                    counter.scope = scope
                    await app(broker)

            nursery.start_soon(one_run)
    finally:
        trio.lowlevel.remove_instrument(counter)
    return counter.steps


async def test_cancelled_at_every_step_output_is_exactly_once(autojump_clock):
    async with open_test_broker() as reference:
        async with open_admin(reference) as admin:
            await admin.create_topics(["in"])
        clean_steps = await run_cancelled_at(reference, None)
        assert committed_view(await fetch(reference, "out", committed=True)) == [b"0", b"1", b"2"]
    assert clean_steps > 20
    for limit in range(1, clean_steps + 1):
        async with open_test_broker() as broker:
            async with open_admin(broker) as admin:
                await admin.create_topics(["in"])
            await run_cancelled_at(broker, limit)  # killed at step `limit`
            await run_cancelled_at(broker, None)  # restarted: finishes the job
            output = committed_view(await fetch(broker, "out", committed=True))
            assert output == [b"0", b"1", b"2"], (limit, output)
