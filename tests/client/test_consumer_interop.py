"""The Trio consumer with real clients over real sockets.

- In one group with a confluent-kafka (librdkafka) consumer, range assignor, against trikafka
  on 127.0.0.1:0 — each side as the group's leader in turn, so each decodes the other's
  ConsumerProtocol bytes (subscription and assignment).
- Reading what confluent-kafka produced, in every codec (the consumer inflates with the
  broker's own codec module).
- Against librdkafka's mock cluster (the benchmarks' reference broker).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import trio

from trikafka.broker import open_broker
from trikafka.client import CommitFailedError
from trikafka.client.cluster import TopicPartition
from trikafka.client.consumer import open_consumer
from trikafka.client.partitioner import partition_for_key
from trikafka.client.producer import open_producer

from .consumer_kit import open_writer

confluent_kafka = pytest.importorskip("confluent_kafka")
pytestmark = pytest.mark.compat
ROOT = Path(__file__).resolve().parents[2]


def confluent_produce(bootstrap: str, topic: str, messages: list[tuple[bytes, bytes]], **conf) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    for key, value in messages:
        producer.produce(topic, value, key=key, headers=[("src", b"confluent")])
    assert producer.flush(30) == 0


class ConfluentMember:
    """A confluent-kafka consumer polling on a thread until told to stop."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.records: list[tuple[int, int, bytes]] = []
        self.assignment: set[int] = set()
        self.stop = threading.Event()
        self.conf = {
            "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "partition.assignment.strategy": "range",
            "session.timeout.ms": 10000, "heartbeat.interval.ms": 500,
        }
        self.topic = topic

    def run(self) -> None:
        consumer = confluent_kafka.Consumer(self.conf)

        def on_assign(_c, partitions):
            self.assignment = {p.partition for p in partitions}

        def on_revoke(_c, partitions):
            self.assignment = set()

        consumer.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke)
        try:
            while not self.stop.is_set():
                message = consumer.poll(0.1)
                if message is None or message.error():
                    continue
                self.records.append((message.partition(), message.offset(), message.value()))
                consumer.commit(message, asynchronous=False)
        finally:
            consumer.close()


async def wait_until(predicate, what: str, limit_s: float = 60) -> None:
    with trio.move_on_after(limit_s):
        while not predicate():  # noqa: ASYNC110 - a thread (librdkafka) changes it: no trio event to wait on
            await trio.sleep(0.05)
        return
    raise AssertionError(f"not within {limit_s} s: {what}")


@pytest.mark.parametrize("trio_leads", [True, False], ids=["trio-leader", "librdkafka-leader"])
async def test_mixed_group_with_confluent_kafka(trio_leads):
    async with open_broker(num_partitions=4) as broker:
        bootstrap = f"127.0.0.1:{broker.port}"
        async with open_writer(bootstrap) as writer:
            await writer.create_topic("mixed", 4)
        theirs = ConfluentMember(bootstrap, "mixed-group", "mixed")
        ours: list[tuple[int, int, bytes]] = []
        async with trio.open_nursery() as nursery:
            # The librdkafka thread must end however the test ends: trio waits for it, and a
            # failed wait that cancelled the nursery without telling it hung the suite.
            try:
                if not trio_leads:
                    nursery.start_soon(trio.to_thread.run_sync, theirs.run)
                    await wait_until(lambda: len(theirs.assignment) == 4, "librdkafka alone owns everything")
                async with open_consumer(
                    bootstrap, group_id="mixed-group", auto_offset_reset="earliest", enable_auto_commit=False,
                    partition_assignment_strategy="range", session_timeout_ms=10000, heartbeat_interval_ms=500,
                ) as consumer:
                    consumer.subscribe(["mixed"])

                    async def poll() -> None:
                        while True:
                            for tp, records in (await consumer.getmany(timeout_ms=100)).items():
                                ours.extend((tp.partition, r.offset, r.value) for r in records)
                                await consumer.commit({tp: records[-1].offset + 1})

                    nursery.start_soon(poll)
                    if trio_leads:
                        await wait_until(lambda: len(consumer.assignment()) == 4, "trio alone owns everything")
                        assert consumer.group.member.is_leader
                        nursery.start_soon(trio.to_thread.run_sync, theirs.run)
                    await wait_until(
                        lambda: len(consumer.assignment()) == 2 and len(theirs.assignment) == 2,
                        "range gives each member two partitions",
                    )
                    assert {tp.partition for tp in consumer.assignment()} | theirs.assignment == {0, 1, 2, 3}
                    assert consumer.group.member.is_leader is trio_leads
                    # range over sorted member ids: the first member id gets partitions 0 and 1
                    messages = [(b"k%d" % i, b"v%d" % i) for i in range(40)]
                    await trio.to_thread.run_sync(confluent_produce, bootstrap, "mixed", messages)
                    await wait_until(lambda: len(ours) + len(theirs.records) >= 40, "all 40 read")
                    nursery.cancel_scope.cancel()
            finally:
                theirs.stop.set()
    values = sorted(v for _, _, v in ours + theirs.records)
    assert values == sorted(v for _, v in messages)  # each read once, by one member
    assert {p for p, _, _ in ours}.isdisjoint({p for p, _, _ in theirs.records})


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
async def test_reads_what_confluent_kafka_produced(codec):
    async with open_broker() as broker:
        bootstrap = f"127.0.0.1:{broker.port}"
        async with open_writer(bootstrap) as writer:
            await writer.create_topic("from-confluent", 2)
        messages = [(b"key-%d" % i, b"value-%d " % i * 20) for i in range(50)]
        conf = {"compression.type": codec, "partitioner": "murmur2_random"}  # the Java client's partitioner
        await trio.to_thread.run_sync(lambda: confluent_produce(bootstrap, "from-confluent", messages, **conf))
        got = []
        with trio.fail_after(30):
            async with open_consumer(bootstrap, group_id="reader", auto_offset_reset="earliest") as consumer:
                consumer.subscribe(["from-confluent"])
                async for record in consumer:
                    got.append(record)
                    if len(got) == len(messages):
                        break
        assert sorted((r.key, r.value) for r in got) == sorted(messages)
        assert all(r.headers == (("src", b"confluent"),) for r in got)
        assert all(r.partition == partition_for_key(r.key, 2) for r in got)  # where the Trio producer puts that key
        for partition in (0, 1):
            offsets = [r.offset for r in got if r.partition == partition]
            assert offsets == sorted(offsets)


