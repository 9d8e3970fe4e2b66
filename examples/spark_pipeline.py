"""Clicks per minute: a Spark Structured Streaming job reading from and writing to Kafka.

    make run                                       # terminal 1: trikafka on 127.0.0.1:9092
    .venv/bin/python examples/spark_pipeline.py    # terminal 2 (needs the `spark` extra)

The job reads JSON click events from the ``clicks`` topic, counts clicks and distinct users per
page and one-minute event-time window (with a one-minute watermark for late events), and
writes each closed window to the ``clicks-per-minute`` topic and to Parquet files. Both
queries keep their offsets and state in a checkpoint directory, so a rerun continues where
the last one stopped. A small generator produces the events first (``--events``); with
``--follow`` it keeps producing and the job keeps running until Ctrl-C.

Against a real Kafka cluster: ``--bootstrap-servers broker1:9092,broker2:9092`` and any
client setting as ``--kafka-option security.protocol=SASL_SSL`` (repeatable). Spark's own
connector takes the same options, so ``format("trikafka")`` becomes ``format("kafka")``
where that connector is installed.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import shutil
import signal
import threading
import time
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from trikafka.spark import spark_session

CLICKS = "clicks"
CLICKS_PER_MINUTE = "clicks-per-minute"
PAGES = ["/", "/search", "/cart", "/checkout"] + [f"/products/{i}" for i in range(12)]
EVENT_SCHEMA = "user STRING, page STRING, ts LONG"


def ensure_topics(kafka: dict[str, str], partitions: int = 3) -> None:
    """Create the two topics if they are missing (a cluster may not auto-create them)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({**kafka, "logger": logging.getLogger("librdkafka")})
    existing = admin.list_topics(timeout=30).topics
    missing = [NewTopic(t, partitions, 1) for t in (CLICKS, CLICKS_PER_MINUTE) if t not in existing]
    if missing:
        for future in admin.create_topics(missing).values():
            future.result(timeout=30)


def generate_clicks(kafka: dict[str, str], events: int, minutes: float, *, start_ms: int | None = None) -> int:
    """Produce ``events`` clicks spread over ``minutes`` of event time ending now, a few of
    them up to 20 s late (out of order). Returns the last event time."""
    from confluent_kafka import Producer

    producer = Producer(
        {**kafka, "linger.ms": 20, "compression.type": "lz4", "logger": logging.getLogger("librdkafka")}
    )
    span = int(minutes * 60_000)
    start = start_ms if start_ms is not None else int(time.time() * 1000) - span
    rng = random.Random(7)
    ts = start
    for i in range(events):
        ts = start + span * i // max(events, 1)
        late = rng.randrange(20_000) if rng.random() < 0.02 else 0
        user = f"user-{rng.randrange(500)}"
        event = {"user": user, "page": rng.choice(PAGES), "ts": ts - late}
        while True:
            try:
                producer.produce(CLICKS, json.dumps(event).encode(), user.encode(), timestamp=ts - late)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    producer.flush(60)
    return ts


def clicks_per_minute(spark: SparkSession, kafka: dict[str, str], **source_options: str) -> DataFrame:
    """The streaming aggregation: clicks and distinct users per page and event-time minute."""
    reader = spark.readStream.format("trikafka").option("subscribe", CLICKS)
    for key, value in {**{f"kafka.{k}": v for k, v in kafka.items()}, **source_options}.items():
        reader = reader.option(key, value)
    events = (
        reader.load()
        .select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"))
        .select("e.*")
        .withColumn("event_time", F.timestamp_millis("ts"))
    )
    return (
        events.withWatermark("event_time", "1 minute")
        .groupBy(F.window("event_time", "1 minute"), "page")
        .agg(F.count("*").alias("clicks"), F.approx_count_distinct("user").alias("users"))
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "page",
            "clicks",
            "users",
        )
    )


def start_queries(
    per_minute: DataFrame, kafka: dict[str, str], work_dir: Path, *, follow: bool
) -> list[StreamingQuery]:
    """Write closed windows to the ``clicks-per-minute`` topic and to Parquet."""
    def trigger(writer):
        return writer.trigger(processingTime="10 seconds") if follow else writer.trigger(availableNow=True)

    to_kafka = per_minute.select(
        F.col("page").alias("key"), F.to_json(F.struct(*per_minute.columns)).alias("value")
    ).writeStream.format("trikafka").queryName("clicks-per-minute to kafka").outputMode("append")
    for key, value in kafka.items():
        to_kafka = to_kafka.option(f"kafka.{key}", value)
    to_kafka = to_kafka.option("topic", CLICKS_PER_MINUTE).option(
        "checkpointLocation", str(work_dir / "checkpoint" / "kafka")
    )
    to_parquet = (
        per_minute.writeStream.format("parquet")
        .queryName("clicks-per-minute to parquet")
        .outputMode("append")
        .option("path", str(work_dir / "parquet"))
        .option("checkpointLocation", str(work_dir / "checkpoint" / "parquet"))
    )
    return [trigger(to_kafka).start(), trigger(to_parquet).start()]


