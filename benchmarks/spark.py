"""The Spark source and sinks against a broker process: ``python -m benchmarks.spark``.

source
    ``--records`` records of 100 bytes in a topic of 3 partitions, read by
    ``readStream.format("trikafka")`` with ``trigger(availableNow=True)`` into Spark's ``noop``
    sink on ``local[2]`` (query start → termination; the SparkSession is up before the clock
    starts), beside a plain confluent-kafka consumer in one process reading the same records
    (assign, from offset 0, until all arrived). Goal: the source ≥ 0.5× the plain consumer.
sinks
    ``--sink-records`` rows (100-byte strings, 2 Spark partitions) written by
    ``df.write.format("trikafka")`` with ``deliveryGuarantee`` ``at-least-once`` and
    ``exactly-once``, alternately, ``--rounds`` times each. Goal: exactly-once ≥ 0.7×
    at-least-once.

Records/s are medians over ``--rounds``; goals are reported, never asserted. Noisy on a shared
machine: the load average is printed beside the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

__all__ = ["GOALS", "main", "measure", "plain_consumer_rate", "sink_rate", "source_rate"]

#: figure → (goal, what it is a ratio of).
GOALS = {
    "source_vs_consumer": (0.5, "trikafka source (availableNow, local[2]) ÷ plain confluent-kafka consumer"),
    "exactly_once_vs_at_least_once": (0.7, "exactly-once sink ÷ at-least-once sink"),
}
VALUE = b"v" * 100
PARTITIONS = 3


def _fill(bootstrap: str, topic: str, records: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000})
    for i in range(records):
        while True:
            try:
                producer.produce(topic, VALUE, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.1)
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(300):
        raise RuntimeError("records still queued after 300 s")


def _create(bootstrap: str, partitions: int) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"bench-spark-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=60)
    return topic


def plain_consumer_rate(bootstrap: str, topic: str, records: int) -> float:
    """Records/s of one assign-only confluent-kafka consumer reading all ``records``."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
        "isolation.level": "read_uncommitted",
    })
    try:
        start = time.perf_counter()
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        got = 0
        while got < records:
            for message in consumer.consume(10_000, 5):
                if message.error() is None:
                    got += 1
        return records / (time.perf_counter() - start)
    finally:
        consumer.close()


def source_rate(spark: Any, bootstrap: str, topic: str, records: int, checkpoint: str) -> float:
    """Records/s of ``readStream.format("trikafka")`` availableNow into the noop sink."""
    start = time.perf_counter()
    query = (
        spark.readStream.format("trikafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    if not query.awaitTermination(1800):
        query.stop()
        raise RuntimeError("the source query took over 30 minutes")
    elapsed = time.perf_counter() - start
    read = sum(p["numInputRows"] for p in query.recentProgress)
    if read != records:
        raise RuntimeError(f"the source read {read} records, not {records}")
    return records / elapsed


def sink_rate(spark: Any, bootstrap: str, rows: int, guarantee: str) -> float:
    """Records/s of a batch ``df.write.format("trikafka")`` of ``rows`` rows."""
    topic = _create(bootstrap, 2)
    df = spark.range(0, rows, numPartitions=2).selectExpr(
        "concat(repeat('v', 90), lpad(CAST(id AS STRING), 10, '0')) AS value"
    )
    start = time.perf_counter()
    (df.write.format("trikafka")
     .option("kafka.bootstrap.servers", bootstrap)
     .option("topic", topic)
     .option("deliveryGuarantee", guarantee)
     .mode("append")
     .save())
    return rows / (time.perf_counter() - start)


def measure(spark: Any, bootstrap: str, records: int, sink_records: int, rounds: int) -> dict:
    """Every figure, medians over ``rounds`` (the sinks alternate which goes first)."""
    topic = _create(bootstrap, PARTITIONS)
    _fill(bootstrap, topic, records)
    consumer, source, alo, eos = [], [], [], []
    with tempfile.TemporaryDirectory(prefix="trikafka-bench-spark-") as work:
        for r in range(rounds):
            consumer.append(plain_consumer_rate(bootstrap, topic, records))
            source.append(source_rate(spark, bootstrap, topic, records, str(Path(work) / f"checkpoint-{r}")))
            order = ["at-least-once", "exactly-once"][:: 1 if r % 2 == 0 else -1]
            for guarantee in order:
                (alo if guarantee == "at-least-once" else eos).append(
                    sink_rate(spark, bootstrap, sink_records, guarantee)
                )
    figures = {
        "consumer_records_per_s": statistics.median(consumer),
        "source_records_per_s": statistics.median(source),
        "at_least_once_records_per_s": statistics.median(alo),
        "exactly_once_records_per_s": statistics.median(eos),
    }
    figures["source_vs_consumer"] = figures["source_records_per_s"] / figures["consumer_records_per_s"]
    figures["exactly_once_vs_at_least_once"] = (
        figures["exactly_once_records_per_s"] / figures["at_least_once_records_per_s"]
    )
    return figures


def markdown(figures: dict, meta: dict) -> str:
    lines = [
        f"Spark source and sinks, {meta['records']:,} records read / {meta['sink_records']:,} written, "
        f"median of {meta['rounds']} round(s), load average {meta['load']:.1f} (2 cores)",
        "",
        "| row | records/s |",
        "|---|---|",
        f"| plain confluent-kafka consumer, 1 process | {figures['consumer_records_per_s']:,.0f} |",
        f"| trikafka source, availableNow, local[2] | {figures['source_records_per_s']:,.0f} |",
        f"| trikafka sink, at-least-once, local[2] | {figures['at_least_once_records_per_s']:,.0f} |",
        f"| trikafka sink, exactly-once, local[2] | {figures['exactly_once_records_per_s']:,.0f} |",
        "",
        "| goal | value | |",
        "|---|---|---|",
    ]
    for key, (goal, what) in GOALS.items():
        value = figures[key]
        lines.append(f"| {what} ≥ {goal} | {value:.2f}× | {'met' if value >= goal else 'missed'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="records the source reads")
    parser.add_argument("--sink-records", type=int, default=200_000, help="rows each sink writes")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--output", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args(argv)

    from trikafka.spark import spark_session
    from trikafka.testing.process import BrokerProcess

    with tempfile.TemporaryDirectory(prefix="trikafka-bench-broker-") as cwd:
        broker = BrokerProcess("--in-memory", cwd=cwd)
        broker.wait_ready()
        try:
            spark = spark_session("trikafka-bench", "local[2]")
            spark.sparkContext.setLogLevel("ERROR")
            try:
                figures = measure(spark, broker.address, args.records, args.sink_records, args.rounds)
            finally:
                spark.stop()
        finally:
            broker.stop()
    meta = {
        "records": args.records, "sink_records": args.sink_records, "rounds": args.rounds,
        "load": os.getloadavg()[0], "command": "python -m benchmarks.spark " + " ".join(argv or sys.argv[1:]),
    }
    table = markdown(figures, meta)
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "spark.json").write_text(json.dumps({"meta": meta, "figures": figures}, indent=1) + "\n")
    (args.output / "spark.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
