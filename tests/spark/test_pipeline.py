"""The trikafka Spark source and sink end to end: PySpark local[2] against a broker process.

One SparkSession serves the whole module (see conftest); streaming queries run with
``trigger(availableNow=True)`` so each one ends by itself once it has read what was there.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pyarrow  # noqa: E402,F401 - installed by the spark extra; must not skip
import pyspark  # noqa: E402,F401
import pytest
from pyspark.errors import StreamingQueryException  # noqa: E402

BASE_TS = 1_700_000_000_000  # ms; 2023-11-14T22:13:20Z


def _utc(ms: int) -> datetime:
    """How Spark's TimestampType comes back to Python: naive, in the session's time zone."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).astimezone().replace(tzinfo=None)


def _records(n: int, *, partitions: int, start: int = 0, tag: str = "v") -> list[dict]:
    return [
        {
            "key": f"k{i}".encode(),
            "value": f"{tag}{i}".encode(),
            "partition": i % partitions,
            "headers": [("n", str(i).encode()), ("empty", b"")],
            "timestamp": BASE_TS + i,
        }
        for i in range(start, start + n)
    ]


def _flat(batches):
    return [row for rows in batches for row in rows]


def test_available_now_reads_every_record_exactly_once(kafka, stream):
    topic = kafka.topic("clicks", partitions=3)
    kafka.produce(topic, _records(60, partitions=3))

    rows = _flat(stream.run(subscribe=topic, startingOffsets="earliest", includeHeaders="true"))

    assert len(rows) == 60
    assert len({(r.partition, r.offset) for r in rows}) == 60
    for r in rows:
        i = int(r.key[1:])
        assert r.topic == topic
        assert r.value == f"v{i}".encode()
        assert r.partition == i % 3
        assert r.offset == i // 3  # round robin over the partitions, in order
        assert r.timestamp == _utc(BASE_TS + i)
        assert r.timestampType == 0  # CreateTime
        assert [(h.key, h.value) for h in r.headers] == [("n", str(i).encode()), ("empty", b"")]


def test_restart_reads_only_new_records_and_new_partitions(kafka, stream):
    topic = kafka.topic("restart", partitions=2)
    kafka.produce(topic, _records(20, partitions=2))
    first = _flat(stream.run(subscribe=topic, startingOffsets="earliest"))
    assert sorted(int(r.value[1:]) for r in first) == list(range(20))

    # More records, and a partition added while the query is down: read from its earliest.
    kafka.add_partitions(topic, 3)
    kafka.produce(topic, _records(30, partitions=3, start=20))
    second = _flat(stream.run(subscribe=topic, startingOffsets="earliest"))

    assert sorted(int(r.value[1:]) for r in second) == list(range(20, 50))
    assert {r.partition for r in second} == {0, 1, 2}
    assert min(r.offset for r in second if r.partition == 2) == 0

    # Nothing new: a third run reads nothing.
    assert stream.run(subscribe=topic, startingOffsets="earliest") == []


def test_starting_offsets_latest_skips_the_backlog(kafka, stream):
    topic = kafka.topic("latest")
    kafka.produce(topic, _records(5, partitions=1))
    assert stream.run(subscribe=topic) == []  # startingOffsets defaults to latest
    kafka.produce(topic, _records(3, partitions=1, start=5))
    assert sorted(r.offset for r in _flat(stream.run(subscribe=topic))) == [5, 6, 7]


def test_max_offsets_per_trigger_splits_the_backlog_by_lag(kafka, stream):
    topic = kafka.topic("limited", partitions=3)
    kafka.produce(topic, [{"value": b"a", "partition": 0}] * 60 + [{"value": b"b", "partition": 1}] * 30)

    batches = stream.run(subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="30")

    # 90 records, 30 per trigger, shared 2:1 by lag: three batches of 20 + 10.
    assert [len(rows) for rows in batches] == [30, 30, 30]
    for rows in batches:
        assert sorted(r.partition for r in rows) == [0] * 20 + [1] * 10
    assert len({(r.partition, r.offset) for r in _flat(batches)}) == 90


