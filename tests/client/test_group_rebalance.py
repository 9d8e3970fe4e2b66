"""Rebalances end to end under MockClock: listeners, cooperative-sticky, static members,
max.poll.interval.ms."""

from __future__ import annotations

import trio
import trio.testing

from trikafka.client import RebalanceListener, TopicPartition
from trikafka.client.consumer import open_consumer
from trikafka.testing import open_test_broker

from .consumer_kit import open_writer

ALL = {TopicPartition("t", p) for p in range(4)}


class Recorder(RebalanceListener):
    def __init__(self, consumer_box: list) -> None:
        self.events: list[tuple[str, frozenset]] = []
        self.box = consumer_box

    async def on_partitions_revoked(self, partitions):
        await trio.sleep(0.1)  # async callbacks are awaited before the next fetch
        self.events.append(("revoked", frozenset(partitions)))
        consumer = self.box[0]
        await consumer.commit(
            {
                tp: consumer.subscriptions.position(tp)
                for tp in partitions
                if consumer.subscriptions.position(tp) is not None
            }
        )

    def on_partitions_assigned(self, partitions):
        self.events.append(("assigned", frozenset(partitions)))

    def on_partitions_lost(self, partitions):
        self.events.append(("lost", frozenset(partitions)))


async def poll_until(consumer, predicate, limit_s=120):
    with trio.fail_after(limit_s):
        while not predicate():
            await consumer.getmany(timeout_ms=200)


async def test_cooperative_sticky_moves_only_what_must_move(autojump_clock):
    async with open_test_broker() as tb, open_writer(tb) as w:
        await w.create_topic("t", 4)
        box_a: list = []
        async with open_consumer(
            tb, group_id="g", partition_assignment_strategy="cooperative-sticky", auto_offset_reset="earliest"
        ) as a:
            box_a.append(a)
            listener = Recorder(box_a)
            a.subscribe(["t"], listener=listener)
            await poll_until(a, lambda: a.assignment() == ALL)
            assert listener.events == [("assigned", frozenset(ALL))]
            async with trio.open_nursery() as nursery:
                nursery.start_soon(poll_until, a, lambda: len(a.assignment()) == 2)
                async with open_consumer(
                    tb, group_id="g", partition_assignment_strategy="cooperative-sticky", auto_offset_reset="earliest"
                ) as b:
                    b.subscribe(["t"])
                    await poll_until(b, lambda: len(b.assignment()) == 2)
                    kept = a.assignment()
                    assert kept | b.assignment() == ALL and not kept & b.assignment()
                    # a never revoked what it kept: one revocation of exactly the two that moved
                    revoked = [p for kind, p in listener.events if kind == "revoked"]
                    assert revoked == [frozenset(ALL - kept)]
                    assert ("lost", frozenset(ALL - kept)) not in listener.events
                    nursery.cancel_scope.cancel()


async def test_eager_revokes_all_and_commits_in_the_listener(autojump_clock):
    async with open_test_broker() as tb, open_writer(tb) as w:
        await w.create_topic("t", 4)
        for p in range(4):
            await w.send("t", p, [b"x", b"y"])
        box: list = []
        async with open_consumer(
            tb,
            group_id="g",
            partition_assignment_strategy="range",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        ) as a:
            box.append(a)
            listener = Recorder(box)
            a.subscribe(["t"], listener=listener)
            got = 0
            with trio.fail_after(60):
                while got < 8:
                    got += sum(len(r) for r in (await a.getmany(timeout_ms=500)).values())
            async with trio.open_nursery() as nursery:
                nursery.start_soon(poll_until, a, lambda: len(a.assignment()) == 2)
                async with open_consumer(tb, group_id="g", partition_assignment_strategy="range") as b:
                    b.subscribe(["t"])
                    await poll_until(b, lambda: len(b.assignment()) == 2)
                    nursery.cancel_scope.cancel()
            assert listener.events[1] == ("revoked", frozenset(ALL))  # eager: everything
            assert await a.committed(ALL) == {tp: 2 for tp in ALL}  # committed by the listener


