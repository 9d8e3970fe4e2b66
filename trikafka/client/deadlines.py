"""Deadlines of the client's public calls, and what a call that ran out of time says.

Every awaitable public call is bounded by the Kafka key that bounds it in the Java client:
``default.api.timeout.ms`` (admin calls; the consumer's ``position``, ``committed``,
``commit``, offset look-ups and close), ``max.block.ms`` (the producer's waits for metadata and
buffer room, its transactional calls), ``request.timeout.ms`` (each request, in
:meth:`KafkaClient.send`). The bound is a trio cancel scope (:func:`bounded`, or the
:func:`bounded_call` decorator), so the MockClock drives it like every other timer.

A call that runs out of time says what it waited for and what the client saw last. The client
core records its sightings in a :class:`Sightings`: each address whose last connection attempt
failed, and why (``connection refused``), and the last other failure (a request without an
answer, a metadata error). With no live connection and failed attempts, the call raises
:class:`BrokerUnreachableError` — "no broker reachable at 127.0.0.1:39999 after 2.0 s
(default.api.timeout.ms): connection refused"; otherwise :class:`KafkaTimeoutError` with the
last sighting.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import trio

from trikafka.client.errors import (
    BrokerUnreachableError,
    KafkaError,
    KafkaTimeoutError,
    UnknownTopicOrPartitionError,
)
from trikafka.client.lifetime import leaves

__all__ = ["Sightings", "bounded", "bounded_call", "connect_reason", "seconds", "timeout_error"]

log = logging.getLogger("trikafka.client.client")

F = TypeVar("F", bound=Callable[..., Any])


def connect_reason(exc: BaseException) -> str:
    """Why a connection attempt failed, as a person says it: ``connection refused``."""
    candidates = [exc]
    if exc.__cause__ is not None:
        candidates += leaves(exc.__cause__)
    for candidate in candidates:
        if isinstance(candidate, socket.gaierror):
            return f"cannot resolve the host name ({candidate.strerror or candidate})"
        if isinstance(candidate, OSError) and candidate.errno:
            return os.strerror(candidate.errno).lower()
    return str(exc) or type(exc).__name__


def seconds(value: float) -> str:
    return f"{value:.1f} s" if value >= 0.1 else f"{value:.3f} s"


class Sightings:
    """What the client core saw last, kept for the message of a call that times out; and the
    log of connection outages: one WARNING per address per outage (each retry at DEBUG), one
    INFO line when it is reached again."""

    def __init__(self) -> None:
        self.unreachable: dict[str, str] = {}  # "host:port" → why its last attempt failed
        self.down_since: dict[str, tuple[float, int]] = {}  # "host:port" → (first failure, attempts)
        self.waiting: dict[str, str] = {}  # "host:port" → what an unfinished attempt waits for
        self.last: str | None = None
        self.last_error: KafkaError | None = None  # an error code a broker answered
        self.count = 0  # sightings so far: a call reports only what it saw itself

    def connect_failed(self, address: str, reason: str) -> None:
        since, attempts = self.down_since.get(address, (trio.current_time(), 0))
        if not attempts:
            log.warning("cannot connect to %s: %s (retrying with backoff; each retry logged at DEBUG)", address, reason)
        else:
            log.debug("cannot connect to %s: %s (attempt %d)", address, reason, attempts + 1)
        self.down_since[address] = (since, attempts + 1)
        self.waiting.pop(address, None)
        self.unreachable[address] = reason
        self.saw(f"cannot connect to {address}: {reason}")
        self.last_error = None

    def connecting(self, address: str, stage: str) -> None:
        """An attempt in progress reached ``stage`` (what a call bound that ends now reports)."""
        self.waiting[address] = stage

    def connected(self, address: str) -> None:
        self.unreachable.pop(address, None)
        self.waiting.pop(address, None)
        down = self.down_since.pop(address, None)
        if down is not None:
            since, attempts = down
            log.info(
                "connected to %s again after %s (%d failed attempt%s)",
                address, seconds(trio.current_time() - since), attempts, "" if attempts == 1 else "s",
            )

    def saw(self, text: str) -> None:
        self.last = text
        self.count += 1

    def saw_error(self, what: str, error: KafkaError) -> None:
        """A retriable error code a broker answered ``what`` with (retried until the deadline)."""
        self.saw(f"the cluster answered {error}" if what in str(error) else f"the cluster answered {what}: {error}")
        self.last_error = error


def timeout_error(client: Any, what: str, key: str, limit: float, since: int = -1) -> KafkaError:
    """The error of ``what`` after ``limit`` seconds of ``key`` without a result; ``since``:
    the sightings count when the call began (a broker's answer seen since then is the news)."""
    seen: Sightings = client.seen
    error = seen.last_error
    if isinstance(error, UnknownTopicOrPartitionError) and seen.count > since:
        return UnknownTopicOrPartitionError(f"{what}: {seen.last}; still so after {seconds(limit)} ({key})")
    if not client.live_connections() and seen.unreachable:
        where = ", ".join(seen.unreachable)
        why = "; ".join(dict.fromkeys(seen.unreachable.values()))
        return BrokerUnreachableError(f"{what}: no broker reachable at {where} after {seconds(limit)} ({key}): {why}")
    if not client.live_connections() and seen.waiting:
        where = ", ".join(seen.waiting)
        why = "; ".join(dict.fromkeys(seen.waiting.values()))
        return BrokerUnreachableError(f"{what}: no broker reachable at {where} after {seconds(limit)} ({key}): {why}")
    if not client.live_connections() and seen.last is None:
        where = ", ".join(f"{b.host}:{b.port}" for b in client.bootstrap)
        return BrokerUnreachableError(
            f"{what}: no broker reachable at {where} after {seconds(limit)} ({key}): no connection attempt finished"
        )
    last = f"; last seen: {seen.last}" if seen.last else ""
    return KafkaTimeoutError(f"{what}: no result after {seconds(limit)} ({key}){last}")


@contextmanager
def bounded(client: Any, what: str, key: str, limit: float | None = None) -> Iterator[None]:
    """Run the block within ``key`` (or ``limit`` seconds); past it, raise :func:`timeout_error`."""
    if limit is None:
        limit = client.config[key] / 1000
    since = client.seen.count
    with trio.move_on_after(limit) as scope:
        yield
    if scope.cancelled_caught:
        raise timeout_error(client, what, key, limit, since)


def bounded_call(key: str) -> Callable[[F], F]:
    """Decorate a method of an object with a ``client``: the call is :func:`bounded` by ``key``."""

    def wrap(method: F) -> F:
        @functools.wraps(method)
        async def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            with bounded(self.client, f"{type(self).__name__}.{method.__name__}()", key):
                return await method(self, *args, **kwargs)

        return call  # type: ignore[return-value]  # wraps() keeps method's signature

    return wrap
