"""The log cleaner: compaction of ``cleanup.policy=compact`` logs, one broker task.

Theory of operation
-------------------
:class:`LogCleaner` runs in the broker's nursery (``log.cleaner.enable``). Each round it asks
:func:`~trikafka.log.cleaner_core.plan_cleaning` which compacted logs need cleaning (dirty
ratio, ``max.compaction.lag.ms``), takes the filthiest, and cleans it in three steps:

1. **compute** — in a worker thread: read the dirty section, build the key → last offset map,
   rewrite each group of segments (:func:`~trikafka.log.cleaner_core.filter_batches`); for a
   file log also write each group's result to ``<base>.log.cleaned`` and fsync it. Only
   read-only segments are read (never the active one), so appends go on meanwhile.
2. **commit** — back on the event loop, with no ``await`` in between, so no request sees a
   half-swapped log: if the log still holds the same segments (retention or a deletion may
   have come first; then the work is dropped), each group is swapped for its cleaned copy.
   File logs follow Kafka's protocol: ``.cleaned`` is renamed ``.swap`` (the commit point),
   the old segments are renamed ``.deleted``, the ``.swap`` becomes the ``.log``. A crash
   anywhere is repaired at the next start (:func:`~trikafka.log.cleaner_files.complete_swaps`:
   a ``.cleaned`` is dropped, a ``.swap`` finishes replacing the segments its offsets cover).
3. **checkpoint** — the log's first dirty offset becomes the end of the map, and file logs'
   go to ``cleaner-offset-checkpoint`` in their log directory (Kafka's file and format), so a
   restart does not count an already clean head as dirty. An entry above a log's end (the
   topic was deleted and made again) is ignored.

When nothing needs cleaning the task sleeps ``log.cleaner.backoff.ms`` on trio's clock.
:meth:`LogCleaner.clean_once` runs one whole round synchronously for deterministic tests.
"""

from __future__ import annotations

import logging
import os
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import trio
from trio_util import AsyncValue

from trikafka.clock import Clock
from trikafka.log.cleaner_core import (
    CleanPlan,
    build_offset_map,
    filter_batches,
    plan_cleaning,
    segment_bytes,
)
from trikafka.log.cleaner_files import CLEANED_SUFFIX, SWAP_SUFFIX, fsync_directory
from trikafka.log.manager import is_file_log, read_checkpoint, write_checkpoint
from trikafka.log.memory import MemoryStore
from trikafka.log.segment import Segment
from trikafka.log.unopened import UnopenedLog

if TYPE_CHECKING:
    from trikafka.log.file import FileLog

__all__ = ["CLEANER_CHECKPOINT", "CleanerStatistics", "LogCleaner", "clean_log"]

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"

logger = logging.getLogger(__name__)


@attrs.frozen
class CleanerStatistics:
    cleanings: int
    bytes_read: int
    bytes_written: int


@attrs.frozen
class _Cleaned:
    """One group of segments and what replaces it (bytes; for file logs, the written path)."""

    group: tuple[Segment, ...]
    data: bytes
    cleaned_path: Path | None
    old_size: int
    #: The cleaned segment in memory, its indexes built in the worker thread (a memory log
    #: takes it as is; a file log takes its indexes, so the event loop never scans a file).
    segment: Segment | None
    #: Where the offset map ended: the log's next first dirty offset.
    end: int


def _aborted_checker(log: Any) -> Callable[[int, int], bool]:
    aborted = list(log.transactions.aborted)

    def is_aborted(producer_id: int, offset: int) -> bool:
        return any(t.producer_id == producer_id and t.first_offset <= offset <= t.last_offset for t in aborted)

    return is_aborted


#: Kafka's ``log.cleaner.dedupe.buffer.size`` holds 24-byte entries (a 16-byte key hash and
#: an offset) at most 90 % full (``log.cleaner.io.buffer.load.factor``).
BYTES_PER_MAP_ENTRY = 24
MAP_LOAD_FACTOR = 0.9


def map_capacity(dedupe_buffer_size: int) -> int:
    """Keys one cleaning may map, as Kafka counts them."""
    return max(1, int(dedupe_buffer_size / BYTES_PER_MAP_ENTRY * MAP_LOAD_FACTOR))