def run(
    spark: SparkSession,
    kafka: dict[str, str],
    work_dir: Path,
    *,
    events: int = 100_000,
    minutes: float = 10,
    follow: bool = False,
    rate: int = 2000,
) -> dict[str, float]:
    """Generate, run both queries, and return what went through (see ``main`` for output)."""
    ensure_topics(kafka)
    generated_at = time.monotonic()
    last_ts = generate_clicks(kafka, events, minutes) if events else None
    generated = time.monotonic() - generated_at

    per_minute = clicks_per_minute(spark, kafka, startingOffsets="earliest")
    started = time.monotonic()
    queries = start_queries(per_minute, kafka, work_dir, follow=follow)
    stop = threading.Event()
    if follow:  # keep producing live events until Ctrl-C
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        while not stop.is_set() and all(q.isActive for q in queries):
            generate_clicks(kafka, rate, 1 / 60, start_ms=int(time.time() * 1000) - 1000)
            stop.wait(1)
        for q in queries:
            q.stop()
    for q in queries:
        q.awaitTermination()
    elapsed = time.monotonic() - started

    read = [sum(p["numInputRows"] for p in q.recentProgress) for q in queries]
    busy = [sum(p["durationMs"].get("triggerExecution", 0) for p in q.recentProgress) / 1000 for q in queries]
    windows = spark.read.schema(per_minute.schema).parquet(str(work_dir / "parquet"))
    return {
        "events_generated": events,
        "generate_seconds": generated,
        "last_event_time_ms": last_ts or 0,
        "records_read_per_query": min(read),  # through both sinks
        "records_read_to_kafka": read[0],
        "records_read_to_parquet": read[1],
        "pipeline_seconds": elapsed,
        "records_per_second": min(read) / elapsed if elapsed else 0.0,
        "records_per_busy_second": min(r / b for r, b in zip(read, busy, strict=True) if b) if any(busy) else 0.0,
        "parquet_windows": windows.count(),
        "parquet_clicks": windows.agg(F.sum("clicks")).first()[0] or 0,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    parser.add_argument("--kafka-option", action="append", default=[], metavar="KEY=VALUE",
                        help="a Kafka client setting, e.g. security.protocol=SSL (repeatable)")
    parser.add_argument("--events", type=int, default=100_000, help="clicks to generate first (0: none)")
    parser.add_argument("--minutes", type=float, default=10, help="event-time span of the generated clicks")
    parser.add_argument("--follow", action="store_true", help="keep producing and processing until Ctrl-C")
    parser.add_argument("--rate", type=int, default=2000, help="clicks per second with --follow")
    parser.add_argument("--work-dir", type=Path, default=Path("spark-pipeline"),
                        help="checkpoint/ and parquet/ live here (default ./spark-pipeline)")
    parser.add_argument("--fresh", action="store_true", help="delete the work dir first (start over)")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)

    kafka = {"bootstrap.servers": args.bootstrap_servers}
    kafka.update(option.split("=", 1) for option in args.kafka_option)
    if args.fresh:
        shutil.rmtree(args.work_dir, ignore_errors=True)

    # Keep every micro-batch's progress (Spark keeps the last 100): the summary adds them up.
    spark = spark_session(
        "clicks-per-minute", args.master, {"spark.sql.streaming.numRecentProgressUpdates": "100000"}
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        result = run(spark, kafka, args.work_dir, events=args.events, minutes=args.minutes,
                     follow=args.follow, rate=args.rate)
        latest = (
            spark.read.format("trikafka")
            .options(**{f"kafka.{k}": v for k, v in kafka.items()})
            .option("subscribe", CLICKS_PER_MINUTE)
            .load()
            .orderBy(F.desc("timestamp"))
            .limit(3)
            .selectExpr("CAST(value AS STRING) AS value")
            .collect()
        )
    finally:
        spark.stop()

    print(f"generated {result['events_generated']:,} clicks in {result['generate_seconds']:.1f} s")
    print(
        f"pipeline: {result['records_read_per_query']:,} records through both queries in "
        f"{result['pipeline_seconds']:.1f} s = {result['records_per_second']:,.0f} records/s "
        f"({result['records_per_busy_second']:,.0f} records/s while a micro-batch ran)"
    )
    if result["records_read_to_kafka"] != result["records_read_to_parquet"]:
        print(
            f"  (to Kafka {result['records_read_to_kafka']:,}, to Parquet "
            f"{result['records_read_to_parquet']:,}: a micro-batch was cut short by the stop)"
        )
    print(
        f"closed windows: {result['parquet_windows']:,} rows, {result['parquet_clicks']:,} clicks "
        f"in {args.work_dir / 'parquet'} and topic {CLICKS_PER_MINUTE!r}; the last minute stays "
        "open until later clicks move the watermark"
    )
    for row in latest:
        print(f"  {CLICKS_PER_MINUTE}: {row.value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