async def test_static_member_restarts_without_a_rebalance(autojump_clock):
    # Kafka's initial delay, so both members form the group in one rebalance (generation 1), as
    # this test was written for. Formed over two generations (the dev default, 0), a's static
    # restart sometimes brings a third: not yet explained, and not what this test is about.
    async with open_test_broker(group_initial_rebalance_delay_ms=3000) as tb, open_writer(tb) as w:
        await w.create_topic("t", 4)
        config = dict(group_id="g", partition_assignment_strategy="range", session_timeout_ms=30000)
        async with (
            open_consumer(tb, group_instance_id="a-1", **config) as a,
            open_consumer(tb, group_instance_id="b-1", **config) as b,
        ):
            a.subscribe(["t"])
            b.subscribe(["t"])
            async with trio.open_nursery() as nursery:
                nursery.start_soon(poll_until, a, lambda: len(a.assignment()) == 2)
                await poll_until(b, lambda: len(b.assignment()) == 2)
            before = a.assignment()
            generation = a.group.member.generation_id
            await a.aclose()  # static: no LeaveGroup
            async with open_consumer(tb, group_instance_id="a-1", **config) as a2:
                a2.subscribe(["t"])
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(poll_until, b, lambda: False, 20)
                    await poll_until(a2, lambda: len(a2.assignment()) == 2)
                    assert a2.assignment() == before
                    await trio.sleep(10)
                    assert b.group.member.generation_id == generation  # b never rebalanced
                    assert len(b.assignment()) == 2
                    nursery.cancel_scope.cancel()


async def test_member_that_stops_polling_leaves_after_max_poll_interval(autojump_clock):
    """Kafka's max.poll.interval.ms: the member leaves once that long has passed since its last
    poll (Java's heartbeat thread sends LeaveGroup when its poll timer expires) — measured from
    the poll, not from when anyone else noticed."""
    async with open_test_broker() as tb, open_writer(tb) as w:
        await w.create_topic("t", 4)
        tb.faults.recorder.start()
        config = dict(group_id="g", partition_assignment_strategy="range", max_poll_interval_ms=20000)
        async with open_consumer(tb, **config) as a, open_consumer(tb, **config) as b:
            a.subscribe(["t"])
            b.subscribe(["t"])
            async with trio.open_nursery() as nursery:
                nursery.start_soon(poll_until, a, lambda: len(a.assignment()) == 2)
                await poll_until(b, lambda: len(b.assignment()) == 2)
            owned = a.assignment()
            # a's last poll: it starts no later than `polled` and ends by `returned`.
            polled = trio.current_time()
            await a.getmany(timeout_ms=0)
            returned = trio.current_time()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(poll_until, b, lambda: b.assignment() == ALL)  # b polls; a is busy
                await tb.wait_for_group_state("g", "PreparingRebalance", members=1, timeout=60)  # a left
                left = trio.current_time()
            assert polled + 20 <= left <= returned + 20  # exactly max.poll.interval.ms after the poll
            lost = []
            a.listener = type("L", (RebalanceListener,), {"on_partitions_lost": lambda self, p: lost.append(p)})()
            await a.getmany(timeout_ms=0)  # a's next poll learns it left
            assert lost == [owned]  # then it rejoins within the same poll
            # ... and heartbeats again: the group stays stable while both keep polling.
            heartbeats = len(tb.recorded("Heartbeat"))
            async with trio.open_nursery() as nursery:
                nursery.start_soon(poll_until, b, lambda: False)
                await poll_until(a, lambda: len(a.assignment()) == 2)
                await trio.sleep(30)  # virtual: ten heartbeat intervals
                nursery.cancel_scope.cancel()
            assert len(tb.recorded("Heartbeat")) > heartbeats


async def test_heartbeats_run_when_their_task_waited_before_the_first_join(autojump_clock):
    """The heartbeat task may reach its wait before the application's first poll: it must
    still wake when the member becomes stable (it once waited on an event the join replaced,
    so it never heartbeat and the member was expired at its session timeout)."""
    async with open_test_broker() as tb, open_writer(tb) as w:
        await w.create_topic("t", 1)
        tb.faults.recorder.start()
        async with open_consumer(tb, group_id="g", session_timeout_ms=10000, heartbeat_interval_ms=1000) as c:
            await trio.testing.wait_all_tasks_blocked()  # the heartbeat task now waits
            c.subscribe(["t"])
            await poll_until(c, lambda: len(c.assignment()) == 1)
            joined = c.group.member.generation_id
            await c.getmany(timeout_ms=30_000)  # idle: only heartbeats keep it in the group
            assert c.group.member.generation_id == joined
            snapshot = tb.group_snapshot("g")
            assert snapshot.state == "Stable" and len(snapshot.members) == 1
            assert len(tb.recorded("Heartbeat")) >= 25
