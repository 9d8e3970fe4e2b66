"""``deliveryGuarantee=exactly-once`` on local[2]: batch writes, re-runs, options refused.

The task-failure and replayed-batch tests run on a standalone cluster (test_cluster.py).
"""

from __future__ import annotations

import pyarrow  # noqa: F401 - installed by the spark extra; must not skip
import pyspark  # noqa: F401
import pytest


def _committed(spark, kafka, topic):
    return [
        r.value
        for r in spark.read.format("trikafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("subscribe", topic)
        .option("kafka.isolation.level", "read_committed")
        .load()
        .collect()
    ]


def test_a_batch_write_run_again_with_the_same_prefix_writes_nothing(kafka, spark):
    topic = kafka.topic("eos-batch", partitions=2)
    df = spark.range(0, 300, numPartitions=3).selectExpr("CAST(id AS STRING) AS value")

    def write(prefix):
        (df.write.format("trikafka")
         .option("kafka.bootstrap.servers", kafka.bootstrap)
         .option("topic", topic)
         .option("deliveryGuarantee", "exactly-once")
         .option("transactionalIdPrefix", prefix)
         .mode("append")
         .save())

    write(f"{topic}-job")
    assert sorted(int(v) for v in _committed(spark, kafka, topic)) == list(range(300))
    write(f"{topic}-job")  # the same write again: every partition finds its marker
    assert len(_committed(spark, kafka, topic)) == 300
    write(f"{topic}-other")  # another write
    assert len(_committed(spark, kafka, topic)) == 600

    # Each Spark partition committed its marker (batch 0) in its own group.
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    futures = kafka.admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(f"{topic}-job-1", [TopicPartition(topic, 0)])]
    )
    (result,) = [f.result(timeout=30) for f in futures.values()]
    assert [(tp.topic, tp.partition, tp.offset) for tp in result.topic_partitions] == [(topic, 0, 1)]


def test_with_a_topic_column_the_marker_is_the_smallest_topic_and_a_rerun_aborts(kafka, spark):
    a, b = kafka.topic("eos-col-b"), kafka.topic("eos-col-a")
    first, second = sorted([a, b])
    df = spark.createDataFrame(
        [(a if i % 3 else b, str(i)) for i in range(60)], "topic string, value string"
    ).repartition(1)

    def write():
        (df.write.format("trikafka")
         .option("kafka.bootstrap.servers", kafka.bootstrap)
         .option("deliveryGuarantee", "exactly-once")
         .option("transactionalIdPrefix", f"{a}-job")
         .mode("append")
         .save())

    write()
    write()  # the same write: the rows go into a transaction that is aborted
    assert sorted(int(v) for v in _committed(spark, kafka, a) + _committed(spark, kafka, b)) == list(range(60))

    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    futures = kafka.admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(f"{a}-job-0", [TopicPartition(first, 0), TopicPartition(second, 0)])]
    )
    (result,) = [f.result(timeout=30) for f in futures.values()]
    assert sorted((tp.topic, tp.offset) for tp in result.topic_partitions) == [(first, 1), (second, -1001)]


def test_a_bad_delivery_guarantee_is_refused_before_any_write(kafka, spark):
    topic = kafka.topic("eos-bad")
    df = spark.createDataFrame([("x",)], "value string")
    with pytest.raises(
        Exception, match="option 'deliveryGuarantee' must be one of 'at-least-once', 'exactly-once', got 'once'"
    ):
        (df.write.format("trikafka").option("kafka.bootstrap.servers", kafka.bootstrap)
         .option("topic", topic).option("deliveryGuarantee", "once").mode("append").save())
    assert _committed(spark, kafka, topic) == []


def test_the_input_check_reads_the_bytes_after_the_data_without_consuming_them():
    import socket
    import struct

    from trikafka.spark.worker_input import _peek, input_complete

    assert input_complete(wait=0) is None  # not inside a pyspark worker: cannot tell

    jvm, worker = socket.socketpair()
    infile = worker.makefile("rb")
    try:
        assert _peek(infile, wait=0.05) == b""  # nothing yet, socket open: not complete
        jvm.sendall(struct.pack(">i", -4))  # END_OF_STREAM, as the JVM sends after complete input
        assert _peek(infile, wait=5) == struct.pack(">i", -4)
        assert _peek(infile, wait=0) == struct.pack(">i", -4)  # buffered, still unread
        assert infile.read(4) == struct.pack(">i", -4)  # pyspark reads it afterwards
        jvm.shutdown(socket.SHUT_WR)  # cut off: end of file
        assert _peek(infile, wait=5) == b""
    finally:
        infile.close()
        worker.close()
        jvm.close()
