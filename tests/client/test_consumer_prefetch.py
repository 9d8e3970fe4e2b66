"""Prefetch: the consumer's next Fetch is out while the application works on a batch
(trikafka/client/consumer_prefetch.py), bounded by ``queued.min.messages`` and
``queued.max.messages.kbytes``; prefetched records are dropped on seek, pause, revocation and
an assignment change, and no record is lost or handed out twice."""

from __future__ import annotations

import trio

from trikafka.client import open_admin
from trikafka.client.cluster import TopicPartition
from trikafka.client.consumer import open_consumer
from trikafka.testing import open_test_broker

from .consumer_kit import open_writer

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def values(batches):
    return [r.value for records in batches.values() for r in records]


async def read_n(consumer, count, **kw):
    out = []
    with trio.fail_after(120):
        while len(out) < count:
            out += values(await consumer.getmany(timeout_ms=200, **kw))
    return out


def fetches(tb, client_id):
    return len(tb.faults.recorder.requests("Fetch", client_id=client_id))


async def test_the_next_batch_is_fetched_while_the_application_works(autojump_clock):
    """Each Fetch takes 1 s (a fault); the application works 2 s on a batch. With prefetch the
    next batch is there when it polls again: a 100 ms getmany returns it."""
    async with open_test_broker() as tb, open_writer(tb) as w:
        await w.create_topic("t", 1)
        await w.send("t", 0, [b"a0", b"a1"])
        async with open_consumer(tb, auto_offset_reset="earliest", client_id="c") as c:
            c.assign([T0])
            assert await read_n(c, 2) == [b"a0", b"a1"]
            tb.faults.add_latency(1.0, api="FETCH", count=None)
            await w.send("t", 0, [b"a2", b"a3"])  # while the prefetch is out
            await trio.sleep(2)  # the application works
            assert values(await c.getmany(timeout_ms=100)) == [b"a2", b"a3"]
            assert await c.position(T0) == 4


async def test_a_seek_drops_prefetched_records(autojump_clock):
    async with open_test_broker() as tb, open_writer(tb) as w:
        await w.create_topic("t", 1)
        await w.send("t", 0, [b"v%d" % i for i in range(10)])
        async with open_consumer(tb, auto_offset_reset="earliest") as c:
            c.assign([T0])
            assert await read_n(c, 4, max_records=4) == [b"v%d" % i for i in range(4)]  # 4..9 buffered
            c.seek(T0, 2)
            assert await c.position(T0) == 2
            assert await read_n(c, 8) == [b"v%d" % i for i in range(2, 10)]
            # A Fetch out (held 1 s) when the seek comes: its answer (offset 10 on) is dropped.
            tb.faults.add_latency(1.0, api="FETCH", count=None)
            await w.send("t", 0, [b"v10", b"v11"])
            c.seek(T0, 9)
            assert await read_n(c, 3) == [b"v9", b"v10", b"v11"]
            assert await c.position(T0) == 12


async def test_pause_drops_prefetched_records_and_resume_reads_them_once(autojump_clock):
    async with open_test_broker() as tb, open_writer(tb) as w:
        await w.create_topic("t", 2)
        await w.send("t", 0, [b"a%d" % i for i in range(10)])
        await w.send("t", 1, [b"b%d" % i for i in range(3)])
        async with open_consumer(tb, auto_offset_reset="earliest") as c:
            c.assign([T0, T1])
            got = await read_n(c, 2, max_records=2)
            c.pause(T0)
            assert await c.position(T0) == sum(1 for v in got if v.startswith(b"a"))
            rest = []
            for _ in range(5):
                rest += values(await c.getmany(timeout_ms=200))
            assert not [v for v in rest if v.startswith(b"a")]  # nothing of a paused partition
            c.resume(T0)
            rest += await read_n(c, 13 - len(got) - len(rest))
            every = got + rest
            assert sorted(every) == sorted([b"a%d" % i for i in range(10)] + [b"b%d" % i for i in range(3)])
            assert [v for v in every if v.startswith(b"a")] == [b"a%d" % i for i in range(10)]
            assert (await c.position(T0), await c.position(T1)) == (10, 3)


