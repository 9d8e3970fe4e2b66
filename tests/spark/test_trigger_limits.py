"""``minOffsetsPerTrigger`` / ``maxTriggerDelay`` / ``maxOffsetsPerTrigger``: the stream reader's
``latestOffset`` against the broker process, with a fake clock (no SparkSession); and one
``availableNow`` query on local[2] showing the minimum does not hold it back."""

from __future__ import annotations

import pyarrow  # noqa: F401 - installed by the spark extra; must not skip
import pyspark  # noqa: F401
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from trikafka.spark.options import SourceOptions
from trikafka.spark.source import KafkaStreamReader


class FakeClock:
    def __init__(self) -> None:
        self.ms = 1_000_000.0

    def __call__(self) -> float:
        return self.ms


def _reader(kafka, topic, **options):
    parsed = SourceOptions.parse(
        {"kafka.bootstrap.servers": kafka.bootstrap, "subscribe": topic, "startingOffsets": "earliest", **options},
        streaming=True,
    )
    reader = KafkaStreamReader(parsed, "trigger-limits")
    reader.clock = FakeClock()
    return reader


def _fill(kafka, topic, n, partition=0):
    kafka.produce(topic, [{"value": b"x", "partition": partition}] * n)


def test_min_offsets_per_trigger_waits_for_enough_records_or_the_delay(kafka):
    topic = kafka.topic("min-offsets", partitions=2)
    _fill(kafka, topic, 3)
    reader = _reader(kafka, topic, minOffsetsPerTrigger="10", maxTriggerDelay="30s")
    assert reader.getDefaultReadLimit() == ReadMinRows(10)
    limit = reader.getDefaultReadLimit()
    start = reader.initialOffset()
    assert start == {topic: {"0": 0, "1": 0}}

    # The first trigger runs with what there is.
    end = reader.latestOffset(start, limit)
    assert end == {topic: {"0": 3, "1": 0}}

    # 6 new offsets < 10: the trigger is skipped (the end is the start), however often asked.
    _fill(kafka, topic, 4, partition=0)
    _fill(kafka, topic, 2, partition=1)
    reader.clock.ms += 29_999
    assert reader.latestOffset(end, limit) == end
    assert reader.reportLatestOffset() == {topic: {"0": 7, "1": 2}}

    # 4 more (10 new): the batch runs.
    _fill(kafka, topic, 4, partition=1)
    second = reader.latestOffset(end, limit)
    assert second == {topic: {"0": 7, "1": 6}}

    # 1 new record: held back until maxTriggerDelay has passed since the last batch.
    _fill(kafka, topic, 1)
    reader.clock.ms += 29_999
    assert reader.latestOffset(second, limit) == second
    reader.clock.ms += 1
    assert reader.latestOffset(second, limit) == {topic: {"0": 8, "1": 6}}

    # ReadAllAvailable (Trigger.Once) wins, as in Spark.
    _fill(kafka, topic, 1)
    assert reader.latestOffset({topic: {"0": 8, "1": 6}}, ReadAllAvailable()) == {topic: {"0": 9, "1": 6}}
    reader.stop()


def test_min_and_max_offsets_per_trigger_together(kafka):
    topic = kafka.topic("min-max-offsets")
    _fill(kafka, topic, 100)
    reader = _reader(kafka, topic, minOffsetsPerTrigger="20", maxOffsetsPerTrigger="30")
    limit = reader.getDefaultReadLimit()
    start = reader.initialOffset()
    ends = []
    while True:
        end = reader.latestOffset(start, limit)
        if end == start:
            break
        ends.append(end[topic]["0"])
        start = end
    # 30 at a time while at least 20 are new; the last 10 wait for the 15m delay.
    assert ends == [30, 60, 90]
    assert reader.latestOffset(start, ReadMaxRows(30)) == start
    reader.clock.ms += 15 * 60 * 1000
    assert reader.latestOffset(start, limit) == {topic: {"0": 100}}
    reader.stop()


def test_available_now_reads_everything_despite_min_offsets(kafka, stream):
    topic = kafka.topic("min-available-now", partitions=2)
    kafka.produce(topic, [{"value": b"a", "partition": 0}] * 40 + [{"value": b"b", "partition": 1}] * 5)

    batches = stream.run(
        subscribe=topic, startingOffsets="earliest", minOffsetsPerTrigger="1000", maxOffsetsPerTrigger="30"
    )

    # 30 shared by lag, rounded down as in Spark (26 + 3), then the rest; the minimum of
    # 1000 would have held both batches back on any other trigger.
    assert [len(rows) for rows in batches] == [29, 16]