def compute(log: Any, plan: CleanPlan, now_ms: float, max_entries: int | None = None) -> list[_Cleaned]:
    """Step 1 (thread-safe: reads read-only segments, writes only ``.cleaned`` files)."""
    is_aborted = _aborted_checker(log)
    offset_map: dict[bytes, int] = {}
    end = plan.end
    for segment in log.segments[:-1]:
        if segment.next_offset > plan.first_dirty and segment.base_offset < end:
            reached = build_offset_map(
                [segment_bytes(segment)], plan.first_dirty, end, is_aborted, offset_map, max_entries
            )
            if reached < end:
                end = reached
                break
    results = []
    for group in plan.groups:
        if group[0].base_offset >= end:
            break  # past the map: nothing to decide there this round
        data = b"".join(
            filter_batches(
                segment_bytes(segment),
                offset_map,
                end,
                now_ms=now_ms,
                delete_retention_ms=log.config.delete_retention_ms,
                is_aborted=is_aborted,
            )
            for segment in group
        )
        base = group[0].base_offset
        path = _write_cleaned(log.directory, base, data) if data and is_file_log(log) else None
        segment = None
        if data:
            store = MemoryStore()
            store.append(data)
            segment = Segment(base, store, index_interval_bytes=log.config.index_interval_bytes)
            segment.recover(base)
        results.append(_Cleaned(group, data, path, sum(s.size for s in group), segment, end))
    return results


def _write_cleaned(directory: Path, base_offset: int, data: bytes) -> Path:
    from trikafka.log.file import segment_file_name  # a file log is open: no import
    path = directory / (segment_file_name(base_offset) + CLEANED_SUFFIX)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    return path


def commit(log: Any, cleaned: Sequence[_Cleaned], now_ms: float) -> bool:
    """Step 2, on the event loop; False (nothing changed) if the log moved on meanwhile."""
    present = {id(s) for s in log.segments[:-1]}
    if log.closed or any(id(s) not in present for c in cleaned for s in c.group):
        for c in cleaned:
            if c.cleaned_path is not None:
                c.cleaned_path.unlink(missing_ok=True)
        return False
    file_log = is_file_log(log)
    for c in cleaned:
        base = c.group[0].base_offset
        if file_log:
            new = _swap_in_file(log, c, base)
        else:
            new = _memory_segment(log, c, base)
        if new is not None:
            new.last_modified_ms = max(s.last_modified_ms for s in c.group)
        log.replace_segments(c.group, new)
        for old in c.group:
            if file_log:
                from trikafka.log.file import DELETED_SUFFIX  # a file log is open: no import

                # Not ``store.delete()``: it would unlink ``<base>.log`` too — now the swap's.
                for path in old.store.paths.values():  # type: ignore[attr-defined]  # a file log: FileStores
                    path.with_name(path.name + DELETED_SUFFIX).unlink(missing_ok=True)
            else:
                old.store.delete()
    return True


def _memory_segment(log: Any, c: _Cleaned, base: int) -> Segment | None:
    for old in c.group:
        old.store.mark_deleted()
    return c.segment


def _swap_in_file(log: FileLog, c: _Cleaned, base: int) -> Segment | None:
    from trikafka.log.file import FileStore, segment_file_name  # a file log is open: no import

    directory = log.directory
    if c.cleaned_path is None:  # nothing left: the old segments simply go
        for old in c.group:
            old.store.mark_deleted()
        fsync_directory(directory)
        return None
    swap = directory / (segment_file_name(base) + SWAP_SUFFIX)
    os.rename(c.cleaned_path, swap)
    fsync_directory(directory)  # the commit point: a restart now completes the swap
    for old in c.group:
        old.store.mark_deleted()
    os.rename(swap, directory / segment_file_name(base))
    fsync_directory(directory)
    built = c.segment
    assert built is not None
    segment = Segment(
        base,
        FileStore(directory, base, log.io, log.open_files),
        index_interval_bytes=log.config.index_interval_bytes,
        offset_index=built.offset_index,
        time_index=built.time_index,
    )
    segment.next_offset = built.next_offset
    segment.max_timestamp = built.max_timestamp
    segment.offset_of_max_timestamp = built.offset_of_max_timestamp
    segment.rolling_base_ms = built.rolling_base_ms
    segment.dirty = True  # its indexes are written at the next flush
    return segment


def clean_log(log: Any, first_dirty: int, now_ms: float) -> tuple[CleanPlan, int, int] | None:
    """Plan, compute and commit one cleaning of ``log`` synchronously; (plan, bytes before,
    bytes after) or None when it needs none. For tests and :meth:`LogCleaner.clean_once`."""
    plan = plan_cleaning(log, first_dirty, now_ms)
    if plan is None:
        return None
    cleaned = compute(log, plan, now_ms)
    before = sum(c.old_size for c in cleaned)
    if not commit(log, cleaned, now_ms):
        return None
    return plan, before, sum(len(c.data) for c in cleaned)


