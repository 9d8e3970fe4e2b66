"""A request exchange that outlives the poll that started it.

Why: ``getmany(timeout_ms=…)`` must return at its timeout whatever the cluster does, yet some
exchanges must not be cut in the middle. A JoinGroup is held by the coordinator until every
member has rejoined (up to the rebalance timeout); cancelling it would throw the answer away
and the member would start over at every poll, never joining. A KIP-848 heartbeat's answer
carries the member's new epoch; losing it fences the member. So the exchange runs in a task of
the consumer's nursery, as Java's consumer leaves a JoinGroup in flight in its network client
when ``poll`` returns: the poll only *waits* for it, a cancelled wait leaves it running, and
the next poll waits on the same :class:`Pending` — or takes its result, if it came meanwhile.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

import trio

__all__ = ["Pending"]

T = TypeVar("T")


class Pending(Generic[T]):
    """``fn()`` running in ``nursery``; :meth:`wait` then :meth:`unwrap` its result."""

    def __init__(self, nursery: trio.Nursery, fn: Callable[[], Awaitable[T]], name: str) -> None:
        self._done = trio.Event()
        self._scope = trio.CancelScope()
        self._value: Any = None
        self._error: BaseException | None = None
        nursery.start_soon(self._run, fn, name=name)

    async def _run(self, fn: Callable[[], Awaitable[T]]) -> None:
        try:
            with self._scope:
                self._value = await fn()
        except Exception as exc:  # handed to the waiting poll, raised there
            self._error = exc
        if self._scope.cancelled_caught:
            self._error = trio.ClosedResourceError("the exchange was abandoned (the consumer is closing)")
        self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    async def wait(self) -> None:
        """Until the exchange ends; a cancelled wait leaves it running."""
        await self._done.wait()

    def unwrap(self) -> T:
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[no-any-return]  # set when there is no error

    def cancel(self) -> None:
        self._scope.cancel()
