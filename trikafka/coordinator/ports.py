"""What the coordinators need from the server, as Protocols (the server's side is structural).

Theory of operation
-------------------
The coordinators sit below ``server/`` in the layering: they may not import it. What they
need from it is named here, and ``broker.py`` hands them the server objects that satisfy
these Protocols through their constructors — no ``Any``, no attributes patched in after
the fact:

* :class:`OffsetsPartitionLog` — one partition of ``__consumer_offsets`` to append the
  group coordinator's records to and replay them from (a :class:`~trikafka.log.log.Log`).
* :class:`ProducerIdSource` — the broker's producer-id block (``ProducerIdManager``).
* :class:`TxnMarkerWriter` — writes transaction markers into partitions and lists the
  transactions still open in logs (``ReplicaManager``: Kafka's WriteTxnMarkers, in process).
* :class:`TransactionalOffsetCommitter` — where a committed transaction's offsets go (the
  ``GroupCoordinator``).
* :data:`TransactionVerifier` — what the partition asks before appending a transactional
  batch (``TransactionCoordinator.verify_produce``); the broker gives it to the
  ReplicaManager.
"""

from __future__ import annotations

from typing import Protocol

__all__ = [
    "OffsetsPartitionLog",
    "ProducerIdSource",
    "RecordsRead",
    "TransactionVerifier",
    "TransactionalOffsetCommitter",
    "TxnMarkerWriter",
]

class TransactionVerifier(Protocol):
    """(transactional id, producer id, epoch, topic, partition) → raises KafkaProtocolError
    unless the partition is in that producer's ongoing transaction; ``add_partition``
    (Produce v12+, KIP-890 part 2) adds it first."""

    def __call__(
        self, transactional_id: str | None, producer_id: int, epoch: int, topic: str, partition: int,
        *, add_partition: bool = False,
    ) -> None: ...


class RecordsRead(Protocol):
    @property
    def records(self) -> bytes: ...


class OffsetsPartitionLog(Protocol):
    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    def append(self, batches: bytearray, *, leader_epoch: int, log_append_time_ms: int | None = None) -> object: ...

    def read(self, offset: int, max_bytes: int) -> RecordsRead: ...

    def flush(self) -> None:
        """Make everything appended so far durable (fsync)."""
        ...


class ProducerIdSource(Protocol):
    def next_id(self) -> int: ...


class TxnMarkerWriter(Protocol):
    async def write_txn_marker(
        self,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        *,
        commit: bool,
        coordinator_epoch: int,
        now_ms: int,
    ) -> bool:
        """Append an end-transaction marker; False if the partition is gone."""
        ...

    def open_transactions(self) -> list[tuple[str, int, int, int]]:
        """(topic, partition, producer id, epoch) of every transaction open in a log."""
        ...


class TransactionalOffsetCommitter(Protocol):
    def commit_transactional_offsets(
        self, group_id: str, offsets: dict[tuple[str, int], tuple[int, int, str | None]]
    ) -> None: ...
