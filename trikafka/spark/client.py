"""The small Kafka client interface the Spark source and sink are written against.

Three roles, three objects, all built from a plain dict of Kafka client properties
(``bootstrap.servers``, ``security.protocol``, ``isolation.level``, …):

- :class:`KafkaAdmin` on the driver: topic metadata and offset look-ups, to plan batches;
- :class:`KafkaReader` in Spark's Python workers: the records of one offset range;
- :class:`KafkaWriter` in Spark's Python workers: produce, then flush and report failures;
- :class:`KafkaTransactionalWriter` in Spark's Python workers: the same inside one Kafka
  transaction per task, with the task's batch marker committed in it (exactly-once sink).

:class:`KafkaClients` builds them. The implementation is chosen by a ``module:attribute``
string (the source/sink option ``trikafka.clients``, default
``trikafka.spark.confluent:ConfluentClients``, librdkafka through confluent-kafka), because
Spark pickles readers and writers to its workers: a name travels, a live connection does not.
Policy (what a lost offset means, how ranges are planned) stays out of the clients.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Protocol

import attrs

# The client's own errors, one type per meaning: a request failed (the message names the Kafka
# error), and an offset Kafka no longer (or not yet) has (``partitions``: offset by partition).
from trikafka.client import KafkaClientError, OffsetOutOfRangeError
from trikafka.spark.offsets import Offsets, TopicPartition

__all__ = [
    "KafkaAdmin",
    "KafkaClientError",
    "KafkaClients",
    "KafkaProduceError",
    "KafkaReader",
    "KafkaTransactionalWriter",
    "KafkaWriter",
    "OffsetOutOfRangeError",
    "ReadLimits",
    "RecordChunk",
    "load_clients",
]


class KafkaProduceError(KafkaClientError):
    """Records could not be delivered; ``errors`` maps each Kafka error name to a count."""

    def __init__(self, message: str, errors: Mapping[str, int]) -> None:
        super().__init__(message)
        self.errors = dict(errors)


@attrs.define
class RecordChunk:
    """Consecutive records of one partition, column by column (ready for Arrow)."""

    keys: list[bytes | None] = attrs.Factory(list)
    values: list[bytes | None] = attrs.Factory(list)
    offsets: list[int] = attrs.Factory(list)
    timestamps: list[int] = attrs.Factory(list)  # milliseconds since the epoch
    timestamp_types: list[int] = attrs.Factory(list)  # Kafka's ids: 0 CreateTime, 1 LogAppendTime
    headers: list[list[tuple[str, bytes | None]] | None] | None = None

    def __len__(self) -> int:
        return len(self.offsets)


class KafkaAdmin(Protocol):
    def topics(self) -> dict[str, int]:
        """Every topic the cluster has, with its number of partitions."""
        ...

    def earliest(self, partitions: Iterable[TopicPartition]) -> Offsets: ...

    def latest(self, partitions: Iterable[TopicPartition]) -> Offsets:
        """The high watermark, or the last stable offset under ``read_committed``."""
        ...

    def for_timestamps(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]: ...

    def close(self) -> None: ...


@attrs.frozen(kw_only=True)
class ReadLimits:
    """How a :class:`KafkaReader` reads one range: at most ``max_records`` a chunk, headers
    only ``with_headers``, giving up after ``poll_timeout_ms`` without progress."""

    max_records: int
    with_headers: bool
    poll_timeout_ms: int


class KafkaReader(Protocol):
    def read(
        self, topic_partition: TopicPartition, start: int, until: int, limits: ReadLimits
    ) -> Iterator[RecordChunk]:
        """The records with offsets in ``[start, until)``, in order, in chunks.

        Offsets may have gaps (transaction markers, aborted records under read_committed,
        compacted records). Raises :class:`OffsetOutOfRangeError` when Kafka no longer has
        an offset, :class:`KafkaClientError` when no progress is made for ``poll_timeout_ms``.
        """
        ...

    def watermarks(self, topic_partition: TopicPartition) -> tuple[int, int]:
        """``(earliest, latest)`` offsets of the partition now."""
        ...


class KafkaWriter(Protocol):
    def write(
        self,
        topics: Sequence[str],
        keys: Sequence[bytes | str | None],
        values: Sequence[bytes | str | None],
        headers: Sequence[Sequence[tuple[str, bytes | None]] | None] | None,
        partitions: Sequence[int | None] | None,
    ) -> None:
        """Queue records; may raise :class:`KafkaProduceError` early for earlier failures."""
        ...

    def flush(self) -> int:
        """Wait until every queued record is acknowledged; return how many were written.

        Raises :class:`KafkaProduceError` naming the Kafka errors if any record failed.
        """
        ...

    def abort(self) -> None:
        """Drop what is still queued and forget failures: the task failed, the next one is
        not to inherit them (records already sent may still arrive: at-least-once)."""
        ...


class KafkaTransactionalWriter(KafkaWriter, Protocol):
    """One transactional producer (``transactional.id``) and its marker group.

    The marker of a task is the offset ``batch_id + 1`` committed for partition 0 of a
    topic it writes, in the consumer group named like the transactional id, inside the
    transaction that carries the task's records (Kafka's TxnOffsetCommit): the records and
    the marker become visible together or not at all.
    """

    def init(self) -> None:
        """``InitProducerId`` for the id: fences every earlier producer of it and aborts (or
        completes) the transaction it left open."""
        ...

    def committed_batch(self, marker_topic: str) -> int | None:
        """The last batch id whose transaction committed under this id, ``None`` if none."""
        ...

    def begin(self) -> None: ...

    def commit(self, batch_id: int, marker_topic: str) -> int:
        """Flush, add the marker, commit the transaction; return how many records it holds.

        Raises :class:`KafkaProduceError` (records refused) or :class:`KafkaClientError`
        (the transaction could not commit: fenced, timed out, …) after aborting it.
        """
        ...

    def close(self) -> None: ...


class KafkaClients(Protocol):
    def admin(self, config: Mapping[str, str]) -> KafkaAdmin: ...

    def reader(self, config: Mapping[str, str]) -> KafkaReader: ...

    def writer(self, config: Mapping[str, str]) -> KafkaWriter: ...

    def transactional_writer(self, config: Mapping[str, str], transactional_id: str) -> KafkaTransactionalWriter: ...


def load_clients(name: str) -> KafkaClients:
    """The :class:`KafkaClients` named ``module:attribute`` (a class is instantiated)."""
    module_name, _, attribute = name.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"option 'trikafka.clients' must look like 'package.module:Name', got {name!r}")
    target = getattr(importlib.import_module(module_name), attribute)
    return target() if isinstance(target, type) else target
