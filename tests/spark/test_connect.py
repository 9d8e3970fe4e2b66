"""``format("trikafka")`` from a Spark Connect client.

A Spark Connect server is started from pyspark's own jars (``bin/spark-submit --class
org.apache.spark.sql.connect.service.SparkConnectServer``, as ``sbin/start-connect-server.sh``
does) on 127.0.0.1, port 0, running its jobs on ``local[2]``; its Python workers import
trikafka through ``PYTHONPATH``. The test is a Connect client
(``SparkSession.builder.remote("sc://127.0.0.1:PORT")``): it registers the data source over
the wire (``trikafka.spark.register``) and reads, writes and streams with it.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pyarrow  # noqa: F401 - installed by the spark extra; must not skip
import pyspark  # noqa: F401
import pytest

from .conftest import QUERY_TIMEOUT
from .standalone import start_connect_server

_CONNECT_ENVIRONMENT = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE")


@pytest.fixture(scope="module")
def connect(tmp_path_factory: pytest.TempPathFactory) -> Any:
    import grpc  # noqa: F401 - the Connect client's packages are in the spark extra: must not skip
    import pandas  # noqa: F401
    from pyspark.sql import SparkSession

    from trikafka.spark import register

    work = tmp_path_factory.mktemp("connect")
    port, server = start_connect_server(
        work,
        "local[2]",
        {"spark.sql.shuffle.partitions": "2", "spark.pyspark.python": sys.executable},
    )
    # A Connect session marks the whole process as a Connect client (os.environ); the other
    # modules' classic SparkSession needs that undone afterwards.
    saved = {k: os.environ.get(k) for k in _CONNECT_ENVIRONMENT}
    try:
        spark = SparkSession.builder.remote(f"sc://127.0.0.1:{port}").getOrCreate()
        try:
            register(spark)
            yield spark
        finally:
            spark.stop()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        server.stop()


def test_source_and_sinks_from_a_connect_client(connect, kafka, tmp_path):
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    assert isinstance(connect, ConnectSession)
    source = kafka.topic("connect-in", partitions=2)
    kafka.produce(source, [{"value": f"v{i}".encode(), "partition": i % 2} for i in range(200)])

    # Batch read.
    rows = (
        connect.read.format("trikafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("subscribe", source)
        .load()
        .selectExpr("CAST(value AS STRING) AS v", "partition")
        .collect()
    )
    assert sorted(int(r.v[1:]) for r in rows) == list(range(200))

    # A stream from the source into the exactly-once sink, availableNow.
    target = kafka.topic("connect-out", partitions=2)
    query = (
        connect.readStream.format("trikafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "120")
        .load()
        .selectExpr("UPPER(CAST(value AS STRING)) AS value", "partition")
        .writeStream.format("trikafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("topic", target)
        .option("deliveryGuarantee", "exactly-once")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(QUERY_TIMEOUT)

    # A batch write (at-least-once) beside it.
    connect.createDataFrame([("extra",)], "value string").write.format("trikafka").option(
        "kafka.bootstrap.servers", kafka.bootstrap
    ).option("topic", target).mode("append").save()

    written = (
        connect.read.format("trikafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("subscribe", target)
        .option("kafka.isolation.level", "read_committed")
        .load()
        .selectExpr("CAST(value AS STRING) AS v")
        .collect()
    )
    assert sorted(r.v for r in written) == sorted([f"V{i}" for i in range(200)] + ["extra"])

    # Options are checked over Connect too, with the same message.
    with pytest.raises(Exception, match="option 'deliveryGuarantee' must be one of"):
        connect.createDataFrame([("x",)], "value string").write.format("trikafka").option(
            "kafka.bootstrap.servers", kafka.bootstrap
        ).option("topic", target).option("deliveryGuarantee", "maybe").mode("append").save()
