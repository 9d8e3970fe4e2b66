"""The hand-off between the network and the request handlers.

One bounded queue (``queued.max.requests``, :class:`~trikafka.network.request_queue.RequestQueue`)
carries :class:`Request` objects from every connection to the handler pool; when it is full,
connections wait — the broker's backpressure, exactly as Kafka's ArrayBlockingQueue. Responses travel back through each
connection's own capacity-1 slot, which is what keeps a connection muted: it cannot have a
second request in flight while the slot is taken.

Closing the send side replaces Kafka's poison-pill ShutdownRequest: handlers drain what is
queued, then their ``async for`` ends.

``queued.max.request.bytes`` (Kafka's request MemoryPool, off by default) bounds the *bytes*
of requests read but not yet handled across the broker: :class:`RequestMemoryPool`. While it
is spent, connections read no new frames; a handler's response gives the bytes back.
"""

from __future__ import annotations

import dataclasses
import enum
import typing
from typing import Any

import attrs
import outcome
import trio

# The answers a handler gives live in a trio-free module (the sans-IO ConnectionState reads
# them); they are re-exported here, where the hand-off is.
from trikafka.network.request_queue import RequestQueue
from trikafka.network.responses import (
    CloseConnectionResponse,
    NoOpResponse,
    Response,
    SendResponse,
)

__all__ = [
    "CloseConnectionResponse",
    "DELAYED",
    "NoOpResponse",
    "Request",
    "RequestChannel",
    "RequestChannelStatistics",
    "RequestMemoryPool",
    "frame_holding_api_keys",
    "Response",
    "ResponseSlot",
    "SendResponse",
]


@attrs.define(eq=False, slots=True)
class Request:
    """One parsed request and the facts of its life, timestamps on trio's clock."""

    processor: int
    connection_id: str
    listener_name: str
    client_host: str
    header: Any  # kio RequestHeader
    body: Any  # kio request entity; None for an unsupported ApiVersions version
    spec: Any  # ApiVersionSpec or None
    size: int
    response_slot: ResponseSlot = attrs.field(repr=False)
    principal: str = "User:ANONYMOUS"
    start_time: float = 0.0  # frame received
    dequeue_time: float = 0.0  # taken by a handler
    api_local_complete_time: float = 0.0  # handler done
    api_remote_complete_time: float = 0.0  # purgatory done (== local when not delayed)
    response_dequeue_time: float = 0.0  # picked up by the connection
    memory: int = 0  # bytes held in the RequestMemoryPool until the response
    #: Over a client quota (KIP-219): the answer's throttle_time_ms, and the trio time until
    #: which the connection reads nothing more after writing it (0.0: not throttled).
    throttle_time_ms: int = 0
    throttle_deadline: float = 0.0

    @property
    def api_key(self) -> int:
        return self.header.request_api_key

    @property
    def api_version(self) -> int:
        return self.header.request_api_version

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id

    @property
    def client_id(self) -> str | None:
        return self.header.client_id


class _Delayed(enum.Enum):
    DELAYED = "DELAYED"


#: What ``ResponseSlot.get(wake_on_delay=True)`` returns for a request left to the purgatory.
DELAYED = _Delayed.DELAYED


