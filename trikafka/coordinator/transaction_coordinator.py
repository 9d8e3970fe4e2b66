"""The transaction coordinator (KIP-98) on trio's clock.

Theory of operation
-------------------
Each transactional id has a :class:`~trikafka.coordinator.transaction_state.TransactionMetadata`:
its producer id and epoch, the timeout the producer asked for, and a state::

    Empty ──AddPartitions/AddOffsets──► Ongoing ──EndTxn──► PrepareCommit ─markers─► CompleteCommit
      ▲                                   │                 PrepareAbort  ─markers─► CompleteAbort
      └──────────InitProducerId (epoch + 1)┴──── timeout, InitProducerId, restart: fence + abort

* **InitProducerId** hands out the producer id and the next epoch. With a transaction open
  it fences that producer — epoch + 1, abort — and answers CONCURRENT_TRANSACTIONS; the
  client retries and gets the epoch after that. KIP-360: a producer that presents its id and
  epoch gets the next epoch, a retry of a bump the same epoch again, anyone else
  PRODUCER_FENCED. An exhausted epoch moves the id to a new producer id.
* **AddPartitionsToTxn / AddOffsetsToTxn** start a transaction (timer on) and widen it.
* **Produce** of a transactional batch is accepted only for a partition of the producer's
  ongoing transaction, at its current epoch (:meth:`verify_produce`, called by the partition).
* **TxnOffsetCommit** keeps offsets pending in the transaction; commit hands them to the
  group coordinator, abort drops them.
* **EndTxn** moves to Prepare*, persists, writes a marker into every partition of the
  transaction (ReplicaManager.write_txn_marker: a control batch that closes the producer's
  transaction there and moves the last stable offset), applies or drops the pending offsets,
  then Complete*. While that runs the transaction is *pending* and every request about it
  gets CONCURRENT_TRANSACTIONS. The EndTxn answer waits for the markers (Kafka answers after
  the Prepare* record and writes markers afterwards; here they are local appends).
* **Timeouts**: when a transaction starts a task sleeps until ``start + transaction timeout``
  on trio's clock (so MockClock tests control it) and, unless the transaction ended first
  (its cancel scope is cancelled), fences the producer and aborts the transaction.
* **Restart**: state comes back from the TransactionLog; PrepareCommit/PrepareAbort finish;
  Ongoing transactions are aborted with a bumped epoch (their producers are fenced — Kafka
  would wait for the timeout instead); a transaction still open in a partition's log that no
  coordinator state will finish gets a marker too — COMMIT if its transactional id completed
  a commit, else ABORT — so the last stable offset can never wedge.

Everything is synchronous but the marker writes (which may wait for a flush); trio runs one
task at a time, so no locks. The coordinator knows partitions and groups only through the
callables the broker gives it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import trio

from trikafka.config import BrokerConfig
from trikafka.coordinator.transaction_state import (
    NO_EPOCH,
    NO_PRODUCER_ID,
    PendingOffsets,
    TopicPartition,
    TransactionLog,
    TransactionMetadata,
    TxnState,
    epoch_exhausted,
)
from trikafka.errors import ErrorCode, KafkaProtocolError

__all__ = ["TransactionCoordinator", "TxnState"]

log = logging.getLogger("trikafka.coordinator")

#: (topic, partition, producer id, epoch, commit, coordinator epoch, now ms) → written?
MarkerWriter = Callable[[str, int, int, int, bool, int, int], Awaitable[bool]]

ONGOING, EMPTY = TxnState.ONGOING, TxnState.EMPTY
PREPARE_COMMIT, PREPARE_ABORT = TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT
COMPLETE_COMMIT, COMPLETE_ABORT = TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT
_PREPARED = (PREPARE_COMMIT, PREPARE_ABORT)
_DONE = (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT)


class TransactionCoordinator:
    def __init__(
        self,
        config: BrokerConfig,
        store: TransactionLog,
        *,
        next_producer_id: Callable[[], int],
        write_marker: MarkerWriter,
        commit_offsets: Callable[[str, dict[TopicPartition, tuple[int, int, str | None]]], None],
        open_transactions: Callable[[], Iterable[tuple[str, int, int, int]]] = lambda: (),
        now_ms: Callable[[], float],
    ) -> None:
        self.config = config
        self.store = store
        self._next_producer_id = next_producer_id
        self._write_marker = write_marker
        self._commit_offsets = commit_offsets
        self._open_transactions = open_transactions
        self.now_ms = now_ms
        self.coordinator_epoch = 0
        self.txns: dict[str, TransactionMetadata] = store.load()
        self._by_producer: dict[int, TransactionMetadata] = {t.producer_id: t for t in self.txns.values()}
        self.loading = True
        self._nursery: trio.Nursery | None = None

    @classmethod
    def for_broker(
        cls, config: BrokerConfig, replicas: Any, groups: Any, now_ms: Callable[[], float]
    ) -> TransactionCoordinator:
        """The broker's coordinator: state in ``<first log dir>/trikafka-transactions.json``,
        markers through the ReplicaManager (which it verifies transactional produces for),
        committed offsets to the GroupCoordinator."""
        path = Path(config.log_dirs[0]) / "trikafka-transactions.json" if config.log_dirs else None

        async def write_marker(
            topic: str, partition: int, pid: int, epoch: int, commit: bool, coordinator_epoch: int, now: int
        ) -> bool:
            return await replicas.write_txn_marker(
                topic, partition, pid, epoch, commit=commit, coordinator_epoch=coordinator_epoch, now_ms=now
            )

        coordinator = cls(
            config,
            TransactionLog(path),
            next_producer_id=replicas.producer_ids.next_id,
            write_marker=write_marker,
            commit_offsets=groups.commit_transactional_offsets,
            open_transactions=replicas.open_transactions,
            now_ms=now_ms,
        )
        replicas.transaction_verifier = coordinator.verify_produce
        return coordinator

    # --- lifecycle ---------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await self._recover()
            self.loading = False
            task_status.started()
            await trio.sleep_forever()  # the nursery stays open for timers and fencing aborts

    async def _recover(self) -> None:
        finished = 0
        for txn in list(self.txns.values()):
            if txn.state == ONGOING:
                self._fence(txn)
                log.warning(
                    "transactional id %r had a transaction open when the broker stopped: aborting it "
                    "(producer %d fenced at epoch %d)",
                    txn.transactional_id, txn.producer_id, txn.producer_epoch,
                )
                await self._end(txn, commit=False)
                finished += 1
            elif txn.state in _PREPARED:
                await self._end(txn, commit=txn.state == PREPARE_COMMIT, prepared=True)
                finished += 1
        for topic, partition, producer_id, epoch in list(self._open_transactions()):
            txn = self._by_producer.get(producer_id)
            if txn is not None and txn.state == ONGOING and (topic, partition) in txn.partitions:
                continue
            commit = txn is not None and txn.state == COMPLETE_COMMIT
            marker_epoch = max(epoch, txn.producer_epoch if txn is not None else epoch)
            log.warning(
                "%s-%d: producer %d left a transaction open that no coordinator state finishes: "
                "writing %s marker",
                topic, partition, producer_id, "a COMMIT" if commit else "an ABORT",
            )
            await self._write_marker(
                topic, partition, producer_id, marker_epoch, commit, self.coordinator_epoch, int(self.now_ms())
            )
            finished += 1
        if self.txns:
            log.info("loaded %d transactional id(s); finished %d transaction(s)", len(self.txns), finished)

    def _save(self) -> None:
        self.store.save(self.txns)

    def _spawn(self, fn: Callable[..., Any], *args: Any, name: str) -> None:
        assert self._nursery is not None, "the transaction coordinator is not running"
        self._nursery.start_soon(_survive_storage_errors, fn, args, name=name)

    # --- InitProducerId ----------------------------------------------------------------

    def init_producer_id(
        self, transactional_id: str, timeout_ms: int, expected: tuple[int, int] | None = None
    ) -> tuple[ErrorCode, int, int]:
        """(error, producer id, epoch) for a transactional producer; see the module docstring."""
        failed = (NO_PRODUCER_ID, NO_EPOCH)
        if self.loading:
            return ErrorCode.coordinator_load_in_progress, *failed
        if not transactional_id:
            return ErrorCode.invalid_request, *failed
        if not 0 < timeout_ms <= self.config.transaction_max_timeout_ms:
            return ErrorCode.invalid_transaction_timeout, *failed
        txn = self.txns.get(transactional_id)
        if txn is None:
            txn = TransactionMetadata(transactional_id, self._next_producer_id(), timeout_ms=timeout_ms)
            self.txns[transactional_id] = txn
            self._by_producer[txn.producer_id] = txn
        if txn.pending or txn.state in _PREPARED:
            return ErrorCode.concurrent_transactions, *failed
        if expected is not None and not (
            txn.producer_epoch == NO_EPOCH
            or expected[0] == txn.producer_id
            or (expected[0] == txn.last_producer_id and epoch_exhausted(expected[1]))
        ):
            return ErrorCode.producer_fenced, *failed
        if txn.state == ONGOING:
            # Fence the producer of the open transaction and abort it; the client retries.
            self._fence(txn)
            self._spawn(self._end, txn, False, name=f"txn-fence-abort:{transactional_id}")
            return ErrorCode.concurrent_transactions, *failed
        if epoch_exhausted(txn.producer_epoch) and (expected is None or expected[1] == txn.producer_epoch):
            new_id = self._next_producer_id()
            self._by_producer.pop(txn.producer_id, None)
            txn.last_producer_id = txn.producer_id
            txn.last_producer_epoch = txn.producer_epoch if expected is not None else NO_EPOCH
            txn.producer_id, txn.producer_epoch = new_id, 0
            self._by_producer[new_id] = txn
        elif expected is None:
            txn.producer_epoch, txn.last_producer_epoch = txn.producer_epoch + 1, NO_EPOCH
        elif txn.producer_epoch == NO_EPOCH or expected[1] == txn.producer_epoch:
            txn.producer_epoch, txn.last_producer_epoch = txn.producer_epoch + 1, txn.producer_epoch
        elif expected[1] != txn.last_producer_epoch:
            return ErrorCode.producer_fenced, *failed
        # else: a retry of a bump that succeeded: the same epoch again
        txn.timeout_ms = timeout_ms
        txn.state = EMPTY
        txn.partitions.clear()
        txn.groups.clear()
        txn.pending_offsets.clear()
        txn.start_ms = -1
        txn.last_update_ms = int(self.now_ms())
        self._save()
        log.info(
            "initialized transactional id %r: producer %d epoch %d",
            transactional_id, txn.producer_id, txn.producer_epoch,
        )
        return ErrorCode.none, txn.producer_id, txn.producer_epoch

    def _fence(self, txn: TransactionMetadata) -> None:
        """Bump the epoch so the markers (and the partitions after them) refuse the old one."""
        txn.producer_epoch += 1
        txn.last_producer_epoch = NO_EPOCH

    # --- adding to a transaction -------------------------------------------------------

    def _check(self, transactional_id: str, producer_id: int, epoch: int) -> tuple[ErrorCode, TransactionMetadata | None]:
        if self.loading:
            return ErrorCode.coordinator_load_in_progress, None
        if not transactional_id:
            return ErrorCode.invalid_request, None
        txn = self.txns.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping, None
        if txn.producer_epoch != epoch:
            return ErrorCode.producer_fenced, None
        if txn.pending or txn.state in _PREPARED:
            return ErrorCode.concurrent_transactions, None
        return ErrorCode.none, txn

    def add_partitions(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: Iterable[TopicPartition]
    ) -> ErrorCode:
        code, txn = self._check(transactional_id, producer_id, epoch)
        if txn is None:
            return code
        partitions = set(partitions)
        if txn.state == ONGOING and partitions <= txn.partitions:
            return ErrorCode.none
        self._begin(txn)
        txn.partitions |= partitions
        self._save()
        return ErrorCode.none

    def add_offsets(self, transactional_id: str, producer_id: int, epoch: int, group_id: str) -> ErrorCode:
        code, txn = self._check(transactional_id, producer_id, epoch)
        if txn is None:
            return code
        if txn.state == ONGOING and group_id in txn.groups:
            return ErrorCode.none
        self._begin(txn)
        txn.groups.add(group_id)
        self._save()
        return ErrorCode.none

    def _begin(self, txn: TransactionMetadata) -> None:
        now = int(self.now_ms())
        txn.last_update_ms = now
        if txn.state == ONGOING:
            return
        txn.state = ONGOING
        txn.start_ms = now
        scope = trio.CancelScope()
        txn.timer = scope
        self._spawn(
            self._expire, txn, scope, trio.current_time() + txn.timeout_ms / 1000,
            name=f"txn-timeout:{txn.transactional_id}",
        )

    async def _expire(self, txn: TransactionMetadata, scope: trio.CancelScope, deadline: float) -> None:
        with scope:
            await trio.sleep_until(deadline)
        if scope.cancelled_caught or txn.timer is not scope or txn.state != ONGOING or txn.pending:
            return
        log.info(
            "transaction of %r (producer %d) passed its timeout of %d ms: aborting",
            txn.transactional_id, txn.producer_id, txn.timeout_ms,
        )
        self._fence(txn)
        await self._end(txn, commit=False)

    def txn_offset_commit(
        self,
        transactional_id: str,
        group_id: str,
        producer_id: int,
        epoch: int,
        offsets: dict[TopicPartition, tuple[int, int, str | None]],
    ) -> dict[TopicPartition, ErrorCode]:
        """Keep offsets pending in the transaction until it ends."""
        code, txn = self._check(transactional_id, producer_id, epoch)
        if code == ErrorCode.producer_fenced:
            code = ErrorCode.invalid_producer_epoch
        elif txn is not None and (txn.state != ONGOING or group_id not in txn.groups):
            code = ErrorCode.invalid_txn_state
        if code != ErrorCode.none:
            return dict.fromkeys(offsets, code)
        assert txn is not None
        result: dict[TopicPartition, ErrorCode] = {}
        pending = txn.pending_offsets.setdefault(group_id, {})
        for tp, value in offsets.items():
            metadata = value[2]
            if metadata is not None and len(metadata.encode()) > self.config.offset_metadata_max_bytes:
                result[tp] = ErrorCode.offset_metadata_too_large
                continue
            pending[tp] = value
            result[tp] = ErrorCode.none
        txn.last_update_ms = int(self.now_ms())
        return result

    def has_pending_offsets(self, group_id: str, tp: TopicPartition) -> bool:
        """Whether a transaction holds an uncommitted offset for this group and partition
        (OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT)."""
        return any(
            tp in txn.pending_offsets.get(group_id, ())
            for txn in self.txns.values()
            if txn.state in (ONGOING, PREPARE_COMMIT)
        )

    # --- produce verification ----------------------------------------------------------

    def verify_produce(
        self, transactional_id: str | None, producer_id: int, epoch: int, topic: str, partition: int
    ) -> None:
        """Raise unless ``topic-partition`` is in the producer's ongoing transaction."""
        txn = self._by_producer.get(producer_id)
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

    # --- EndTxn ------------------------------------------------------------------------

    async def end_txn(self, transactional_id: str, producer_id: int, epoch: int, commit: bool) -> ErrorCode:
        code, txn = self._check(transactional_id, producer_id, epoch)
        if txn is None:
            if code == ErrorCode.concurrent_transactions:
                prepared = self.txns[transactional_id].state
                if prepared in _PREPARED and (prepared == PREPARE_COMMIT) != commit:
                    return ErrorCode.invalid_txn_state
            return code
        if txn.state == ONGOING:
            await self._end(txn, commit)
            return ErrorCode.none
        if txn.state == COMPLETE_COMMIT:
            return ErrorCode.none if commit else ErrorCode.invalid_txn_state
        if txn.state == COMPLETE_ABORT:
            return ErrorCode.none if not commit else ErrorCode.invalid_txn_state
        return ErrorCode.invalid_txn_state  # Empty: nothing to end

    async def _end(self, txn: TransactionMetadata, commit: bool, *, prepared: bool = False) -> None:
        """Prepare, write the markers, apply or drop the offsets, complete."""
        if txn.timer is not None:
            txn.timer.cancel()
            txn.timer = None
        if not prepared:
            txn.state = PREPARE_COMMIT if commit else PREPARE_ABORT
            if not commit:
                txn.pending_offsets.clear()
        txn.pending = True
        txn.last_update_ms = int(self.now_ms())
        self._save()
        with trio.CancelScope(shield=True):  # half-written markers would need a restart to finish
            for topic, partition in sorted(txn.partitions):
                try:
                    await self._write_marker(
                        topic, partition, txn.producer_id, txn.producer_epoch, commit,
                        self.coordinator_epoch, int(self.now_ms()),
                    )
                except Exception:
                    log.exception("cannot write the transaction marker to %s-%d", topic, partition)
            if commit:
                for group_id, offsets in txn.pending_offsets.items():
                    if offsets:
                        self._commit_offsets(group_id, offsets)
        txn.state = COMPLETE_COMMIT if commit else COMPLETE_ABORT
        txn.partitions.clear()
        txn.groups.clear()
        txn.pending_offsets.clear()
        txn.pending = False
        txn.last_update_ms = int(self.now_ms())
        self._save()

    # --- DescribeTransactions / ListTransactions ---------------------------------------

    def describe(self, transactional_id: str) -> TransactionMetadata | None:
        return self.txns.get(transactional_id)

    def list_transactions(
        self, states: set[str], producer_ids: set[int], min_duration_ms: int = -1
    ) -> list[TransactionMetadata]:
        now = self.now_ms()
        return [
            txn
            for txn in self.txns.values()
            if (not states or txn.state.value in states)
            and (not producer_ids or txn.producer_id in producer_ids)
            and (min_duration_ms < 0 or (txn.state == ONGOING and now - txn.start_ms >= min_duration_ms))
        ]


__all__ += ["PendingOffsets"]


async def _survive_storage_errors(fn: Callable[..., Any], args: tuple) -> None:
    """A timer or fencing task whose marker write fails (a full disk: KAFKA_STORAGE_ERROR)
    logs one line; it must not take the coordinator, and with it the broker, down."""
    try:
        await fn(*args)
    except (OSError, KafkaProtocolError) as exc:
        log.error("transaction coordinator: %s failed: %s", getattr(fn, "__name__", fn), exc)
