"""``format("trikafka")``: the one DataSource class Spark registers, joining source and sink.

It lives apart from :mod:`trikafka.spark.source` and :mod:`trikafka.spark.sink` so that the
reader side and the writer side never import each other; this module imports both.
"""

from __future__ import annotations

import uuid

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from trikafka.spark.options import KafkaOptionError, SinkOptions, SourceOptions
from trikafka.spark.schema import kafka_schema
from trikafka.spark.sink import KafkaBatchWriter, KafkaStreamWriter, WritePlan
from trikafka.spark.source import KafkaBatchReader, KafkaStreamReader

__all__ = ["KafkaDataSource"]


class KafkaDataSource(DataSource):
    """``format("trikafka")``: Spark's Kafka source and sink, spoken by a Python client."""

    @classmethod
    def name(cls) -> str:
        return "trikafka"

    def schema(self) -> StructType:
        include = str(self.options.get("includeHeaders", "false")).strip().lower() == "true"
        return kafka_schema(include)

    def _source_options(self, schema: StructType, *, streaming: bool) -> SourceOptions:
        options = SourceOptions.parse(self.options, streaming=streaming)
        if schema != kafka_schema(options.include_headers):
            raise KafkaOptionError(
                "Kafka source has a fixed schema and cannot be set with a custom one "
                f"(expected {kafka_schema(options.include_headers).simpleString()}, "
                f"got {schema.simpleString()})"
            )
        return options

    def reader(self, schema: StructType) -> DataSourceReader:
        options = self._source_options(schema, streaming=False)
        prefix = self.options.get("groupIdPrefix") or "spark-kafka-relation"
        return KafkaBatchReader(options, f"{prefix}-{uuid.uuid4()}")

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options = self._source_options(schema, streaming=True)
        return KafkaStreamReader(options, f"{options.group_id_prefix}-{uuid.uuid4()}-executor")

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        options = SinkOptions.parse(self.options)
        prefix = options.transactional_id_prefix or f"trikafka-spark-batch-{uuid.uuid4()}"
        return KafkaBatchWriter(options, WritePlan.of(schema, options), prefix)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        options = SinkOptions.parse(self.options)
        return KafkaStreamWriter(options, WritePlan.of(schema, options))


