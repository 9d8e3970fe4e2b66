"""The pytest plugin's ``kafka_cluster`` on trikafka.cluster: faults per broker, cluster controls
and awaitable state together, as a user's suite would use them (issue 13's "Done when")."""

from __future__ import annotations

from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.compat.support import TIMEOUT, Deadline


def test_idempotent_producer_through_injected_not_leader_and_a_leader_move(kafka_cluster):
    cluster = kafka_cluster(brokers=3)
    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("faulty", 1, 3)])["faulty"].result(TIMEOUT)
    leader = cluster.leader("faulty", 0)
    fault = cluster.brokers[leader - 1].inject_error("Produce", "NOT_LEADER_OR_FOLLOWER", count=2, topic="faulty")
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
    failures: list[Any] = []
    for i in range(100):
        producer.produce("faulty", b"%d" % i, on_delivery=lambda err, _msg: err and failures.append(err))
        if i == 49:
            assert producer.flush(TIMEOUT) == 0
            cluster.move_leader("faulty", 0, leader % 3 + 1)
    assert producer.flush(TIMEOUT) == 0 and failures == []
    assert fault.remaining == 0  # both injected refusals were answered
    assert cluster.brokers[0].wait_for_high_watermark("faulty", 0, at_least=100, timeout=TIMEOUT) == 100

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition("faulty", 0, 0)])
        values: list[bytes] = []
        deadline = Deadline()
        while len(values) < 100 and deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                values.append(message.value())
        assert values == [b"%d" % i for i in range(100)]  # in order, none twice, none lost
    finally:
        consumer.close()
