"""Real clients against version profiles (``--kafka-version``): they still produce and consume,
and they negotiate that release's versions.

kafka-python guesses a broker's release from its ApiVersions answer with a table of its own
(``kafka.protocol.broker_version_data``): that table naming the profile's release for each one
is an independent check of ours. 3.4 changed no broker API, so it reads as 3.3; kafka-python 3.0.12's
table stops at 4.3, so 4.4 reads as 4.3. From 4.0 (KRaft brokers, as ours) its per-release ranges are
compared with ours whole.
"""

from __future__ import annotations

from typing import Any

import pytest

from trikafka.config.kafka_versions import KAFKA_VERSIONS

pytestmark = [
    pytest.mark.compat,
    # kafka-python's schema loading, not ours.
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]

TIMEOUT = 30


def _guess(release: str) -> tuple[int, int]:
    later = {"3.4": (3, 3), "4.4": (4, 3)}
    return later.get(release) or tuple(map(int, release.split(".")))  # type: ignore[return-value]


@pytest.mark.parametrize("release", [r for r in KAFKA_VERSIONS if r >= "4.0"])
def test_kafka_pythons_table_agrees_from_4_0(release: str) -> None:
    """kafka-python's ApiVersions table per release (its ``BROKER_API_VERSIONS``, KRaft captures
    from 4.0) against ours; before 4.0 its tables are ZooKeeper brokers' (cluster actions included)."""
    from kafka.protocol.broker_version_data import BROKER_API_VERSIONS

    from trikafka.config.kafka_versions_data import RELEASES

    theirs = BROKER_API_VERSIONS.get(tuple(map(int, release.split("."))))
    if theirs is None:
        assert release == "4.4", release  # the one release newer than kafka-python 3.0.12's table
        return
    assert RELEASES[release]["apis"] == theirs


@pytest.mark.parametrize("release", KAFKA_VERSIONS)
def test_kafka_python_reads_the_profile_as_that_release(release: str) -> None:
    from kafka import KafkaProducer

    from trikafka.testing import ThreadedBroker

    broker = ThreadedBroker({"kafka.version": release}).start()
    try:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=TIMEOUT * 1000)
        try:
            assert producer.config["api_version"] == _guess(release)
        finally:
            producer.close()
    finally:
        broker.stop()


def _max_versions(recorded: list[Any]) -> dict[str, int]:
    found: dict[str, int] = {}
    for request in recorded:
        found[request.api] = max(found.get(request.api, -1), request.version)
    return found


@pytest.mark.trikafka(kafka_version="2.8")
def test_clients_produce_and_consume_at_2_8_versions(kafka_broker: Any) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTopicPartition

    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers, "client.id": "rdkafka"})
    for i in range(5):
        producer.produce("profiled", key=b"k", value=f"rd-{i}".encode())
    assert producer.flush(TIMEOUT) == 0
    kp = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers, client_id="kpython")
    kp.send("profiled", b"kp").get(TIMEOUT)
    kp.close()

    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": "g28",
                         "client.id": "rdkafka", "enable.auto.commit": False})
    consumer.assign([TopicPartition("profiled", 0, 0)])
    values: list[bytes] = []
    for _ in range(100):
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
        if len(values) == 6:
            break
    consumer.close()
    assert values == [f"rd-{i}".encode() for i in range(5)] + [b"kp"]

    kc = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap_servers, client_id="kpython",
                       auto_offset_reset="earliest", consumer_timeout_ms=TIMEOUT * 1000)
    kc.assign([KTopicPartition("profiled", 0)])
    got = [m.value for _, m in zip(range(6), kc, strict=False)]
    kc.close()
    assert got == values

    # Kafka 2.8's ranges: Produce v0-9, Fetch v0-12, Metadata v0-11, ApiVersions v0-3.
    for client in ("rdkafka", "kpython"):
        versions = _max_versions(kafka_broker.recorded(client_id=client))
        assert versions["Produce"] <= 9 and versions["Fetch"] <= 12 and versions["Metadata"] <= 11, versions
    # librdkafka asks ApiVersions v3 (or its newest) and uses the newest of both: 2.8's maxima.
    rd = _max_versions(kafka_broker.recorded(client_id="rdkafka"))
    assert rd["Produce"] == 9 and rd["Fetch"] == 12


def test_the_cli_speaks_as_2_8_and_says_what_it_lacks(start_broker_process: Any) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient

    broker = start_broker_process("--kafka-version", "2.8")
    broker.wait_for_output("kafka.version 2.8: advertising")
    assert "AlterReplicaLogDirs v0-2" in broker.output
    producer = Producer({"bootstrap.servers": broker.address})
    producer.produce("cli-profiled", b"v")
    assert producer.flush(TIMEOUT) == 0
    topics = AdminClient({"bootstrap.servers": broker.address}).list_topics(timeout=TIMEOUT).topics
    assert "cli-profiled" in topics