async def test_an_assignment_change_drops_the_partitions_records(autojump_clock):
    async with open_test_broker() as tb, open_writer(tb) as w:
        await w.create_topic("t", 2)
        await w.send("t", 0, [b"a%d" % i for i in range(6)])
        await w.send("t", 1, [b"b%d" % i for i in range(6)])
        async with open_consumer(tb, auto_offset_reset="earliest") as c:
            c.assign([T0, T1])
            got = await read_n(c, 2, max_records=2)
            c.assign([T1])
            rest = await read_n(c, 6 - sum(1 for v in got if v.startswith(b"b")))
            assert not [v for v in rest if v.startswith(b"a")]
            assert [v for v in got + rest if v.startswith(b"b")] == [b"b%d" % i for i in range(6)]
            assert await c.position(T1) == 6


async def test_revocation_drops_prefetched_records_nothing_lost_or_twice(autojump_clock):
    """Two members of a group, auto-commit: the first has records buffered and a Fetch out when
    the second joins and takes a partition; the second starts at the first's committed
    position. Every record is handed out exactly once across the two."""
    async with open_test_broker() as tb, open_writer(tb) as w:
        await w.create_topic("t", 2)
        for p in (0, 1):
            await w.send("t", p, [b"%d-%d" % (p, i) for i in range(200)])
        common = {"group_id": "g", "auto_offset_reset": "earliest"}
        seen: list[bytes] = []
        async with open_consumer(tb, **common) as first:
            first.subscribe(["t"])
            seen += await read_n(first, 3, max_records=3)
            async with open_consumer(tb, **common) as second:
                second.subscribe(["t"])
                with trio.fail_after(120):
                    while not second.assignment():
                        seen += values(await first.getmany(timeout_ms=100, max_records=1))
                        seen += values(await second.getmany(timeout_ms=100, max_records=1))
                    assert len(first.assignment()) == len(second.assignment()) == 1
                    assert len(seen) < 300  # the rebalance came while records were buffered
                    while len(seen) < 400:
                        seen += values(await first.getmany(timeout_ms=100, max_records=5))
                        seen += values(await second.getmany(timeout_ms=100, max_records=5))
        assert sorted(seen) == sorted(b"%d-%d" % (p, i) for p in (0, 1) for i in range(200))


async def test_prefetch_is_bounded_by_queued_min_messages_and_kbytes(autojump_clock):
    async with open_test_broker() as tb, open_writer(tb) as w:
        await w.create_topic("t", 1)
        await w.send("t", 0, [b"x" * 1000 for _ in range(10)])
        tb.faults.recorder.start()
        for client_id, config, expected in (
            ("default", {}, 2),  # the first Fetch, then one ahead while the app works
            ("min-messages", {"queued_min_messages": 5}, 1),  # 9 buffered ≥ 5: nothing ahead
            ("kbytes", {"queued_max_messages_kbytes": 1}, 1),  # ~10 KB buffered > 1 KB
        ):
            async with open_consumer(tb, auto_offset_reset="earliest", client_id=client_id, **config) as c:
                c.assign([T0])
                assert len(await read_n(c, 1, max_records=1)) == 1
                await trio.sleep(1)
                assert fetches(tb, client_id) == expected, client_id
                assert len(await read_n(c, 9)) == 9


async def test_every_record_once_under_prefetch_with_small_fetches(autojump_clock):
    """Many small Fetch answers (max.partition.fetch.bytes) appended behind a buffer."""
    async with open_test_broker() as tb, open_writer(tb) as w:
        await w.create_topic("t", 1)
        for i in range(20):
            await w.send("t", 0, [b"r%d-%d" % (i, j) for j in range(5)])
        async with open_admin(tb):
            pass
        async with open_consumer(tb, auto_offset_reset="earliest", max_partition_fetch_bytes=200) as c:
            c.assign([T0])
            got = await read_n(c, 100, max_records=7)
            assert got == [b"r%d-%d" % (i, j) for i in range(20) for j in range(5)]
            assert await c.position(T0) == 100
