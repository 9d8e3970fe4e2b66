"""A log's offsets that tasks wait on: :class:`EndOffset`, and the :class:`LogOffsets` mixin
of :class:`~trikafka.log.log.Log` that moves them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trio_util import AsyncValue

__all__ = ["EndOffset", "LogOffsets"]


class EndOffset:
    """An offset that tasks may wait on, and that calls its watchers when it changes.

    A long poll over several partitions waits for any of their ends to move. Through
    ``AsyncValue`` alone that takes a task per partition (``trio_util.wait_any``: a nursery,
    and on waking a cancellation of every sibling); a watcher — Kafka's watcher lists in its
    purgatory — is one callback here, run where the offset moves, so the waiting fetch is
    one task with one wake-up.

    A partition nobody waits on holds a plain int: the ``AsyncValue`` that :meth:`wait_value`
    parks on (nine dictionaries, ~1.6 KB) and the watcher set are made by their first user,
    so a broker of 100,000 idle partitions does not carry 300,000 of them.
    """

    __slots__ = ("_value", "_watchers", "_waiters")

    def __init__(self, value: int) -> None:
        self._value = value
        self._watchers: set[Callable[[], None]] | None = None
        self._waiters: AsyncValue[int] | None = None

    def __repr__(self) -> str:
        return f"EndOffset({self._value})"

    @property
    def value(self) -> int:
        return self._value

    @value.setter
    def value(self, x: int) -> None:
        if self._value == x:
            return
        self._value = x
        if self._waiters is not None:
            self._waiters.value = x
        if self._watchers:
            for watcher in tuple(self._watchers):
                watcher()

    @property
    def watchers(self) -> set[Callable[[], None]]:
        """Callbacks run (on the event loop, where the offset moves) after each change."""
        if self._watchers is None:
            self._watchers = set()
        return self._watchers

    async def wait_value(self, value_or_predicate: Any, *, held_for: float = 0.0) -> int:
        """``AsyncValue.wait_value``: until the offset is (or satisfies) the argument."""
        if self._waiters is None:
            self._waiters = AsyncValue(self._value)
        return await self._waiters.wait_value(value_or_predicate, held_for=held_for)


class LogOffsets:
    """The high watermark (with one replica, the log end offset) of a :class:`Log`."""

    # Provided by Log (and LogTransactions).
    high_watermark: EndOffset
    _update_lso: Callable[[], None]

    @property
    def log_end_offset_value(self) -> EndOffset:
        """The log end offset to wait on: with one replica, the high watermark itself."""
        return self.high_watermark

    def _set_end(self, offset: int) -> None:
        self.high_watermark.value = offset
        self._update_lso()
