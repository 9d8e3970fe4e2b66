"""The plugin's fixtures themselves: marks, sync waits with real clients, the cluster factory,
clean start and stop."""

from __future__ import annotations

import importlib.util
import threading

import pytest
from confluent_kafka import Consumer, Producer

from trikafka.testing.cluster import ClusterUnavailableError

pytestmark = pytest.mark.compat

TIMEOUT = 30


@pytest.mark.trikafka(config={"num.partitions": 3, "log.retention.ms": 60_000})
def test_mark_sets_broker_config(kafka_broker):
    assert kafka_broker.thread.call(lambda: kafka_broker.broker.config.num_partitions) == 3
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    producer.produce("three", b"x", partition=2)
    assert producer.flush(TIMEOUT) == 0
    assert kafka_broker.wait_for_high_watermark("three", 2, at_least=1) == 1


def test_each_test_gets_a_fresh_broker_and_no_thread_outlives_it(kafka_broker):
    assert kafka_broker.recorded() == []  # nothing from earlier tests
    names = {t.name for t in threading.enumerate()}
    assert kafka_broker.thread.name in names


def test_no_broker_thread_left_over():
    assert not [t for t in threading.enumerate() if t.name.startswith("trikafka-")]


def test_group_and_commit_waits_with_confluent_kafka(kafka_broker):
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    for i in range(5):
        producer.produce("clicks", b"%d" % i)
    assert producer.flush(TIMEOUT) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_broker.bootstrap_servers,
            "group.id": "dashboard",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(["clicks"])
    try:
        seen = 0
        while seen < 5:
            message = consumer.poll(TIMEOUT)
            assert message is not None and message.error() is None
            seen += 1
        group = kafka_broker.wait_for_group_state("dashboard", "Stable", members=1)
        assert group.state == "Stable" and len(group.members) == 1
        consumer.commit(asynchronous=False)
        assert kafka_broker.wait_for_committed("dashboard", "clicks", 0, at_least=5) == 5
    finally:
        consumer.close()
    assert kafka_broker.wait_for_group_state("dashboard", "Empty", members=0).state == "Empty"


def test_transaction_state_wait_with_a_transactional_producer(kafka_broker):
    producer = Producer(
        {"bootstrap.servers": kafka_broker.bootstrap_servers, "transactional.id": "tx-1"}
    )
    producer.init_transactions(TIMEOUT)
    producer.begin_transaction()
    producer.produce("ledger", b"debit")
    producer.flush(TIMEOUT)
    assert kafka_broker.wait_for_transaction_state("tx-1", "Ongoing") == "Ongoing"
    producer.commit_transaction(TIMEOUT)
    assert kafka_broker.wait_for_transaction_state("tx-1", "CompleteCommit") == "CompleteCommit"
    assert kafka_broker.wait_for_last_stable_offset("ledger", 0, at_least=2) == 2  # + marker


def test_a_wait_that_times_out_says_what_it_saw(kafka_broker):
    with pytest.raises(TimeoutError, match=r"wait_for_group_state\('nobody', 'Stable'.*does not exist"):
        kafka_broker.wait_for_group_state("nobody", "Stable", timeout=0.05)


def test_faults_over_threads_are_the_brokers_faults(kafka_broker):
    fault = kafka_broker.inject_error("Metadata", "REQUEST_TIMED_OUT", count=None)
    assert [f.id for f in kafka_broker.faults] == [fault.id]
    kafka_broker.remove_fault(fault)
    assert kafka_broker.faults == []
    with pytest.raises(ValueError, match="unknown api"):
        kafka_broker.inject_error("Nope", 7)


def test_kafka_cluster_of_one(kafka_cluster):
    cluster = kafka_cluster(brokers=1)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    producer.produce("c", b"1")
    assert producer.flush(TIMEOUT) == 0
    assert len(cluster.brokers) == 1
    assert cluster.brokers[0].wait_for_high_watermark("c", 0, at_least=1) == 1


def test_kafka_cluster_of_three_needs_the_cluster_module(kafka_cluster):
    if importlib.util.find_spec("trikafka.cluster") is None:
        with pytest.raises(ClusterUnavailableError, match=r"brokers=3.*trikafka.cluster.open_cluster"):
            kafka_cluster(brokers=3)
    else:  # the cluster module is there: three brokers, one metadata view
        cluster = kafka_cluster(brokers=3)
        assert len(cluster.brokers) == 3
        assert cluster.bootstrap_servers.count(",") == 2


def test_stopping_releases_held_responses_first():
    import socket

    from trikafka.testing import ThreadedBroker
    from trikafka.testing.frames import api_versions_frame, api_versions_response

    broker = ThreadedBroker().start()
    try:
        hold = broker.hold_responses("ApiVersions")
        host, port = broker.bootstrap_servers.split(":")
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            sock.sendall(api_versions_frame(correlation_id=7))
            state_changes = broker.thread.call(lambda: broker.broker.state_changes)
            broker.thread.run(state_changes.wait_until, lambda: bool(hold.held), timeout=30)
            broker.stop()  # the held answer goes out before the connection closes
            received = b""
            while chunk := sock.recv(65536):
                received += chunk
    finally:
        broker.stop()
    assert received, "the connection closed without the held response"
    correlation_id, response = api_versions_response(received[4:])
    assert correlation_id == 7 and response.error_code == 0
