"""A Kafka test suite as a testcontainers-python user writes it (kept as such on purpose).

Not collected here (its name does not start with ``test_``): tests/testing/test_container.py
copies it with its one import line swapped for ``from trikafka.testing import KafkaContainer``
and runs it with pytest in a subprocess. Everything below that line is what the same suite
runs against Docker.
"""

import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from testcontainers.kafka import KafkaContainer


@pytest.fixture(scope="module")
def kafka():
    with KafkaContainer("confluentinc/cp-kafka:7.6.0").with_kraft() as kafka:
        yield kafka


def _topic(bootstrap, partitions=1):
    name = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def test_bootstrap_server_is_host_and_exposed_port(kafka):
    host, port = kafka.get_bootstrap_server().rsplit(":", 1)
    assert host == kafka.get_container_host_ip()
    assert int(port) == kafka.get_exposed_port(9093)


def test_confluent_kafka_round_trip(kafka):
    bootstrap = kafka.get_bootstrap_server()
    topic = _topic(bootstrap)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i)
    assert producer.flush(30) == 0

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cg", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values = []
    try:
        for _ in range(300):
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                values.append(message.value())
            if len(values) == 10:
                break
    finally:
        consumer.close()
    assert values == [b"v%d" % i for i in range(10)]


def test_kafka_python_round_trip(kafka):
    bootstrap = kafka.get_bootstrap_server()
    topic = _topic(bootstrap, partitions=3)
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(30):
        producer.send(topic, b"m%d" % i)
    producer.flush(30)
    producer.close()

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id="kp",
        auto_offset_reset="earliest",
        consumer_timeout_ms=30000,
    )
    values = []
    for message in consumer:
        values.append(message.value)
        if len(values) == 30:
            break
    consumer.close()
    assert sorted(values) == sorted(b"m%d" % i for i in range(30))


def test_env_settings_reach_the_broker():
    with KafkaContainer().with_env("KAFKA_NUM_PARTITIONS", "4") as kafka:
        bootstrap = kafka.get_bootstrap_server()
        producer = Producer({"bootstrap.servers": bootstrap})
        producer.produce("auto-created", b"x")
        assert producer.flush(30) == 0
        metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30)
        assert len(metadata.topics["auto-created"].partitions) == 4
