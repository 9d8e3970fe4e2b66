"""Log compaction, sans-IO: which part of a log is cleanable, the key → last offset map, and the
rewriting of batches. Bytes and numbers in, bytes and numbers out; the Trio task and the files
are :mod:`trikafka.log.cleaner`'s.

Kafka's rules (``LogCleaner``, ``LogCleanerManager``, KIP-58, KIP-354, KIP-534):

* A compacted log has a *clean* head (already compacted, below the cleaner's checkpoint, the
  "first dirty offset") and a *dirty* tail. Only offsets below the **first uncleanable
  offset** may be cleaned: the active segment's base offset, the last stable offset (an open
  transaction's data is never compacted), and — with ``min.compaction.lag.ms`` — the first
  segment holding a record younger than the lag.
* A log is cleaned when its dirty share of the cleanable bytes reaches
  ``min.cleanable.dirty.ratio``, or when its oldest dirty record is older than
  ``max.compaction.lag.ms`` (then regardless of the ratio).
* The **offset map** holds, for each key in the dirty section, the offset of its last record.
  A record below the map's end is kept when no later record has its key; records at or past
  the end are kept as they are. Records without a key are dropped (a compacted topic refuses
  them on produce; Kafka's cleaner drops those that got in earlier).
* **Tombstones** (a key with a null value) are kept until their batch's *delete horizon*
  passes. The first cleaning that sees a batch holding tombstones rewrites it with the horizon
  ``now + delete.retention.ms`` in its base timestamp and attribute bit 6 (KIP-534); a later
  cleaning after the horizon drops the tombstones. A consumer that reads from the start within
  ``delete.retention.ms`` of a delete therefore sees the tombstone.
* **Transactions**: data batches of aborted transactions are removed outright (their records
  are not part of the log's meaning). Transaction markers are kept. (Kafka removes a marker
  once its delete horizon has passed and no data of its transaction is left; we keep them:
  a few dozen bytes per transaction.)
* **Batches keep their identity**: a rewritten batch keeps its base offset, last offset delta,
  producer id and epoch, base sequence and partition leader epoch, so offsets never change
  (gaps appear between and inside batches) and idempotent producers' sequences stay right. A
  batch all of whose records go is dropped (Kafka keeps an empty batch when it is its
  producer's last, to preserve producer state across restarts; trikafka's producer state is
  not rebuilt from the log, so nothing depends on it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import attrs

from trikafka.protocol.batch_layout import BatchHeader, Record
from trikafka.protocol.batch_records import decode_records
from trikafka.protocol.compression import compress
from trikafka.protocol.record_builder import DELETE_HORIZON_BIT, build_retained_batch
from trikafka.protocol.records import iter_batches

__all__ = ["CleanPlan", "build_offset_map", "filter_batches", "plan_cleaning", "segment_bytes"]

#: ``(producer id, offset) → True`` when that transactional data belongs to an aborted transaction.
IsAborted = Callable[[int, int], bool]


@attrs.frozen
class CleanPlan:
    """What one cleaning of one log does: map ``[first_dirty, end)``, rewrite the segments
    ``groups`` (lists of segments, each group becoming one segment)."""

    first_dirty: int
    end: int
    dirty_ratio: float
    forced: bool  # by max.compaction.lag.ms
    groups: tuple[tuple[Any, ...], ...]


def plan_cleaning(log: Any, first_dirty: int, now_ms: float) -> CleanPlan | None:
    """The cleaning ``log`` needs now, or None. Uses the ``Log`` public interface only:
    ``config``, ``segments``, ``log_start_offset``, ``last_stable_offset``."""
    config = log.config
    if not config.compact_enabled:
        return None
    segments = list(log.segments)
    active = segments[-1]
    first_dirty = max(first_dirty, log.log_start_offset)
    uncleanable = min(active.base_offset, log.last_stable_offset.value)
    if config.min_compaction_lag_ms > 0:
        for segment in segments:
            if segment.next_offset > first_dirty and segment.largest_timestamp > now_ms - config.min_compaction_lag_ms:
                uncleanable = min(uncleanable, segment.base_offset)
                break
    if first_dirty >= uncleanable:
        return None
    cleanable = [s for s in segments[:-1] if s.base_offset < uncleanable and s.size]
    clean_bytes = sum(s.size for s in cleanable if s.next_offset <= first_dirty)
    dirty_segments = [s for s in cleanable if s.next_offset > first_dirty]
    dirty_bytes = sum(s.size for s in dirty_segments)
    if not dirty_bytes:
        return None
    ratio = dirty_bytes / (clean_bytes + dirty_bytes)
    forced = False
    if config.max_compaction_lag_ms < 2**63 - 1:
        first_timestamp = _first_timestamp(dirty_segments[0])
        forced = first_timestamp >= 0 and now_ms - first_timestamp > config.max_compaction_lag_ms
    if ratio < config.min_cleanable_dirty_ratio and not forced:
        return None
    return CleanPlan(first_dirty, uncleanable, ratio, forced, _group(cleanable, config.segment_bytes))


def _first_timestamp(segment: Any) -> int:
    for header in segment.scan(0):
        return header.base_timestamp if not header.attributes & DELETE_HORIZON_BIT else header.max_timestamp
    return -1


def _group(segments: list[Any], max_bytes: int) -> tuple[tuple[Any, ...], ...]:
    """Consecutive segments whose total size fits one segment (Kafka's groupSegmentsBySize;
    relative offsets must fit the int32 index too)."""
    groups: list[list[Any]] = []
    for segment in segments:
        if groups:
            group = groups[-1]
            size = sum(s.size for s in group) + segment.size
            if size <= max_bytes and segment.next_offset - group[0].base_offset < 2**31 - 1:
                group.append(segment)
                continue
        groups.append([segment])
    return tuple(tuple(g) for g in groups)


def segment_bytes(segment: Any) -> bytes:
    """All of a (read-only) segment's bytes. A file segment is read through its own
    descriptor, by path: this runs in the cleaner's worker thread, and the store's shared
    descriptors (bounded, recycled by the event loop) are not for other threads."""
    paths = getattr(segment.store, "paths", None)
    if paths is not None:
        with open(paths[".log"], "rb") as f:
            return f.read(segment.size)
    return b"".join(bytes(chunk) for chunk in segment.store.read(0, segment.size))


def build_offset_map(
    chunks: Iterable[bytes],
    start: int,
    end: int,
    is_aborted: IsAborted,
    offset_map: dict[bytes, int],
    max_entries: int | None = None,
) -> int:
    """Fill ``offset_map`` with key → offset of its last record among the records in
    ``[start, end)`` of ``chunks`` (whole batches, in offset order); control batches and
    aborted data do not count. Returns where the map ends: ``end``, or — when a batch would
    take the map past ``max_entries`` (``log.cleaner.dedupe.buffer.size``) — that batch's base
    offset, so the cleaning stops there and the rest waits for the next round (Kafka's
    cleaner does the same; the first batch always goes in, so a round always progresses)."""
    for data in chunks:
        for header in iter_batches(data, validate_records=False):
            if header.last_offset < start or header.base_offset >= end or header.is_control:
                continue
            if header.is_transactional and is_aborted(header.producer_id, header.base_offset):
                continue
            if max_entries is not None and offset_map and len(offset_map) + header.record_count > max_entries:
                return max(header.base_offset, start)
            for record in decode_records(data, header):
                if start <= record.offset < end and record.key is not None:
                    offset_map[record.key] = record.offset
    return end


def filter_batches(
    data: bytes,
    offset_map: dict[bytes, int],
    end: int,
    *,
    now_ms: float,
    delete_retention_ms: int,
    is_aborted: IsAborted,
) -> bytes:
    """``data``'s batches after compaction (see the module doc)."""
    out = bytearray()
    for header in iter_batches(data, validate_records=False):
        raw = memoryview(data)[header.position : header.end]
        if header.is_control or header.base_offset >= end:
            out += raw
            continue
        if header.is_transactional and is_aborted(header.producer_id, header.base_offset):
            continue
        kept = _retained(data, header, offset_map, end, now_ms)
        if not kept:
            continue
        horizon = header.base_timestamp if header.attributes & DELETE_HORIZON_BIT else None
        needs_horizon = horizon is None and any(r.value is None for r in kept)
        if len(kept) == header.record_count and not needs_horizon:
            out += raw  # untouched: the stored bytes as they are
            continue
        if needs_horizon:
            horizon = int(now_ms) + delete_retention_ms
        elif not any(r.value is None for r in kept):
            horizon = None  # no tombstone left: no horizon to keep
        out += build_retained_batch(header, kept, delete_horizon_ms=horizon, compress=compress)
    return bytes(out)


def _retained(data: bytes, header: BatchHeader, offset_map: dict[bytes, int], end: int, now_ms: float) -> list[Record]:
    records = decode_records(data, header)
    horizon_passed = bool(header.attributes & DELETE_HORIZON_BIT) and now_ms > header.base_timestamp
    kept = []
    for record in records:
        if record.offset >= end:
            kept.append(record)
            continue
        if record.key is None:
            continue
        if offset_map.get(record.key, -1) > record.offset:
            continue  # a later record has this key
        if record.value is None and horizon_passed:
            continue  # a tombstone past its delete horizon
        kept.append(record)
    return kept
