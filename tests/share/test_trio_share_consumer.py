"""The Trio share consumer against an in-memory broker, in virtual time (``autojump_clock``):
the same behaviours as the ShareConsumer tests — one member per record while held, RELEASE
redelivers with the count one higher, REJECT never, an expired lock hands the record back, the
delivery count limit archives — with every timeout (locks, heartbeats, long polls) on trio's
clock.
"""

from __future__ import annotations

import trio

from trikafka.client import open_admin, open_producer, open_share_consumer
from trikafka.client.admin_types import (
    AlterConfigOp,
    ConfigResource,
    ConfigResourceType,
    NewTopic,
    OpType,
)
from trikafka.testing import open_test_broker

FAST = {"group.share.heartbeat.interval.ms": 500, "group.share.min.heartbeat.interval.ms": 500,
        "group.share.assignment.interval.ms": 0}


async def prepare(tb, topic: str, group: str, values, **configs: str) -> None:
    async with open_admin(tb) as admin:
        await admin.create_topics([NewTopic(topic, 1, 1)])
        await admin.incremental_alter_configs(
            {
                ConfigResource(ConfigResourceType.GROUP, group): [
                    AlterConfigOp(k, v, OpType.SET)
                    for k, v in {"share.auto.offset.reset": "earliest", **configs}.items()
                ]
            }
        )
    async with open_producer(tb) as producer:
        for value in values:
            await producer.send(topic, value, partition=0)


async def poll_until(consumer, enough, limit: float = 120.0) -> list:
    got: list = []
    with trio.fail_after(limit):  # virtual seconds
        while not enough(got):
            got.extend(await consumer.poll(1000))
    return got


async def test_two_members_never_hold_the_same_record_and_release_redelivers(autojump_clock):
    async with open_test_broker(**FAST) as tb:
        await prepare(tb, "q", "g", [b"%d" % i for i in range(6)])
        async with open_share_consumer(tb, group_id="g", acknowledgement_mode="explicit", max_poll_records=3) as a, \
                open_share_consumer(tb, group_id="g", acknowledgement_mode="explicit", max_poll_records=3) as b:
            a.subscribe("q")
            b.subscribe("q")
            held_a = await poll_until(a, bool)
            held_b = await poll_until(b, bool)
            assert {r.offset for r in held_a}.isdisjoint(r.offset for r in held_b)
            a.acknowledge(held_a[0], "release")
            for r in held_a[1:]:
                a.acknowledge(r, "accept")
            await a.commit()
            for r in held_b:
                b.acknowledge(r, "accept")
            await b.commit()
            again = await poll_until(a, lambda got: any(r.offset == held_a[0].offset for r in got))
            released = [r for r in again if r.offset == held_a[0].offset]
            assert [(r.value, r.delivery_count) for r in released] == [(held_a[0].value, 2)]
            for r in again:
                a.acknowledge(r, "accept")
            await a.commit()
        snapshot = await tb.broker.wait_for_share_records("g", "q", 0, state="Acknowledged", at_least=6)
        assert snapshot.start_offset == 6


async def test_an_unacknowledged_record_returns_after_its_lock(autojump_clock):
    async with open_test_broker(**FAST) as tb:
        await prepare(tb, "q", "g", [b"only"])
        async with open_share_consumer(tb, group_id="g", acknowledgement_mode="explicit") as holder, \
                open_share_consumer(tb, group_id="g", acknowledgement_mode="explicit") as other:
            holder.subscribe("q")
            other.subscribe("q")
            held = await poll_until(holder, bool)
            start = trio.current_time()
            again = await poll_until(other, bool)
            assert trio.current_time() - start >= 29  # group.share.record.lock.duration.ms (30 s)
            assert [(r.value, r.delivery_count) for r in again] == [(held[0].value, 2)]
            other.acknowledge(again[0], "accept")
            await other.commit()


async def test_reject_and_the_delivery_limit_archive(autojump_clock):
    async with open_test_broker(**FAST) as tb:
        await prepare(tb, "q", "g", [b"rejected", b"tired", b"fine"], **{"share.delivery.count.limit": "2"})
        async with open_share_consumer(tb, group_id="g", acknowledgement_mode="explicit") as c:
            c.subscribe("q")
            for _ in range(2):
                got = await poll_until(c, lambda got: any(r.value == b"tired" for r in got))
                for r in got:
                    c.acknowledge(r, {b"rejected": "reject", b"tired": "release", b"fine": "accept"}[r.value])
                await c.commit()
        snapshot = await tb.broker.wait_for_share_records("g", "q", 0, state="Archived", at_least=2)
        assert (snapshot.start_offset, snapshot.totals) == (3, {"Acknowledged": 1, "Archived": 2})


async def test_implicit_mode_accepts_what_the_last_poll_returned(autojump_clock):
    async with open_test_broker(**FAST) as tb:
        await prepare(tb, "q", "g", [b"a", b"b"])
        async with open_share_consumer(tb, group_id="g") as c:
            c.subscribe("q")
            got = await poll_until(c, lambda got: len(got) >= 2)
            assert [(r.value, r.delivery_count) for r in got] == [(b"a", 1), (b"b", 1)]
        snapshot = await tb.broker.wait_for_share_records("g", "q", 0, state="Acknowledged", at_least=2)
        assert snapshot.start_offset == 2
        await tb.broker.wait_for_share_group_state("g", "Empty", members=0)
