"""The transaction coordinator (KIP-98): the Trio shell around :class:`TransactionMachine`.

Theory of operation
-------------------
Decisions are :class:`~trikafka.coordinator.transactions.transaction_machine.TransactionMachine`'s (see
its module for the states and the rules of each request); this shell owns what waits:

* **Timeouts**: the machine asks for one timer per transactional id (``StartTxnTimer``,
  ``CancelTxnTimer``); a :class:`~trikafka.coordinator.timers.TimerQueue` keeps them on
  trio's clock (so MockClock tests control them). When one passes and the transaction is
  still open, the machine fences the producer and the shell aborts the transaction.
* **Ending**: EndTxn (and a fence or timeout abort, run as a task in the coordinator's
  nursery) goes Prepare* → a marker into every partition of the transaction
  (:class:`~trikafka.coordinator.ports.TxnMarkerWriter`: a control batch that closes the
  producer's transaction there and moves the last stable offset) → the pending offsets to
  the group coordinator on commit → Complete*. The marker writes are shielded from
  cancellation: half-written markers would need a restart to finish. The EndTxn answer
  waits for the markers (Kafka answers after the Prepare* record and writes markers
  afterwards; here they are local appends).
* **Restart**: state comes back from the TransactionLog; PrepareCommit/PrepareAbort finish;
  Ongoing transactions are aborted with a bumped epoch (their producers are fenced — Kafka
  would wait for the timeout instead); a transaction still open in a partition's log that no
  coordinator state will finish gets a marker too — COMMIT if its transactional id completed
  a commit, else ABORT — so the last stable offset can never wedge.

The shell knows the server only through the Protocols of :mod:`~trikafka.coordinator.ports`,
given to its constructor by the broker.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable
from typing import Any, Concatenate, ParamSpec, TypeVar

import trio

from trikafka.clock import Clock
from trikafka.coordinator.ports import (
    ProducerIdSource,
    TransactionalOffsetCommitter,
    TxnMarkerWriter,
)
from trikafka.coordinator.settings import TransactionSettings
from trikafka.coordinator.timers import TimerQueue
from trikafka.coordinator.transactions.transaction_machine import (
    PREPARED,
    AbortTxn,
    CancelTxnTimer,
    StartTxnTimer,
    TransactionMachine,
)
from trikafka.coordinator.transactions.transaction_state import (
    NO_EPOCH,
    NO_PRODUCER_ID,
    PendingOffsets,
    TopicPartition,
    TransactionLog,
    TransactionMetadata,
    TxnState,
)
from trikafka.coordinator.transactions.transaction_v2 import end_txn_v2
from trikafka.errors import ErrorCode, KafkaProtocolError

__all__ = ["PendingOffsets", "TransactionCoordinator", "TxnState"]

log = logging.getLogger("trikafka.coordinator")


P = ParamSpec("P")
R = TypeVar("R")


def _with_now(
    request: Callable[Concatenate[TransactionMachine, float, P], R],
) -> Callable[Concatenate[TransactionCoordinator, P], R]:
    """A request of the machine as the shell's: the machine is given the clock's now and the
    caller's arguments, and its effects are carried out before the answer is returned."""

    @functools.wraps(request)
    def forward(self: TransactionCoordinator, /, *args: P.args, **kwargs: P.kwargs) -> R:
        answer = request(self.machine, self.now_ms(), *args, **kwargs)
        self._apply()
        return answer

    return forward