class LogCleaner:
    """The broker's cleaner task; see the module docstring."""

    def __init__(
        self,
        log_manager: Any,
        *,
        backoff_ms: int,
        clock: Clock,
        dedupe_buffer_size: int = 134217728,
    ) -> None:
        self.log_manager = log_manager
        self.max_map_entries = map_capacity(dedupe_buffer_size)
        self.backoff_ms = backoff_ms
        self._clock = clock
        self._first_dirty: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self._stats = CleanerStatistics(0, 0, 0)
        #: Cleanings done so far, as a value one can wait on: a cleaning computes in a worker
        #: thread, so under an autojump MockClock virtual time runs on while it does.
        self.cleaned = AsyncValue(0)
        #: Log directory → its cleaner-offset-checkpoint entries.
        self._checkpoints = {
            Path(d): read_checkpoint(Path(d) / CLEANER_CHECKPOINT) for d in (log_manager.log_dirs or ())
        }


    def reconfigure(self, *, backoff_ms: int, dedupe_buffer_size: int) -> None:
        """New ``log.cleaner.backoff.ms`` / ``log.cleaner.dedupe.buffer.size``, at run time:
        the next pause and the next cleaning use them."""
        self.backoff_ms = backoff_ms
        self.max_map_entries = map_capacity(dedupe_buffer_size)

    def first_dirty_offset(self, log: Any) -> int:
        """Where the log's dirty section starts: this run's memory, else the checkpoint."""
        found = self._first_dirty.get(log)
        if found is not None:
            return found
        directory = getattr(log, "directory", None)
        if directory is not None:
            saved = self._checkpoints.get(Path(directory).parent, {}).get((log.topic, log.partition), 0)
            if saved <= log.log_end_offset:
                return saved
        return 0

    def _checkpoint(self, log: Any, offset: int) -> Path | None:
        """Record ``offset`` for a file log; the directory whose checkpoint must be written."""
        directory = getattr(log, "directory", None)
        if directory is None:
            return None
        log_dir = Path(directory).parent
        entries = self._checkpoints.setdefault(log_dir, {})
        entries[(log.topic, log.partition)] = offset
        alive = set(self.log_manager.logs)
        for gone in [key for key in entries if key not in alive]:
            del entries[gone]
        return log_dir

    def _write_checkpoint(self, log_dir: Path | None) -> None:
        if log_dir is not None:
            write_checkpoint(log_dir / CLEANER_CHECKPOINT, dict(self._checkpoints[log_dir]))

    def statistics(self) -> CleanerStatistics:
        return self._stats

    def _filthiest(self, now_ms: float) -> tuple[Any, CleanPlan] | None:
        best = None
        for log in self.log_manager.logs.values():
            if log.closed or not log.config.compact_enabled:
                continue
            if isinstance(log, UnopenedLog):
                log = log.open()  # a compacted log's first cleaning is a use
            plan = plan_cleaning(log, self.first_dirty_offset(log), now_ms)
            if plan is not None and (
                best is None or (plan.forced, plan.dirty_ratio) > (best[1].forced, best[1].dirty_ratio)
            ):
                best = (log, plan)
        return best

    def _done(self, log: Any, plan: CleanPlan, cleaned: Sequence[_Cleaned]) -> Path | None:
        end = cleaned[0].end if cleaned else plan.end
        self._first_dirty[log] = end
        before = sum(c.old_size for c in cleaned)
        after = sum(len(c.data) for c in cleaned)
        self._stats = CleanerStatistics(
            self._stats.cleanings + 1, self._stats.bytes_read + before, self._stats.bytes_written + after
        )
        self.cleaned.value = self._stats.cleanings
        logger.info(
            "Cleaned %s up to offset %d: %d bytes -> %d (dirty ratio %.2f)",
            log.name,
            end,
            before,
            after,
            plan.dirty_ratio,
        )
        return self._checkpoint(log, end)

    def clean_once(self) -> int:
        """One synchronous round over every log needing it (deterministic tests); returns how
        many logs were cleaned."""
        count = 0
        now = self._clock()
        while (found := self._filthiest(now)) is not None:
            log, plan = found
            cleaned = compute(log, plan, now, self.max_map_entries)
            if not commit(log, cleaned, now):
                break
            self._write_checkpoint(self._done(log, plan, cleaned))
            count += 1
        return count

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            now = self._clock()
            found = self._filthiest(now)
            if found is None:
                await trio.sleep(self.backoff_ms / 1000)
                continue
            log, plan = found
            try:
                cleaned = await trio.to_thread.run_sync(compute, log, plan, now, self.max_map_entries)
                if commit(log, cleaned, now):
                    await trio.to_thread.run_sync(self._write_checkpoint, self._done(log, plan, cleaned))
                else:
                    await trio.sleep(self.backoff_ms / 1000)
            except OSError:
                # A full or failing disk: say so, back off, try again; bugs still raise.
                logger.exception("Cleaning %s failed", log.name)
                await trio.sleep(self.backoff_ms / 1000)
