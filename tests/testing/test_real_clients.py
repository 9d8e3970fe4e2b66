"""The pytest plugin's ``kafka_broker`` with real clients over TCP: faults they must survive.

Each test gets its own broker (a free port, in memory) from the plugin; the faults are the
broker's own, injected from the test thread. Delivery is checked on the broker's side (the
high watermark) and by reading the records back, so a duplicate cannot hide.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer

pytestmark = pytest.mark.compat

TIMEOUT = 30


def _consume_values(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "check",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        while len(values) < expected:
            message = consumer.poll(TIMEOUT)
            assert message is not None, f"only {len(values)} of {expected} records came back"
            assert message.error() is None, message.error()
            values.append(message.value())
    finally:
        consumer.close()
    return values


def _produce(producer: Producer, topic: str, values: list[bytes]) -> list[object]:
    errors: list[object] = []

    def delivered(err, _message) -> None:
        errors.append(err)

    for value in values:
        producer.produce(topic, value=value, on_delivery=delivered)
    assert producer.flush(TIMEOUT) == 0, "messages still in flight"
    return errors


def test_confluent_idempotent_producer_retries_through_not_leader(kafka_broker):
    fault = kafka_broker.inject_error("Produce", "NOT_LEADER_OR_FOLLOWER", count=2, topic="orders")
    producer = Producer(
        {
            "bootstrap.servers": kafka_broker.bootstrap_servers,
            "enable.idempotence": True,
            "linger.ms": 5,
            "retry.backoff.ms": 10,
        }
    )
    values = [b"order-%d" % i for i in range(20)]
    errors = _produce(producer, "orders", values)

    assert errors == [None] * len(values)
    assert fault.applied == 2
    produces = kafka_broker.recorded("Produce")
    assert len(produces) >= 3  # two answered with the error, then the retries
    assert kafka_broker.wait_for_high_watermark("orders", 0, at_least=20) == 20
    assert kafka_broker.high_watermark("orders", 0) == 20  # nothing written twice
    assert _consume_values(kafka_broker.bootstrap_servers, "orders", 20) == values


def test_idempotent_producer_writes_once_when_the_connection_drops_after_apply(kafka_broker):
    # Warm up: the topic exists and the producer has its producer id before the fault.
    producer = Producer(
        {
            "bootstrap.servers": kafka_broker.bootstrap_servers,
            "enable.idempotence": True,
            "linger.ms": 0,
            "retry.backoff.ms": 10,
        }
    )
    assert _produce(producer, "payments", [b"first"]) == [None]
    fault = kafka_broker.drop_connection("Produce", after=True, topic="payments", count=1)

    assert _produce(producer, "payments", [b"second"]) == [None]

    assert fault.applied == 1
    # The dropped request was applied; its retry carried the same sequence and was not.
    produces = [r for r in kafka_broker.recorded("Produce") if "payments" in r.topics]
    assert len(produces) >= 3
    assert kafka_broker.high_watermark("payments", 0) == 2
    assert _consume_values(kafka_broker.bootstrap_servers, "payments", 2) == [b"first", b"second"]


def test_dropped_before_apply_is_retried_and_written_once(kafka_broker):
    fault = kafka_broker.drop_connection("Produce", topic="refunds", count=1)
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers, "enable.idempotence": True})
    assert _produce(producer, "refunds", [b"r1", b"r2"]) == [None, None]
    assert fault.applied == 1
    assert kafka_broker.high_watermark("refunds", 0) == 2


def test_recorder_shows_what_kafka_python_sent(kafka_broker):
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=kafka_broker.bootstrap_servers, client_id="recorded-app", acks=1
    )
    producer.send("audit", b"hello").get(timeout=TIMEOUT)
    producer.close()

    sent = kafka_broker.recorded(client_id="recorded-app")
    apis = [r.api for r in sent]
    assert apis[0] == "ApiVersions"
    assert "Metadata" in apis and "Produce" in apis
    assert apis.index("Metadata") < apis.index("Produce")
    produce = kafka_broker.recorded("Produce", client_id="recorded-app")
    assert len(produce) == 1
    assert produce[0].partitions == (("audit", 0),)
    assert produce[0].body.acks == 1
    assert produce[0].version >= 3


@pytest.mark.asyncio
async def test_aiokafka_recovers_from_an_injected_request_timeout(kafka_broker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    fault = kafka_broker.inject_error("Produce", "REQUEST_TIMED_OUT", count=1, topic="events")
    producer = AIOKafkaProducer(
        bootstrap_servers=kafka_broker.bootstrap_servers, retry_backoff_ms=10
    )
    await producer.start()
    try:
        await producer.send_and_wait("events", b"e1")
        await producer.send_and_wait("events", b"e2")
    finally:
        await producer.stop()
    assert fault.applied == 1

    fetch_fault = kafka_broker.inject_error("Fetch", "REQUEST_TIMED_OUT", count=1, topic="events")
    consumer = AIOKafkaConsumer(
        "events",
        bootstrap_servers=kafka_broker.bootstrap_servers,
        auto_offset_reset="earliest",
        retry_backoff_ms=10,
    )
    await consumer.start()
    try:
        values = []
        while len(values) < 2:
            batch = await consumer.getmany(timeout_ms=1000)
            values += [record.value for records in batch.values() for record in records]
    finally:
        await consumer.stop()
    assert values == [b"e1", b"e2"]
    assert fetch_fault.applied == 1
    assert await kafka_broker.aio.wait_for_high_watermark("events", 0, at_least=2) == 2
