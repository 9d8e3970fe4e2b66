"""The bounded queue between the connections and the request handler pool.

Kafka's RequestChannel holds an ``ArrayBlockingQueue`` of ``queued.max.requests``; here it
is :class:`RequestQueue`, which does what ``trio.open_memory_channel(capacity)`` did with the
cost of the memory channel's generality taken out of a tiny request's path: one producer
method, one consumer method, no clones, no statistics objects.

Two rules make it cheaper than the channel and keep it fair:

- A request for a handler already waiting goes straight to that handler (rescheduled with
  it), never through the deque — the common case while handlers keep up.
- A handler taking a request that was queued does not pass through the scheduler first
  (the memory channel's ``receive`` does, once per request). A handler therefore works
  through a backlog without yielding between requests; the backlog is bounded by
  ``queued.max.requests`` and every request it takes wakes its connection, so the
  connections run as soon as the handler next waits. Cancellation is seen at that wait.

A consumer's turn can also be lent out (:meth:`reserve`, :meth:`release`): a connection that
finds a handler idle answers its request in its own task, and while it does, that idle
handler counts as busy — no request is handed to it — so no more requests are handled at
once than there are handlers.

Closing ends the handlers' ``async for`` once the queue is drained (Kafka's shutdown pill,
without the pill); a connection waiting for room, or putting after the close, gets
``trio.ClosedResourceError``, as from a closed memory channel.
"""

from __future__ import annotations

import collections
from typing import Generic, TypeVar

import outcome
import trio

__all__ = ["RequestQueue"]

T = TypeVar("T")


class RequestQueue(Generic[T]):
    """At most ``capacity`` items queued; producers wait for room, consumers for items."""

    __slots__ = ("capacity", "_items", "_getters", "_putters", "_closed", "_reserved")

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"a request queue needs a capacity of at least 1, not {capacity}")
        self.capacity = capacity
        self._items: collections.deque[T] = collections.deque()
        self._getters: collections.deque[trio.lowlevel.Task] = collections.deque()
        #: Producers waiting for room, with what they put: task → item, in arrival order.
        self._putters: dict[trio.lowlevel.Task, T] = {}
        self._closed = False
        #: Waiting consumers whose turn is lent out (:meth:`reserve`): not handed items.
        self._reserved = 0

    def __len__(self) -> int:
        return len(self._items)

    @property
    def waiting_putters(self) -> int:
        return len(self._putters)

    @property
    def waiting_getters(self) -> int:
        return len(self._getters)

    def put_nowait(self, item: T) -> bool:
        """Queue ``item`` (or hand it to a waiting consumer); False when the queue is full."""
        if self._closed:
            raise trio.ClosedResourceError("the request queue is closed")
        getters = self._getters
        if len(getters) > self._reserved:
            trio.lowlevel.reschedule(getters.popleft(), outcome.Value(item))
            return True
        items = self._items
        if len(items) < self.capacity:
            items.append(item)
            return True
        return False

    async def put(self, item: T) -> None:
        """Queue ``item``, waiting while the queue is full. No checkpoint when there is room."""
        if self.put_nowait(item):
            return
        task = trio.lowlevel.current_task()
        self._putters[task] = item

        def abort(_raise_cancel: object) -> trio.lowlevel.Abort:
            del self._putters[task]
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)

    def reserve(self) -> bool:
        """Take an idle consumer's turn (True), or find none idle (False).

        The caller does that consumer's work itself, then must :meth:`release` the turn.
        """
        if len(self._getters) > self._reserved and not self._closed:
            self._reserved += 1
            return True
        return False

    def _take(self) -> T:
        """The first queued item; the room it leaves goes to the longest-waiting producer."""
        items = self._items
        item = items.popleft()
        putters = self._putters
        if putters:
            task = next(iter(putters))
            items.append(putters.pop(task))
            trio.lowlevel.reschedule(task)
        return item

    def release(self) -> None:
        """Give back a turn taken by :meth:`reserve`; an item queued meanwhile goes out."""
        self._reserved -= 1
        items = self._items
        if items and len(self._getters) > self._reserved:
            trio.lowlevel.reschedule(self._getters.popleft(), outcome.Value(self._take()))

    async def get(self) -> T:
        """The next item, waiting for one; ``trio.EndOfChannel`` once closed and drained."""
        if self._items:
            return self._take()
        if self._closed:
            raise trio.EndOfChannel
        task = trio.lowlevel.current_task()
        self._getters.append(task)

        def abort(_raise_cancel: object) -> trio.lowlevel.Abort:
            self._getters.remove(task)
            return trio.lowlevel.Abort.SUCCEEDED

        return await trio.lowlevel.wait_task_rescheduled(abort)  # type: ignore[no-any-return]

    def __aiter__(self) -> RequestQueue[T]:
        return self

    async def __anext__(self) -> T:
        try:
            return await self.get()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None

    def close(self) -> None:
        """No more items: waiting consumers end (once drained), waiting producers fail."""
        self._closed = True
        if not self._items:
            for task in self._getters:
                trio.lowlevel.reschedule(task, outcome.Error(trio.EndOfChannel()))
            self._getters.clear()
        for task in self._putters:
            trio.lowlevel.reschedule(
                task, outcome.Error(trio.ClosedResourceError("the request queue is closed"))
            )
        self._putters.clear()
