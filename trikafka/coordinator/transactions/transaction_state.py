"""Transaction metadata and where it is kept: one JSON file per broker.

Kafka keeps each transactional id's state in the ``__transaction_state`` topic. trikafka has
one broker and no replication, so it keeps the same facts — transactional id → producer id,
epoch, last epoch, timeout, state, and while a transaction ends the partitions, groups and
pending offsets it covers — in ``<first log dir>/trikafka-transactions.json``, rewritten
whole (temporary file, then an atomic rename) at every change that must survive a restart:
an epoch handed out, a partition added, a transaction preparing or completing. Nothing reads
it but the broker; an in-memory broker keeps it in memory only.

What a restart does with it (see TransactionCoordinator): PrepareCommit/PrepareAbort are
finished (markers written, pending offsets applied on commit); Ongoing transactions are
aborted with a bumped epoch, which fences their producers — as a timeout would.
"""

from __future__ import annotations

import enum
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

__all__ = ["TxnState", "TransactionMetadata", "TransactionLog", "NO_PRODUCER_ID", "NO_EPOCH", "MAX_EPOCH"]

log = logging.getLogger("trikafka.coordinator")

NO_PRODUCER_ID = -1
NO_EPOCH = -1
MAX_EPOCH = 32767  # int16; the coordinator keeps the last one for fencing


class TxnState(enum.Enum):
    """Kafka's TransactionState names (DescribeTransactions/ListTransactions show them)."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"


def epoch_exhausted(epoch: int) -> bool:
    """No epoch equal to MAX_EPOCH is handed out, so a producer can always be fenced."""
    return epoch >= MAX_EPOCH - 1


TopicPartition = tuple[str, int]
#: group id → (topic, partition) → (offset, leader epoch, metadata)
PendingOffsets = dict[str, dict[TopicPartition, tuple[int, int, str | None]]]


@attrs.define(eq=False)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int = NO_EPOCH
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_EPOCH
    timeout_ms: int = 60_000
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = attrs.Factory(set)
    groups: set[str] = attrs.Factory(set)
    pending_offsets: PendingOffsets = attrs.Factory(dict)
    start_ms: int = -1
    last_update_ms: int = -1
    #: a transition is in flight (markers being written): requests get CONCURRENT_TRANSACTIONS
    pending: bool = False

    def to_json(self) -> dict[str, Any]:
        """What survives a restart (the id is the document's key; ``pending`` is not kept)."""
        return attrs.asdict(
            self,
            filter=lambda field, _: field.name not in ("transactional_id", "pending"),
            value_serializer=_json_value,
        )

    @classmethod
    def from_json(cls, transactional_id: str, value: dict[str, Any]) -> TransactionMetadata:
        return cls(
            transactional_id,
            int(value["producer_id"]),
            int(value["producer_epoch"]),
            int(value.get("last_producer_id", NO_PRODUCER_ID)),
            int(value.get("last_producer_epoch", NO_EPOCH)),
            int(value["timeout_ms"]),
            TxnState(value["state"]),
            {(t, int(p)) for t, p in value.get("partitions", [])},
            set(value.get("groups", [])),
            {
                group: {(t, int(p)): (int(o), int(e), m) for t, p, o, e, m in rows}
                for group, rows in value.get("pending_offsets", {}).items()
            },
            int(value.get("start_ms", -1)),
            int(value.get("last_update_ms", -1)),
        )


def _json_value(_: Any, field: attrs.Attribute[Any] | None, value: Any) -> Any:
    """Enums by name, sets sorted, pending offsets as [topic, partition, offset, epoch, metadata] rows."""
    name = field.name if field is not None else None
    if name == "state":
        return value.value
    if name == "partitions":
        return sorted([t, p] for t, p in value)
    if name == "groups":
        return sorted(value)
    if name == "pending_offsets":
        return {
            group: [[t, p, o, e, m] for (t, p), (o, e, m) in sorted(offsets.items())]
            for group, offsets in value.items()
        }
    return value


class TransactionLog:
    """The JSON file (or nothing, for an in-memory broker); see the module docstring."""

    VERSION = 1

    def __init__(self, path: Path | None) -> None:
        self.path = path

    @classmethod
    def for_log_dirs(cls, log_dirs: Sequence[str] | None) -> TransactionLog:
        """``<first log dir>/trikafka-transactions.json``; nothing for an in-memory broker."""
        return cls(Path(log_dirs[0]) / "trikafka-transactions.json" if log_dirs else None)

    def load(self) -> dict[str, TransactionMetadata]:
        if self.path is None or not self.path.exists():
            return {}
        try:
            document = json.loads(self.path.read_text())
        except (OSError, ValueError) as exc:
            log.error("cannot read %s (%s): transactional ids start afresh", self.path, exc)
            return {}
        return {
            tid: TransactionMetadata.from_json(tid, value)
            for tid, value in document.get("transactions", {}).items()
        }

    def save(self, transactions: dict[str, TransactionMetadata]) -> None:
        if self.path is None:
            return
        document = {
            "version": self.VERSION,
            "transactions": {tid: txn.to_json() for tid, txn in transactions.items()},
        }
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(document, separators=(",", ":")))
        os.replace(tmp, self.path)
