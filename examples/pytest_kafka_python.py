"""Asserting what a kafka-python client sent, with the request recorder of ``kafka_broker``.

Run: ``pytest examples/pytest_kafka_python.py``.
"""

import pytest
from kafka import KafkaProducer


@pytest.mark.trikafka(config={"num.partitions": 3})
def test_the_producer_sends_metadata_then_produce(kafka_broker):
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers, client_id="audit", acks="all")
    producer.send("audit-log", b"login", partition=2).get(timeout=30)
    producer.close()

    sent = [r.api for r in kafka_broker.recorded(client_id="audit")]
    assert sent.index("Metadata") < sent.index("Produce")
    (produce,) = kafka_broker.recorded("Produce", client_id="audit")
    assert produce.partitions == (("audit-log", 2),) and produce.body.acks == -1
