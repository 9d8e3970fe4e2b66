"""Log compaction with real clients against a real broker process with a data directory.

confluent-kafka writes many updates to a few keys (and deletes one) on a ``cleanup.policy=
compact`` topic with small segments; the broker's cleaner (backoff 100 ms here) compacts the
rolled segments on disk. The partition's size, read back with kafka-python's DescribeLogDirs,
shrinks; a confluent-kafka consumer reading from the beginning then sees each key's last value
(the deleted key only as its tombstone, kept for ``delete.retention.ms``), with offsets
preserved — as a changelog restore (Kafka Streams, quixstreams, faust) would read it.

quixstreams and faust are not installed here; this drives the same wire behaviour they rely on.
"""

from __future__ import annotations

import random
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

TOPIC = "changelog"
KEYS = [b"user-%d" % i for i in range(5)]
UPDATES = 2000


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("data")
    with run_broker_process("--data-dir", str(data), "--override", "log.cleaner.backoff.ms=100") as process:
        yield process
        assert process.stop() == 0, process.output


def _partition_size(bootstrap: str) -> int:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT * 1000)
    try:
        (per_broker,) = admin.describe_log_dirs({TOPIC: [0]})
        return sum(p["partition_size"] for d in per_broker["log_dirs"] for t in d["topics"] for p in t["partitions"])
    finally:
        admin.close()


def test_changelog_topic_is_compacted_and_restores_only_live_keys(broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = NewTopic(TOPIC, 1, 1, config={"cleanup.policy": "compact", "segment.bytes": "4096",
                                          "min.cleanable.dirty.ratio": "0.1"})
    for future in admin.create_topics([topic]).values():
        future.result(TIMEOUT)

    # Five in flight, as the Java client: two thousand pipelined one-record requests against a
    # muted connection with Kafka's 100 KiB socket buffers stall loopback TCP in retransmit
    # backoff (seen here; noted for the next session).
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "batch.num.messages": 1,
                         "max.in.flight.requests.per.connection": 5})
    errors: list = []
    last: dict[bytes, bytes | None] = {}
    for i in range(UPDATES):
        key = KEYS[i % len(KEYS)]
        value = b"state %d of %s " % (i, key) + b"x" * 40
        producer.produce(TOPIC, key=key, value=value, partition=0,
                         on_delivery=lambda err, _msg: errors.append(err) if err else None)
        last[key] = value
        if i % 100 == 0:
            producer.poll(0)
    producer.produce(TOPIC, key=KEYS[0], value=None, partition=0)  # delete user-0
    last[KEYS[0]] = None
    for i in range(200):  # more writes so the delete is rolled out of the active segment
        key = KEYS[1 + i % 4]
        last[key] = b"final %d" % i + b"y" * 40
        producer.produce(TOPIC, key=key, value=last[key], partition=0)
    assert producer.flush(TIMEOUT) == 0 and errors == []
    del producer

    written = UPDATES * 60
    deadline = Deadline()
    size = _partition_size(broker.bootstrap)
    while size > written // 4 and deadline:
        size = _partition_size(broker.bootstrap)
    assert size < written // 4, f"partition still {size} bytes after compaction"

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "restore", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        _, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=TIMEOUT)
        restored: list[tuple[int, bytes, bytes | None]] = []
        deadline = Deadline()
        while deadline and (not restored or restored[-1][0] < high - 1):
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                restored.append((message.offset(), message.key(), message.value()))
    finally:
        consumer.close()
    offsets = [o for o, _, _ in restored]
    assert offsets == sorted(set(offsets)) and offsets[-1] == high - 1, "offsets kept, in order"
    assert len(restored) < (UPDATES + 201) // 4, f"read {len(restored)} records: not compacted"
    state: dict[bytes, bytes | None] = {}
    for _, key, value in restored:
        state[key] = value
    assert state == last, "the restore ends with every key's last value, user-0 deleted"


