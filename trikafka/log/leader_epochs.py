"""A partition's leader epochs and where each began: Kafka's leader-epoch cache.

Why. After a leader change a client (KIP-320) or a follower asks OffsetForLeaderEpoch "where did
epoch E end?" to find out whether the log it read from was truncated. The answer comes from a
short list of ``(epoch, start offset)`` entries — Kafka's ``leader-epoch-checkpoint`` — one per
epoch that wrote to the log, in increasing order of both.

Here the list is derived from the log itself: every batch carries its partition leader epoch
in its header, so :class:`LeaderEpochCache` follows a log by reading the batch headers it has
not seen yet (:meth:`LeaderEpochCache.catch_up`, through ``Log.read``; once per new batch, only
when asked). A log cut back to fewer offsets (recovery, a full truncation) is re-read from its
start; a log whose start moved forward (retention, DeleteRecords) keeps its entries, the first
clamped to the new start, as Kafka's ``truncateFromStart`` does. Nothing is written to disk:
after a restart the first question re-reads the headers once.

:meth:`LeaderEpochCache.end_offset_for` answers with Kafka's rules (``endOffsetFor``): the
latest epoch ends at the log end offset; an older one at the start of the next known epoch,
reported with the largest known epoch not above it; one older than every entry at the first
entry's start; an unknown (-1) or too-new epoch gets (-1, -1).
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

import attrs

from trikafka.protocol.records import iter_batches

__all__ = ["EpochEntry", "LeaderEpochCache", "UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET"]

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
_READ_BYTES = 1 << 20


@attrs.frozen
class EpochEntry:
    epoch: int
    start_offset: int


class LeaderEpochCache:
    def __init__(self) -> None:
        self.entries: list[EpochEntry] = []
        self._scanned_to = 0  # the offset after the last batch read

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """Epoch ``epoch`` wrote from ``start_offset`` on. An epoch not newer than the latest is
        ignored; entries the new one contradicts (same or later start) are dropped."""
        if epoch < 0 or (self.entries and epoch <= self.latest_epoch):
            return
        while self.entries and self.entries[-1].start_offset >= start_offset:
            self.entries.pop()
        self.entries.append(EpochEntry(epoch, start_offset))

    def truncate_from_start(self, log_start_offset: int) -> None:
        """Drop epochs wholly below the new log start; clamp the one that spans it."""
        keep = [e for e in self.entries if e.start_offset >= log_start_offset]
        below = [e for e in self.entries if e.start_offset < log_start_offset]
        if below and (not keep or keep[0].start_offset > log_start_offset):
            keep.insert(0, EpochEntry(below[-1].epoch, log_start_offset))
        self.entries = keep

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop epochs that began at or after ``end_offset`` (the log was cut back to it)."""
        self.entries = [e for e in self.entries if e.start_offset < end_offset]
        self._scanned_to = min(self._scanned_to, end_offset)

    def end_offset_for(self, requested: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch; see the module doc."""
        if requested == UNDEFINED_EPOCH or not self.entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested == self.latest_epoch:
            return requested, log_end_offset
        epochs = [e.epoch for e in self.entries]
        higher = bisect_right(epochs, requested)
        if higher == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested, self.entries[0].start_offset
        return self.entries[higher - 1].epoch, self.entries[higher].start_offset

    def catch_up(self, log: Any) -> None:
        """Read the batch headers ``log`` appended since the last call (``Log`` public API:
        ``log_start_offset``, ``log_end_offset``, ``read``)."""
        end = log.log_end_offset
        if end < self._scanned_to:  # cut back: re-read from the start
            self.entries = []
            self._scanned_to = 0
        position = max(self._scanned_to, log.log_start_offset)
        while position < end:
            data = log.read(position, _READ_BYTES, min_one_batch=True)
            records = data.records if data is not None else b""
            if not records:
                break
            for header in iter_batches(records, validate_records=False):
                if header.last_offset >= position:
                    self.assign(header.partition_leader_epoch, max(header.base_offset, position))
                position = max(position, header.next_offset)
        self._scanned_to = max(self._scanned_to, position)
        self.truncate_from_start(log.log_start_offset)
