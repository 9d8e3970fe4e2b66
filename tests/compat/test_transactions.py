"""Real transactional producers and read_committed consumers against a real broker process.

confluent-kafka (librdkafka) and aiokafka each run the same story on the session's broker:
a transaction over two partitions that is aborted, one that is committed together with a
consumer group's offsets (``send_offsets_to_transaction``), and a plain record after them. A
read_committed consumer must then see exactly the committed records and the plain one, a
read_uncommitted consumer everything, and the group's committed offsets must be the ones
sent in the committed transaction.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid

import pytest

from .support import TIMEOUT, Deadline

pytestmark = pytest.mark.compat

PARTITIONS = 2
_names = itertools.count()


def create_topic(bootstrap: str, prefix: str) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"{prefix}-{next(_names)}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(timeout=TIMEOUT)
    return name


def read_all(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    """Every record a consumer with this isolation level delivers, up to the partition ends."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4()}", "enable.auto.commit": False,
        "isolation.level": isolation, "enable.partition.eof": True, "auto.offset.reset": "earliest",
    })
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        values, at_end = [], set()
        deadline = Deadline()
        while len(at_end) < PARTITIONS:
            assert deadline, f"{isolation} consumer did not reach the end of {topic}"
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                at_end.add(message.partition())
                continue
            values.append(message.value())
        return sorted(values)
    finally:
        consumer.close()


def committed_offsets(bootstrap: str, topic: str, group: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=TIMEOUT)
        return {tp.partition: tp.offset for tp in found}
    finally:
        consumer.close()


def produce_plain(bootstrap: str, topic: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, b"plain", partition=0)
    assert producer.flush(TIMEOUT) == 0


COMMITTED = sorted([b"commit-0", b"commit-1", b"commit-2", b"commit-3", b"plain"])
EVERYTHING = sorted(COMMITTED + [b"abort-0", b"abort-1", b"abort-2", b"abort-3"])


def check(bootstrap: str, topic: str, group: str) -> None:
    assert read_all(bootstrap, topic, "read_committed") == COMMITTED
    assert read_all(bootstrap, topic, "read_uncommitted") == EVERYTHING
    assert committed_offsets(bootstrap, topic, group) == {0: 7, 1: 11}


def test_confluent_kafka_transactions(broker_address):
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    topic = create_topic(broker_address, "txn-confluent")
    group = f"txn-group-{uuid.uuid4()}"
    transactional_id = f"tx-{uuid.uuid4()}"
    producer = Producer({
        "bootstrap.servers": broker_address, "transactional.id": transactional_id,
        "transaction.timeout.ms": 60_000, "linger.ms": 5,
    })
    producer.init_transactions(TIMEOUT)

    producer.begin_transaction()
    for i in range(4):
        producer.produce(topic, f"abort-{i}".encode(), partition=i % PARTITIONS)
    producer.flush(TIMEOUT)
    producer.abort_transaction(TIMEOUT)

    producer.begin_transaction()
    for i in range(4):
        producer.produce(topic, f"commit-{i}".encode(), partition=i % PARTITIONS)
    metadata = Consumer({"bootstrap.servers": broker_address, "group.id": group})
    try:
        producer.send_offsets_to_transaction(
            [TopicPartition(topic, 0, 7), TopicPartition(topic, 1, 11)], metadata.consumer_group_metadata(), TIMEOUT
        )
    finally:
        metadata.close()
    producer.commit_transaction(TIMEOUT)
    produce_plain(broker_address, topic)

    check(broker_address, topic, group)

    # A second producer with the same transactional id fences the first.
    successor = Producer({"bootstrap.servers": broker_address, "transactional.id": transactional_id})
    successor.init_transactions(TIMEOUT)
    producer.begin_transaction()
    producer.produce(topic, b"zombie", partition=0)
    with pytest.raises(KafkaException) as raised:
        producer.commit_transaction(TIMEOUT)
    assert raised.value.args[0].fatal(), raised.value
    assert read_all(broker_address, topic, "read_committed") == COMMITTED


def test_aiokafka_transactions(broker_address):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.structs import OffsetAndMetadata

    topic = create_topic(broker_address, "txn-aiokafka")
    group = f"txn-group-{uuid.uuid4()}"

    async def main() -> list[bytes]:
        producer = AIOKafkaProducer(
            bootstrap_servers=broker_address, transactional_id=f"tx-{uuid.uuid4()}", enable_idempotence=True,
            request_timeout_ms=TIMEOUT * 1000,
        )
        await producer.start()
        try:
            await producer.begin_transaction()
            for i in range(4):
                await producer.send_and_wait(topic, f"abort-{i}".encode(), partition=i % PARTITIONS)
            await producer.abort_transaction()

            async with producer.transaction():
                for i in range(4):
                    await producer.send_and_wait(topic, f"commit-{i}".encode(), partition=i % PARTITIONS)
                await producer.send_offsets_to_transaction(
                    {
                        TopicPartition(topic, 0): OffsetAndMetadata(7, ""),
                        TopicPartition(topic, 1): OffsetAndMetadata(11, ""),
                    },
                    group,
                )
        finally:
            await producer.stop()
        produce_plain(broker_address, topic)

        consumer = AIOKafkaConsumer(
            bootstrap_servers=broker_address, isolation_level="read_committed", enable_auto_commit=False,
            auto_offset_reset="earliest", group_id=None,
        )
        await consumer.start()
        try:
            partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
            consumer.assign(partitions)
            ends = await consumer.end_offsets(partitions)  # the last stable offsets
            values: list[bytes] = []
            while [tp for tp in partitions if await consumer.position(tp) < ends[tp]]:
                batches = await consumer.getmany(timeout_ms=500)
                values += [m.value for messages in batches.values() for m in messages]
            return sorted(values)
        finally:
            await consumer.stop()

    seen = asyncio.run(asyncio.wait_for(main(), TIMEOUT * 2))
    assert seen == COMMITTED
    check(broker_address, topic, group)
