"""A nursery hidden inside a library's ``async with``: plain exceptions out, never a group.

Theory of operation. ``open_producer``, ``open_consumer``, ``open_admin`` and ``open_client``
run background tasks (connection readers, the metadata refresher, the sender, heartbeats) in a
nursery that lives exactly as long as the caller's ``async with`` block. Trio's nurseries
raise strict exception groups, so without care a ``ValueError`` raised in the block would leave
it as ``ExceptionGroup([ValueError])`` — twice nested when two nurseries stack — and neither
``except ValueError`` nor ``except KafkaError`` would match. Trio's guidance for libraries that
open a nursery inside a context manager (trio-websocket's ``open_websocket`` does it) is to
unwrap at the boundary, because the caller never asked for concurrency. The rules here:

1. ``KeyboardInterrupt`` / ``SystemExit`` anywhere in the group leave as themselves.
2. The caller's exception (what the block raised) leaves as itself — unless it is only the
   ``Cancelled`` our own nursery delivered because a background task failed: then rule 3.
   A background failure seen at the same time is kept as a note on it, not hidden silently.
3. The client's own failure: a :class:`KafkaError` leaves as itself; anything else (a bug)
   as :class:`KafkaClientError` naming the task's exception, which is its ``__cause__``.
4. Only cancellations: the first ``Cancelled`` is re-raised, so an outer cancel scope sees it.

Stacked helpers (the producer's nursery inside the client core's) each apply the rules; the
inner one's plain exception is the outer one's "caller exception", so the result is the same.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from trikafka.client.errors import KafkaClientError, KafkaError

__all__ = ["leaves", "open_service_nursery", "plain_exception"]


def leaves(group: BaseException) -> list[BaseException]:
    """The non-group exceptions inside ``group`` (depth first), or ``[group]`` itself."""
    if not isinstance(group, BaseExceptionGroup):
        return [group]
    out: list[BaseException] = []
    for inner in group.exceptions:
        out += leaves(inner)
    return out


def plain_exception(group: BaseExceptionGroup, caller_error: BaseException | None, what: str) -> BaseException:
    """The one exception to raise for ``group`` under the module's rules."""
    found = leaves(group)
    for exc in found:
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            return exc
    failures = [exc for exc in found if not isinstance(exc, trio.Cancelled) and exc is not caller_error]
    if caller_error is not None and not isinstance(caller_error, trio.Cancelled):
        for failure in failures:
            caller_error.add_note(f"meanwhile {what} failed: {failure!r}")
        return caller_error
    if failures:
        first = next((exc for exc in failures if isinstance(exc, KafkaError)), failures[0])
        if isinstance(first, KafkaError):
            return first
        error = KafkaClientError(f"{what} failed: {first!r}")
        error.__cause__ = first
        return error
    return caller_error if caller_error is not None else found[0]


@asynccontextmanager
async def open_service_nursery(what: str) -> AsyncIterator[trio.Nursery]:
    """``trio.open_nursery()`` whose exceptions leave as one plain exception (module rules).

    ``what`` names the owner in messages: ``"the producer"``, ``"the client core"``.
    """
    caller_error: BaseException | None = None
    plain: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            try:
                yield nursery
            except BaseException as exc:
                caller_error = exc
                raise
    except BaseExceptionGroup as group:
        plain = plain_exception(group, caller_error, what)
    if plain is not None:
        # Raised here, outside the ``except``, so the group does not become the caller's
        # exception's ``__context__`` (it holds that very exception: a confusing traceback).
        try:
            raise plain
        finally:
            del plain, caller_error  # no reference cycle through this frame