def _read(
    query: Callable[Concatenate[TransactionMachine, P], R],
) -> Callable[Concatenate[TransactionCoordinator, P], R]:
    """A question to the machine, asked through the shell (it changes nothing)."""

    @functools.wraps(query)
    def forward(self: TransactionCoordinator, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return query(self.machine, *args, **kwargs)

    return forward


class TransactionCoordinator:
    def __init__(
        self,
        settings: TransactionSettings,
        store: TransactionLog,
        *,
        producer_ids: ProducerIdSource,
        markers: TxnMarkerWriter,
        groups: TransactionalOffsetCommitter,
        now_ms: Clock,
        on_state_change: Callable[[], None] = lambda: None,
    ) -> None:
        self.settings = settings
        #: Called when a transaction ends with no request to answer (a timeout or fencing
        #: abort), so awaitable broker state sees it at once.
        self.on_state_change = on_state_change
        self.machine = TransactionMachine(settings, store, producer_ids)
        self._markers = markers
        self._groups = groups
        self.now_ms = now_ms
        self.coordinator_epoch = 0
        self._timers: TimerQueue[str] = TimerQueue()
        self._nursery: trio.Nursery | None = None

    @property
    def loading(self) -> bool:
        return self.machine.loading

    @property
    def txns(self) -> dict[str, TransactionMetadata]:
        return self.machine.txns

    # --- lifecycle -----------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await self._recover()
            self.machine.loading = False
            nursery.start_soon(self._timers.run, self._timed_out, name="transaction-timeouts")
            task_status.started()

    async def _recover(self) -> None:
        finished = 0
        for txn in list(self.txns.values()):
            if txn.state == TxnState.ONGOING:
                self.machine.fence(txn)
                log.warning(
                    "transactional id %r had a transaction open when the broker stopped: aborting it "
                    "(producer %d fenced at epoch %d)",
                    txn.transactional_id, txn.producer_id, txn.producer_epoch,
                )  # fmt: skip
                await self._end(txn, commit=False)
                finished += 1
            elif txn.state in PREPARED:
                await self._end(txn, commit=txn.state == TxnState.PREPARE_COMMIT, prepared=True)
                finished += 1
        for topic, partition, producer_id, epoch in list(self._markers.open_transactions()):
            known = self.machine.by_producer.get(producer_id)
            if known is not None and known.state == TxnState.ONGOING and (topic, partition) in known.partitions:
                continue
            commit = known is not None and known.state == TxnState.COMPLETE_COMMIT
            marker_epoch = max(epoch, known.producer_epoch if known is not None else epoch)
            log.warning(
                "%s-%d: producer %d left a transaction open that no coordinator state finishes: "
                "writing %s marker",
                topic, partition, producer_id, "a COMMIT" if commit else "an ABORT",
            )  # fmt: skip
            await self._write_marker(topic, partition, producer_id, marker_epoch, commit)
            finished += 1
        if self.txns:
            log.info("loaded %d transactional id(s); finished %d transaction(s)", len(self.txns), finished)

    def _apply(self) -> None:
        """Carry out what the machine asked for in the call that just returned."""
        for effect in self.machine.take_effects():
            if isinstance(effect, StartTxnTimer):
                deadline = trio.current_time() + effect.timeout_ms / 1000
                self._timers.schedule(effect.transactional_id, deadline)
            elif isinstance(effect, CancelTxnTimer):
                self._timers.cancel(effect.transactional_id)
            elif isinstance(effect, AbortTxn):
                assert self._nursery is not None, "the transaction coordinator is not running"
                txn = self.txns[effect.transactional_id]
                self._nursery.start_soon(
                    _survive_storage_errors, self._end, (txn, False), name=f"txn-fence-abort:{effect.transactional_id}"
                )

    def _timed_out(self, transactional_id: str) -> None:
        txn = self.machine.timed_out(transactional_id)
        if txn is not None:
            assert self._nursery is not None
            self._nursery.start_soon(
                _survive_storage_errors, self._end, (txn, False), name=f"txn-timeout-abort:{transactional_id}"
            )

    # --- requests ------------------------------------------------------------------------

    # The machine's requests, forwarded with the clock's now and their effects carried out.
    init_producer_id = _with_now(TransactionMachine.init_producer_id)
    add_partitions = _with_now(TransactionMachine.add_partitions)
    add_offsets = _with_now(TransactionMachine.add_offsets)
    txn_offset_commit = _with_now(TransactionMachine.txn_offset_commit)
    has_pending_offsets = _read(TransactionMachine.has_pending_offsets)

    def verify_produce(
        self, transactional_id: str | None, producer_id: int, epoch: int, topic: str, partition: int,
        *, add_partition: bool = False,
    ) -> None:
        """Raise unless ``topic-partition`` is in the producer's ongoing transaction (the
        ReplicaManager's ``transaction_verifier``). ``add_partition`` (Produce v12+, KIP-890
        part 2): a partition not yet in it is added first, starting a transaction if none is
        open, as AddPartitionsToTxn would — the producer sends none."""
        if add_partition:
            txn = self.machine.by_producer.get(producer_id)
            if txn is not None and (transactional_id is None or transactional_id == txn.transactional_id):
                code = self.add_partitions(txn.transactional_id, producer_id, epoch, [(topic, partition)])
                if code == ErrorCode.producer_fenced:
                    code = ErrorCode.invalid_producer_epoch
                if code != ErrorCode.none:
                    raise KafkaProtocolError(f"cannot add {topic}-{partition} to the transaction of "
                                             f"{txn.transactional_id!r}", code)
        self.machine.verify_produce(transactional_id, producer_id, epoch, topic, partition)

    def verify_partitions(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4+ with ``verify_only``: is each partition in the producer's
        ongoing transaction (NONE) or not (INVALID_TXN_STATE)? Nothing is added."""
        code, txn = self.machine.check(transactional_id, producer_id, epoch)
        if txn is None:
            return dict.fromkeys(partitions, code)
        ongoing = txn.state == TxnState.ONGOING
        return {
            tp: ErrorCode.none if ongoing and tp in txn.partitions else ErrorCode.invalid_txn_state for tp in partitions
        }

    async def end_txn(
        self, transactional_id: str, producer_id: int, epoch: int, commit: bool, *, bump_epoch: bool = False
    ) -> tuple[ErrorCode, int, int]:
        """(error, producer id, epoch to use next); ``bump_epoch``: EndTxn v5 (TV2), whose
        answer carries them — earlier versions answer (-1, -1)."""
        if not bump_epoch:
            code, txn = self.machine.end_txn(transactional_id, producer_id, epoch, commit)
            if txn is not None:
                await self._end(txn, commit)
            return code, NO_PRODUCER_ID, NO_EPOCH
        decision = end_txn_v2(self.machine, transactional_id, producer_id, epoch, commit)
        txn = decision.txn or self.txns.get(transactional_id)
        if decision.error != ErrorCode.none or txn is None:
            return decision.error, NO_PRODUCER_ID, NO_EPOCH
        if decision.empty_abort:
            self.machine.prepare_end(txn, False, prepared=False, now_ms=self.now_ms(), bump=True)
            self.machine.complete_end(txn, False, self.now_ms(), bump=True)
            self._apply()
        elif decision.txn is not None:
            await self._end(txn, commit, bump=True)
        return ErrorCode.none, txn.producer_id, txn.producer_epoch

    async def _end(self, txn: TransactionMetadata, commit: bool, *, prepared: bool = False, bump: bool = False) -> None:
        """Prepare, write the markers, apply or drop the offsets, complete."""
        self.machine.prepare_end(txn, commit, prepared=prepared, now_ms=self.now_ms(), bump=bump)
        self._apply()
        with trio.CancelScope(shield=True):  # half-written markers would need a restart to finish
            for topic, partition in sorted(txn.partitions):
                try:
                    await self._write_marker(topic, partition, txn.producer_id, txn.producer_epoch, commit)
                except Exception:
                    log.exception("cannot write the transaction marker to %s-%d", topic, partition)
            if commit:
                for group_id, offsets in txn.pending_offsets.items():
                    if offsets:
                        self._groups.commit_transactional_offsets(group_id, offsets)
        self.machine.complete_end(txn, commit, self.now_ms(), bump=bump)
        self.on_state_change()

    async def _write_marker(self, topic: str, partition: int, producer_id: int, epoch: int, commit: bool) -> bool:
        return await self._markers.write_txn_marker(
            topic, partition, producer_id, epoch,
            commit=commit, coordinator_epoch=self.coordinator_epoch, now_ms=int(self.now_ms()),
        )  # fmt: skip

    # --- DescribeTransactions / ListTransactions -----------------------------------------

    describe = _read(TransactionMachine.describe)
    list_transactions = _with_now(TransactionMachine.list_transactions)


async def _survive_storage_errors(fn: Callable[..., Any], args: tuple) -> None:
    """A timeout or fencing abort whose marker write fails (a full disk: KAFKA_STORAGE_ERROR)
    logs one line; it must not take the coordinator, and with it the broker, down."""
    try:
        await fn(*args)
    except (OSError, KafkaProtocolError) as exc:
        log.error("transaction coordinator: %s failed: %s", getattr(fn, "__name__", fn), exc)
