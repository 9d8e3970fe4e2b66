"""The transaction coordinator's state machine (KIP-98), without trio.

Theory of operation
-------------------
Each transactional id has a :class:`~trikafka.coordinator.transactions.transaction_state.TransactionMetadata`:
its producer id and epoch, the timeout the producer asked for, and a state::

    Empty ──AddPartitions/AddOffsets──► Ongoing ──EndTxn──► PrepareCommit ─markers─► CompleteCommit
      ▲                                   │                 PrepareAbort  ─markers─► CompleteAbort
      └──────────InitProducerId (epoch + 1)┴──── timeout, InitProducerId, restart: fence + abort

:class:`TransactionMachine` makes every decision synchronously and takes ``now_ms`` (first, where a
request's answer depends on it: the shell forwards the rest of the arguments as they come); what
needs the clock or the partitions is an effect in its outbox, which the Trio shell
(:class:`~trikafka.coordinator.transactions.transaction_coordinator.TransactionCoordinator`) drains
after each call: :class:`StartTxnTimer` / :class:`CancelTxnTimer` (the transaction timeout)
and :class:`AbortTxn` (a fenced transaction to abort: markers are the shell's, as they await
the partitions). Ending a transaction is three steps — :meth:`TransactionMachine.prepare_end`,
the markers (shell), :meth:`TransactionMachine.complete_end` — and while it runs the
transaction is *pending*: every request about it gets CONCURRENT_TRANSACTIONS.

* **InitProducerId** hands out the producer id and the next epoch. With a transaction open
  it fences that producer — epoch + 1, abort — and answers CONCURRENT_TRANSACTIONS; the
  client retries and gets the epoch after that. KIP-360: a producer that presents its id and
  epoch gets the next epoch, a retry of a bump the same epoch again, anyone else
  PRODUCER_FENCED. An exhausted epoch moves the id to a new producer id.
* **AddPartitionsToTxn / AddOffsetsToTxn** start a transaction (timer on) and widen it.
* **Produce** of a transactional batch is accepted only for a partition of the producer's
  ongoing transaction, at its current epoch (:meth:`verify_produce`, asked by the partition).
* **TxnOffsetCommit** keeps offsets pending in the transaction; commit hands them to the
  group coordinator, abort drops them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import attrs

from trikafka.coordinator.ports import ProducerIdSource
from trikafka.coordinator.settings import TransactionSettings
from trikafka.coordinator.transactions.transaction_state import (
    NO_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TransactionLog,
    TransactionMetadata,
    TxnState,
    epoch_exhausted,
)
from trikafka.coordinator.transactions.transaction_v2 import (
    bump_at_prepare,
    move_to_next_producer_id,
)
from trikafka.errors import ErrorCode, KafkaProtocolError

__all__ = ["AbortTxn", "CancelTxnTimer", "StartTxnTimer", "TransactionMachine", "TxnEffect"]

log = logging.getLogger("trikafka.coordinator")

PREPARED = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
ONGOING = TxnState.ONGOING
OffsetCommit = tuple[int, int, str | None]


@attrs.frozen
class StartTxnTimer:
    """The transaction began: abort it ``timeout_ms`` from now unless it ends first."""

    transactional_id: str
    timeout_ms: int


@attrs.frozen
class CancelTxnTimer:
    transactional_id: str


@attrs.frozen
class AbortTxn:
    """The producer was fenced with its transaction open: abort it (write the markers)."""

    transactional_id: str


TxnEffect = StartTxnTimer | CancelTxnTimer | AbortTxn


class TransactionMachine:
    def __init__(self, settings: TransactionSettings, store: TransactionLog, producer_ids: ProducerIdSource) -> None:
        self.settings = settings
        self.store = store
        self.producer_ids = producer_ids
        self.txns: dict[str, TransactionMetadata] = store.load()
        self.by_producer: dict[int, TransactionMetadata] = {t.producer_id: t for t in self.txns.values()}
        self.loading = True
        self.outbox: list[TxnEffect] = []

    def take_effects(self) -> list[TxnEffect]:
        effects, self.outbox = self.outbox, []
        return effects

    def save(self) -> None:
        self.store.save(self.txns)

    # --- InitProducerId ------------------------------------------------------------------

    def init_producer_id(
        self, now_ms: float, transactional_id: str, timeout_ms: int, expected: tuple[int, int] | None = None
    ) -> tuple[ErrorCode, int, int]:
        """(error, producer id, epoch) for a transactional producer; see the module docstring."""
        failed = (NO_PRODUCER_ID, NO_EPOCH)
        if self.loading:
            return ErrorCode.coordinator_load_in_progress, *failed
        if not transactional_id:
            return ErrorCode.invalid_request, *failed
        if not 0 < timeout_ms <= self.settings.transaction_max_timeout_ms:
            return ErrorCode.invalid_transaction_timeout, *failed
        txn = self.txns.get(transactional_id)
        if txn is None:
            txn = TransactionMetadata(transactional_id, self.producer_ids.next_id(), timeout_ms=timeout_ms)
            self.txns[transactional_id] = txn
            self.by_producer[txn.producer_id] = txn
        if txn.pending or txn.state in PREPARED:
            return ErrorCode.concurrent_transactions, *failed
        if expected is not None and not (
            txn.producer_epoch == NO_EPOCH
            or expected[0] == txn.producer_id
            or (expected[0] == txn.last_producer_id and epoch_exhausted(expected[1]))
        ):
            return ErrorCode.producer_fenced, *failed
        if txn.state == ONGOING:
            # Fence the producer of the open transaction and abort it; the client retries.
            self.fence(txn)
            self.outbox.append(AbortTxn(transactional_id))
            return ErrorCode.concurrent_transactions, *failed
        if not self._next_epoch(txn, expected):
            return ErrorCode.producer_fenced, *failed
        txn.timeout_ms = timeout_ms
        txn.state = TxnState.EMPTY
        txn.partitions.clear()
        txn.groups.clear()
        txn.pending_offsets.clear()
        txn.start_ms = -1
        txn.last_update_ms = int(now_ms)
        self.save()
        log.info(
            "initialized transactional id %r: producer %d epoch %d",
            transactional_id, txn.producer_id, txn.producer_epoch,
        )  # fmt: skip
        return ErrorCode.none, txn.producer_id, txn.producer_epoch

    def _next_epoch(self, txn: TransactionMetadata, expected: tuple[int, int] | None) -> bool:
        """Bump the epoch (KIP-360 rules); False: the producer is fenced."""
        if epoch_exhausted(txn.producer_epoch) and (expected is None or expected[1] == txn.producer_epoch):
            new_id = self.producer_ids.next_id()
            self.by_producer.pop(txn.producer_id, None)
            txn.last_producer_id = txn.producer_id
            txn.last_producer_epoch = txn.producer_epoch if expected is not None else NO_EPOCH
            txn.producer_id, txn.producer_epoch = new_id, 0
            self.by_producer[new_id] = txn
        elif expected is None:
            txn.producer_epoch, txn.last_producer_epoch = txn.producer_epoch + 1, NO_EPOCH
        elif txn.producer_epoch == NO_EPOCH or expected[1] == txn.producer_epoch:
            txn.producer_epoch, txn.last_producer_epoch = txn.producer_epoch + 1, txn.producer_epoch
        elif expected[1] != txn.last_producer_epoch:
            return False
        # else: a retry of a bump that succeeded: the same epoch again
        return True

    @staticmethod
    def fence(txn: TransactionMetadata) -> None:
        """Bump the epoch so the markers (and the partitions after them) refuse the old one."""
        txn.producer_epoch += 1
        txn.last_producer_epoch = NO_EPOCH

    # --- adding to a transaction ---------------------------------------------------------

    def check(
        self, transactional_id: str, producer_id: int, epoch: int
    ) -> tuple[ErrorCode, TransactionMetadata | None]:
        if self.loading:
            return ErrorCode.coordinator_load_in_progress, None
        if not transactional_id:
            return ErrorCode.invalid_request, None
        txn = self.txns.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping, None
        if txn.producer_epoch != epoch:
            return ErrorCode.producer_fenced, None
        if txn.pending or txn.state in PREPARED:
            return ErrorCode.concurrent_transactions, None
        return ErrorCode.none, txn

    def add_partitions(
        self, now_ms: float, transactional_id: str, producer_id: int, epoch: int, partitions: Iterable[TopicPartition]
    ) -> ErrorCode:
        code, txn = self.check(transactional_id, producer_id, epoch)
        if txn is None:
            return code
        partitions = set(partitions)
        if txn.state == ONGOING and partitions <= txn.partitions:
            return ErrorCode.none
        self._begin(txn, now_ms)
        txn.partitions |= partitions
        self.save()
        return ErrorCode.none

    def add_offsets(
        self, now_ms: float, transactional_id: str, producer_id: int, epoch: int, group_id: str
    ) -> ErrorCode:
        code, txn = self.check(transactional_id, producer_id, epoch)
        if txn is None:
            return code
        if txn.state == ONGOING and group_id in txn.groups:
            return ErrorCode.none
        self._begin(txn, now_ms)
        txn.groups.add(group_id)
        self.save()
        return ErrorCode.none

    def _begin(self, txn: TransactionMetadata, now_ms: float) -> None:
        txn.last_update_ms = int(now_ms)
        if txn.state == ONGOING:
            return
        txn.state = ONGOING
        txn.start_ms = int(now_ms)
        self.outbox.append(StartTxnTimer(txn.transactional_id, txn.timeout_ms))

    def txn_offset_commit(
        self,
        now_ms: float,
        transactional_id: str,
        group_id: str,
        producer_id: int,
        epoch: int,
        offsets: dict[TopicPartition, OffsetCommit],
    ) -> dict[TopicPartition, ErrorCode]:
        """Keep offsets pending in the transaction until it ends."""
        code, txn = self.check(transactional_id, producer_id, epoch)
        if code == ErrorCode.producer_fenced:
            code = ErrorCode.invalid_producer_epoch
        elif txn is not None and (txn.state != ONGOING or group_id not in txn.groups):
            code = ErrorCode.invalid_txn_state
        if code != ErrorCode.none or txn is None:
            return dict.fromkeys(offsets, code)
        result: dict[TopicPartition, ErrorCode] = {}
        pending = txn.pending_offsets.setdefault(group_id, {})
        for tp, value in offsets.items():
            metadata = value[2]
            if metadata is not None and len(metadata.encode()) > self.settings.offset_metadata_max_bytes:
                result[tp] = ErrorCode.offset_metadata_too_large
                continue
            pending[tp] = value
            result[tp] = ErrorCode.none
        txn.last_update_ms = int(now_ms)
        return result

    def has_pending_offsets(self, group_id: str, tp: TopicPartition) -> bool:
        """Whether a transaction holds an uncommitted offset for this group and partition
        (OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT)."""
        return any(
            tp in txn.pending_offsets.get(group_id, ())
            for txn in self.txns.values()
            if txn.state in (ONGOING, TxnState.PREPARE_COMMIT)
        )

    def verify_produce(
        self, transactional_id: str | None, producer_id: int, epoch: int, topic: str, partition: int
    ) -> None:
        """Raise unless ``topic-partition`` is in the producer's ongoing transaction."""
        txn = self.by_producer.get(producer_id)
        if txn is None or txn.producer_id != producer_id or (
            transactional_id is not None and transactional_id != txn.transactional_id
        ):
            raise KafkaProtocolError(
                f"producer {producer_id} has no transaction (transactional id {transactional_id!r})",
                ErrorCode.invalid_txn_state,
            )
        if epoch != txn.producer_epoch:
            raise KafkaProtocolError(
                f"producer {producer_id} epoch {epoch} is not the current {txn.producer_epoch}",
                ErrorCode.invalid_producer_epoch,
            )
        if txn.state != ONGOING or txn.pending or (topic, partition) not in txn.partitions:
            raise KafkaProtocolError(
                f"{topic}-{partition} is not part of the ongoing transaction of {txn.transactional_id!r} "
                f"({txn.state.value})",
                ErrorCode.invalid_txn_state,
            )

    # --- ending a transaction ------------------------------------------------------------

    def end_txn(
        self, transactional_id: str, producer_id: int, epoch: int, commit: bool
    ) -> tuple[ErrorCode, TransactionMetadata | None]:
        """EndTxn's answer, or (NONE, the transaction) when the shell must end it now."""
        code, txn = self.check(transactional_id, producer_id, epoch)
        if txn is None:
            if code == ErrorCode.concurrent_transactions:
                prepared = self.txns[transactional_id].state
                if prepared in PREPARED and (prepared == TxnState.PREPARE_COMMIT) != commit:
                    return ErrorCode.invalid_txn_state, None
            return code, None
        if txn.state == ONGOING:
            return ErrorCode.none, txn
        if txn.state == TxnState.COMPLETE_COMMIT:
            return (ErrorCode.none if commit else ErrorCode.invalid_txn_state), None
        if txn.state == TxnState.COMPLETE_ABORT:
            return (ErrorCode.none if not commit else ErrorCode.invalid_txn_state), None
        return ErrorCode.invalid_txn_state, None  # Empty: nothing to end

    def prepare_end(
        self, txn: TransactionMetadata, commit: bool, *, prepared: bool, now_ms: float, bump: bool = False
    ) -> None:
        """Prepare* (persisted), pending until :meth:`complete_end`; the timer is off.
        ``bump``: transaction version 2 ends with epoch + 1 (``transaction_v2``)."""
        self.outbox.append(CancelTxnTimer(txn.transactional_id))
        if bump:
            bump_at_prepare(txn)
        if not prepared:
            txn.state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
            if not commit:
                txn.pending_offsets.clear()
        txn.pending = True
        txn.last_update_ms = int(now_ms)
        self.save()

    def complete_end(self, txn: TransactionMetadata, commit: bool, now_ms: float, bump: bool = False) -> None:
        if bump:
            move_to_next_producer_id(self, txn, self.producer_ids.next_id)
        txn.state = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        txn.partitions.clear()
        txn.groups.clear()
        txn.pending_offsets.clear()
        txn.pending = False
        txn.last_update_ms = int(now_ms)
        self.save()

    def timed_out(self, transactional_id: str) -> TransactionMetadata | None:
        """The transaction's timeout passed: fence its producer; the shell aborts it."""
        txn = self.txns.get(transactional_id)
        if txn is None or txn.state != ONGOING or txn.pending:
            return None
        log.info(
            "transaction of %r (producer %d) passed its timeout of %d ms: aborting",
            txn.transactional_id, txn.producer_id, txn.timeout_ms,
        )  # fmt: skip
        self.fence(txn)
        return txn

    # --- DescribeTransactions / ListTransactions -----------------------------------------

    def describe(self, transactional_id: str) -> TransactionMetadata | None:
        return self.txns.get(transactional_id)

    def list_transactions(
        self, now_ms: float, states: set[str], producer_ids: set[int], min_duration_ms: int = -1
    ) -> list[TransactionMetadata]:
        return [
            txn
            for txn in self.txns.values()
            if (not states or txn.state.value in states)
            and (not producer_ids or txn.producer_id in producer_ids)
            and (min_duration_ms < 0 or (txn.state == ONGOING and now_ms - txn.start_ms >= min_duration_ms))
        ]
