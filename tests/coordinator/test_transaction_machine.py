"""The transaction state machine without trio: decisions and the effects it asks for."""

from __future__ import annotations

from trikafka.config import BrokerConfig
from trikafka.coordinator.transactions.transaction_machine import (
    AbortTxn,
    CancelTxnTimer,
    StartTxnTimer,
    TransactionMachine,
)
from trikafka.coordinator.transactions.transaction_state import TransactionLog, TxnState
from trikafka.errors import ErrorCode
from trikafka.server.wiring import transaction_settings

NOW = 1_700_000_000_000.0


class ProducerIds:
    def __init__(self) -> None:
        self.last = 999

    def next_id(self) -> int:
        self.last += 1
        return self.last


def machine() -> TransactionMachine:
    m = TransactionMachine(transaction_settings(BrokerConfig()), TransactionLog(None), ProducerIds())
    m.loading = False
    return m


def test_a_transaction_starts_its_timer_once_and_ending_cancels_it() -> None:
    m = machine()
    code, pid, epoch = m.init_producer_id(NOW, "tx", 10_000)
    assert (code, pid, epoch) == (ErrorCode.none, 1000, 0)
    assert m.add_partitions(NOW, "tx", pid, epoch, [("t", 0)]) == ErrorCode.none
    assert m.add_partitions(NOW + 5, "tx", pid, epoch, [("t", 1)]) == ErrorCode.none
    assert m.take_effects() == [StartTxnTimer("tx", 10_000)]
    code, txn = m.end_txn("tx", pid, epoch, commit=True)
    assert code == ErrorCode.none and txn is not None
    m.prepare_end(txn, True, prepared=False, now_ms=NOW + 10)
    assert m.take_effects() == [CancelTxnTimer("tx")]
    assert m.check("tx", pid, epoch)[0] == ErrorCode.concurrent_transactions  # markers pending
    m.complete_end(txn, True, NOW + 11)
    assert txn.state is TxnState.COMPLETE_COMMIT and not txn.partitions
    assert m.end_txn("tx", pid, epoch, commit=True) == (ErrorCode.none, None)  # a retry


def test_init_producer_id_with_a_transaction_open_fences_and_asks_for_the_abort() -> None:
    m = machine()
    _, pid, epoch = m.init_producer_id(NOW, "tx", 10_000)
    m.add_partitions(NOW, "tx", pid, epoch, [("t", 0)])
    m.take_effects()
    assert m.init_producer_id(NOW, "tx", 10_000) == (ErrorCode.concurrent_transactions, -1, -1)
    assert m.take_effects() == [AbortTxn("tx")]
    assert m.txns["tx"].producer_epoch == epoch + 1  # the old producer is fenced
    assert m.add_partitions(NOW, "tx", pid, epoch, [("t", 0)]) == ErrorCode.producer_fenced


def test_a_timeout_after_the_transaction_ended_does_nothing() -> None:
    m = machine()
    _, pid, epoch = m.init_producer_id(NOW, "tx", 10_000)
    m.add_partitions(NOW, "tx", pid, epoch, [("t", 0)])
    _, txn = m.end_txn("tx", pid, epoch, commit=False)
    assert txn is not None
    m.prepare_end(txn, False, prepared=False, now_ms=NOW)
    assert m.timed_out("tx") is None  # pending: the end is under way
    m.complete_end(txn, False, NOW)
    assert m.timed_out("tx") is None
    assert m.txns["tx"].producer_epoch == epoch
