"""kafka-python first on a fresh three-broker cluster with replication factor 3 (issue 32,
"Also found in a cluster"): its consumers were reported getting 0 of 1000 records on the
first run against a fresh ``--brokers 3`` process (min.insync.replicas=2, RF 3 internal
topics too), and every record on a rerun. Nothing else touches the cluster first here: the
internal ``__consumer_offsets`` partitions, the group and the fetch sessions are all new —
records first, then the consumer; and the consumer first, then the records."""

from __future__ import annotations

import re

import kafka
import pytest
from kafka.admin import KafkaAdminClient, NewTopic

from tests.compat.support import TIMEOUT, Deadline
from trikafka.testing.process import broker_process

pytestmark = pytest.mark.compat

RF3 = (
    "--brokers", "3",
    "--override", "default.replication.factor=3", "--override", "min.insync.replicas=2",
    "--override", "offsets.topic.replication.factor=3",
)  # fmt: skip


def _consume(bootstrap: str, group: str, want: int) -> list[bytes]:
    consumer = kafka.KafkaConsumer(
        "kp-orders",
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=TIMEOUT * 1000,
    )
    values: list[bytes] = []
    try:
        for message in consumer:
            values.append(message.value)
            if len(values) == want:
                break
        consumer.commit()
    finally:
        consumer.close()
    return values


@pytest.mark.parametrize("storage", ["files", "memory"])
def test_kafka_python_first_on_a_fresh_rf3_cluster(tmp_path, storage):
    args = RF3 + (("--in-memory",) if storage == "memory" else ())
    with broker_process(*args, cwd=tmp_path) as broker:
        bootstrap = re.search(r"bootstrap\.servers=(\S+)", broker.output).group(1)
        assert bootstrap.count(",") == 2, broker.output
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            admin.create_topics([NewTopic("kp-orders", 3, 3)])
        finally:
            admin.close()
        producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, acks="all")
        for i in range(1000):
            producer.send("kp-orders", b"%d" % i)
        producer.flush(TIMEOUT)

        first = _consume(bootstrap, "kp-fresh", 1000)
        assert sorted(first) == sorted(b"%d" % i for i in range(1000)), f"{len(first)} of 1000 records"

        for i in range(1000, 1200):
            producer.send("kp-orders", b"%d" % i)
        producer.flush(TIMEOUT)
        producer.close()
        resumed = _consume(bootstrap, "kp-fresh", 200)  # the group resumes from its commits
        assert sorted(resumed) == sorted(b"%d" % i for i in range(1000, 1200)), f"{len(resumed)} of 200 records"


def test_kafka_python_consumer_joins_before_the_first_record(tmp_path):
    """The other order on a fresh cluster of the same shape: kafka-python's consumer (its
    defaults: auto-commit on) joins first, so its group, its FindCoordinator and the RF 3
    ``__consumer_offsets`` come before any record; then the records arrive while it polls."""
    with broker_process(*RF3, cwd=tmp_path) as broker:
        bootstrap = re.search(r"bootstrap\.servers=(\S+)", broker.output).group(1)
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            admin.create_topics([NewTopic("kp-late", 3, 3)])
        finally:
            admin.close()
        consumer = kafka.KafkaConsumer(
            "kp-late", bootstrap_servers=bootstrap, group_id="kp-early", auto_offset_reset="earliest"
        )
        try:
            deadline = Deadline()
            while len(consumer.assignment()) < 3 and deadline:
                assert consumer.poll(timeout_ms=100) == {}
            assert len(consumer.assignment()) == 3, consumer.assignment()

            producer = kafka.KafkaProducer(bootstrap_servers=bootstrap)
            for i in range(1000):
                producer.send("kp-late", b"%d" % i)
            producer.flush(TIMEOUT)
            producer.close()

            values: list[bytes] = []
            while len(values) < 1000 and deadline:
                for records in consumer.poll(timeout_ms=200).values():
                    values.extend(r.value for r in records)
            assert sorted(values) == sorted(b"%d" % i for i in range(1000)), f"{len(values)} of 1000 records"
        finally:
            consumer.close()
