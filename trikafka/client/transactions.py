"""Producer identity and transaction state (Java's ``TransactionManager``), sans-IO.

Holds the producer id and epoch (from InitProducerId), the next sequence number per partition
(idempotence: the broker drops a batch whose sequence it has seen), and — for a transactional
producer — the transaction's state and the partitions and group offsets it has touched.

States and legal transitions, Java's names and rules::

    UNINITIALIZED ──init──► READY ──begin──► IN_TRANSACTION ──commit──► COMMITTING_TRANSACTION ─► READY
                                               │   └─(a send failed)─► ABORTABLE_ERROR
                                               └──abort──► ABORTING_TRANSACTION ─► READY
    ABORTABLE_ERROR ──abort──► ABORTING_TRANSACTION;   any ──fenced──► FATAL_ERROR (close only)

An illegal transition raises :class:`TransactionStateError` naming state and event.
"""

from __future__ import annotations

from trikafka.client.cluster import TopicPartition
from trikafka.client.errors import ProducerFencedError

__all__ = ["TransactionManager", "TransactionStateError"]

INT32_MAX = 2**31 - 1

TRANSITIONS: dict[str, frozenset[str]] = {
    "UNINITIALIZED": frozenset({"READY", "FATAL_ERROR"}),
    "READY": frozenset({"IN_TRANSACTION", "READY", "FATAL_ERROR"}),
    "IN_TRANSACTION": frozenset({"COMMITTING_TRANSACTION", "ABORTING_TRANSACTION", "ABORTABLE_ERROR", "FATAL_ERROR"}),
    "COMMITTING_TRANSACTION": frozenset({"READY", "ABORTABLE_ERROR", "FATAL_ERROR"}),
    "ABORTING_TRANSACTION": frozenset({"READY", "FATAL_ERROR"}),
    "ABORTABLE_ERROR": frozenset({"ABORTING_TRANSACTION", "ABORTABLE_ERROR", "FATAL_ERROR"}),
    "FATAL_ERROR": frozenset({"FATAL_ERROR"}),
}


class TransactionStateError(Exception):
    """A transactional call made in a state that does not allow it (Java's
    IllegalStateException), or any call after a fatal error."""


class TransactionManager:
    def __init__(self, transactional_id: str | None, idempotent: bool) -> None:
        self.transactional_id = transactional_id
        self.idempotent = idempotent
        self.producer_id = -1
        self.epoch = -1
        self.state = "UNINITIALIZED"
        self.sequences: dict[TopicPartition, int] = {}
        self.partitions: set[TopicPartition] = set()  # added to the current transaction
        self.error: BaseException | None = None

    @property
    def transactional(self) -> bool:
        return self.transactional_id is not None

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    def transition(self, target: str, event: str, error: BaseException | None = None) -> None:
        if target not in TRANSITIONS[self.state]:
            if self.state == "FATAL_ERROR" and self.error is not None:
                raise TransactionStateError(f"cannot {event}: the producer failed fatally ({self.error})")
            raise TransactionStateError(f"cannot {event} in state {self.state}")
        self.state = target
        if error is not None:
            self.error = error

    def set_producer(self, producer_id: int, epoch: int) -> None:
        """A new identity: sequences restart at 0 for every partition."""
        self.producer_id = producer_id
        self.epoch = epoch
        self.sequences.clear()
        if self.state == "UNINITIALIZED":
            self.transition("READY", "initialise")

    def next_sequence(self, tp: TopicPartition, count: int) -> int:
        """The base sequence for a new batch of ``count`` records (wraps at int32 max)."""
        base = self.sequences.get(tp, 0)
        self.sequences[tp] = (base + count) % (INT32_MAX + 1)
        return base

    def begin(self) -> None:
        if not self.transactional:
            raise TransactionStateError("transactions need transactional.id")
        self.transition("IN_TRANSACTION", "begin a transaction")
        self.partitions.clear()

    def check_can_send(self) -> None:
        if self.state == "FATAL_ERROR":
            raise TransactionStateError(f"the producer failed fatally: {self.error}")
        if self.transactional and self.state != "IN_TRANSACTION":
            if self.state == "ABORTABLE_ERROR":
                raise TransactionStateError(f"the transaction must be aborted: {self.error}")
            raise TransactionStateError(
                f"a transactional producer sends inside a transaction, not in state {self.state}"
            )

    def fail(self, error: BaseException) -> None:
        """A send or request failed: fatal when fenced, else the transaction must abort."""
        if isinstance(error, ProducerFencedError):
            self.state = "FATAL_ERROR"
            self.error = error
        elif self.transactional and self.state in ("IN_TRANSACTION", "COMMITTING_TRANSACTION"):
            self.state = "ABORTABLE_ERROR"
            self.error = error

    def finished(self) -> None:
        """EndTxn succeeded."""
        self.transition("READY", "finish the transaction")
        self.partitions.clear()
        self.error = None

    def new_partitions(self, tps: list[TopicPartition]) -> list[TopicPartition]:
        return [tp for tp in tps if tp not in self.partitions]
