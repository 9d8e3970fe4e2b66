"""The ``trikafka`` Spark data source: Kafka topics as a streaming or batch DataFrame.

Spark runs a Python data source in three kinds of process, and the objects here are built
for that:

- the **planner** (a long-lived Python process on the driver, one per streaming query)
  holds a :class:`KafkaStreamReader` that answers ``initialOffset`` / ``latestOffset`` /
  ``partitions`` with an admin client, opened on first use and kept;
- for a batch read, ``partitions()`` of :class:`KafkaBatchReader` runs once on the driver;
- the **workers** run ``read(partition)`` on *another*, pickled copy of the reader, which has
  seen none of the planner's state: every setting a read needs (client properties, group id,
  headers, data-loss policy) travels inside :class:`KafkaInputPartition`.

One input partition is one offset range of one topic-partition (several, split, with
``minPartitions``). Records go to Spark as Arrow record batches built column by column, in
exactly the Arrow schema Spark derives from the output schema (Spark rejects any other).
Offsets are Spark's Kafka checkpoint JSON, see :mod:`trikafka.spark.offsets`.

Spark calls ``stop()`` only sometimes; nothing here relies on it (librdkafka's threads end
with the process).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Iterator
from typing import Any

import attrs
import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from trikafka.spark.client import KafkaAdmin, OffsetOutOfRangeError, ReadLimits, RecordChunk, load_clients
from trikafka.spark.offsets import (
    OffsetRange,
    Offsets,
    TopicPartition,
    delay_batch,
    offsets_from_json,
    offsets_to_json,
    plan_ranges,
    rate_limit,
    resolve_offsets,
    resume_after_out_of_range,
    split_ranges,
)
from trikafka.spark.options import KafkaOptionError, SourceOptions
from trikafka.spark.schema import kafka_schema

__all__ = [
    "KafkaBatchReader",
    "KafkaInputPartition",
    "KafkaStreamReader",
    "ReadSettings",
    "read_partition",
]

log = logging.getLogger(__name__)

#: Records per Arrow batch handed to Spark (Spark's ``arrow.maxRecordsPerBatch`` default).
MAX_RECORDS_PER_BATCH = 10_000
#: Attempts to resume a range after Kafka answers "offset out of range" before giving up.
MAX_RESUMES = 5

@functools.cache
def _arrow_schema(include_headers: bool) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(kafka_schema(include_headers), timezone="UTC")


# --- what a read needs, travelling in the partition ------------------------------------------


@attrs.frozen
class ReadSettings:
    clients: str
    client_config: dict[str, str]
    include_headers: bool
    fail_on_data_loss: bool
    poll_timeout_ms: int
    max_records_per_batch: int = MAX_RECORDS_PER_BATCH

    @classmethod
    def of(cls, options: SourceOptions, group_id: str) -> ReadSettings:
        config = dict(options.client_config)
        config.setdefault("group.id", group_id)
        config.setdefault("isolation.level", options.isolation_level)
        return cls(
            clients=options.clients,
            client_config=config,
            include_headers=options.include_headers,
            fail_on_data_loss=options.fail_on_data_loss,
            poll_timeout_ms=options.poll_timeout_ms,
        )


class KafkaInputPartition(InputPartition):
    """``[from_offset, until_offset)`` of one topic-partition, and how to read it."""

    def __init__(self, offset_range: OffsetRange, settings: ReadSettings) -> None:
        super().__init__(None)
        self.topic, self.partition = offset_range.topic_partition
        self.from_offset = offset_range.from_offset
        self.until_offset = offset_range.until_offset
        self.settings = settings

    def __repr__(self) -> str:
        return (
            f"KafkaInputPartition({self.topic}-{self.partition} "
            f"[{self.from_offset}, {self.until_offset}))"
        )


def _to_record_batch(chunk: RecordChunk, tp: TopicPartition, schema: pa.Schema) -> pa.RecordBatch:
    n = len(chunk)
    arrays = [
        pa.array(chunk.keys, pa.binary()),
        pa.array(chunk.values, pa.binary()),
        pa.array([tp.topic] * n, pa.string()),
        pa.array([tp.partition] * n, pa.int32()),
        pa.array(chunk.offsets, pa.int64()),
        pa.array(chunk.timestamps, pa.timestamp("ms", tz="UTC")).cast(schema.field("timestamp").type),
        pa.array(chunk.timestamp_types, pa.int32()),
    ]
    if chunk.headers is not None:
        arrays.append(
            pa.array(
                [
                    [{"key": k, "value": v} for k, v in headers] if headers else None
                    for headers in chunk.headers
                ],
                schema.field("headers").type,
            )
        )
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def read_partition(partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """The records of one :class:`KafkaInputPartition` as Arrow batches (in a Spark worker).

    Offsets Kafka no longer has are data loss: an error naming topic, partition and offsets,
    or — with ``failOnDataLoss=false`` — a warning and a jump to the earliest offset left.
    """
    if not isinstance(partition, KafkaInputPartition):
        return  # Spark's placeholder when a batch read planned no partition
    settings = partition.settings
    reader = load_clients(settings.clients).reader(settings.client_config)
    tp = TopicPartition(partition.topic, partition.partition)
    schema = _arrow_schema(settings.include_headers)
    start, until = partition.from_offset, partition.until_offset
    limits = ReadLimits(max_records=settings.max_records_per_batch, with_headers=settings.include_headers,
                        poll_timeout_ms=settings.poll_timeout_ms)
    resumes = 0
    while start < until:
        try:
            for chunk in reader.read(tp, start, until, limits):
                start = chunk.offsets[-1] + 1
                yield _to_record_batch(chunk, tp, schema)
            return
        except OffsetOutOfRangeError as exc:
            resumes += 1
            if resumes > MAX_RESUMES:
                raise
            earliest, latest = reader.watermarks(tp)
            start, warning = resume_after_out_of_range(
                tp,
                max(exc.partitions.get(tp, start), start),  # type: ignore[call-overload]  # spark's TopicPartition: same fields
                until,
                earliest,
                latest,
                fail_on_data_loss=settings.fail_on_data_loss,
            )
            if warning:
                log.warning("%s", warning)


class _Planner:
    """The driver side shared by the batch and the streaming reader: one admin client."""

    def __init__(self, options: SourceOptions, group_id: str) -> None:
        self.options = options
        self.settings = ReadSettings.of(options, group_id)
        self._admin: KafkaAdmin | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_admin"] = None  # pickled to the workers: live clients stay behind
        return state

    @property
    def admin(self) -> KafkaAdmin:
        if self._admin is None:
            self._admin = load_clients(self.options.clients).admin(self.options.client_config)
        return self._admin

    def current_partitions(self) -> set[TopicPartition]:
        return self.options.subscription.partitions(self.admin.topics())

    def resolve(self, spec: Any, partitions: set[TopicPartition]) -> Offsets:
        try:
            return resolve_offsets(spec, partitions, self.admin)
        except ValueError as exc:
            raise KafkaOptionError(str(exc)) from None

    def input_partitions(self, ranges: list[OffsetRange]) -> list[KafkaInputPartition]:
        return [
            KafkaInputPartition(r, self.settings)
            for r in split_ranges(ranges, self.options.min_partitions)
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(partition)

    def stop(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None


class KafkaBatchReader(_Planner, DataSourceReader):
    """``spark.read.format("trikafka")``: from ``startingOffsets`` to ``endingOffsets``."""

    def partitions(self) -> list[InputPartition]:
        try:
            partitions = self.current_partitions()
            start = self.resolve(self.options.starting, partitions)
            assert self.options.ending is not None
            end = self.resolve(self.options.ending, partitions)
        finally:
            self.stop()
        ranges = []
        for tp in sorted(partitions):
            begin, until = start[tp], end[tp]
            if until < begin:
                raise KafkaOptionError(
                    f"Beginning offset {begin} is after the ending offset {until} for topic "
                    f"{tp.topic} partition {tp.partition}. You either provided an invalid "
                    "fromOffset, or the Kafka topic has been damaged"
                )
            ranges.append(OffsetRange(tp, begin, until))
        return list(self.input_partitions(ranges))


class KafkaStreamReader(_Planner, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("trikafka")``: micro-batches of offset ranges.

    ``minOffsetsPerTrigger``: PySpark's :class:`ReadMinRows` has no delay and there is no
    composite limit, so the limits are applied here from the options, as Spark's
    ``KafkaMicroBatchStream`` does; Spark hands back what :meth:`getDefaultReadLimit` said,
    or ``ReadAllAvailable`` (which wins, as in Spark). With ``availableNow`` the minimum is
    not applied: the query is to read what is there and stop, not to wait for more.
    """

    def __init__(self, options: SourceOptions, group_id: str) -> None:
        super().__init__(options, group_id)
        self._available_now: Offsets | None = None
        self._latest: Offsets | None = None
        self._last_trigger_ms: float | None = None
        #: Milliseconds, for ``maxTriggerDelay`` (monotonic: a wall clock may step back).
        self.clock = lambda: time.monotonic() * 1000

    def initialOffset(self) -> dict:
        partitions = self.current_partitions()
        return offsets_to_json(self.resolve(self.options.starting, partitions))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        limit = self.options.max_offsets_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = self.admin.latest(self.current_partitions())

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        if self._available_now is not None:
            latest = self._available_now
        else:
            latest = self.admin.latest(self.current_partitions())
        self._latest = latest
        if isinstance(limit, ReadAllAvailable):
            return offsets_to_json(latest)
        begin = offsets_from_json(start)
        minimum = self.options.min_offsets_per_trigger
        if minimum is not None and self._available_now is None:
            now = self.clock()
            if delay_batch(
                minimum,
                begin,
                latest,
                now_ms=now,
                last_trigger_ms=self._last_trigger_ms,
                max_delay_ms=self.options.max_trigger_delay_ms,
            ):
                log.debug("fewer than minOffsetsPerTrigger=%d new offsets: delaying the batch", minimum)
                return start
            self._last_trigger_ms = now
        maximum = limit.max_rows if isinstance(limit, ReadMaxRows) else self.options.max_offsets_per_trigger
        if maximum is not None:
            return offsets_to_json(rate_limit(maximum, begin, latest, self.admin.earliest))
        return offsets_to_json(latest)

    def reportLatestOffset(self) -> dict | None:
        return None if self._latest is None else offsets_to_json(self._latest)

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        start_offsets = offsets_from_json(start)
        end_offsets = offsets_from_json(end)
        new = [tp for tp in end_offsets if tp not in start_offsets]
        earliest_of_new = self.admin.earliest(new) if new else {}
        ranges, warnings = plan_ranges(
            start_offsets,
            end_offsets,
            earliest_of_new,
            fail_on_data_loss=self.options.fail_on_data_loss,
        )
        for warning in warnings:
            log.warning("%s", warning)
        return list(self.input_partitions(ranges))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: offsets live in Spark's checkpoint, never in a consumer group."""
