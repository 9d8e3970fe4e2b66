"""Testing confluent-kafka code with the ``kafka_broker`` fixture (no conftest needed).

Run: ``pytest examples/pytest_confluent_kafka.py``.
"""

from confluent_kafka import Consumer, Producer


def test_idempotent_producer_survives_a_leader_error(kafka_broker):
    kafka_broker.inject_error("Produce", "NOT_LEADER_OR_FOLLOWER", count=2)
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers, "enable.idempotence": True})
    for i in range(10):
        producer.produce("orders", value=b"order-%d" % i)
    assert producer.flush(30) == 0
    assert kafka_broker.wait_for_high_watermark("orders", 0, at_least=10) == 10  # no duplicates

    consumer = Consumer(
        {"bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": "billing", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe(["orders"])
    assert consumer.poll(30).value() == b"order-0"
    kafka_broker.wait_for_group_state("billing", "Stable", members=1)
    consumer.commit(asynchronous=False)
    assert kafka_broker.wait_for_committed("billing", "orders", 0, at_least=1) >= 1
    consumer.close()
