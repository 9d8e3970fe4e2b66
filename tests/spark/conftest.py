"""Fixtures for the Spark tests: one broker process and one SparkSession for the whole session.

A SparkSession costs 15–25 s to start on a 2-core machine, so every Spark test shares one
(``local[2]``); each test uses its own topics and checkpoint directories instead. The broker
is ``python -m trikafka --in-memory`` on 127.0.0.1:0 (``BrokerProcess`` waits for its banner,
no sleeps). Kafka is driven from the tests with confluent-kafka: an AdminClient for topics
and DeleteRecords, a producer, and an assign-only consumer (the broker has no consumer groups
yet, and the source never needs them).

The pure planning tests (``test_planning.py``, ``test_options.py``) use none of this and run
without pyspark.
"""

from __future__ import annotations

import itertools
import logging
import os
import shutil
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from trikafka.testing.process import BrokerProcess, BrokerProcessError

LIBRDKAFKA = logging.getLogger("tests.librdkafka")

#: Seconds any one streaming query may take before the test fails instead of hanging.
QUERY_TIMEOUT = 180


class Kafka:
    """Test-side Kafka helpers against the session's broker."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka.admin import AdminClient

        self.bootstrap = bootstrap
        self.admin = AdminClient({"bootstrap.servers": bootstrap, "logger": LIBRDKAFKA})
        self._names = itertools.count()

    def topic(self, prefix: str, partitions: int = 1, config: Mapping[str, str] | None = None) -> str:
        from confluent_kafka.admin import NewTopic

        name = f"{prefix}-{next(self._names)}"
        future = self.admin.create_topics(
            [NewTopic(name, partitions, 1, config=dict(config or {}))], operation_timeout=30
        )[name]
        future.result(timeout=30)
        return name

    def add_partitions(self, topic: str, total: int) -> None:
        from confluent_kafka.admin import NewPartitions

        self.admin.create_partitions([NewPartitions(topic, total)])[topic].result(timeout=30)

    def produce(
        self,
        topic: str,
        records: Sequence[Mapping[str, Any]],
        **config: Any,
    ) -> None:
        """Each record: value, and optionally key, partition, headers, timestamp (ms)."""
        from confluent_kafka import Producer

        errors: list[str] = []
        producer = Producer(
            {"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 5, "logger": LIBRDKAFKA, **config}
        )
        for record in records:
            extra = {k: record[k] for k in ("partition", "headers", "timestamp") if k in record}
            producer.produce(
                topic,
                record["value"],
                record.get("key"),
                on_delivery=lambda err, _msg: errors.append(str(err)) if err else None,
                **extra,
            )
        assert producer.flush(30) == 0
        assert errors == []

    def delete_records(self, topic: str, partition: int, before: int) -> None:
        from confluent_kafka import TopicPartition

        futures = self.admin.delete_records([TopicPartition(topic, partition, before)])
        for future in futures.values():
            future.result(timeout=30)

    def consume(self, topic: str, partitions: int = 1) -> list[Any]:
        """Every record of ``topic`` now, read with an assign-only consumer."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "tests",
                "enable.auto.commit": False,
                "logger": LIBRDKAFKA,
            }
        )
        try:
            records = []
            for p in range(partitions):
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
                if high <= low:
                    continue
                consumer.assign([TopicPartition(topic, p, low)])
                got = 0
                while got < high - low:
                    messages = consumer.consume(high - low - got, 30)
                    assert messages, f"no records from {topic}-{p} within 30 s"
                    for message in messages:
                        assert message.error() is None, message.error()
                        records.append(message)
                        got += 1
            return records
        finally:
            consumer.close()


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kafka]:
    import confluent_kafka  # noqa: F401 - installed by the extras; must not skip
    broker = BrokerProcess("--in-memory", cwd=tmp_path_factory.mktemp("spark-broker"))
    try:
        broker.wait_ready()
    except BrokerProcessError as exc:
        pytest.fail(str(exc))
    try:
        yield Kafka(broker.address)
    finally:
        broker.stop()


class SparkSessions:
    """The one SparkContext a process may have, handed to whichever module asks.

    ``local[2]`` is shared by most modules; ``tests/spark/test_cluster.py`` needs a driver on
    a standalone master. Asking for the other kind stops the current one first (a new one
    costs 15-25 s, so the local one is kept for as long as nobody asks for another).
    """

    def __init__(self) -> None:
        self.current: Any = None
        self.key: tuple = ()

    def get(self, master: str, conf: Mapping[str, str] | None = None) -> Any:
        from trikafka.spark import configure_environment, spark_session

        key = (master, tuple(sorted((conf or {}).items())))
        if self.current is not None and (key != self.key or self.current.sparkContext._jsc is None):
            self.close()
        if self.current is None:
            configure_environment()
            if not os.environ.get("JAVA_HOME") and not shutil.which("java"):
                pytest.fail("Spark 4 needs Java 17 or 21: install a JDK (make system-deps) or set JAVA_HOME")
            self.current = spark_session("trikafka-tests", master, conf)
            self.current.sparkContext.setLogLevel("ERROR")
            self.key = key
        return self.current

    def close(self) -> None:
        if self.current is not None:
            self.current.stop()
            self.current = None


@pytest.fixture(scope="session")
def spark_sessions() -> Iterator[SparkSessions]:
    import pyarrow  # noqa: F401 - installed by the spark extra; must not skip
    import pyspark  # noqa: F401

    sessions = SparkSessions()
    try:
        yield sessions
    finally:
        sessions.close()


@pytest.fixture
def spark(spark_sessions: SparkSessions) -> Any:
    """The shared ``local[2]`` SparkSession."""
    return spark_sessions.get("local[2]")


class Stream:
    """Runs ``readStream.format("trikafka")`` queries into ``foreachBatch`` and keeps the batches."""

    def __init__(self, spark: Any, kafka: Kafka, tmp_path: Path) -> None:
        self.spark = spark
        self.kafka = kafka
        self.tmp_path = tmp_path

    def reader(self, **options: str) -> Any:
        reader = self.spark.readStream.format("trikafka").option(
            "kafka.bootstrap.servers", self.kafka.bootstrap
        )
        for key, value in options.items():
            reader = reader.option(key, value)
        return reader.load()

    def run(self, checkpoint: str = "checkpoint", **options: str) -> list[list[Any]]:
        """One ``availableNow`` run; the rows of each non-empty micro-batch, in order."""
        batches: list[tuple[int, list[Any]]] = []

        def collect(df: Any, batch_id: int) -> None:
            rows = df.collect()
            if rows:
                batches.append((batch_id, rows))

        query = (
            self.reader(**options)
            .writeStream.foreachBatch(collect)
            .option("checkpointLocation", str(self.tmp_path / checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        try:
            finished = query.awaitTermination(QUERY_TIMEOUT)
        finally:
            if query.isActive:
                query.stop()
        assert finished, f"the query did not finish within {QUERY_TIMEOUT} s"
        return [rows for _, rows in sorted(batches, key=lambda b: b[0])]


@pytest.fixture
def stream(spark: Any, kafka: Kafka, tmp_path: Path) -> Stream:
    return Stream(spark, kafka, tmp_path)
