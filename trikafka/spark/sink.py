"""The ``trikafka`` Spark sink: rows of a DataFrame produced as Kafka records.

Columns as in Spark's Kafka sink: ``value`` (string or binary, required), ``key`` (string or
binary), ``topic`` (string; required unless the ``topic`` option is given, which then wins),
``headers`` (array of struct<key: string, value: binary>) and ``partition`` (int); other
columns are ignored. The layout is checked on the driver when the query starts
(:class:`WritePlan`); each Spark task then produces its rows through the Kafka client with
acks=all and retries, and waits for every acknowledgement before it reports success. A record
Kafka refuses fails the task with the Kafka error's name (``KAFKA_PRODUCE_FAILED: ...
MESSAGE_TOO_LARGE``).

Like Spark's Kafka sink this is at-least-once by default: a retried task or micro-batch may
write a record twice. With ``deliveryGuarantee=exactly-once`` each task writes its share of a
micro-batch in a Kafka transaction (:func:`write_exactly_once`), so readers with
``isolation.level=read_committed`` see each record once (see ``docs/spark.md`` for the
conditions). Python streaming sinks support the Append and Complete output modes; for Update,
write each micro-batch with ``foreachBatch(lambda df, _: df.write.format("trikafka")...)``.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from typing import Any

import attrs
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import BinaryType, DataType, IntegerType, StringType, StructType

from trikafka.spark.client import KafkaProduceError, KafkaWriter, load_clients
from trikafka.spark.options import KafkaOptionError, SinkOptions
from trikafka.spark.schema import HEADERS_TYPE
from trikafka.spark.worker_input import input_complete

__all__ = [
    "DEFAULT_TRANSACTIONAL_ID_PREFIX",
    "KafkaBatchWriter",
    "KafkaCommitMessage",
    "KafkaStreamWriter",
    "WritePlan",
    "write_exactly_once",
]

log = logging.getLogger(__name__)


#: A streaming query's transactional ids: ``<prefix>-<query id>-<Spark partition id>``.
DEFAULT_TRANSACTIONAL_ID_PREFIX = "trikafka-spark"
#: The local properties Spark's micro-batch engine gives every task of a batch.
_QUERY_ID_KEY = "sql.streaming.queryId"
_BATCH_ID_KEY = "streaming.sql.batchId"


@attrs.frozen
class KafkaCommitMessage(WriterCommitMessage):
    records: int
    #: exactly-once: the task found its batch already committed and wrote nothing.
    skipped: bool = False


def _same_type(actual: DataType, expected: DataType) -> bool:
    """Equal up to nullability (Spark's Kafka sink does not care about it)."""
    def strip(t: Any) -> Any:
        return t.jsonValue() if hasattr(t, "jsonValue") else t

    def drop_nulls(j: Any) -> Any:
        if isinstance(j, dict):
            return {k: drop_nulls(v) for k, v in j.items() if k not in ("nullable", "containsNull", "metadata")}
        if isinstance(j, list):
            return [drop_nulls(v) for v in j]
        return j

    return drop_nulls(strip(actual)) == drop_nulls(strip(expected))


@attrs.frozen
class WritePlan:
    """Which input columns feed which part of a record (their names as Spark spells them)."""

    value: str
    key: str | None = None
    topic: str | None = None
    headers: str | None = None
    partition: str | None = None

    @classmethod
    def of(cls, schema: StructType, options: SinkOptions) -> WritePlan:
        fields = {f.name.lower(): f for f in schema.fields}

        def column(name: str, allowed: tuple[DataType, ...], description: str) -> str | None:
            field = fields.get(name)
            if field is None:
                return None
            if not any(_same_type(field.dataType, t) for t in allowed):
                raise KafkaOptionError(
                    f"{name} attribute type must be {description}, got {field.dataType.simpleString()}"
                )
            return field.name

        value = column("value", (StringType(), BinaryType()), "a string or binary")
        if value is None:
            raise KafkaOptionError("Required attribute 'value' not found")
        topic = column("topic", (StringType(),), "a string")
        if topic is None and options.topic is None:
            raise KafkaOptionError(
                "topic option required when no 'topic' attribute is present. Use the topic "
                "option for setting a topic."
            )
        return cls(
            value=value,
            key=column("key", (StringType(), BinaryType()), "a string or binary"),
            topic=None if options.topic is not None else topic,
            headers=column("headers", (HEADERS_TYPE,), "an array of struct<key: string, value: binary>"),
            partition=column("partition", (IntegerType(),), "an int"),
        )


def _write(options: SinkOptions, plan: WritePlan, batches: Iterator[pa.RecordBatch]) -> int:
    writer = load_clients(options.clients).writer(options.client_config)
    try:
        for batch in batches:
            _write_batch(writer, options, plan, batch)
        return writer.flush()
    except BaseException:
        writer.abort()
        raise


def write_exactly_once(
    options: SinkOptions,
    plan: WritePlan,
    batches: Iterator[pa.RecordBatch],
    transactional_id: str,
    batch_id: int,
) -> KafkaCommitMessage:
    """One task's share of batch ``batch_id`` in one transaction of ``transactional_id``.

    InitProducerId fences any earlier attempt of the task (and aborts what it left open).
    The marker is the offset ``batch_id + 1`` committed for partition 0 of the ``topic``
    option's topic — or, with a ``topic`` column, of the smallest topic name among the
    task's rows (row order may differ in a replay; the set of rows may not). With the option
    the marker is checked first, and a task whose batch is already committed writes nothing;
    with a column it is checked once the rows are in the open transaction, which is then
    aborted instead of committed. A task with no rows opens no transaction.
    """
    batches = iter(batches)
    first = next((b for b in batches if b.num_rows), None)
    if first is None:
        return KafkaCommitMessage(0)
    writer = load_clients(options.clients).transactional_writer(options.client_config, transactional_id)

    def committed(topic: str) -> bool:
        done = writer.committed_batch(topic)
        if done is not None and done >= batch_id:
            log.info("%s: batch %d is already committed (up to batch %d): nothing written",
                     transactional_id, batch_id, done)
            return True
        return False

    try:
        writer.init()
        if options.topic is not None and committed(options.topic):
            return KafkaCommitMessage(0, skipped=True)
        writer.begin()
        topics: set[str] = set()
        for batch in itertools.chain([first], batches):
            _write_batch(writer, options, plan, batch)
            if plan.topic is not None:
                topics.update(pc.unique(batch.column(plan.topic)).to_pylist())
        _check_input_complete(transactional_id)
        marker_topic = options.topic if options.topic is not None else min(topics)
        if options.topic is None and committed(marker_topic):
            writer.abort()
            return KafkaCommitMessage(0, skipped=True)
        return KafkaCommitMessage(writer.commit(batch_id, marker_topic))
    except BaseException:
        writer.abort()
        raise
    finally:
        writer.close()


def _check_input_complete(transactional_id: str) -> None:
    """Refuse to commit a partition whose rows stopped early (see :mod:`.worker_input`)."""
    complete = input_complete()
    if complete is None:
        raise RuntimeError(
            "deliveryGuarantee 'exactly-once' cannot tell whether this task received all of its "
            "rows (pyspark's worker input stream was not found): not committing "
            f"{transactional_id}'s transaction"
        )
    if not complete:
        raise RuntimeError(
            f"the task's input ended early (something before the sink failed): transaction of "
            f"{transactional_id} aborted, nothing of it is visible to read_committed readers"
        )


def _task_context() -> TaskContext:
    context = TaskContext.get()
    if context is None:
        raise RuntimeError("deliveryGuarantee 'exactly-once' writes only inside a Spark task")
    return context


def _write_batch(writer: KafkaWriter, options: SinkOptions, plan: WritePlan, batch: pa.RecordBatch) -> None:
    n = batch.num_rows
    if not n:
        return

    def column(name: str | None) -> list | None:
        return None if name is None else batch.column(name).to_pylist()

    if plan.topic is None:
        topics: list = [options.topic] * n
    else:
        topics = column(plan.topic)  # type: ignore[assignment]  # a planned column is there
        if any(t is None for t in topics):
            raise KafkaProduceError(
                "null topic present in the data. Use the topic option for setting a topic.",
                {"NULL_TOPIC": sum(t is None for t in topics)},
            )
    headers = column(plan.headers)
    writer.write(
        topics,
        column(plan.key) or [None] * n,
        column(plan.value),  # type: ignore[arg-type]  # the value column is always planned
        None
        if headers is None
        else [[(h["key"], h["value"]) for h in row] if row else None for row in headers],
        column(plan.partition),
    )


class KafkaBatchWriter(DataSourceArrowWriter):
    """``df.write.format("trikafka")``.

    Exactly-once: transactional ids ``<transactionalIdPrefix>-<Spark partition id>``, batch id
    0. Without the option the prefix is new for every write (``trikafka-spark-batch-<uuid>``),
    which covers retried tasks; with it, running the same write again writes only what did
    not commit before.
    """

    def __init__(self, options: SinkOptions, plan: WritePlan, transactional_id_prefix: str | None = None) -> None:
        self.options = options
        self.plan = plan
        self.transactional_id_prefix = transactional_id_prefix

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
        if not self.options.exactly_once:
            return KafkaCommitMessage(_write(self.options, self.plan, iterator))
        partition = _task_context().partitionId()
        return write_exactly_once(
            self.options, self.plan, iterator, f"{self.transactional_id_prefix}-{partition}", 0
        )

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total = sum(m.records for m in messages if isinstance(m, KafkaCommitMessage))
        log.info("wrote %d record(s) to Kafka", total)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Kafka cannot take records back: what was acknowledged stays (at-least-once)."""


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("trikafka")`` (Append and Complete output modes)."""

    def __init__(self, options: SinkOptions, plan: WritePlan) -> None:
        self.options = options
        self.plan = plan

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
        if not self.options.exactly_once:
            return KafkaCommitMessage(_write(self.options, self.plan, iterator))
        context = _task_context()
        query_id = context.getLocalProperty(_QUERY_ID_KEY)
        batch_id = context.getLocalProperty(_BATCH_ID_KEY)
        if query_id is None or batch_id is None:
            raise RuntimeError(
                f"deliveryGuarantee 'exactly-once': the task has no {_QUERY_ID_KEY!r} or "
                f"{_BATCH_ID_KEY!r} (only micro-batch queries are supported)"
            )
        prefix = self.options.transactional_id_prefix or DEFAULT_TRANSACTIONAL_ID_PREFIX
        return write_exactly_once(
            self.options, self.plan, iterator, f"{prefix}-{query_id}-{context.partitionId()}", int(batch_id)
        )

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        done = [m for m in messages if isinstance(m, KafkaCommitMessage)]
        skipped = sum(m.skipped for m in done)
        log.debug(
            "micro-batch %d: wrote %d record(s) to Kafka%s",
            batchId,
            sum(m.records for m in done),
            f" ({skipped} task(s) found the batch already committed)" if skipped else "",
        )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """At-least-once: Kafka cannot take records back, what was acknowledged stays.
        Exactly-once: a failed task aborted its transaction, or its retry fences it."""
