"""Durability of a partition's log: flush.messages, flush.ms and the recovery point.

Split from :mod:`trikafka.log.log` by responsibility. Appends reach the store (the OS page
cache for files) without fsync; a flush makes them durable and advances the recovery point.
It comes in three steps so the fsyncs can leave the event loop without giving up ordering:
:meth:`LogDurability.prepare_flush` (fast, on the caller's thread: index writes and
duplicated descriptors), :meth:`FlushJob.run` (the fsyncs, safe in a worker thread: it only
touches what prepare handed it) and :meth:`LogDurability.complete_flush` (back on the caller's
thread: the recovery point moves only to what the job covered).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs

from trikafka.log.segment import Segment, SyncHandle
from trikafka.log.storage import storage_error

if TYPE_CHECKING:
    from trikafka.clock import Clock
    from trikafka.log.config import LogConfig

__all__ = ["FlushJob", "LogDurability"]


@attrs.define
class FlushJob:
    """The durable half of a flush, safe to run in a worker thread (see :meth:`Log.flush`)."""

    offset: int  # everything below this offset is durable once run() returns
    segments: list[Segment]
    handles: list[SyncHandle]

    def run(self) -> None:
        try:
            for handle in self.handles:
                handle.sync()
        finally:
            for handle in self.handles:
                handle.close()
            self.handles = []


class LogDurability:
    """Mixed into :class:`~trikafka.log.log.Log`; see the module docstring."""

    # Provided by Log.
    config: LogConfig
    recovery_point: int
    if TYPE_CHECKING:  # read-only properties of Log

        @property
        def log_end_offset(self) -> int: ...

        @property
        def name(self) -> str: ...

    _segments: list[Segment]
    _unflushed_messages: int
    _rolled_since_flush: bool
    _last_flush_ms: float
    _clock: Clock
    _check_open: Callable[[], None]

    @property
    def flush_messages_due(self) -> bool:
        """flush.messages appends are waiting to be made durable."""
        return self._unflushed_messages >= self.config.flush_messages

    def needs_flush(self, now_ms: float) -> bool:
        """Whether flush.ms has passed with unflushed data, or a rolled segment awaits its
        flush (Kafka flushes a segment when it is rolled)."""
        if not any(s.dirty for s in self._segments):
            return False
        return self._rolled_since_flush or now_ms - self._last_flush_ms >= self.config.flush_ms

    def prepare_flush(self) -> FlushJob:
        """Write out index entries and take sync handles; fast, on the caller's thread."""
        self._check_open()
        segments = [s for s in self._segments if s.dirty]
        handles: list[SyncHandle] = []
        try:
            for segment in segments:
                segment.store.persist_indexes(segment.offset_index, segment.time_index)
                handle = segment.store.sync_handle()
                if handle is not None:
                    handles.append(handle)
        except OSError as exc:  # nothing was marked clean: the next flush does it all again
            for handle in handles:
                handle.close()
            raise storage_error(f"flush of {self.name}", exc) from None
        for segment in segments:
            segment.dirty = False
        self._unflushed_messages = 0
        self._rolled_since_flush = False
        return FlushJob(offset=self.log_end_offset, segments=segments, handles=handles)

    def complete_flush(self, job: FlushJob, *, ok: bool = True) -> None:
        """Advance the recovery point after ``job.run()``; with ``ok=False`` (it raised),
        mark its segments dirty again so the next flush retries."""
        if not ok:
            for segment in job.segments:
                segment.dirty = True
            return
        self.recovery_point = max(self.recovery_point, min(job.offset, self.log_end_offset))
        self._last_flush_ms = self._clock()

    def flush(self) -> None:
        """Make everything appended so far durable (fsync), and advance the recovery point."""
        job = self.prepare_flush()
        try:
            job.run()
        except OSError as exc:
            self.complete_flush(job, ok=False)
            raise storage_error(f"flush of {self.name}", exc) from None
        except BaseException:
            self.complete_flush(job, ok=False)
            raise
        self.complete_flush(job)
