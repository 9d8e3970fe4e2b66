"""One test file, two targets: a trikafka broker per test, or your Kafka cluster.

Run: ``pytest examples/pytest_any_cluster.py`` (trikafka), or
``pytest --kafka-bootstrap=HOST:PORT examples/pytest_any_cluster.py`` (a real cluster;
the fault test is skipped there, naming the option).
"""

import uuid

from confluent_kafka import Consumer, Producer


def _unique(name: str) -> str:
    """A shared cluster keeps what earlier runs made: each run uses names of its own."""
    return f"{name}-{uuid.uuid4().hex[:8]}"


def test_orders_are_consumed_and_committed(kafka_broker):
    topic, group = _unique("orders"), _unique("billing")
    kafka_broker.create_topic(topic, partitions=3)
    kafka_broker.produce(topic, [("order-1", "10 EUR"), ("order-2", "25 EUR")])

    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    try:
        values = []
        while len(values) < 2:
            message = consumer.poll(30)
            assert message is not None and message.error() is None
            values.append(message.value())
        kafka_broker.wait_for_group_state(group, "Stable", members=1)
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()

    assert sorted(values) == [b"10 EUR", b"25 EUR"]
    records = kafka_broker.read(topic)
    committed = {r.partition: kafka_broker.committed(group, topic, r.partition) for r in records}
    assert all(committed[r.partition] > r.offset for r in records)


def test_a_produce_retried_after_a_leader_change(kafka_broker):
    topic = _unique("payments")
    kafka_broker.create_topic(topic)
    kafka_broker.inject_error("Produce", "NOT_LEADER_OR_FOLLOWER", count=1)  # trikafka only: skipped elsewhere
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    producer.produce(topic, b"42 EUR")
    assert producer.flush(30) == 0
    assert [r.value for r in kafka_broker.read(topic)] == [b"42 EUR"]
