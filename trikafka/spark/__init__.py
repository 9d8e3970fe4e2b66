"""trikafka for Spark: Spark's Kafka source and sink as a Python data source (PySpark 4).

``format("trikafka")`` reads and writes Kafka topics — on a trikafka broker or any Kafka
cluster — with the option names and the schema of Spark's own Kafka connector, which
pyspark's wheel does not carry::

    from trikafka.spark import spark_session

    spark = spark_session()                     # registers format("trikafka")
    clicks = (spark.readStream.format("trikafka")
              .option("kafka.bootstrap.servers", "127.0.0.1:9092")
              .option("subscribe", "clicks")
              .load())

Needs the ``spark`` extra (pyspark, pyarrow). The names below are imported on first use, so
the pure planning modules (:mod:`trikafka.spark.offsets`, :mod:`trikafka.spark.options`)
work without pyspark.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trikafka.spark.client import KafkaClientError, KafkaProduceError
    from trikafka.spark.datasource import KafkaDataSource
    from trikafka.spark.offsets import KafkaDataLossError
    from trikafka.spark.options import KafkaOptionError
    from trikafka.spark.schema import kafka_schema
    from trikafka.spark.session import configure_environment, register, spark_session

__all__ = [
    "KafkaClientError",
    "KafkaDataLossError",
    "KafkaDataSource",
    "KafkaOptionError",
    "KafkaProduceError",
    "configure_environment",
    "kafka_schema",
    "register",
    "spark_session",
]

_HOMES = {
    "KafkaClientError": "trikafka.spark.client",
    "KafkaProduceError": "trikafka.spark.client",
    "KafkaDataLossError": "trikafka.spark.offsets",
    "KafkaOptionError": "trikafka.spark.options",
    "configure_environment": "trikafka.spark.session",
    "register": "trikafka.spark.session",
    "spark_session": "trikafka.spark.session",
    "KafkaDataSource": "trikafka.spark.datasource",
    "kafka_schema": "trikafka.spark.schema",
}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'trikafka.spark' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
