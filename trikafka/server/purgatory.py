"""The Purgatory: where requests that must wait do their waiting.

Kafka's DelayedOperationPurgatory keeps watcher lists and a timing wheel; with trio each
delayed operation is simply a task in the purgatory's nursery that waits, level-triggered,
on what it needs (a high watermark ``AsyncValue``, a group's state) under a deadline on
trio's clock, then sends its response. Handlers stay free; the purgatory's lifetime bounds
every delayed operation, so shutting it down cancels them all.

A graceful stop must not wait out a long poll: :meth:`Purgatory.complete_all` (the broker
calls it first thing when it stops) ends every wait entered through :meth:`wait_until`, and
each operation answers at once with what it has — a Fetch with the data there is, a JoinGroup
with NOT_COORDINATOR (the client finds the coordinator again) — so a stop takes as long as
the slowest in-flight write, not ``shutdown.grace.ms``.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
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
        self._waits: set[trio.CancelScope] = set()
        self.completing = False  # complete_all() was called: every wait ends at once

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

    async def _watch(self, operation: Callable[..., Awaitable[Any]], args: tuple[Any, ...]) -> None:
        self._delayed += 1
        try:
            await operation(*args)
        finally:
            self._delayed -= 1
            self._completed += 1

    @contextmanager
    def wait_until(self, deadline: float = math.inf) -> Iterator[trio.CancelScope]:
        """``trio.move_on_at(deadline)`` that :meth:`complete_all` also ends: a delayed
        operation waits in here, then answers with what it has (check ``cancelled_caught``)."""
        scope = trio.CancelScope(deadline=deadline)
        if self.completing:
            scope.cancel()
        self._waits.add(scope)
        try:
            with scope:
                yield scope
        finally:
            self._waits.discard(scope)

    def complete_all(self) -> None:
        """End every delayed operation's wait now (a stop); later ones do not wait at all."""
        self.completing = True
        for scope in self._waits:
            scope.cancel()

    def statistics(self) -> PurgatoryStatistics:
        return PurgatoryStatistics(self._delayed, self._completed)
