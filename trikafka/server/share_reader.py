"""Reading a partition's log for a share group: where a share partition starts, and which of
the batches just read a member acquires.

``share.auto.offset.reset`` decides where a share partition with no state starts: ``latest``
(the high watermark), ``earliest`` (the log start) or ``by_duration:<ISO-8601>`` (the first
record at or after now minus the duration; the high watermark when there is none). Under
``share.isolation.level=read_committed`` the read stops at the last stable offset and the
records of aborted transactions are archived, never delivered, as control records always are.

The answer carries the whole batches read (the client keeps only the offsets in the acquired
ranges, as Kafka's clients do): a record is never rewritten on its way out.
"""

from __future__ import annotations

from typing import Any

import attrs

from trikafka.config.share import parse_duration_ms
from trikafka.coordinator.share.partition import SharePartition, SharePartitionLimits
from trikafka.log.slices import materialize
from trikafka.protocol.records import parse_batch_header

__all__ = ["ShareRead", "initial_offset", "read_and_acquire"]

CONTROL_BIT = 0x20
HEADER_SIZE = 61


@attrs.frozen
class ShareRead:
    records: bytes
    acquired: list[tuple[int, int, int]]  # (first, last, delivery count)

    @property
    def count(self) -> int:
        return sum(last - first + 1 for first, last, _ in self.acquired)


def initial_offset(partition_log: Any, reset: str, now_ms: float) -> int:
    """Where a share partition without state starts (``share.auto.offset.reset``)."""
    offset: int
    if reset == "earliest":
        offset = partition_log.log_start_offset
        return offset
    if reset.startswith("by_duration:"):
        found = partition_log.offset_for_timestamp(int(now_ms - parse_duration_ms(reset.split(":", 1)[1])))
        if found is not None:
            offset = max(found[0], partition_log.log_start_offset)
            return offset
    offset = partition_log.high_watermark.value
    return offset


def _batches(data: bytes) -> list[tuple[int, int, bool, int]]:
    """(first offset, last offset, is control, producer id) of each whole batch in ``data``."""
    out = []
    position = 0
    while position + HEADER_SIZE <= len(data):
        header = parse_batch_header(data, position)
        if position + header.size > len(data):
            break
        out.append((header.base_offset, header.base_offset + header.last_offset_delta,
                    bool(header.attributes & CONTROL_BIT), header.producer_id))
        position += header.size
    return out


def read_and_acquire(
    sp: SharePartition,
    partition_log: Any,
    member_id: str,
    *,
    max_records: int,
    max_bytes: int,
    now: float,
    limits: SharePartitionLimits,
    committed: bool,
) -> ShareRead:
    """Acquire up to ``max_records`` records of ``sp`` for ``member_id`` from its log."""
    if sp.start_offset < partition_log.log_start_offset:
        sp.skip_to(partition_log.log_start_offset)
    end = partition_log.last_stable_offset.value if committed else partition_log.high_watermark.value
    offset = sp.next_fetch_offset()
    if offset >= end or max_records <= 0:
        return ShareRead(b"", [])
    found = partition_log.read(offset, max(max_bytes, 1), min_one_batch=True,
                               max_offset=end if committed else None)
    data = b"".join(materialize(c) for c in found.chunks)
    batches = [b for b in _batches(data) if b[0] < end]
    if not batches:
        return ShareRead(b"", [])
    skip: list[int] = []
    if committed and partition_log.transactions.aborted:
        aborted = partition_log.aborted_transactions(batches[0][0], batches[-1][1] + 1)
        for first, last, is_control, producer_id in batches:
            if not is_control and any(t.producer_id == producer_id and t.first_offset <= first <= t.last_offset
                                      for t in aborted):
                skip.extend(range(first, last + 1))
    acquired = sp.acquire(member_id, [(f, min(last, end - 1), c) for f, last, c, _ in batches],
                          max_records, now, limits, skip)
    if not acquired:
        return ShareRead(b"", [])
    return ShareRead(data, acquired)
