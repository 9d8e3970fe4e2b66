"""The coordinators' Trio half: keyed deadlines on trio's clock, and answers to wait for.

Theory of operation
-------------------
The state machines ask for timers by key (:class:`ScheduleTimer`-like effects); a
:class:`TimerQueue` keeps one deadline per key — a new one replaces the old, a cancelled key
has none — in a heap, and a single task (:meth:`TimerQueue.run`, in the coordinator's
nursery) sleeps until the earliest, then hands every key whose deadline has come back to the
machine, in deadline order. Superseded heap entries are skipped when they surface, so a
heartbeat that pushes a session back costs one heap push, not a task. Deadlines are on
trio's clock, so a ``MockClock`` test moves them.

A :class:`Waiter` is an answer someone waits for (a parked JoinGroup or SyncGroup): set once,
awaited once. It is the only place an event lives; the domain values hold integer tickets.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar, cast

import trio

__all__ = ["TimerQueue", "Waiter"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Waiter(Generic[V]):
    """A response someone is waiting for (JoinGroup, SyncGroup): set once, awaited once."""

    __slots__ = ("_event", "value")

    def __init__(self) -> None:
        self._event = trio.Event()
        self.value: V | None = None

    @classmethod
    def done_with(cls, value: V) -> Waiter[V]:
        waiter: Waiter[V] = cls()
        waiter.set(value)
        return waiter

    def set(self, value: V) -> None:
        if not self._event.is_set():
            self.value = value
            self._event.set()

    @property
    def done(self) -> bool:
        return self._event.is_set()

    async def wait(self) -> V:
        await self._event.wait()
        return cast(V, self.value)  # set before the event was


class TimerQueue(Generic[K]):
    def __init__(self) -> None:
        self._deadlines: dict[K, float] = {}
        self._heap: list[tuple[float, int, K]] = []
        self._order = itertools.count()
        self._wakeup = trio.Event()
        self._sleeping_until = math.inf

    def __len__(self) -> int:
        return len(self._deadlines)

    def schedule(self, key: K, deadline: float) -> None:
        """``key`` comes due at ``deadline`` (trio time), replacing any earlier deadline."""
        self._deadlines[key] = deadline
        heapq.heappush(self._heap, (deadline, next(self._order), key))
        if deadline < self._sleeping_until:
            self._wakeup.set()

    def cancel(self, key: K) -> None:
        self._deadlines.pop(key, None)

    def _next_due(self, now: float) -> K | None:
        while self._heap:
            deadline, _, key = self._heap[0]
            if self._deadlines.get(key) != deadline:
                heapq.heappop(self._heap)  # superseded or cancelled
                continue
            if deadline > now:
                return None
            heapq.heappop(self._heap)
            del self._deadlines[key]
            return key
        return None

    async def run(self, fire: Callable[[K], None]) -> None:
        """Forever: call ``fire(key)`` as each key's deadline passes."""
        while True:
            now = trio.current_time()
            while (key := self._next_due(now)) is not None:
                fire(key)
            self._next_due(-math.inf)  # drop superseded entries at the head
            self._sleeping_until = self._heap[0][0] if self._heap else math.inf
            self._wakeup = trio.Event()
            with trio.move_on_at(self._sleeping_until):
                await self._wakeup.wait()
