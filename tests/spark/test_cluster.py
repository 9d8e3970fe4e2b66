"""The source and both sinks on a standalone Spark cluster: executors in another JVM.

A master and a worker are started from pyspark's own ``spark-class`` on 127.0.0.1 (see
``standalone.py``) for this module; the driver is this process. The executors' Python gets
trikafka (and these tests, for the UDFs) through ``PYTHONPATH``, so every reader, writer and
input partition crosses a process boundary pickled.

Two failures, each with the at-least-once and the exactly-once sink, read back with
``read_committed``:

- a task fails once (a UDF raises on the first attempt of Spark partition 0, after that
  task's first records have reached Kafka; ``spark.task.maxFailures=2``), and Spark retries it;
- the driver stops between the tasks' writes and the batch's commit: the commit log entry of
  the last micro-batch is removed from the checkpoint — the state a driver that died after
  the sink wrote and before Spark recorded the batch leaves — and the query restarted from
  that checkpoint replays the batch with the same offsets.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pyarrow  # noqa: F401 - installed by the spark extra; must not skip
import pyspark  # noqa: F401
import pytest

from .conftest import QUERY_TIMEOUT
from .standalone import executor_conf, start_standalone

RECORDS_PER_PARTITION = 400
#: Source offset of Spark partition 0 at which the first attempt fails, and how many of that
#: task's records must be in Kafka first (of the 300 before it, in batches of 50 rows).
FAIL_AT = 300
WRITTEN_BEFORE_FAILING = 100
#: Seconds the failing UDF waits for those records before it fails anyway.
WAIT_FOR_WRITES = 60


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, spark_sessions: Any) -> Any:
    work = tmp_path_factory.mktemp("standalone")
    url, daemons = start_standalone(work)
    try:
        conf = {
            **executor_conf(),
            "spark.task.maxFailures": "2",
            "spark.sql.shuffle.partitions": "2",
            # Rows reach the sink's Python worker in batches of 50 through a 4 KiB buffer (64 KiB
            # by default, which would hold all of a small task's rows until its end).
            "spark.sql.execution.arrow.maxRecordsPerBatch": "50",
            "spark.buffer.size": "4096",
        }
        yield spark_sessions.get(url, conf)
    finally:
        spark_sessions.close()
        for daemon in reversed(daemons):
            daemon.stop()


def _source(kafka: Any, name: str) -> str:
    topic = kafka.topic(name, partitions=2)
    kafka.produce(
        topic,
        [
            {"value": f"{p}-{i}".encode().ljust(100, b"."), "partition": p}
            for p in range(2)
            for i in range(RECORDS_PER_PARTITION)
        ],
    )
    return topic


def _committed_values(spark: Any, kafka: Any, topic: str) -> list[str]:
    rows = (
        spark.read.format("trikafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("subscribe", topic)
        .option("kafka.isolation.level", "read_committed")
        .load()
        .selectExpr("rtrim('.', CAST(value AS STRING)) AS v")
        .collect()
    )
    return [r.v for r in rows]


def _high_watermark(kafka: Any, topic: str, partition: int) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": kafka.bootstrap, "group.id": "watermarks", "isolation.level": "read_uncommitted"}
    )
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30, cached=False)[1]
    finally:
        consumer.close()


def _run(df: Any, kafka: Any, target: str, checkpoint: Path, guarantee: str) -> None:
    query = (
        df.writeStream.format("trikafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("topic", target)
        .option("deliveryGuarantee", guarantee)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        finished = query.awaitTermination(QUERY_TIMEOUT)
    finally:
        if query.isActive:
            query.stop()
    assert finished, f"the query did not finish within {QUERY_TIMEOUT} s"
    if query.exception() is not None:
        raise query.exception()


def _fail_first_attempt(bootstrap: str, target: str) -> Any:
    """A UDF passing ``value`` through, except on the first attempt of Spark partition 0:
    at source offset FAIL_AT it waits until that task's earlier records are in Kafka (in the
    log — committed or not), then raises."""
    from pyspark.sql.functions import udf

    @udf("string")
    def flaky(value: str, offset: int) -> str:
        from pyspark import TaskContext

        context = TaskContext.get()
        if context.partitionId() == 0 and context.attemptNumber() == 0 and offset == FAIL_AT:
            from confluent_kafka import Consumer, TopicPartition

            # read_uncommitted: the high watermark, open transactions included (not the LSO).
            consumer = Consumer(
                {"bootstrap.servers": bootstrap, "group.id": "flaky-udf", "isolation.level": "read_uncommitted"}
            )
            deadline = time.monotonic() + WAIT_FOR_WRITES
            try:
                while time.monotonic() < deadline:
                    _, high = consumer.get_watermark_offsets(TopicPartition(target, 0), timeout=10, cached=False)
                    if high >= WRITTEN_BEFORE_FAILING:
                        break
            finally:
                consumer.close()
            raise RuntimeError(f"injected failure: first attempt of partition 0 at offset {offset}")
        return value

    return flaky


@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
def test_a_task_retried_after_a_failure(cluster, kafka, tmp_path, guarantee):
    source = _source(kafka, "cluster-failure")
    target = kafka.topic("cluster-failure-out", partitions=2)
    flaky = _fail_first_attempt(kafka.bootstrap, target)
    df = (
        cluster.readStream.format("trikafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("CAST(value AS STRING) AS value", "offset", "partition")
        .select(flaky("value", "offset").alias("value"), "partition")
    )

    _run(df, kafka, target, tmp_path / "checkpoint", guarantee)

    values = _committed_values(cluster, kafka, target)
    expected = {f"{p}-{i}" for p in range(2) for i in range(RECORDS_PER_PARTITION)}
    assert set(values) == expected
    duplicates = len(values) - len(expected)
    # Either way the first attempt's records reached the log of target partition 0.
    assert _high_watermark(kafka, target, 0) >= RECORDS_PER_PARTITION + WRITTEN_BEFORE_FAILING
    if guarantee == "at-least-once":
        # ... and stay: the retry writes them again.
        assert duplicates >= WRITTEN_BEFORE_FAILING
    else:
        # ... in a transaction that was aborted.
        assert duplicates == 0


@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
def test_a_batch_replayed_after_the_driver_stopped_before_its_commit(cluster, kafka, tmp_path, guarantee):
    source = _source(kafka, "cluster-replay")
    target = kafka.topic("cluster-replay-out", partitions=2)
    checkpoint = tmp_path / "checkpoint"

    def df() -> Any:
        return (
            cluster.readStream.format("trikafka")
            .option("kafka.bootstrap.servers", kafka.bootstrap)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(RECORDS_PER_PARTITION))
            .load()
            .selectExpr("value", "partition")
        )

    _run(df(), kafka, target, checkpoint, guarantee)
    assert len(_committed_values(cluster, kafka, target)) == 2 * RECORDS_PER_PARTITION
    commits = sorted((checkpoint / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    assert [c.name for c in commits] == ["0", "1"]  # two micro-batches of 400

    # The driver "died" after batch 1 was written and before Spark recorded it as done.
    commits[-1].unlink()
    for crc in (checkpoint / "commits").glob(".1.crc"):
        crc.unlink()
    _run(df(), kafka, target, checkpoint, guarantee)  # replays batch 1, same offsets
    assert (checkpoint / "commits" / "1").exists()

    values = _committed_values(cluster, kafka, target)
    assert set(values) == {f"{p}-{i}" for p in range(2) for i in range(RECORDS_PER_PARTITION)}
    duplicates = len(values) - 2 * RECORDS_PER_PARTITION
    if guarantee == "at-least-once":
        assert duplicates == RECORDS_PER_PARTITION  # batch 1 written twice
    else:
        assert duplicates == 0
