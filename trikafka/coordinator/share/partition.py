"""A share partition (KIP-932): which records of one topic-partition a share group has in flight.

Theory of operation
-------------------
A share group reads a partition as a queue. The records between the share-partition start
offset (SPSO) and its end offset (``end_offset``: the next offset never handed out) are *in
flight*; each has a state and a delivery count:

* ``AVAILABLE``  — may be handed out (again) by the next ShareFetch;
* ``ACQUIRED``   — handed to one member, locked until ``share.record.lock.duration.ms`` after
  its acquisition (a RENEW acknowledgement pushes the lock back);
* ``ACKNOWLEDGED`` — accepted by its member: done;
* ``ARCHIVED``   — rejected, a gap (no record at that offset), or delivered
  ``share.delivery.count.limit`` times without being accepted: done, never delivered again.

Acquiring an offset counts one more delivery. A released record (RELEASE, its lock expiring,
its member leaving) becomes AVAILABLE again — or ARCHIVED when its delivery count has reached
the limit. When the records at the SPSO are done (ACKNOWLEDGED or ARCHIVED) the SPSO moves past
them and they are forgotten; offsets at or above ``end_offset`` have never been handed out.
``share.partition.max.record.locks`` bounds how far ``end_offset`` may run ahead of the SPSO.

The machine is pure: it takes ``now`` (trio time, seconds) and returns what changed; the
share-partition manager (``manager.py``) owns the timer that calls :meth:`expire_locks` at
:meth:`next_deadline`, so trio's clock (and a ``MockClock``) drives lock expiry. Kafka tracks
in-flight records by batch and splits batches on demand; this keeps one entry per offset,
bounded by the record-lock limit.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Iterator

import attrs

from trikafka.errors import ErrorCode, KafkaProtocolError

__all__ = ["AckType", "InFlight", "RecordState", "SharePartition", "SharePartitionLimits"]


class RecordState(enum.Enum):
    AVAILABLE = "Available"
    ACQUIRED = "Acquired"
    ACKNOWLEDGED = "Acknowledged"
    ARCHIVED = "Archived"


class AckType(enum.IntEnum):
    """The acknowledge types of ShareFetch/ShareAcknowledge (0 is a gap: no record there)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4  # ShareAcknowledge/ShareFetch v2 (KIP-1222)


DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


@attrs.define
class InFlight:
    state: RecordState
    delivery_count: int = 0
    member_id: str | None = None
    deadline: float = math.inf  # trio time the acquisition lock expires


@attrs.frozen
class SharePartitionLimits:
    """The group configs that govern a share partition, read at each call (they may change)."""

    lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    max_record_locks: int = 2_000


