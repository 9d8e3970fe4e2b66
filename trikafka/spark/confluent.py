"""The Kafka clients of the Spark source and sink, on confluent-kafka (librdkafka).

Why these settings:

- The consumer only ever uses ``assign()`` with explicit offsets and never commits: Spark keeps
  the offsets in its checkpoint, like Spark's own Kafka source. librdkafka insists on a
  ``group.id`` even so; it is set (Spark's ``spark-kafka-source-<uuid>`` scheme) and never
  joined, so brokers without consumer groups work.
- ``auto.offset.reset=error`` turns a deleted offset into an error event the source turns
  into its data-loss policy, instead of librdkafka silently jumping.
- ``isolation.level`` defaults to ``read_uncommitted``, the Java client's (and so Spark's)
  default; librdkafka's own default is ``read_committed``.
- A range is done when the consumer's position reaches its end, not when a record with the
  last offset arrives: transaction markers and aborted records leave gaps in the offsets.
- The producer defaults to ``acks=all`` with idempotence, the Java producer's defaults since
  Kafka 3.0, and to the ``murmur2_random`` partitioner, the Java producer's hash, so a key lands
  in the same partition whichever client wrote it.
- Spark reuses Python worker processes, so one consumer and one producer per configuration
  are kept per process (like Spark's consumer and producer caches) and created lazily: readers
  and writers are pickled to the workers, live clients are not.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from trikafka.spark.client import (
    KafkaClientError,
    OffsetOutOfRangeError,
    ReadLimits,
    RecordChunk,
)
from trikafka.spark.offsets import Offsets, TopicPartition
from trikafka.spark.producers import (
    ConfluentTransactionalWriter,
    ConfluentWriter,
    kafka_error_name,
    librdkafka_log,
)

__all__ = [
    "ConfluentAdmin",
    "ConfluentClients",
    "ConfluentReader",
    "ConfluentTransactionalWriter",
    "ConfluentWriter",
    "kafka_error_name",
]

log = logging.getLogger(__name__)

#: Seconds an admin request may take (the Java admin client's default.api.timeout.ms).
ADMIN_TIMEOUT = 60.0
#: Seconds one ``consume`` call waits for a full chunk before the position is checked.
CONSUME_WAIT = 0.2

_CONSUMER_ONLY = {"isolation.level", "group.id"}


def _raise_for(error: Any, what: str) -> None:
    raise KafkaClientError(f"{what} failed: {kafka_error_name(error)}")


class ConfluentAdmin:
    """Metadata and offsets for the driver (one ListOffsets per leader, not per partition)."""

    def __init__(self, config: Mapping[str, str]) -> None:
        from confluent_kafka import IsolationLevel
        from confluent_kafka.admin import AdminClient

        self._isolation = (
            IsolationLevel.READ_COMMITTED
            if config.get("isolation.level") == "read_committed"
            else IsolationLevel.READ_UNCOMMITTED
        )
        self._admin = AdminClient(
            {"logger": librdkafka_log, **{k: v for k, v in config.items() if k not in _CONSUMER_ONLY}}  # type: ignore[dict-item]  # a Logger: documented, not in the stub
        )

    def topics(self) -> dict[str, int]:
        from confluent_kafka import KafkaException

        try:
            metadata = self._admin.list_topics(timeout=ADMIN_TIMEOUT)
        except KafkaException as exc:
            _raise_for(exc.args[0], "Metadata")
        return {
            name: len(topic.partitions)
            for name, topic in metadata.topics.items()
            if topic.error is None and topic.partitions
        }

    def _list_offsets(self, specs: Mapping[TopicPartition, Any], what: str) -> dict[TopicPartition, int]:
        from confluent_kafka import TopicPartition as RdTopicPartition

        if not specs:
            return {}
        futures = self._admin.list_offsets(
            {RdTopicPartition(tp.topic, tp.partition): spec for tp, spec in specs.items()},
            isolation_level=self._isolation,
            request_timeout=ADMIN_TIMEOUT,
        )
        from confluent_kafka import KafkaError, KafkaException

        result: dict[TopicPartition, int] = {}
        for rd, future in futures.items():
            try:
                result[TopicPartition(rd.topic, rd.partition)] = future.result().offset
            except KafkaException as exc:
                error = exc.args[0]
                if error.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION):
                    continue  # deleted meanwhile: absent from the answer, the caller decides
                _raise_for(error, f"ListOffsets ({what}) of {rd.topic}-{rd.partition}")
        return result

    def earliest(self, partitions: Iterable[TopicPartition]) -> Offsets:
        from confluent_kafka.admin import OffsetSpec

        return self._list_offsets({tp: OffsetSpec.earliest() for tp in partitions}, "earliest")

    def latest(self, partitions: Iterable[TopicPartition]) -> Offsets:
        from confluent_kafka.admin import OffsetSpec

        return self._list_offsets({tp: OffsetSpec.latest() for tp in partitions}, "latest")

    def for_timestamps(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        from confluent_kafka.admin import OffsetSpec

        found = self._list_offsets(
            {tp: OffsetSpec.for_timestamp(ts) for tp, ts in timestamps.items()}, "by timestamp"
        )
        return {tp: None if offset < 0 else offset for tp, offset in found.items()}

    def close(self) -> None:
        self._admin = None  # type: ignore[assignment]  # dropped: a call after close() fails on None


class ConfluentReader:
    """Reads offset ranges with one assign-only consumer, reused range after range."""

    def __init__(self, config: Mapping[str, str]) -> None:
        self._config = {
            "logger": librdkafka_log,
            **config,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "error",
            "enable.partition.eof": False,
        }
        self._config.setdefault("isolation.level", "read_uncommitted")
        self._consumer: Any = None

    def _get_consumer(self) -> Any:
        if self._consumer is None:
            from confluent_kafka import Consumer

            self._consumer = Consumer(self._config)
        return self._consumer

    def read(
        self, topic_partition: TopicPartition, start: int, until: int, limits: ReadLimits
    ) -> Iterator[RecordChunk]:
        from confluent_kafka import KafkaError
        from confluent_kafka import TopicPartition as RdTopicPartition

        max_records, with_headers, poll_timeout_ms = limits.max_records, limits.with_headers, limits.poll_timeout_ms

        consumer = self._get_consumer()
        topic, partition = topic_partition
        consumer.assign([RdTopicPartition(topic, partition, start)])
        try:
            position = start
            last_progress = time.monotonic()
            while position < until:
                messages = consumer.consume(min(until - position, max_records), CONSUME_WAIT)
                chunk = RecordChunk(headers=[] if with_headers else None)
                for message in messages:
                    error = message.error()
                    if error is not None:
                        code = error.code()
                        if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                            offset = message.offset()
                            raise OffsetOutOfRangeError(
                                # spark's TopicPartition: the client's fields, as a tuple
                                {topic_partition: offset if offset is not None and offset >= 0 else position}  # type: ignore[dict-item]  # same fields
                            )
                        if error.fatal() or code in (
                            KafkaError.UNKNOWN_TOPIC_OR_PART,
                            KafkaError._UNKNOWN_PARTITION,
                            KafkaError._UNKNOWN_TOPIC,
                            KafkaError.TOPIC_AUTHORIZATION_FAILED,
                        ):
                            _raise_for(error, f"Fetch of {topic_partition}")
                        log.debug("consumer: %s (retrying)", kafka_error_name(error))
                        continue
                    if message.topic() != topic or message.partition() != partition:
                        continue  # left over from an earlier assignment
                    offset = message.offset()
                    if offset < position:
                        continue
                    if offset >= until:
                        position = until
                        break
                    chunk.keys.append(message.key())
                    chunk.values.append(message.value())
                    chunk.offsets.append(offset)
                    kind, timestamp = message.timestamp()
                    chunk.timestamps.append(timestamp)
                    chunk.timestamp_types.append(kind - 1)  # librdkafka 1/2 → Kafka 0/1; none → -1
                    if chunk.headers is not None:
                        chunk.headers.append(message.headers())
                    position = offset + 1
                if len(chunk):
                    last_progress = time.monotonic()
                    yield chunk
                    continue
                if position >= until:
                    break
                # No record: the rest of the range may be a gap (markers, aborted records).
                (current,) = consumer.position([RdTopicPartition(topic, partition)])
                if current.offset is not None and current.offset > position:
                    position = current.offset
                    last_progress = time.monotonic()
                elif (time.monotonic() - last_progress) * 1000 > poll_timeout_ms:
                    raise KafkaClientError(
                        f"Failed to get records for {topic_partition} (topic {topic!r}, partition "
                        f"{partition}) at offset {position} (range ends at {until}) after polling "
                        f"for {poll_timeout_ms} ms"
                    )
        finally:
            consumer.unassign()

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def watermarks(self, topic_partition: TopicPartition) -> tuple[int, int]:
        from confluent_kafka import KafkaException
        from confluent_kafka import TopicPartition as RdTopicPartition

        try:
            low, high = self._get_consumer().get_watermark_offsets(
                RdTopicPartition(*topic_partition), timeout=ADMIN_TIMEOUT, cached=False
            )
        except KafkaException as exc:
            _raise_for(exc.args[0], f"ListOffsets of {topic_partition}")
        return low, high


class ConfluentClients:
    """:class:`~trikafka.spark.client.KafkaClients` on confluent-kafka, cached per process.

    Each query has its own consumer group id, so a long-lived worker would gather consumers
    query after query: the cache keeps the :data:`CAPACITY` most recently used of each kind.
    """

    CAPACITY = 8
    _lock = threading.Lock()
    _readers: dict[tuple, ConfluentReader] = {}
    _writers: dict[tuple, ConfluentWriter] = {}

    def admin(self, config: Mapping[str, str]) -> ConfluentAdmin:
        return ConfluentAdmin(config)

    def reader(self, config: Mapping[str, str]) -> ConfluentReader:
        return self._cached(self._readers, config, ConfluentReader)

    def writer(self, config: Mapping[str, str]) -> ConfluentWriter:
        return self._cached(self._writers, config, ConfluentWriter)

    def transactional_writer(self, config: Mapping[str, str], transactional_id: str) -> ConfluentTransactionalWriter:
        """A new producer per task: a cached one could have been fenced by another worker."""
        return ConfluentTransactionalWriter(config, transactional_id)

    def _cached(self, cache: dict, config: Mapping[str, str], factory: Any) -> Any:
        key = tuple(sorted((k, str(v)) for k, v in config.items()))
        with self._lock:
            client = cache.pop(key, None) or factory(config)
            cache[key] = client  # most recently used last
            while len(cache) > self.CAPACITY:
                oldest = next(iter(cache))
                cache.pop(oldest).close()
            return client
