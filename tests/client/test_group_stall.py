"""A three-member group where one member stalls past session.timeout.ms (45 virtual seconds).

The members process with *commit-before-process*: a batch is processed only after its offsets
were committed. When the stalled member comes back, its commit is refused (the coordinator
removed it and the others own its partitions now), so it never processes a record somebody
else also processed. The whole run — broker, three consumers, a writer — is one Trio program
under MockClock over the in-memory transport: three virtual minutes in well under a second.
"""

from __future__ import annotations

import trio

from trikafka.client import CommitFailedError
from trikafka.client.cluster import TopicPartition
from trikafka.client.consumer import open_consumer
from trikafka.testing import open_test_broker

from .consumer_kit import open_writer

PARTITIONS = 6
TOTAL = 240


class Gate:
    """Freezes every stream of one member (a long GC pause, a network partition)."""

    def __init__(self) -> None:
        self._open = trio.Event()
        self._open.set()

    def close(self) -> None:
        self._open = trio.Event()

    def open(self) -> None:
        self._open.set()

    async def wait(self) -> None:
        await self._open.wait()


class GatedStream(trio.abc.Stream):
    def __init__(self, inner: trio.abc.Stream, gate: Gate) -> None:
        self.inner, self.gate = inner, gate

    async def send_all(self, data) -> None:
        await self.gate.wait()
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes=None):
        data = await self.inner.receive_some(max_bytes)
        await self.gate.wait()
        return data

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_stalled_member_loses_its_partitions_and_nothing_is_lost_or_read_twice(autojump_clock):
    processed: dict[str, list[tuple[int, int, bytes]]] = {"a": [], "b": [], "c": []}
    refused: dict[str, int] = {"a": 0, "b": 0, "c": 0}
    assignments: dict[str, set[TopicPartition]] = {}
    gates = {name: Gate() for name in processed}
    stall_c = trio.Event()  # set: c freezes after its next poll that returns records
    c_stalled = trio.Event()
    progress = [trio.Event()]  # set (and replaced) whenever a member processes a batch

    async with open_test_broker() as tb, open_writer(tb) as writer:
        await writer.create_topic("t", PARTITIONS)

        async def member(name: str, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
            async def connector(host: str, port: int) -> trio.abc.Stream:
                return GatedStream(await tb.listener.connect(), gates[name])

            async with open_consumer(
                tb, connector=connector, group_id="g", client_id=name,
                auto_offset_reset="earliest", enable_auto_commit=False,
                default_api_timeout_ms=120_000,  # c's commit waits out its 60 s stall, not a timeout
            ) as consumer:
                consumer.subscribe(["t"])
                task_status.started()
                while True:
                    batches = await consumer.getmany(timeout_ms=1000)
                    assignments[name] = consumer.assignment()
                    if name == "c" and batches and stall_c.is_set() and not c_stalled.is_set():
                        gates["c"].close()  # frozen between the poll and the commit
                        c_stalled.set()
                    for tp, records in batches.items():
                        try:
                            await consumer.commit({tp: records[-1].offset + 1})
                        except CommitFailedError:
                            refused[name] += 1
                            continue  # not ours any more: somebody else will process them
                        processed[name].extend((tp.partition, r.offset, r.value) for r in records)
                        progress[0].set()
                        progress[0] = trio.Event()

        async def write() -> None:
            for i in range(TOTAL):
                await writer.send("t", i % PARTITIONS, [b"v%d" % i])
                await trio.sleep(0.5)

        async with trio.open_nursery() as nursery:
            for name in processed:
                await nursery.start(member, name)
            nursery.start_soon(write)
            await trio.sleep(20)
            assert all(len(assignments.get(n, ())) == 2 for n in processed), assignments
            stalled_from = set(assignments["c"])
            stall_c.set()
            await c_stalled.wait()
            await trio.sleep(60)  # past session.timeout.ms (45 s) + a rebalance
            assert assignments["a"] | assignments["b"] == {TopicPartition("t", p) for p in range(PARTITIONS)}
            assert not assignments["a"] & assignments["b"]
            assert stalled_from <= assignments["a"] | assignments["b"]
            gates["c"].open()
            with trio.fail_after(300):
                while sum(len(p) for p in processed.values()) < TOTAL:
                    await progress[0].wait()
            await trio.sleep(10)  # would a duplicate still arrive?
            nursery.cancel_scope.cancel()

    everything = [item for items in processed.values() for item in items]
    assert sorted(v for _, _, v in everything) == sorted(b"v%d" % i for i in range(TOTAL))  # none lost, none twice
    for p in range(PARTITIONS):
        offsets = [o for part, o, _ in sorted(everything, key=lambda x: x[1]) if part == p]
        assert offsets == list(range(TOTAL // PARTITIONS))
    for items in processed.values():  # per-partition order within each member
        for p in range(PARTITIONS):
            mine = [o for part, o, _ in items if part == p]
            assert mine == sorted(mine)
    assert refused["c"] >= 1, "the stalled member's commit was refused: the fence was exercised"
    assert processed["c"], "the stalled member rejoined and got work again"
