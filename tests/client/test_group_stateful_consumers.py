"""Hypothesis drives a consumer group: random sends, joins, leaves, pauses, and virtual time.

Why a thread
------------
Hypothesis's state machines are synchronous. Each example runs one Trio program — the
in-memory broker, a writer and up to three consumers — on a background thread under a
``MockClock`` whose autojump is *off between steps*: a step runs as a Trio task with autojump
on (so the consumers' heartbeats, fetch waits and rebalances happen in virtual time), then turns
autojump off and waits until every task is blocked. Between steps nothing runs, so the
invariants read a quiet world, and an example replays the same way every time.

The invariant (issue #12)
-------------------------
Every acknowledged record reaches the group's processing exactly once when the members commit
before processing (commit mode), at least once when they never commit; and each partition's
records are processed in offset order. Checked after every step (no duplicates, order) and at
teardown, after resuming everything and letting a member drain the topic (nothing missing).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio
import trio.testing
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from trikafka.client import CommitFailedError
from trikafka.client.consumer import open_consumer
from trikafka.testing import open_test_broker

from .consumer_kit import open_writer

PARTITIONS = 4
MAX_MEMBERS = 3
STEP_LIMIT_S = 60  # wall-clock bound of one step, so a hang fails instead of stalling CI


class VirtualLoop:
    """A Trio program on a thread; ``run`` executes one step in it under autojump."""

    def __init__(self) -> None:
        self.clock = trio.testing.MockClock(autojump_threshold=math.inf)
        self._ready = threading.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._scope: trio.CancelScope | None = None
        self.nursery: trio.Nursery | None = None
        self.crash: BaseException | None = None
        self._thread = threading.Thread(target=self._main_thread, daemon=True, name="virtual-loop")
        self._thread.start()
        assert self._ready.wait(STEP_LIMIT_S)

    def _main_thread(self) -> None:
        try:
            trio.run(self._main, clock=self.clock)
        except BaseException as exc:  # re-raised by run() on the test's thread
            self.crash = exc
        finally:
            self._ready.set()

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        async with trio.open_nursery() as nursery:
            self._scope = nursery.cancel_scope
            self.nursery = nursery
            self._ready.set()
            await trio.sleep_forever()

    def run(self, fn: Callable[[], Awaitable[Any]]) -> Any:
        async def step() -> Any:
            self.clock.autojump_threshold = 0
            try:
                with trio.fail_after(3600):  # virtual: a step that never ends fails
                    return await fn()
            finally:
                self.clock.autojump_threshold = math.inf
                await trio.testing.wait_all_tasks_blocked()

        if self.crash is not None:
            raise AssertionError("the trio program crashed") from self.crash
        return trio.from_thread.run(step, trio_token=self._token)

    def close(self) -> None:
        if self._token is not None and self._scope is not None:
            try:
                trio.from_thread.run_sync(self._scope.cancel, trio_token=self._token)
            except trio.RunFinishedError:
                pass
        self._thread.join(STEP_LIMIT_S)


@attrs.define
class Member:
    name: str
    consumer: Any = None
    stopping: bool = False
    done: trio.Event = attrs.Factory(trio.Event)
    joined: trio.Event = attrs.Factory(trio.Event)


class ConsumerGroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = VirtualLoop()
        self.members: list[Member] = []
        self.counter = 0
        self.acknowledged: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        self.processed: list[tuple[str, int, int, bytes]] = []  # member, partition, offset, value
        self.commits = True
        self.tb: Any = None
        self.writer: Any = None
        self.progress: trio.Event | None = None  # set (and replaced) whenever a member processes

    # --- set-up ----------------------------------------------------------------------------

    @initialize(commits=st.booleans())
    def start(self, commits: bool) -> None:
        self.commits = commits

        async def open_world() -> None:
            ready = trio.Event()

            async def world(*, task_status=trio.TASK_STATUS_IGNORED) -> None:
                async with open_test_broker() as tb, open_writer(tb) as writer:
                    await writer.create_topic("t", PARTITIONS)
                    self.tb, self.writer = tb, writer
                    task_status.started()
                    await trio.sleep_forever()

            assert self.loop.nursery is not None
            self.progress = trio.Event()
            await self.loop.nursery.start(world)
            ready.set()

        self.loop.run(open_world)
        self._join()

    def teardown(self) -> None:
        try:
            if self.loop.crash is None and self.tb is not None:
                self._drain_and_check()
        finally:
            self.loop.close()

    # --- a member ---------------------------------------------------------------------------

    async def _member_main(self, member: Member) -> None:
        try:
            async with open_consumer(
                self.tb, group_id="g", client_id=member.name, auto_offset_reset="earliest",
                enable_auto_commit=False, session_timeout_ms=10000, heartbeat_interval_ms=1000,
            ) as consumer:
                member.consumer = consumer
                consumer.subscribe(["t"])
                while not member.stopping:
                    batches = await consumer.getmany(timeout_ms=500)
                    member.joined.set()
                    for tp, records in batches.items():
                        if self.commits:
                            try:
                                await consumer.commit({tp: records[-1].offset + 1})
                            except CommitFailedError:
                                continue
                        self.processed.extend((member.name, tp.partition, r.offset, r.value) for r in records)
                        self.progress.set()
                        self.progress = trio.Event()
        finally:
            member.done.set()

    def _join(self) -> None:
        self.counter += 1
        member = Member(f"m{self.counter}")
        self.members.append(member)

        async def go() -> None:
            assert self.loop.nursery is not None
            self.loop.nursery.start_soon(self._member_main, member)
            await member.joined.wait()

        self.loop.run(go)

    # --- rules ------------------------------------------------------------------------------

    @precondition(lambda self: len(self.members) < MAX_MEMBERS)
    @rule()
    def join(self) -> None:
        self._join()

    @precondition(lambda self: len(self.members) > 1)
    @rule(data=st.data())
    def leave(self, data: st.DataObject) -> None:
        member = self.members.pop(data.draw(st.integers(0, len(self.members) - 1)))
        member.stopping = True

        async def go() -> None:
            await member.done.wait()

        self.loop.run(go)

    @rule(partition=st.integers(0, PARTITIONS - 1), count=st.integers(1, 5))
    def send(self, partition: int, count: int) -> None:
        values = [b"p%d-%d" % (partition, len(self.acknowledged[partition]) + i) for i in range(count)]

        async def go() -> None:
            await self.writer.send("t", partition, values)

        self.loop.run(go)
        self.acknowledged[partition].extend(values)  # acknowledged: the broker answered

    @rule(data=st.data())
    def pause(self, data: st.DataObject) -> None:
        member = data.draw(st.sampled_from(self.members))
        assigned = sorted(member.consumer.assignment()) if member.consumer else []
        if assigned:
            member.consumer.pause(data.draw(st.sampled_from(assigned)))

    @rule(data=st.data())
    def resume(self, data: st.DataObject) -> None:
        member = data.draw(st.sampled_from(self.members))
        if member.consumer:
            member.consumer.resume(*member.consumer.paused())

    @rule(seconds=st.sampled_from([0.5, 2.0, 5.0, 30.0]))
    def advance(self, seconds: float) -> None:
        async def go() -> None:
            await trio.sleep(seconds)

        self.loop.run(go)

    # --- invariants -------------------------------------------------------------------------

    @invariant()
    def processing_is_in_partition_order(self) -> None:
        for p in range(PARTITIONS):
            offsets = [o for _, part, o, _ in self.processed if part == p]
            if self.commits:
                assert offsets == list(range(len(offsets))), f"partition {p}: {offsets}"
            else:
                # at-least-once: a rebalance may replay, but a member never goes backwards
                for name in {m for m, *_ in self.processed}:
                    mine = [o for m, part, o, _ in self.processed if part == p and m == name]
                    runs = [b - a for a, b in zip(mine, mine[1:], strict=False)]
                    assert all(step == 1 or step <= 0 for step in runs), (p, name, mine)

    def _drain_and_check(self) -> None:
        for member in self.members:
            if member.consumer is not None:
                member.consumer.resume(*member.consumer.paused())
        wanted = {(p, v) for p, values in self.acknowledged.items() for v in values}

        async def drain() -> None:
            while {(p, v) for _, p, _, v in self.processed} < wanted:
                await self.progress.wait()

        self.loop.run(drain)
        got = [(p, v) for _, p, _, v in self.processed]
        assert set(got) == wanted, "an acknowledged record was never processed"
        if self.commits:
            assert len(got) == len(set(got)), "a record was processed twice despite commit-before-process"
        self.processing_is_in_partition_order()


ConsumerGroupMachine.TestCase.settings = settings(
    max_examples=12, stateful_step_count=12, deadline=None, derandomize=True
)
TestConsumerGroup = ConsumerGroupMachine.TestCase
