"""Retention and deletion of a partition's log: what may go, and detaching it.

Split from :mod:`trikafka.log.log` by responsibility: :class:`LogRetention` holds the rules
that move the log start offset (DeleteRecords, retention.ms, retention.bytes) and detach
whole segments; :class:`~trikafka.log.log.Log` mixes it in. Detaching is cheap and happens on
the event loop; freeing the files (``segment.store.delete()``) is the caller's, in a worker
thread if it likes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from trikafka.errors import ErrorCode, KafkaProtocolError
from trikafka.log.segment import Segment

if TYPE_CHECKING:
    from trio_util import AsyncValue

    from trikafka.log.config import LogConfig
    from trikafka.log.transactions import TransactionTracker

__all__ = ["LogRetention"]


class LogRetention:
    """Mixed into :class:`~trikafka.log.log.Log`; see the module docstring."""

    # Provided by Log.
    config: LogConfig
    high_watermark: AsyncValue[int]
    transactions: TransactionTracker
    recovery_point: int
    _segments: list[Segment]
    _log_start_offset: int
    _unflushed_messages: int
    _check_open: Callable[[], None]
    _update_lso: Callable[[], None]
    if TYPE_CHECKING:  # read-only properties of Log

        @property
        def name(self) -> str: ...

        @property
        def size_in_bytes(self) -> int: ...

    _new_segment: Callable[[int], Segment]
    _set_end: Callable[[int], None]

    # --- deletion ----------------------------------------------------------------------------

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: advance the log start offset to ``offset``; return the new one.

        Whole segments below it are freed by the next :meth:`apply_retention`.
        """
        self._check_open()
        if not 0 <= offset <= self.high_watermark.value:
            raise KafkaProtocolError(
                f"cannot delete {self.name} before {offset}: the high watermark is "
                f"{self.high_watermark.value}",
                ErrorCode.offset_out_of_range,
            )
        self._log_start_offset = max(self._log_start_offset, offset)
        self.transactions.drop_before(self._log_start_offset)
        self._update_lso()
        return self._log_start_offset

    def apply_retention(self, now_ms: float) -> list[Segment]:
        """Detach segments that retention.ms, retention.bytes or the log start offset let go.

        Never the active segment. The detached segments are already gone from the log and
        from a restart's view (``mark_deleted``); the caller frees them with
        ``segment.store.delete()``, in a worker thread if it likes (files).
        """
        self._check_open()
        config = self.config
        deleted: list[Segment] = []
        if config.delete_enabled and config.retention_ms >= 0:
            deleted += self._detach_while(
                lambda s, _next: now_ms - s.largest_timestamp > config.retention_ms
            )
        if config.delete_enabled and config.retention_bytes >= 0:
            excess = self.size_in_bytes - config.retention_bytes

            def over_size(segment: Segment, _next: Segment) -> bool:
                nonlocal excess
                if excess - segment.size < 0:
                    return False
                excess -= segment.size
                return True

            deleted += self._detach_while(over_size)
        deleted += self._detach_while(lambda _s, nxt: nxt.base_offset <= self._log_start_offset)
        return deleted

    def _detach_while(self, predicate: Callable[[Segment, Segment], bool]) -> list[Segment]:
        count = 0
        while count < len(self._segments) - 1 and predicate(
            self._segments[count], self._segments[count + 1]
        ):
            count += 1
        detached, self._segments = self._segments[:count], self._segments[count:]
        for segment in detached:
            segment.store.mark_deleted()
        if detached:
            self._log_start_offset = max(self._log_start_offset, self._segments[0].base_offset)
            self.transactions.drop_before(self._log_start_offset)
            self._update_lso()
        return detached

    def replace_segments(self, old: tuple[Segment, ...], new: Segment | None) -> None:
        """Swap the consecutive read-only segments ``old`` for ``new`` (the log cleaner's
        compacted copy, based at ``old[0]``'s base offset) or for nothing. Offsets do not
        change; the caller checked that ``old`` are all still here."""
        self._check_open()
        i = next(i for i, s in enumerate(self._segments) if s is old[0])
        assert i + len(old) < len(self._segments), "never the active segment"
        self._segments[i : i + len(old)] = [new] if new is not None else []

    def truncate_fully(self, start_offset: int = 0) -> None:
        """Drop every record and restart the log, empty, at ``start_offset``."""
        self._check_open()
        for segment in self._segments:
            segment.store.mark_deleted()
            segment.store.delete()
        self._segments = [self._new_segment(start_offset)]
        self._log_start_offset = start_offset
        self.recovery_point = start_offset
        self._unflushed_messages = 0
        self.transactions.clear()
        self._set_end(start_offset)