def test_compressed_batches_are_decoded(kafka, spark):
    codecs = ["gzip", "snappy", "lz4", "zstd"]
    topic = kafka.topic("codecs", partitions=len(codecs))
    for p, codec in enumerate(codecs):
        records = [
            {"key": f"{codec}-{i}".encode(), "value": (codec * 50).encode() + bytes([i]), "partition": p}
            for i in range(100)
        ]
        kafka.produce(topic, records, **{"compression.type": codec, "batch.num.messages": 25})

    rows = (
        spark.read.format("trikafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("subscribe", topic)
        .load()
        .collect()
    )

    assert len(rows) == 400
    for r in rows:
        codec = codecs[r.partition]
        i = int(r.key.decode().rsplit("-", 1)[1])
        assert r.key == f"{codec}-{i}".encode()
        assert r.value == (codec * 50).encode() + bytes([i])
        assert r.offset == i


def test_batch_read_with_pattern_and_json_offsets(kafka, spark):
    a = kafka.topic("pattern-a", partitions=2)
    b = kafka.topic("pattern-b")
    kafka.topic("other")
    kafka.produce(a, _records(10, partitions=2))
    kafka.produce(b, _records(4, partitions=1))

    df = (
        spark.read.format("trikafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("subscribePattern", r"pattern-[ab]-\d+")
        .option("startingOffsets", json.dumps({a: {"0": 1, "1": -2}, b: {"0": 2}}))
        .option("endingOffsets", json.dumps({a: {"0": 3, "1": -1}, b: {"0": -1}}))
        .option("minPartitions", "5")
        .load()
    )
    rows = df.collect()

    got = sorted((r.topic, r.partition, r.offset) for r in rows)
    assert got == sorted(
        [(a, 0, 1), (a, 0, 2)] + [(a, 1, o) for o in range(5)] + [(b, 0, 2), (b, 0, 3)]
    )
    assert df.rdd.getNumPartitions() >= 5  # the larger ranges were split


def test_sink_writes_an_aggregate_back_to_a_topic(kafka, spark, stream, tmp_path):
    source = kafka.topic("pages", partitions=3)
    target = kafka.topic("pages-count")
    pages = ["/home", "/cart", "/home", "/pay", "/home", "/cart"]
    kafka.produce(source, [{"key": b"u", "value": p.encode(), "partition": i % 3} for i, p in enumerate(pages)])

    counts = (
        stream.reader(subscribe=source, startingOffsets="earliest")
        .selectExpr("CAST(value AS STRING) AS page")
        .groupBy("page")
        .count()
        .selectExpr("page AS key", "CAST(count AS STRING) AS value")
    )
    query = (
        counts.writeStream.format("trikafka")
        .outputMode("complete")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("topic", target)
        .option("checkpointLocation", str(tmp_path / "sink-checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180)

    written = {m.key().decode(): int(m.value()) for m in kafka.consume(target)}
    assert written == {"/home": 3, "/cart": 2, "/pay": 1}


def test_batch_sink_columns_and_failures(kafka, spark):
    target = kafka.topic("written", partitions=2)
    df = spark.createDataFrame(
        [(target, "a", b"1", 1, [("h", b"x")]), (target, None, b"2", 0, None)],
        "topic string, key string, value binary, partition int, headers array<struct<key:string,value:binary>>",
    )
    df.write.format("trikafka").option("kafka.bootstrap.servers", kafka.bootstrap).mode("append").save()

    records = sorted(kafka.consume(target, partitions=2), key=lambda m: m.value())
    assert [(m.partition(), m.key(), m.value(), m.headers()) for m in records] == [
        (1, b"a", b"1", [("h", b"x")]),
        (0, None, b"2", None),
    ]

    # A record the broker refuses fails the Spark task, naming the Kafka error.
    small = kafka.topic("small", config={"max.message.bytes": "200"})
    big = spark.createDataFrame([("x" * 1000,)], "value string")
    with pytest.raises(Exception, match="MESSAGE_TOO_LARGE"):
        big.write.format("trikafka").option("kafka.bootstrap.servers", kafka.bootstrap).option(
            "topic", small
        ).mode("append").save()


def test_deleted_offsets_are_data_loss_unless_fail_on_data_loss_is_false(kafka, stream):
    topic = kafka.topic("retention")
    kafka.produce(topic, _records(10, partitions=1))
    assert len(_flat(stream.run(subscribe=topic, startingOffsets="earliest"))) == 10

    kafka.produce(topic, _records(10, partitions=1, start=10))  # offsets 10..19
    kafka.delete_records(topic, 0, before=15)  # 10..14 are gone before the query reads them

    with pytest.raises(StreamingQueryException) as failure:
        stream.run(subscribe=topic, startingOffsets="earliest")
    message = str(failure.value)
    assert "KAFKA_DATA_LOSS" in message
    assert f"topic '{topic}', partition 0" in message
    assert "offsets 10 to 14" in message

    rows = _flat(stream.run(subscribe=topic, startingOffsets="earliest", failOnDataLoss="false"))
    assert [r.offset for r in rows] == [15, 16, 17, 18, 19]


def _transactional_producer(kafka, name: str):
    from confluent_kafka import Producer

    from .conftest import LIBRDKAFKA

    producer = Producer({
        "bootstrap.servers": kafka.bootstrap, "transactional.id": f"{name}-{id(kafka)}", "linger.ms": 5,
        "logger": LIBRDKAFKA,
    })
    producer.init_transactions(30)
    return producer


def _produce_transaction(kafka, topic: str) -> None:
    """Offsets 0-2 an aborted transaction, 3 its abort marker, 4-5 committed, 6 the commit
    marker, 7 a plain record — through librdkafka's transactional producer."""
    producer = _transactional_producer(kafka, topic)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, b"aborted%d" % i, b"t", partition=0)
    producer.flush(30)
    producer.abort_transaction(30)
    producer.begin_transaction()
    for i in range(2):
        producer.produce(topic, b"committed%d" % i, b"t", partition=0)
    producer.commit_transaction(30)
    kafka.produce(topic, [{"key": b"t", "value": b"plain", "partition": 0}])


def _read_values(spark, kafka, topic, **options):
    reader = spark.read.format("trikafka").option("kafka.bootstrap.servers", kafka.bootstrap).option("subscribe", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    return [(r.offset, r.value) for r in reader.load().orderBy("offset").collect()]


def test_transaction_markers_leave_gaps_that_end_the_range(kafka, spark):
    topic = kafka.topic("txn")
    _produce_transaction(kafka, topic)

    assert _read_values(spark, kafka, topic) == [
        (0, b"aborted0"), (1, b"aborted1"), (2, b"aborted2"),
        (4, b"committed0"), (5, b"committed1"), (7, b"plain"),
    ]
    # A range that ends on a marker ends too (the position passes the marker).
    assert _read_values(spark, kafka, topic, endingOffsets=json.dumps({topic: {"0": 7}}))[-1] == (5, b"committed1")


def test_read_committed_skips_aborted_records(kafka, spark):
    topic = kafka.topic("txn-committed")
    _produce_transaction(kafka, topic)
    committed = {"kafka.isolation.level": "read_committed"}

    assert _read_values(spark, kafka, topic, **committed) == [
        (4, b"committed0"), (5, b"committed1"), (7, b"plain"),
    ]
    # Ranges that end on a marker, or hold nothing but an aborted transaction and its
    # marker, end too: no record with their last offset is ever delivered.
    assert _read_values(spark, kafka, topic, endingOffsets=json.dumps({topic: {"0": 7}}), **committed) == [
        (4, b"committed0"), (5, b"committed1"),
    ]
    assert _read_values(spark, kafka, topic, endingOffsets=json.dumps({topic: {"0": 4}}), **committed) == []

    # A transaction still open: "latest" is the last stable offset, so the batch stops before
    # it (and does not wait for it); once committed, its records are read.
    producer = _transactional_producer(kafka, f"{topic}-open")
    producer.begin_transaction()
    producer.produce(topic, b"pending", b"t", partition=0)
    producer.flush(30)
    try:
        assert _read_values(spark, kafka, topic, **committed)[-1] == (7, b"plain")
    finally:
        producer.commit_transaction(30)
    assert _read_values(spark, kafka, topic, **committed)[-1] == (8, b"pending")


def test_bad_options_are_refused_with_sparks_message(kafka, spark):
    reader = spark.read.format("trikafka").option("kafka.bootstrap.servers", kafka.bootstrap)
    with pytest.raises(Exception, match="One of the following options must be specified"):
        reader.load().collect()
    with pytest.raises(Exception, match="auto.offset.reset' is not supported"):
        reader.option("subscribe", "x").option("kafka.auto.offset.reset", "earliest").load().collect()


def test_the_example_pipeline(kafka, spark, tmp_path):
    """``examples/spark_pipeline.py``: generator, windowed aggregation, Kafka and Parquet sinks."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "spark_pipeline.py"
    spec = importlib.util.spec_from_file_location("spark_pipeline_example", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)

    result = example.run(spark, {"bootstrap.servers": kafka.bootstrap}, tmp_path, events=3000, minutes=5)

    assert result["records_read_per_query"] == 3000
    windows = [json.loads(m.value()) for m in kafka.consume(example.CLICKS_PER_MINUTE, partitions=3)]
    assert len(windows) == result["parquet_windows"] > 0
    assert sum(w["clicks"] for w in windows) == result["parquet_clicks"]
    # Closed windows only: the last minute waits for the watermark, so not every click is out.
    assert 0 < result["parquet_clicks"] < 3000
    assert {"window_start", "window_end", "page", "clicks", "users"} <= set(windows[0])
