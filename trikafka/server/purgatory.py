"""The Purgatory: where requests that must wait do their waiting.

Kafka's DelayedOperationPurgatory keeps watcher lists and a timing wheel; with trio each
delayed operation is simply a task in the purgatory's nursery that waits, level-triggered,
on what it needs (a high watermark ``AsyncValue``, a group's state) under a deadline on
trio's clock, then sends its response. Handlers stay free; the purgatory's lifetime bounds
every delayed operation, so shutting it down cancels them all.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

__all__ = ["Purgatory", "PurgatoryStatistics"]


@attrs.frozen
class PurgatoryStatistics:
    delayed: int  # operations waiting now (Kafka's PurgatorySize)
    completed: int


class Purgatory:
    def __init__(self) -> None:
        self._nursery: trio.Nursery | None = None
        self._delayed = 0
        self._completed = 0

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def delay(self, operation: Callable[..., Awaitable[Any]], *args: Any, name: str) -> None:
        """Run ``operation(*args)`` as a delayed operation; it sends its own response."""
        if self._nursery is None:
            raise RuntimeError("the purgatory is not running")
        self._nursery.start_soon(self._watch, operation, args, name=name)

    async def _watch(self, operation: Callable[..., Awaitable[Any]], args: tuple) -> None:
        self._delayed += 1
        try:
            await operation(*args)
        finally:
            self._delayed -= 1
            self._completed += 1

    def statistics(self) -> PurgatoryStatistics:
        return PurgatoryStatistics(self._delayed, self._completed)