@pytest.mark.parametrize("reader", ["kafka-python", "aiokafka", "confluent-kafka"])
def test_batched_updates_leave_gaps_inside_batches_that_clients_read(broker: BrokerProcess, reader: str) -> None:
    """Producer batches of many records, most of them superseded: the cleaner keeps each
    batch's base offset and last offset delta and drops records from its middle, so the
    batches come back with gaps between their records' offsets."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"batched-{reader}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    config = {"cleanup.policy": "compact", "segment.bytes": "16384", "min.cleanable.dirty.ratio": "0.1"}
    for future in admin.create_topics([NewTopic(topic, 1, 1, config=config)]).values():
        future.result(TIMEOUT)
    # Batches of up to 4 KiB (a produce request must fit one segment), lz4-compressed.
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50, "compression.type": "lz4",
                         "batch.size": 4096})
    last: dict[bytes, bytes] = {}
    errors: list = []
    for i in range(3000):
        key = b"key-%d" % (i % 7) if i % 50 else b"rare-%d" % i  # some keys written once
        last[key] = b"value %d " % i + random.Random(i).randbytes(30)  # incompressible
        producer.produce(topic, key=key, value=last[key], partition=0,
                         on_delivery=lambda err, _msg: errors.append(err) if err else None)
    assert producer.flush(TIMEOUT) == 0 and errors == []
    del producer

    deadline = Deadline()
    while _partition_size_of(broker.bootstrap, topic) > 3000 * 50 // 4 and deadline:
        pass
    got = _consume(reader, broker.bootstrap, topic)
    offsets = [o for o, _, _ in got]
    assert offsets == sorted(set(offsets))
    # 67 live keys, plus what the active segment (16 KiB, never cleaned) still holds.
    assert len(got) < 3000 // 4, f"read {len(got)} records: not compacted"
    assert any(b - a > 1 for (a, _, _), (b, _, _) in zip(got, got[1:], strict=False)), "offsets have gaps"
    state = {}
    for _, key, value in got:
        state[key] = value
    assert state == last


def _partition_size_of(bootstrap: str, topic: str) -> int:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT * 1000)
    try:
        (per_broker,) = admin.describe_log_dirs({topic: [0]})
        return sum(p["partition_size"] for d in per_broker["log_dirs"] for t in d["topics"] for p in t["partitions"])
    finally:
        admin.close()


def _consume(reader: str, bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes]]:
    from confluent_kafka import Consumer, TopicPartition

    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    _, high = probe.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT)
    probe.close()
    got: list[tuple[int, bytes, bytes]] = []
    deadline = Deadline()

    def done() -> bool:
        return bool(got) and got[-1][0] >= high - 1

    if reader == "kafka-python":
        from kafka import KafkaConsumer
        from kafka import TopicPartition as KTP

        consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                 auto_offset_reset="earliest", request_timeout_ms=TIMEOUT * 1000)
        consumer.assign([KTP(topic, 0)])
        try:
            while not done() and deadline:
                for messages in consumer.poll(timeout_ms=500).values():
                    got.extend((m.offset, m.key, m.value) for m in messages)
        finally:
            consumer.close()
    elif reader == "aiokafka":
        import asyncio

        from aiokafka import AIOKafkaConsumer
        from aiokafka import TopicPartition as ATP

        async def run() -> None:
            consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                        auto_offset_reset="earliest", request_timeout_ms=TIMEOUT * 1000)
            await consumer.start()
            try:
                consumer.assign([ATP(topic, 0)])
                while not done() and deadline:
                    for messages in (await consumer.getmany(timeout_ms=500)).values():
                        got.extend((m.offset, m.key, m.value) for m in messages)
            finally:
                await consumer.stop()

        asyncio.run(run())
    else:
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "restore-batched", "enable.auto.commit": False}
        )
        consumer.assign([TopicPartition(topic, 0, 0)])
        try:
            while not done() and deadline:
                message = consumer.poll(0.5)
                if message is not None:
                    assert message.error() is None, message.error()
                    got.append((message.offset(), message.key(), message.value()))
        finally:
            consumer.close()
    return got