async def test_consume_from_librdkafka_mock_cluster():
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "benchmarks.mock_cluster"], cwd=ROOT,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )
    try:
        with trio.fail_after(60):
            lines = _lines(process.stdout)
            ready = await lines.__anext__()
            assert ready.startswith("READY "), ready
            bootstrap = ready.split()[1]
            await process.stdin.send_all(b"topic mocked 2\n")
            assert await lines.__anext__() == "ok"
            messages = [(b"k%d" % i, b"v%d" % i) for i in range(30)]
            await trio.to_thread.run_sync(confluent_produce, bootstrap, "mocked", messages)
            got = []
            async with open_consumer(bootstrap, group_id="on-mock", auto_offset_reset="earliest") as consumer:
                consumer.subscribe(["mocked"])
                async for record in consumer:
                    got.append((record.key, record.value))
                    if len(got) == len(messages):
                        break
                await consumer.commit()
                committed = await consumer.committed([TopicPartition("mocked", 0), TopicPartition("mocked", 1)])
            assert sorted(got) == sorted(messages)
            assert sum(committed.values()) == len(messages)
    finally:
        await process.stdin.aclose()
        with trio.move_on_after(10):
            await process.wait()
        if process.returncode is None:
            process.kill()


async def test_trio_producer_and_a_trio_group_on_librdkafka_mock_cluster():
    """Produce, consume and a two-member group, all Trio, against librdkafka's mock cluster:
    every record read, the partitions split between the members. At least once, not exactly:
    the mock refuses commits while its group is joining (REBALANCE_IN_PROGRESS), so a record
    read just before a rebalance may be read again by its next owner."""
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "benchmarks.mock_cluster"], cwd=ROOT,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )
    try:
        with trio.fail_after(90):
            lines = _lines(process.stdout)
            ready = await lines.__anext__()
            assert ready.startswith("READY "), ready
            bootstrap = ready.split()[1]
            await process.stdin.send_all(b"topic paired 4\n")
            assert await lines.__anext__() == "ok"
            keys = [b"key-%d" % i for i in range(40)]
            async with open_producer(bootstrap) as producer:
                sent = {key: (await producer.send("paired", b"v-" + key, key=key)).partition for key in keys}
            assert sent == {key: partition_for_key(key, 4) for key in keys}
            config = dict(group_id="pair", auto_offset_reset="earliest", partition_assignment_strategy="range",
                          session_timeout_ms=10000, heartbeat_interval_ms=500)
            reads: dict[str, list[tuple[int, bytes]]] = {"a": [], "b": []}
            async with open_consumer(bootstrap, **config) as a, open_consumer(bootstrap, **config) as b:
                members = {"a": a, "b": b}
                for consumer in members.values():
                    consumer.subscribe(["paired"])

                async def member(name: str) -> None:
                    consumer = members[name]
                    while not (len(a.assignment()) == 2 and len(b.assignment()) == 2
                               and {k for r in reads.values() for _, k in r} == set(keys)):
                        for records in (await consumer.getmany(timeout_ms=100)).values():
                            reads[name].extend((r.partition, r.key) for r in records)
                        with contextlib.suppress(CommitFailedError):  # a rebalance began
                            await consumer.commit()

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(member, "a")
                    nursery.start_soon(member, "b")
                owned = {name: {tp.partition for tp in c.assignment()} for name, c in members.items()}
        assert owned["a"].isdisjoint(owned["b"]) and owned["a"] | owned["b"] == {0, 1, 2, 3}
        assert {k for r in reads.values() for _, k in r} == set(keys)
        assert all(p == sent[k] for r in reads.values() for p, k in r)  # the producer's partition
    finally:
        await process.stdin.aclose()
        with trio.move_on_after(10):
            await process.wait()
        if process.returncode is None:
            process.kill()


async def _lines(stream):
    buffer = b""
    while True:
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            yield line.decode().strip()
        data = await stream.receive_some()
        if not data:
            return
        buffer += data
