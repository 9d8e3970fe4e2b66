"""A partition's transactions (KIP-98): the open ones, and the index of aborted ones.

Theory of operation
-------------------
A transactional producer's batches carry attribute bit 4; the coordinator ends each
transaction with a *control batch* (bits 4 and 5) holding one marker record, COMMIT or ABORT.
The log watches the batches it appends (only the headers, and the marker's key) and keeps:

* ``ongoing``: producer id → the first offset of its open transaction (and its epoch);
* ``aborted``: ``(producer id, first offset, last offset)`` of every aborted transaction
  still in the log, in the order their markers were written — Kafka's ``.txnindex``, where
  the last offset is the marker's own offset.

The **last stable offset** is the first offset of the oldest open transaction, or the high
watermark when none is open (never below the log start offset). A ``read_committed``
consumer reads below it only, and uses the aborted list the Fetch response carries to drop
the records of aborted transactions.

Nothing here is written to disk: a file-backed log that ever held a transactional batch
leaves a small marker file in its directory, and opening such a log rebuilds this state by
scanning its batch headers (logs without the marker file are not scanned, so their start-up
cost is unchanged).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from typing import TYPE_CHECKING

import attrs

from trikafka.protocol.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    BatchHeader,
    control_type,
    parse_batch_header,
)

if TYPE_CHECKING:
    from trio_util import AsyncValue

    from trikafka.log.segment import Segment

__all__ = ["AbortedTxn", "LogTransactions", "OpenTxn", "TransactionTracker"]

_TXN_BITS = 0x30  # transactional | control


@attrs.frozen
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the offset of the ABORT marker


@attrs.define
class OpenTxn:
    first_offset: int
    producer_epoch: int


class TransactionTracker:
    """The open and aborted transactions of one partition; see the module docstring."""

    __slots__ = ("ongoing", "aborted")

    def __init__(self) -> None:
        self.ongoing: dict[int, OpenTxn] = {}
        self.aborted: list[AbortedTxn] = []

    @staticmethod
    def concerns(headers: Iterable[BatchHeader]) -> bool:
        """Whether any of these batches is transactional (cheap: one bit test per batch)."""
        for header in headers:
            if header.attributes & _TXN_BITS:
                return True
        return False

    def observe(self, data: bytes | bytearray | memoryview, header: BatchHeader) -> None:
        """Account for one appended batch (``header`` with its final offsets, positioned in
        ``data``)."""
        if not header.attributes & _TXN_BITS or header.producer_id < 0:
            return
        pid = header.producer_id
        if not header.is_control:
            if pid not in self.ongoing:
                self.ongoing[pid] = OpenTxn(header.base_offset, header.producer_epoch)
            return
        kind = control_type(data, header)
        if kind not in (CONTROL_ABORT, CONTROL_COMMIT):
            return  # not an end-transaction marker (e.g. a future control type)
        started = self.ongoing.pop(pid, None)
        if kind == CONTROL_ABORT and started is not None:
            self.aborted.append(AbortedTxn(pid, started.first_offset, header.base_offset))

    def first_unstable_offset(self) -> int | None:
        if not self.ongoing:
            return None
        return min(txn.first_offset for txn in self.ongoing.values())

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping ``[start, end)``: last offset ≥ start and first
        offset < end (what a Fetch from ``start`` that returned data up to ``end`` needs)."""
        if not self.aborted:
            return []
        # Markers are appended in offset order, so last offsets are sorted.
        i = bisect_left(self.aborted, start, key=_last_offset)
        return [txn for txn in self.aborted[i:] if txn.first_offset < end]

    def drop_before(self, log_start_offset: int) -> None:
        """Forget aborted transactions wholly below the log start offset (retention,
        DeleteRecords): no fetch can reach them any more."""
        if self.aborted and self.aborted[0].last_offset < log_start_offset:
            i = bisect_left(self.aborted, log_start_offset, key=_last_offset)
            del self.aborted[:i]

    def clear(self) -> None:
        self.ongoing.clear()
        self.aborted.clear()


def _last_offset(txn: AbortedTxn) -> int:
    return txn.last_offset


class LogTransactions:
    """The transaction state of a :class:`~trikafka.log.log.Log` (mixed into it): the last
    stable offset, the aborted transactions a read_committed fetch needs, and their
    rebuilding from the batch headers at recovery."""

    # Provided by Log.
    transactions: TransactionTracker
    high_watermark: AsyncValue[int]
    last_stable_offset: AsyncValue[int]
    _log_start_offset: int
    _segments: list[Segment]

    def _update_lso(self) -> None:
        """LSO = first offset of the oldest open transaction, else the high watermark; never
        below the log start offset (DeleteRecords may pass an open transaction's start)."""
        high = self.high_watermark.value
        first = self.transactions.first_unstable_offset() if self.transactions.ongoing else None
        lso = high if first is None else max(min(first, high), self._log_start_offset)
        if self.last_stable_offset.value != lso:
            self.last_stable_offset.value = lso

    def aborted_transactions(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping ``[start, end)`` (for a read_committed Fetch)."""
        return self.transactions.aborted_between(start, end)

    def _note_transactional(self) -> None:
        """Hook: the log now holds transactional batches (files leave a marker)."""

    def _track_transactions(self, data: bytes | bytearray | memoryview, headers: list) -> None:
        self._note_transactional()
        for header in headers:
            self.transactions.observe(data, header)

    def rebuild_transactions(self) -> None:
        """Rebuild the transaction state by scanning every batch header (recovery)."""
        tracker = self.transactions
        tracker.clear()
        for segment in self._segments:
            for header in segment.scan():
                if not header.attributes & 0x30:
                    continue
                if header.is_control:
                    data = segment.store.pread(header.position, header.size)
                    relative = parse_batch_header(data, 0)
                    tracker.observe(data, relative)
                else:
                    tracker.observe(b"", header)
        tracker.drop_before(self._log_start_offset)
        self._update_lso()
