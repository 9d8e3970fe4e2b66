"""The consumer against the in-memory broker under MockClock: subscribe, read, commit, seek."""

from __future__ import annotations

import re

import pytest
import trio
import trio.testing

from trikafka.client.cluster import TopicPartition
from trikafka.client.consumer import open_consumer
from trikafka.client.consumer_fetch import NoOffsetForPartitionError
from trikafka.testing import open_test_broker

from .consumer_kit import open_writer

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


async def read(consumer, count, limit_s=60):
    out = []
    with trio.fail_after(limit_s):
        async for record in consumer:
            out.append(record)
            if len(out) == count:
                return out
    return out


async def test_subscribe_read_commit_and_resume(autojump_clock):
    async with open_test_broker() as tb, open_writer(tb) as w:
        await w.create_topic("t", 2)
        await w.send("t", 0, [b"a0", b"a1", b"a2"], keys=[b"k", None, b"k2"])
        await w.send("t", 1, [b"b0", b"b1"])
        async with open_consumer(tb, group_id="g", auto_offset_reset="earliest", enable_auto_commit=False) as c:
            c.subscribe(["t"])
            records = await read(c, 5)
            assert c.assignment() == {T0, T1}
            by_partition = {p: [r.value for r in records if r.partition == p] for p in (0, 1)}
            assert by_partition == {0: [b"a0", b"a1", b"a2"], 1: [b"b0", b"b1"]}
            first = next(r for r in records if r.value == b"a0")
            assert (first.topic, first.offset, first.key, first.headers, first.timestamp) == (
                "t",
                0,
                b"k",
                (("h", b"1"),),
                1_700_000_000_000,
            )
            await c.commit()
            assert await c.committed([T0, T1]) == {T0: 3, T1: 2}
        await w.send("t", 0, [b"a3"])
        async with open_consumer(tb, group_id="g", auto_offset_reset="earliest") as c:
            c.subscribe("t")
            assert [r.value for r in await read(c, 1)] == [b"a3"]


async def test_auto_commit_on_interval_and_on_close(autojump_clock):
    async with open_test_broker() as tb, open_writer(tb) as w:
        await w.create_topic("t", 1)
        await w.send("t", 0, [b"x", b"y"])
        async with open_consumer(tb, group_id="g", auto_offset_reset="earliest", auto_commit_interval_ms=1000) as c:
            c.subscribe(["t"])
            await read(c, 2)
            await trio.sleep(1.5)
            await c.getmany(timeout_ms=0)  # auto-commit happens in a poll, when due
            assert await c.committed([T0]) == {T0: 2}
            await w.send("t", 0, [b"z"])
            await read(c, 1)
        async with open_consumer(tb, group_id="other-reader", enable_auto_commit=False) as c:
            c.assign([T0])
            assert await c.committed([T0]) == {T0: None}
        async with open_consumer(tb, group_id="g") as c:
            c.assign([T0])
            assert await c.committed([T0]) == {T0: 3}  # committed on close


async def test_assign_seek_pause_and_positions(autojump_clock):
    async with open_test_broker() as tb, open_writer(tb) as w:
        await w.create_topic("t", 2)
        await w.send("t", 0, [b"%d" % i for i in range(10)])
        await w.send("t", 1, [b"p1"])
        async with open_consumer(tb, auto_offset_reset="latest") as c:
            c.assign([T0, T1])
            assert await c.position(T0) == 10
            c.seek_to_beginning(T0)
            assert await c.position(T0) == 0
            c.seek(T0, 7)
            assert [r.value for r in await read(c, 3)] == [b"7", b"8", b"9"]
            c.seek_to_beginning()
            c.pause(T0)
            batch = await c.getmany(timeout_ms=1000)
            assert list(batch) == [T1] and c.paused() == {T0}
            assert await c.position(T0) == 0
            c.resume(T0)
            batch = await c.getmany(timeout_ms=1000, max_records=4)
            assert [r.offset for r in batch[T0]] == [0, 1, 2, 3]
            assert await c.position(T0) == 4


async def test_getmany_waits_in_virtual_time(autojump_clock):
    async with open_test_broker() as tb, open_writer(tb) as w:
        await w.create_topic("t", 1)
        async with open_consumer(tb, auto_offset_reset="earliest") as c:
            c.assign([T0])
            start = trio.current_time()
            assert await c.getmany(timeout_ms=2500) == {}
            assert trio.current_time() - start == pytest.approx(2.5, abs=0.51)


async def test_offset_reset_none_names_the_partition(autojump_clock):
    async with open_test_broker() as tb, open_writer(tb) as w:
        await w.create_topic("t", 1)
        async with open_consumer(tb, group_id="g", auto_offset_reset="none") as c:
            c.assign([T0])
            with pytest.raises(NoOffsetForPartitionError, match="t"):
                await c.getmany(timeout_ms=100)


async def test_pattern_subscription_picks_up_new_topics(autojump_clock):
    async with open_test_broker() as tb, open_writer(tb) as w:
        await w.create_topic("logs-a", 1)
        await w.create_topic("metrics", 1)
        await w.send("logs-a", 0, [b"a"])
        await w.send("metrics", 0, [b"m"])
        async with open_consumer(tb, group_id="g", auto_offset_reset="earliest", metadata_max_age_ms=5000) as c:
            c.subscribe(pattern=re.compile(r"logs-.*"))
            assert [r.value for r in await read(c, 1)] == [b"a"]
            await w.create_topic("logs-b", 1)
            await w.send("logs-b", 0, [b"b"])
            assert [r.value for r in await read(c, 1)] == [b"b"]
            assert c.subscription() == {"logs-a", "logs-b"}


async def test_a_pattern_subscribed_after_a_metadata_refresh_is_matched_at_once(autojump_clock):
    """The pattern wakes the metadata refresher: it does not wait out metadata.max.age.ms
    (5 minutes) because a refresh happened before it was subscribed."""
    async with open_test_broker() as tb, open_writer(tb) as w:
        await w.create_topic("logs-a", 1)
        await w.send("logs-a", 0, [b"a"])
        async with open_consumer(tb, group_id="g", auto_offset_reset="earliest") as c:
            await c.client.refresh_metadata()
            c.subscribe(pattern=r"logs-.*")
            start = trio.current_time()
            records = await c.getmany(timeout_ms=10_000)
            assert [r.value for rs in records.values() for r in rs] == [b"a"]
            assert trio.current_time() - start < 10


async def test_mixing_subscription_modes_is_refused(autojump_clock):
    async with open_test_broker() as tb:
        async with open_consumer(tb, group_id="g") as c:
            c.subscribe(["t"])
            with pytest.raises(ValueError, match="mutually exclusive"):
                c.assign([T0])
        async with open_consumer(tb) as c:
            with pytest.raises(ValueError, match="needs a group.id"):
                c.subscribe(["t"])


async def test_two_tasks_polling_one_consumer_is_refused(autojump_clock):
    async with open_test_broker() as tb, open_writer(tb) as w:
        await w.create_topic("t", 1)
        async with open_consumer(tb, group_id="g") as consumer:
            consumer.subscribe(["t"])
            async with trio.open_nursery() as nursery:
                nursery.start_soon(consumer.getmany, 5000)
                await trio.testing.wait_all_tasks_blocked()
                with pytest.raises(trio.BusyResourceError, match="already polling"):
                    await consumer.getmany(timeout_ms=0)
                nursery.cancel_scope.cancel()
            await consumer.getmany(timeout_ms=0)  # the guard is released when a poll is cancelled
