"""Broker fixtures of every scope under pytest-xdist: ``pytest -n 2`` gives each worker process
its own brokers (each on a free port of 127.0.0.1), so tests in different workers never share one.
The function-scoped ``kafka_broker`` and the mark come with the plugin; a module- or
session-scoped broker is a fixture of your own around ``ThreadedBroker``."""

import pytest
from confluent_kafka import Producer

from trikafka.testing import ThreadedBroker


@pytest.fixture(scope="session")
def session_broker():
    with ThreadedBroker() as broker:  # one per xdist worker, shared by that worker's tests
        yield broker


@pytest.fixture(scope="module")
def module_broker():
    with ThreadedBroker({"num.partitions": 2}) as broker:
        yield broker


def produce(broker, topic, value, partition=0):
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    producer.produce(topic, value, partition=partition)
    assert producer.flush(30) == 0


@pytest.mark.parametrize("n", range(2))
def test_session_broker(session_broker, n):
    produce(session_broker, f"session-{n}", b"x")
    assert session_broker.wait_for_high_watermark(f"session-{n}", 0, at_least=1) == 1


@pytest.mark.parametrize("n", range(2))
def test_module_broker(module_broker, n):
    produce(module_broker, f"module-{n}", b"x")
    assert module_broker.wait_for_high_watermark(f"module-{n}", 0, at_least=1) == 1


@pytest.mark.parametrize("n", range(2))
@pytest.mark.trikafka(config={"num.partitions": 3})
def test_kafka_broker_and_the_mark(kafka_broker, n):
    produce(kafka_broker, "orders", b"x", partition=2)
    # A fresh broker for every test, in whichever worker: the record is always the first.
    assert kafka_broker.wait_for_high_watermark("orders", 2, at_least=1) == 1