class ResponseSlot:
    """A connection's capacity-1 response channel: one waiter (the connection), any putter.

    This is the mute: the connection waits here and reads no further frame until its one
    response arrives. It does what ``trio.open_memory_channel(1)`` did, minus what the mute
    cycle never uses (several waiters, statistics, clones) — the memory channel's bookkeeping
    was a measurable share of a tiny request's cost. Closing the slot (the connection is
    gone) makes ``put`` raise ``trio.ClosedResourceError``, as the channel's did.
    """

    __slots__ = ("_closed", "_value", "_waiter", "_wake_on_delay")

    def __init__(self) -> None:
        self._closed = False
        self._value: Response | None = None
        self._waiter: trio.lowlevel.Task | None = None
        self._wake_on_delay = False

    def put(self, response: Response) -> None:
        if self._closed:
            raise trio.ClosedResourceError("the connection is gone")
        if self._value is not None:
            raise trio.WouldBlock("a response is already waiting")  # two answers: our bug
        waiter = self._waiter
        if waiter is None:
            self._value = response
        else:
            self._waiter = None
            self._wake_on_delay = False
            trio.lowlevel.reschedule(waiter, outcome.Value(response))

    async def get(self, wake_on_delay: bool = False) -> Response | _Delayed:
        """The response; or, with ``wake_on_delay``, :data:`DELAYED` as soon as the handler
        is done with the request without answering it (the purgatory will): a connection
        holding earlier answers then writes them instead of waiting for a long poll."""
        value = self._value
        if value is not None:
            self._value = None
            await trio.lowlevel.checkpoint()
            return value
        if self._waiter is not None:
            raise trio.BusyResourceError("another task is already waiting for this response")
        self._waiter = trio.lowlevel.current_task()
        self._wake_on_delay = wake_on_delay

        def abort(_raise_cancel: object) -> trio.lowlevel.Abort:
            self._waiter = None
            self._wake_on_delay = False
            return trio.lowlevel.Abort.SUCCEEDED

        return await trio.lowlevel.wait_task_rescheduled(abort)

    def take(self) -> Response | None:
        """The response if it is here (None if not), without waiting or a checkpoint: for
        a connection whose request was just handled in its own task (``send_request``)."""
        value = self._value
        self._value = None
        return value

    def handled(self) -> None:
        """The request handler is done with this slot's request (answered or not)."""
        waiter = self._waiter
        if waiter is not None and self._wake_on_delay:
            self._waiter = None
            self._wake_on_delay = False
            trio.lowlevel.reschedule(waiter, outcome.Value(DELAYED))

    def close(self) -> None:
        self._closed = True
        self._value = None


class RequestMemoryPool:
    """``queued.max.request.bytes``: a broker-wide budget of request bytes in flight.

    Kafka's SimpleMemoryPool in its non-strict mode, the one the SocketServer uses: a frame
    may be taken while *any* budget is left (``available > 0``), so the budget can dip below
    zero by at most one frame per connection, and a frame as large as
    ``socket.request.max.bytes`` is never refused outright. While ``available <= 0``
    connections read no new frames (``wait_for_memory``); ``release`` wakes them all.

    Which bytes are held follows Kafka (``ApiKeys.requiresDelayedAllocation``): a request
    whose schema has bytes or records fields (Produce, JoinGroup, SyncGroup — see
    :func:`frame_holding_api_keys`) keeps its frame's bytes until its response; every other
    frame is parsed into new objects and given back at once, so for those the pool is only
    the gate. (Kafka also holds the requests it may forward to a controller; nothing is
    forwarded here.)
    """

    __slots__ = ("size", "available", "_lot")

    def __init__(self, size: int) -> None:
        if size <= 0:
            raise ValueError(f"a request memory pool needs a positive size, not {size}")
        self.size = size
        self.available = size
        self._lot = trio.lowlevel.ParkingLot()

    def allocate(self, count: int) -> None:
        self.available -= count

    def release(self, count: int) -> None:
        was_out = self.available <= 0
        self.available += count
        if was_out and self.available > 0:
            self._lot.unpark_all()

    async def wait_for_memory(self) -> None:
        """Return once some budget is left (at once, without a checkpoint, if it is)."""
        while self.available <= 0:
            await self._lot.park()

    @property
    def waiting(self) -> int:
        return len(self._lot)


