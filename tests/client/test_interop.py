"""The Trio client against real brokers over real sockets, with confluent-kafka on the other end.

* Trio producer → ``python -m trikafka`` → confluent-kafka consumer, and the reverse direction
  for partitioning: confluent-kafka with ``partitioner=murmur2_random`` (librdkafka's name for
  the Java client's partitioner) and the Trio producer put every key on the same partition.
* Trio producer → librdkafka's mock cluster (the benchmarks' reference broker) → confluent-kafka.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import trio
from confluent_kafka import Consumer, Producer

from trikafka.client import NewTopic, open_admin, open_producer
from trikafka.client.partitioner import partition_for_key
from trikafka.testing.process import broker_process

pytestmark = pytest.mark.compat

TIMEOUT = 60
KEYS = [f"key-{i}".encode() for i in range(64)] + [b"", b"\x00\xff" * 9, "ключ".encode()]


def consume_all(bootstrap: str, topic: str, count: int) -> list[tuple[int, bytes | None, bytes | None]]:
    """(partition, key, value) of ``count`` records, read by confluent-kafka from the start."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"reader-{topic}", "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })
    consumer.subscribe([topic])
    out = []
    try:
        for _ in range(600):
            message = consumer.poll(0.1)
            if message is None:
                if len(out) >= count:
                    break
                continue
            assert message.error() is None, message.error()
            out.append((message.partition(), message.key(), message.value()))
            if len(out) >= count:
                break
    finally:
        consumer.close()
    return out


def confluent_partitions(bootstrap: str, topic: str) -> dict[bytes, int]:
    """Where confluent-kafka, partitioning as Java does, puts each key."""
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
    placed: dict[bytes, int] = {}

    def report(error, message):
        assert error is None, error
        placed[message.key()] = message.partition()

    for key in KEYS:
        producer.produce(topic, value=b"from confluent", key=key, on_delivery=report)
    assert producer.flush(30) == 0
    return placed


async def produce_keys(bootstrap: str, topic: str, **config) -> dict[bytes, int]:
    placed = {}
    async with open_producer(bootstrap, **config) as producer:
        for key in KEYS:
            metadata = await producer.send(topic, b"from trio " + key, key=key, headers={"origin": b"trio"})
            placed[key] = metadata.partition
    return placed


async def test_trio_producer_and_confluent_agree_on_partitions_and_records():
    with broker_process("--in-memory") as broker, trio.fail_after(TIMEOUT):
        async with open_admin(broker.bootstrap) as admin:
            await admin.create_topics([NewTopic("mixed", 5, 1)])
        ours = await produce_keys(broker.bootstrap, "mixed", compression_type="lz4", linger_ms=2)
        theirs = await trio.to_thread.run_sync(confluent_partitions, broker.bootstrap, "mixed")
        assert ours == theirs == {key: partition_for_key(key, 5) for key in KEYS}
        read = await trio.to_thread.run_sync(consume_all, broker.bootstrap, "mixed", 2 * len(KEYS))
        from_trio = sorted((p, k or b"", v) for p, k, v in read if v.startswith(b"from trio"))
        assert from_trio == sorted((ours[k], k, b"from trio " + k) for k in KEYS)


async def test_trio_transactions_are_read_committed_by_confluent():
    with broker_process("--in-memory") as broker, trio.fail_after(TIMEOUT):
        async with open_producer(broker.bootstrap, transactional_id="interop") as producer:
            async with producer.transaction():
                await producer.send("txn", b"kept-1")
            with pytest.raises(ValueError):
                async with producer.transaction():
                    await producer.send("txn", b"aborted")
                    raise ValueError
            async with producer.transaction():
                await producer.send("txn", b"kept-2")

        def read_committed():
            consumer = Consumer({
                "bootstrap.servers": broker.bootstrap, "group.id": "rc", "auto.offset.reset": "earliest",
                "isolation.level": "read_committed", "enable.partition.eof": True,
            })
            consumer.subscribe(["txn"])
            out = []
            try:
                for _ in range(600):
                    message = consumer.poll(0.1)
                    if message is None:
                        continue
                    if message.error():
                        if message.error().code() == -191:  # _PARTITION_EOF
                            break
                        raise AssertionError(message.error())
                    out.append(message.value())
            finally:
                consumer.close()
            return out

        assert await trio.to_thread.run_sync(read_committed) == [b"kept-1", b"kept-2"]


@pytest.fixture
def mock_cluster():
    """librdkafka's mock cluster in its own process (benchmarks/mock_cluster.py)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.mock_cluster"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        ready = process.stdout.readline().split()
        assert ready and ready[0] == "READY", ready
        process.bootstrap = ready[1]

        def topic(name: str, partitions: int) -> None:
            process.stdin.write(f"topic {name} {partitions}\n")
            process.stdin.flush()
            assert process.stdout.readline().strip() == "ok"

        process.topic = topic
        yield process
    finally:
        process.stdin.close()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()


async def test_trio_producer_against_librdkafka_mock_cluster(mock_cluster):
    mock_cluster.topic("mocked", 3)
    with trio.fail_after(TIMEOUT):
        ours = await produce_keys(mock_cluster.bootstrap, "mocked", compression_type="zstd")
        assert ours == {key: partition_for_key(key, 3) for key in KEYS}
        read = await trio.to_thread.run_sync(consume_all, mock_cluster.bootstrap, "mocked", len(KEYS))
        assert sorted(v for _, _, v in read) == sorted(b"from trio " + k for k in KEYS)
        assert all(p == ours[k or b""] for p, k, _ in read)
