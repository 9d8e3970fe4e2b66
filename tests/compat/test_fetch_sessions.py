"""Real consumers over incremental fetch sessions (KIP-227), against a real broker process.

kafka-python 3.x opens a session with its first full Fetch and then sends incremental fetches,
adding, altering and forgetting partitions as its buffers fill and drain — the paths a session
must get right or records are lost or repeated. aiokafka (FINAL epoch) and librdkafka (no
KIP-227 in librdkafka 2.x: session id 0, epoch -1) stay sessionless and must be unaffected.

One topic of 100 partitions: records land on a fifth of them, then more records arrive while
the consumer is idle-polling the other partitions through its session.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from trikafka.testing.process import BrokerProcess
from trikafka.testing.process import broker_process as run_broker_process

from .support import TIMEOUT, Deadline

pytestmark = [
    pytest.mark.compat,
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]

PARTITIONS = 100


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with run_broker_process("--in-memory") as process:
        yield process
        assert process.stop() == 0, process.output


def _produce(bootstrap: str, topic: str, records: list[tuple[int, bytes]]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    errors = []
    for partition, value in records:
        producer.produce(topic, value=value, key=value, partition=partition,
                         on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert producer.flush(TIMEOUT) == 0 and errors == []


def _create(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(TIMEOUT)


def _wave(tag: str, count: int, partitions: range) -> list[tuple[int, bytes]]:
    return [(partitions[i % len(partitions)], f"{tag}-{i}".encode()) for i in range(count)]


def _check(got: list[tuple[int, int, bytes]], expected: list[tuple[int, bytes]]) -> None:
    """Every record once, in offset order within each partition."""
    by_partition: dict[int, list[tuple[int, bytes]]] = {}
    for partition, offset, value in got:
        by_partition.setdefault(partition, []).append((offset, value))
    for partition, items in by_partition.items():
        offsets = [o for o, _ in items]
        assert offsets == sorted(set(offsets)), f"partition {partition}: repeated or out of order"
    assert sorted(v for _, _, v in got) == sorted(v for _, v in expected)


def test_kafka_python_consumes_through_an_incremental_session(broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer, TopicPartition

    topic = "sessions-kafka-python"
    _create(broker.bootstrap, topic)
    first = _wave("a", 200, range(0, PARTITIONS, 5))
    _produce(broker.bootstrap, topic, first)
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False,
        auto_offset_reset="earliest", request_timeout_ms=TIMEOUT * 1000, fetch_max_wait_ms=100,
        max_partition_fetch_bytes=4096,  # small: several rounds, partitions in and out of the session
    )
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        got: list[tuple[int, int, bytes]] = []

        def drain(count: int) -> None:
            deadline = Deadline()
            while len(got) < count and deadline:
                for messages in consumer.poll(timeout_ms=500).values():
                    got.extend((m.partition, m.offset, m.value) for m in messages)

        drain(len(first))
        _check(got, first)
        handlers = consumer._fetcher._session_handlers  # the client's own view of its session
        assert handlers and all(h.next_metadata.session_id > 0 for h in handlers.values()), (
            "kafka-python did not get an incremental session"
        )
        # More records, on other partitions, while the session is idle-polling.
        second = _wave("b", 150, range(1, PARTITIONS, 7))
        _produce(broker.bootstrap, topic, second)
        drain(len(first) + len(second))
        _check(got, first + second)
        assert any(h.next_metadata.epoch > 1 for h in handlers.values()), "no incremental fetch was answered"
        assert all(h.next_metadata.session_id > 0 for h in handlers.values())
    finally:
        consumer.close()


@pytest.mark.parametrize("client", ["confluent-kafka", "aiokafka"])
def test_sessionless_clients_are_unaffected(broker: BrokerProcess, client: str) -> None:
    topic = f"sessions-{client}"
    _create(broker.bootstrap, topic)
    records = _wave("c", 300, range(0, PARTITIONS, 3))
    _produce(broker.bootstrap, topic, records)
    if client == "confluent-kafka":
        got = _confluent_consume(broker.bootstrap, topic, len(records))
    else:
        got = _aiokafka_consume(broker.bootstrap, topic, len(records))
    _check(got, records)


def _confluent_consume(bootstrap: str, topic: str, count: int) -> list:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        got = []
        deadline = Deadline()
        while len(got) < count and deadline:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                got.append((message.partition(), message.offset(), message.value()))
        return got
    finally:
        consumer.close()


def _aiokafka_consume(bootstrap: str, topic: str, count: int) -> list:
    import asyncio

    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def consume():
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                    auto_offset_reset="earliest", request_timeout_ms=TIMEOUT * 1000)
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
            got = []
            deadline = Deadline()
            while len(got) < count and deadline:
                for messages in (await consumer.getmany(timeout_ms=500)).values():
                    got.extend((m.partition, m.offset, m.value) for m in messages)
            return got
        finally:
            await consumer.stop()

    return asyncio.run(consume())