def frame_holding_api_keys(registry: Any) -> frozenset[int]:
    """The api keys whose requests hold their bytes in the pool until answered: those with
    a bytes or records field in any supported version (Kafka's retainsBufferReference)."""
    from kio.static.primitive import Records

    def leaves(hint: Any) -> Any:
        args = typing.get_args(hint)
        if not args:
            yield hint
        for arg in args:
            yield from leaves(arg)

    def holds(entity: type, seen: set[type]) -> bool:
        hints = typing.get_type_hints(entity)
        for field in dataclasses.fields(entity):  # type: ignore[arg-type]
            for leaf in leaves(hints[field.name]):
                if leaf is bytes or leaf is Records:
                    return True
                if dataclasses.is_dataclass(leaf) and leaf not in seen:
                    seen.add(leaf)  # type: ignore[arg-type]
                    if holds(leaf, seen):  # type: ignore[arg-type]
                        return True
        return False

    return frozenset(
        api_key
        for api_key, (lo, hi) in registry.supported.items()
        if any(holds(registry.get(api_key, v).request_type, set()) for v in range(lo, hi + 1))
    )


class InlineHandlers(typing.Protocol):
    """What the channel needs of the handler pool (``server/request_handler.py``) to let a
    connection answer in its own task; the network layer does not import the server."""

    async def handle(self, request: Request) -> None: ...


@attrs.frozen
class RequestChannelStatistics:
    queue_size: int  # Kafka's RequestQueueSize
    capacity: int
    tasks_waiting_send: int
    memory_pool_available: int | None = None  # MemoryPoolAvailable; None: unbounded
    memory_pool_used: int = 0  # MemoryPoolUsed
    tasks_waiting_memory: int = 0


class RequestChannel:
    """The shared request queue between connections and the handler pool."""

    def __init__(self, capacity: int, queued_max_bytes: int = -1) -> None:
        self.capacity = capacity
        #: What the handler pool drains (``async for``); closing it is the shutdown pill.
        self.queue: RequestQueue[Request] = RequestQueue(capacity)
        # queued.max.request.bytes <= 0 is unbounded, as in Kafka (MemoryPool.NONE).
        self.memory_pool = RequestMemoryPool(queued_max_bytes) if queued_max_bytes > 0 else None
        #: The handler pool, while it runs (it sets this): an idle one lets the connection
        #: answer in its own task (``RequestHandlerPool.handle``).
        self.handlers: InlineHandlers | None = None

    async def send_request(self, request: Request) -> bool:
        """Hand ``request`` to the handlers; True when it was handled already, inline.

        While a handler is idle the request is handled in the caller's task (its answer, if
        any, is then in the request's slot); otherwise it is queued, and the caller waits
        only when the queue is full (backpressure). No checkpoint when there is room: the
        caller's next step is waiting for the response, which is one, and an extra trip
        through the scheduler here cost ~10 % of a tiny request's time.
        """
        handlers = self.handlers
        queue = self.queue
        if handlers is not None and queue.reserve():  # an idle handler's turn, taken here
            try:
                await handlers.handle(request)
            finally:
                queue.release()
            return True
        if not queue.put_nowait(request):
            await queue.put(request)
        return False

    def send_response(self, request: Request, response: Response) -> None:
        """Hand a response to its connection; a connection that is gone is not an error."""
        now = trio.current_time()
        if not request.api_local_complete_time:
            request.api_local_complete_time = now
        request.api_remote_complete_time = now
        if request.memory:
            self.memory_pool.release(request.memory)  # type: ignore[union-attr]
            request.memory = 0
        try:
            request.response_slot.put(response)
        except trio.ClosedResourceError:
            pass  # the connection closed while we worked; Kafka drops these too

    async def close(self) -> None:
        self.queue.close()
        await trio.lowlevel.checkpoint()

    def statistics(self) -> RequestChannelStatistics:
        queue = self.queue
        pool = self.memory_pool
        return RequestChannelStatistics(
            queue_size=len(queue),
            capacity=self.capacity,
            tasks_waiting_send=queue.waiting_putters,
            memory_pool_available=None if pool is None else pool.available,
            memory_pool_used=0 if pool is None else pool.size - pool.available,
            tasks_waiting_memory=0 if pool is None else pool.waiting,
        )
