"""Transaction version 2 (KIP-890 part 2): the epoch bumps at the end of every transaction.

Theory of operation
-------------------
With TV2 a producer's epoch is no longer constant between InitProducerIds: EndTxn v5 bumps it
as the transaction ends — the Prepare* state and every marker carry epoch + 1 — and answers
the producer id and epoch to use next. A late Produce or EndTxn of the old epoch (a zombie, or
a request retried after a timeout) is then fenced by the partitions and the coordinator, so it
can never land in the *next* transaction. When epoch + 1 is the last usable epoch, the
transaction still ends with it and the id moves to a new producer id at epoch 0 (the previous
id is kept, so a retry of that EndTxn is recognised).

Kafka's rules for EndTxn v5 (the request's version decides, as in Kafka's KafkaApis):

* Ongoing → Prepare* with the bumped epoch, markers, Complete*; answer the new id/epoch.
* A retry — the same (id, epoch) as the EndTxn that completed, in the matching Complete*
  state — answers NONE with the current id/epoch, and changes nothing.
* Abort with no transaction open (Empty, Complete*) at the current epoch: with TV2 a producer
  cannot know whether its produce added a partition implicitly, so it may abort "nothing":
  the epoch bumps, no marker is written.
* Anything else: as EndTxn v4 (PRODUCER_FENCED, INVALID_PRODUCER_ID_MAPPING,
  CONCURRENT_TRANSACTIONS, INVALID_TXN_STATE).

Adding partitions implicitly (Produce v12+) and groups (TxnOffsetCommit v5+) is the
machine's ``add_partitions``/``add_offsets``, called by the partition and the API layer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from trikafka.coordinator.transactions.transaction_state import (
    NO_EPOCH,
    TransactionMetadata,
    TxnState,
    epoch_exhausted,
)
from trikafka.errors import ErrorCode

__all__ = ["EndTxnV2", "bump_at_prepare", "end_txn_v2", "move_to_next_producer_id"]

ONGOING = TxnState.ONGOING
PREPARED = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


class Machine(Protocol):
    txns: dict[str, TransactionMetadata]
    by_producer: dict[int, TransactionMetadata]
    loading: bool

    def save(self) -> None: ...


class EndTxnV2:
    """What EndTxn v5 decided: an error, a transaction to end now, or an answer as is."""

    __slots__ = ("error", "txn", "empty_abort")

    def __init__(self, error: ErrorCode, txn: TransactionMetadata | None = None, empty_abort: bool = False) -> None:
        self.error = error
        self.txn = txn
        self.empty_abort = empty_abort


def _is_retry(txn: TransactionMetadata, producer_id: int, epoch: int) -> bool:
    """The (id, epoch) of the EndTxn that ended the last transaction (before its bump)."""
    if epoch == NO_EPOCH or epoch != txn.last_producer_epoch:
        return False
    if producer_id == txn.producer_id:
        return txn.producer_epoch == epoch + 1
    return producer_id == txn.last_producer_id and txn.producer_epoch == 0


def end_txn_v2(machine: Machine, transactional_id: str, producer_id: int, epoch: int, commit: bool) -> EndTxnV2:
    if machine.loading:
        return EndTxnV2(ErrorCode.coordinator_load_in_progress)
    if not transactional_id:
        return EndTxnV2(ErrorCode.invalid_request)
    txn = machine.txns.get(transactional_id)
    if txn is None:
        return EndTxnV2(ErrorCode.invalid_producer_id_mapping)
    retry = _is_retry(txn, producer_id, epoch)
    if producer_id != txn.producer_id and not retry:
        return EndTxnV2(ErrorCode.invalid_producer_id_mapping)
    if txn.pending or txn.state in PREPARED:
        if txn.state in PREPARED and (txn.state == TxnState.PREPARE_COMMIT) != commit:
            return EndTxnV2(ErrorCode.invalid_txn_state)
        return EndTxnV2(ErrorCode.concurrent_transactions)
    if retry:
        done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        return EndTxnV2(ErrorCode.none if txn.state == done else ErrorCode.invalid_txn_state)
    if epoch != txn.producer_epoch:
        return EndTxnV2(ErrorCode.producer_fenced)
    if txn.state == ONGOING:
        return EndTxnV2(ErrorCode.none, txn)
    if not commit and txn.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
        return EndTxnV2(ErrorCode.none, txn, empty_abort=True)
    return EndTxnV2(ErrorCode.invalid_txn_state)


def bump_at_prepare(txn: TransactionMetadata) -> None:
    """The transaction ends with epoch + 1 (markers included); the epoch it ran with is
    remembered to recognise a retried EndTxn."""
    txn.last_producer_epoch = txn.producer_epoch
    txn.producer_epoch += 1


def move_to_next_producer_id(machine: Machine, txn: TransactionMetadata, next_id: Callable[[], int]) -> None:
    """After the bump, an exhausted epoch moves the id to a fresh producer id at epoch 0."""
    if not epoch_exhausted(txn.producer_epoch):
        return
    machine.by_producer.pop(txn.producer_id, None)
    txn.last_producer_id = txn.producer_id
    txn.producer_id, txn.producer_epoch = next_id(), 0
    machine.by_producer[txn.producer_id] = txn