@attrs.define
class SharePartition:
    group_id: str
    topic: str
    partition: int
    start_offset: int = -1  # -1: not initialized (share.auto.offset.reset decides)
    end_offset: int = -1
    #: The topic's id when this state was made: a topic deleted and created again under the
    #: same name is another topic (Kafka keys share partitions by topic id).
    topic_id: str | None = None
    in_flight: dict[int, InFlight] = attrs.Factory(dict)
    #: Records archived because their delivery count reached the limit or they were rejected,
    #: as (offset, delivery count, reason), for the dead-letter queue; drained by the manager.
    archived_for_dlq: list[tuple[int, int, str]] = attrs.Factory(list)
    #: Records that became ACKNOWLEDGED / ARCHIVED since the broker started (they leave
    #: ``in_flight`` once the SPSO passes them): what the test kit's waits count.
    totals: dict[str, int] = attrs.Factory(lambda: {"Acknowledged": 0, "Archived": 0})
    #: Records acknowledged since the broker started, by Kafka's ``ackType`` tag (Accept,
    #: Release, Reject, Renew), and acquisition locks that timed out: what ``/metrics`` serves.
    acknowledgements: dict[str, int] = attrs.Factory(dict)
    lock_timeouts: int = 0
    #: The partition's leader has loaded this state since the broker started (Kafka's
    #: SharePartitionManager reads it from the share coordinator when a ShareFetch first names
    #: the partition): a fetch over partitions not loaded yet answers with the first one ready.
    loaded: bool = False

    def in_flight_batches(self) -> int:
        """Kafka's InFlightBatchCount: runs of consecutive in-flight offsets in one state, with
        one holder, delivery count and lock (what Kafka's cached state keeps as one batch)."""
        batches, previous, last = 0, None, None
        for offset in sorted(self.in_flight):
            record = self.in_flight[offset]
            shape = (record.state, record.member_id, record.delivery_count, record.deadline)
            if shape != previous or last is None or offset != last + 1:
                batches += 1
            previous, last = shape, offset
        return batches

    @property
    def initialized(self) -> bool:
        return self.start_offset >= 0

    def initialize(self, offset: int) -> None:
        self.start_offset = self.end_offset = offset

    # --- reading ---------------------------------------------------------------------------

    def next_fetch_offset(self) -> int:
        """Where the next read of the log starts: the first AVAILABLE record, else the end."""
        available = [o for o, r in self.in_flight.items() if r.state is RecordState.AVAILABLE]
        return min(available) if available else self.end_offset

    def has_available(self, log_end: int) -> bool:
        """Whether a fetch could acquire something now (a released record or new data)."""
        if any(r.state is RecordState.AVAILABLE for r in self.in_flight.values()):
            return True
        return self.end_offset < log_end

    def next_deadline(self) -> float:
        deadlines = [r.deadline for r in self.in_flight.values() if r.state is RecordState.ACQUIRED]
        return min(deadlines, default=math.inf)

    def counts(self) -> dict[str, int]:
        """How many in-flight records are in each state."""
        out = {s.value: 0 for s in RecordState}
        for record in self.in_flight.values():
            out[record.state.value] += 1
        return out

    # --- acquiring ---------------------------------------------------------------------------

    def acquire(
        self,
        member_id: str,
        batches: Iterable[tuple[int, int, bool]],
        max_records: int,
        now: float,
        limits: SharePartitionLimits,
        skip: Iterable[int] = (),
    ) -> list[tuple[int, int, int]]:
        """Acquire for ``member_id`` up to ``max_records`` records from ``batches`` (the
        log's batches just read: ``(first offset, last offset, is control)``), locking each
        until ``now`` + the lock duration. ``skip`` are offsets that are no records to deliver
        (aborted transactions under read_committed): they are archived like control records.
        Returns the acquired ranges ``(first, last, delivery count)``."""
        deadline = now + limits.lock_duration_ms / 1000
        skipped = set(skip)
        acquired: list[int] = []
        for offset, is_control in _offsets(batches, self.start_offset):
            if len(acquired) >= max_records:
                break
            record = self.in_flight.get(offset)
            if record is None:
                if offset < self.end_offset:
                    continue  # done and forgotten already
                if offset - self.start_offset >= limits.max_record_locks:
                    # The in-flight window is full: stop. Every later offset is past the end
                    # too; it stays unread (never taken for a gap) until the SPSO moves on.
                    break
                if offset > self.end_offset:  # compacted away, or a gap: nothing to deliver
                    for gap in range(self.end_offset, offset):
                        self.in_flight[gap] = InFlight(RecordState.ARCHIVED)
                        self.totals["Archived"] += 1
                    self.end_offset = offset
                record = self.in_flight[offset] = InFlight(RecordState.AVAILABLE)
                self.end_offset = offset + 1
                if is_control or offset in skipped:
                    self._finish(record, RecordState.ARCHIVED)
                    continue
            if record.state is not RecordState.AVAILABLE:
                continue
            record.state = RecordState.ACQUIRED
            record.delivery_count += 1
            record.member_id = member_id
            record.deadline = deadline
            acquired.append(offset)
        self._advance_start()
        return _ranges(acquired, self.in_flight)

    def skip_to(self, offset: int) -> None:
        """The log no longer holds records below ``offset`` (retention, DeleteRecords): the
        share partition starts there, whatever was in flight below it."""
        if offset <= self.start_offset:
            return
        for o in [o for o in self.in_flight if o < offset]:
            del self.in_flight[o]
        self.start_offset = offset
        self.end_offset = max(self.end_offset, offset)

    # --- acknowledging -----------------------------------------------------------------------

    def acknowledge(
        self, member_id: str, first: int, last: int, types: tuple[int, ...], now: float,
        limits: SharePartitionLimits,
    ) -> None:
        """Apply one acknowledgement batch from ``member_id``; INVALID_RECORD_STATE (nothing
        applied) if any offset of it is not acquired by that member."""
        if last < first or not types or (len(types) != 1 and len(types) != last - first + 1):
            raise KafkaProtocolError(f"invalid acknowledgement batch {first}-{last}", ErrorCode.invalid_request)
        kinds: list[AckType] = []
        for t in types:
            try:
                kinds.append(AckType(t))
            except ValueError:
                raise KafkaProtocolError(f"unknown acknowledge type {t}", ErrorCode.invalid_request) from None
        for offset in range(first, last + 1):
            kind = kinds[0] if len(kinds) == 1 else kinds[offset - first]
            record = self.in_flight.get(offset)
            if kind is AckType.GAP and (record is None or record.state is RecordState.ARCHIVED):
                continue
            if record is None or record.state is not RecordState.ACQUIRED or record.member_id != member_id:
                raise KafkaProtocolError(
                    f"offset {offset} of {self.topic}-{self.partition} is not acquired by {member_id}",
                    ErrorCode.invalid_record_state,
                )
        for offset in range(first, last + 1):
            kind = kinds[0] if len(kinds) == 1 else kinds[offset - first]
            record = self.in_flight.get(offset)
            if record is None or record.state is not RecordState.ACQUIRED:
                continue
            if kind is not AckType.GAP:
                name = kind.name.capitalize()
                self.acknowledgements[name] = self.acknowledgements.get(name, 0) + 1
            if kind is AckType.ACCEPT:
                self._finish(record, RecordState.ACKNOWLEDGED)
            elif kind is AckType.RELEASE:
                self._release(offset, record, limits)
            elif kind is AckType.RENEW:
                record.deadline = now + limits.lock_duration_ms / 1000
            else:  # REJECT, or GAP on an acquired offset
                self._finish(record, RecordState.ARCHIVED)
                if kind is AckType.REJECT:
                    self.archived_for_dlq.append((offset, record.delivery_count, "REJECTED"))
        self._advance_start()

    # --- releasing ---------------------------------------------------------------------------

    def expire_locks(self, now: float, limits: SharePartitionLimits) -> int:
        """Release every record whose lock has expired; how many were released."""
        expired = [
            (o, r) for o, r in self.in_flight.items() if r.state is RecordState.ACQUIRED and r.deadline <= now
        ]
        for offset, record in expired:
            self._release(offset, record, limits)
        self._advance_start()
        self.lock_timeouts += len(expired)
        return len(expired)

    def release_member(self, member_id: str, limits: SharePartitionLimits) -> int:
        """Release what ``member_id`` holds (its share session closed, it left the group)."""
        held = [
            (o, r) for o, r in self.in_flight.items()
            if r.state is RecordState.ACQUIRED and r.member_id == member_id
        ]
        for offset, record in held:
            self._release(offset, record, limits)
        self._advance_start()
        return len(held)

    def reset_to(self, offset: int) -> None:
        """AlterShareGroupOffsets: start again at ``offset``, nothing in flight."""
        self.in_flight.clear()
        self.start_offset = self.end_offset = offset

    # --- inside ------------------------------------------------------------------------------

    def _release(self, offset: int, record: InFlight, limits: SharePartitionLimits) -> None:
        if record.delivery_count >= limits.delivery_count_limit:
            self._finish(record, RecordState.ARCHIVED)
            self.archived_for_dlq.append((offset, record.delivery_count, "DELIVERY_COUNT_EXCEEDED"))
        else:
            record.state = RecordState.AVAILABLE
            record.member_id = None
            record.deadline = math.inf

    def _finish(self, record: InFlight, state: RecordState) -> None:
        self.totals[state.value] += 1
        record.state = state
        record.member_id = None
        record.deadline = math.inf

    def _advance_start(self) -> None:
        while True:
            record = self.in_flight.get(self.start_offset)
            if record is None or record.state not in DONE:
                return
            del self.in_flight[self.start_offset]
            self.start_offset += 1


def _offsets(batches: Iterable[tuple[int, int, bool]], start: int) -> Iterator[tuple[int, bool]]:
    """Each offset of ``batches`` from ``start`` on, with whether its batch is a control batch."""
    for first, last, is_control in batches:
        for offset in range(max(first, start), last + 1):
            yield offset, is_control


def _ranges(offsets: list[int], in_flight: dict[int, InFlight]) -> list[tuple[int, int, int]]:
    """Sorted offsets → contiguous ``(first, last, delivery count)`` runs of equal count."""
    ranges: list[tuple[int, int, int]] = []
    for offset in sorted(offsets):
        count = in_flight[offset].delivery_count
        if ranges and ranges[-1][1] == offset - 1 and ranges[-1][2] == count:
            ranges[-1] = (ranges[-1][0], offset, count)
        else:
            ranges.append((offset, offset, count))
    return ranges
