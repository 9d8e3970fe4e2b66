"""The Trio share consumer against an in-memory broker, in virtual time (``autojump_clock``):
the same behaviours as the ShareConsumer tests — one member per record while held, RELEASE
redelivers with the count one higher, REJECT never, an expired lock hands the record back, the
delivery count limit archives (and writes the dead-letter queue), what was acknowledged outlives
a restart on a data dir — with every timeout (locks, heartbeats, long polls) on trio's clock.
"""

from __future__ import annotations

import trio

from trikafka.client import TopicPartition, open_admin, open_consumer, open_producer, open_share_consumer
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


async def test_archived_records_land_in_the_dead_letter_queue_with_kafkas_headers(autojump_clock):
    async with open_test_broker(**FAST) as tb:
        async with open_admin(tb) as admin:
            await admin.create_topics([NewTopic("q.dlq", 1, 1)])
        await prepare(tb, "q", "g", [b"rejected", b"tired", b"fine"], **{
            "share.delivery.count.limit": "2", "errors.deadletterqueue.topic.name": "q.dlq",
            "errors.deadletterqueue.copy.record.enable": "true"})
        async with open_share_consumer(tb, group_id="g", acknowledgement_mode="explicit") as c:
            c.subscribe("q")
            for _ in range(2):
                got = await poll_until(c, lambda got: any(r.value == b"tired" for r in got))
                for r in got:
                    c.acknowledge(r, {b"rejected": "reject", b"tired": "release", b"fine": "accept"}[r.value])
                await c.commit()
        await tb.broker.wait_for_high_watermark("q.dlq", 0, at_least=2)
        async with open_consumer(tb, auto_offset_reset="earliest") as reader:
            reader.assign([TopicPartition("q.dlq", 0)])
            letters: list = []
            with trio.fail_after(60):
                while len(letters) < 2:
                    for records in (await reader.getmany(1000)).values():
                        letters.extend(records)
        by_value = {r.value: dict((k, v.decode()) for k, v in r.headers) for r in letters}
        assert by_value == {
            b"rejected": {"__dlq.errors.topic": "q", "__dlq.errors.partition": "0", "__dlq.errors.offset": "0",
                          "__dlq.errors.group": "g", "__dlq.errors.delivery.count": "1",
                          "__dlq.errors.message": "Offset rejected by client."},
            b"tired": {"__dlq.errors.topic": "q", "__dlq.errors.partition": "0", "__dlq.errors.offset": "1",
                       "__dlq.errors.group": "g", "__dlq.errors.delivery.count": "2",
                       "__dlq.errors.message": "Offset delivery count exceeded the threshold."},
        }


async def test_a_restart_on_a_data_dir_keeps_what_was_acknowledged(tmp_path, autojump_clock):
    config = {**FAST, "log_dirs": str(tmp_path)}
    async with open_test_broker(**config) as tb:
        await prepare(tb, "q", "g", [b"%d" % i for i in range(4)])
        async with open_share_consumer(tb, group_id="g", acknowledgement_mode="explicit", max_poll_records=2) as c:
            c.subscribe("q")
            got = await poll_until(c, lambda got: len(got) >= 2)
            assert [r.value for r in got] == [b"0", b"1"]
            for r in got:
                c.acknowledge(r, "accept")
            await c.commit()
        snapshot = await tb.broker.wait_for_share_records("g", "q", 0, state="Acknowledged", at_least=2)
        assert snapshot.start_offset == 2
    async with open_test_broker(**config) as tb:  # the same data dir: what was accepted stays accepted
        async with open_share_consumer(tb, group_id="g", acknowledgement_mode="explicit") as c:
            c.subscribe("q")
            again = await poll_until(c, lambda got: len(got) >= 2)
            assert sorted(r.value for r in again) == [b"2", b"3"]
            for r in again:
                c.acknowledge(r, "accept")
            await c.commit()
        # (the Acknowledged total counts what this broker saw: the two of this run)
        snapshot = await tb.broker.wait_for_share_records("g", "q", 0, state="Acknowledged", at_least=2)
        assert snapshot.start_offset == 4
