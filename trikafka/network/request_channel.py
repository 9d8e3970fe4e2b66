"""The hand-off between the network and the request handlers (the card's two channels).

One shared ``trio.open_memory_channel(queued.max.requests)`` carries :class:`Request` objects
from every connection to the ``num.io.threads`` handler tasks; when it is full, the sending
connection waits in ``send`` — the broker's backpressure, as Kafka's ArrayBlockingQueue.
Responses travel back through each connection's own ``trio.open_memory_channel(1)``
(:attr:`Request.response_send`), which is what keeps a connection muted: it awaits its
one response there, writes it, and only then reads its next frame.

A handler answers with ``send_nowait`` on the capacity-1 channel: with one request in flight
per connection there is always room, so a handler never waits on a slow client (and a full
channel would be our bug, raised as ``trio.WouldBlock``). A connection that went away closed
its receive end; answering it is then not an error (Kafka drops those responses too).

Nothing is sent to stop the handlers (Kafka's poison-pill ShutdownRequest): a broker that
stops closes every connection first, after which nobody could read an answer to what is
still queued, so the handlers are cancelled (``RequestPath.aclose``).

``queued.max.request.bytes`` (Kafka's request MemoryPool, off by default) bounds the *bytes*
of requests being read or read but not yet handled across the broker:
:class:`RequestMemoryPool`. A frame's declared size is reserved when its prefix is read,
before its body; while the pool is spent, connections read nothing; a handler's response
(or the connection's close) gives the bytes back.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import TYPE_CHECKING, Any

import attrs
import trio

# The answers a handler gives live in a trio-free module (the sans-IO ConnectionState reads
# them); they are re-exported here, where the hand-off is.
from trikafka.network.responses import (
    CloseConnectionResponse,
    NoOpResponse,
    Response,
    SendResponse,
)
from trikafka.protocol.framing import NEED_DATA

if TYPE_CHECKING:
    from kio.static.protocol import RequestHeader

__all__ = [
    "CloseConnectionResponse",
    "ConnectionMemory",
    "NoOpResponse",
    "Request",
    "RequestChannel",
    "RequestChannelStatistics",
    "RequestMemoryPool",
    "ResponseSender",
    "FRAME_HOLDING_API_KEYS",
    "frame_holding_api_keys",
    "Response",
    "SendResponse",
    "open_response_channel",
]


class ResponseSender(typing.Protocol):
    """What a handler answers through: the send end of a connection's capacity-1 channel
    (``trio.MemorySendChannel``), or a test kit's wrapper around one (injected faults)."""

    def send_nowait(self, value: Response, /) -> None: ...


def open_response_channel() -> tuple[trio.MemorySendChannel[Response], trio.MemoryReceiveChannel[Response]]:
    """A connection's mute: ``trio.open_memory_channel(1)`` for its one response in flight."""
    return trio.open_memory_channel[Response](1)


@attrs.define(eq=False, slots=True)
class Request:
    """One parsed request and the facts of its life, timestamps on trio's clock."""

    processor: int
    connection_id: str
    listener_name: str
    client_host: str
    header: RequestHeader  # kio's, v1 or v2
    body: Any  # kio request entity; None for an unsupported ApiVersions version
    spec: Any  # ApiVersionSpec; None only for an unsupported ApiVersions version
    size: int
    #: The send end of the connection's capacity-1 response channel (the mute).
    response_send: ResponseSender = attrs.field(repr=False)
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


class RequestMemoryPool:
    """``queued.max.request.bytes``: a broker-wide budget of request bytes in flight.

    Kafka's SimpleMemoryPool in its non-strict mode, the one the SocketServer uses
    (``tryAllocate`` succeeds while at least one byte is available): a frame may be taken
    while *any* budget is left (``available > 0``), so the budget can dip below zero by at
    most one frame per connection, and a frame as large as ``socket.request.max.bytes`` —
    even one larger than the pool — is never refused outright. A frame is taken when its
    size prefix is read, before its body. While ``available <= 0`` connections read nothing
    (``wait_for_memory``); ``release`` wakes them all.

    Which bytes are held follows Kafka (``ApiKeys.requiresDelayedAllocation``): a request
    whose schema has bytes or records fields (Produce, JoinGroup, SyncGroup — see
    :func:`frame_holding_api_keys`) keeps its frame's bytes until its response; every other
    frame is parsed into new objects and given back at once, so for those the pool is only
    the gate. (Kafka also holds the requests it may forward to a controller; nothing is
    forwarded here.)
    """

    __slots__ = ("size", "available", "high_water", "waits", "depleted_seconds", "_depleted_at", "_room")

    def __init__(self, size: int) -> None:
        if size <= 0:
            raise ValueError(f"a request memory pool needs a positive size, not {size}")
        self.size = size
        self.available = size
        #: The most bytes ever taken at once (may pass ``size`` by one frame: non-strict).
        self.high_water = 0
        #: Times a connection was muted waiting for memory (Kafka counts the depleted time).
        self.waits = 0
        #: Seconds (trio time) the pool spent depleted, ended spells (MemoryPoolDepletedTimeTotal).
        self.depleted_seconds = 0.0
        self._depleted_at: float | None = None
        #: Set (and replaced by a fresh one) when budget comes back: wakes every waiter.
        self._room = trio.Event()

    def allocate(self, count: int) -> None:
        was_in = self.available > 0
        self.available -= count
        used = self.size - self.available
        if used > self.high_water:
            self.high_water = used
        if was_in and self.available <= 0:
            self._depleted_at = trio.current_time()

    def release(self, count: int) -> None:
        was_out = self.available <= 0
        self.available += count
        if was_out and self.available > 0:
            if self._depleted_at is not None:
                self.depleted_seconds += trio.current_time() - self._depleted_at
                self._depleted_at = None
            self._room.set()  # set before it is replaced: no waiter is left behind
            self._room = trio.Event()

    async def wait_for_memory(self) -> None:
        """Return once some budget is left (at once, without a checkpoint, if it is)."""
        if self.available <= 0:
            self.waits += 1
        while self.available <= 0:
            await self._room.wait()

    @property
    def used(self) -> int:
        return self.size - self.available

    @property
    def waiting(self) -> int:
        return self._room.statistics().tasks_waiting


class ConnectionMemory:
    """One connection's share of the :class:`RequestMemoryPool`.

    A frame whose prefix is read reserves its declared size before its body is read (Kafka's
    NetworkReceive taking its buffer from the pool; non-strict: the connection asks only while
    :meth:`may_read`, so the pool may overdraw by one frame). Once decoded, the bytes of a
    request that keeps views of its frame (``held_api_keys``: Produce, JoinGroup, SyncGroup, …)
    are held until it is handled (:meth:`take_held` moves them to ``Request.memory``); any
    other frame's go back at once; a closing connection gives back what it still has.
    """

    __slots__ = ("pool", "held_api_keys", "reserved", "held")

    def __init__(self, pool: RequestMemoryPool, held_api_keys: frozenset[int]) -> None:
        self.pool = pool
        self.held_api_keys = held_api_keys
        self.reserved = 0  # for the frame being read
        self.held = 0  # by the request just decoded, until it becomes a Request

    def may_read(self) -> bool:
        """A frame is being read (its bytes are reserved), or the pool has a byte left."""
        return bool(self.reserved) or self.pool.available > 0

    def account(self, state: Any, event: object) -> None:
        """``event`` came from ``state.next_event()``: reserve, hold or give back its bytes."""
        pool = self.pool
        if event is NEED_DATA:
            if not self.reserved:
                size = state.pending_size
                if size:
                    pool.allocate(size)
                    self.reserved = size
            return
        if self.held:  # the last request's bytes never went to a Request (a SASL token)
            pool.release(self.held)
            self.held = 0
        reserved, self.reserved = self.reserved, 0
        header = getattr(event, "header", None)
        if header is not None and header.request_api_key in self.held_api_keys:
            size = state.frame_size
            if reserved != size:  # read whole in one go: taken now
                pool.allocate(size - reserved)
            self.held = size
        elif reserved:
            pool.release(reserved)

    def take_held(self) -> int:
        held, self.held = self.held, 0
        return held

    def release_reserved(self) -> None:
        if self.reserved:
            self.pool.release(self.reserved)
            self.reserved = 0

    def release_all(self) -> None:
        self.release_reserved()
        if self.held:
            self.pool.release(self.held)
            self.held = 0


#: What :func:`frame_holding_api_keys` finds for every API trikafka serves — Produce,
#: JoinGroup, SyncGroup, SaslAuthenticate, AlterUserScramCredentials, PushTelemetry — as a table (checked
#: against the schemas by the tests): walking every version's request type loads every kio
#: entity module, half a second and ~19 MB at each broker's start.
FRAME_HOLDING_API_KEYS = frozenset({0, 11, 14, 36, 51, 72})


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
        for field in dataclasses.fields(entity):
            for leaf in leaves(hints[field.name]):
                if leaf is bytes or leaf is Records:
                    return True
                if dataclasses.is_dataclass(leaf) and leaf not in seen:
                    seen.add(leaf)  # type: ignore[arg-type]  # a dataclass type, as checked
                    if holds(leaf, seen):  # type: ignore[arg-type]  # as above
                        return True
        return False

    return frozenset(
        api_key
        for api_key, (lo, hi) in registry.supported.items()
        if any(holds(registry.get(api_key, v).request_type, set()) for v in range(lo, hi + 1))
    )


@attrs.frozen
class RequestChannelStatistics:
    queue_size: int  # Kafka's RequestQueueSize
    capacity: int
    tasks_waiting_send: int  # connections waiting for room (backpressure)
    tasks_waiting_receive: int = 0  # idle handlers
    memory_pool_available: int | None = None  # MemoryPoolAvailable; None: unbounded
    memory_pool_used: int = 0  # MemoryPoolUsed
    tasks_waiting_memory: int = 0
    memory_pool_high_water: int = 0  # the most MemoryPoolUsed has been
    memory_pool_waits: int = 0  # connections muted for memory, ever
    memory_pool_depleted_seconds: float = 0.0  # MemoryPoolDepletedTimeTotal


class RequestChannel:
    """The shared request channel between connections and the handler pool."""

    def __init__(self, capacity: int, queued_max_bytes: int = -1) -> None:
        if capacity < 1:
            raise ValueError(f"queued.max.requests must be at least 1, not {capacity}")
        self.capacity = capacity
        #: ``trio.open_memory_channel(queued.max.requests)``: connections send, handlers receive.
        self.request_send, self.request_receive = trio.open_memory_channel[Request](capacity)
        self._send_nowait = self.request_send.send_nowait
        self._send = self.request_send.send
        # queued.max.request.bytes <= 0 is unbounded, as in Kafka (MemoryPool.NONE).
        self.memory_pool = RequestMemoryPool(queued_max_bytes) if queued_max_bytes > 0 else None

    async def send_request(self, request: Request) -> None:
        """A connection hands over ``request``, waiting only while the channel is full.

        ``send_nowait`` first: ``send`` always passes through the scheduler once before the
        connection goes on to await its answer — which is a checkpoint of its own, so the
        extra pass bought nothing but a scheduler round per request.
        """
        try:
            self._send_nowait(request)
        except trio.WouldBlock:
            await self._send(request)  # full: backpressure

    def send_response(self, request: Request, response: Response) -> None:
        """Hand a response to its connection; a connection that is gone is not an error."""
        now = trio.current_time()
        if not request.api_local_complete_time:
            request.api_local_complete_time = now
        request.api_remote_complete_time = now
        if request.memory:
            self.memory_pool.release(request.memory)  # type: ignore[union-attr]  # memory is taken only from a pool
            request.memory = 0
        try:
            request.response_send.send_nowait(response)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the connection closed while we worked; Kafka drops these too

    def statistics(self) -> RequestChannelStatistics:
        channel = self.request_send.statistics()
        pool = self.memory_pool
        return RequestChannelStatistics(
            queue_size=channel.current_buffer_used,
            capacity=self.capacity,
            tasks_waiting_send=channel.tasks_waiting_send,
            tasks_waiting_receive=channel.tasks_waiting_receive,
            memory_pool_available=None if pool is None else pool.available,
            memory_pool_used=0 if pool is None else pool.size - pool.available,
            tasks_waiting_memory=0 if pool is None else pool.waiting,
            memory_pool_high_water=0 if pool is None else pool.high_water,
            memory_pool_waits=0 if pool is None else pool.waits,
            memory_pool_depleted_seconds=0.0 if pool is None else pool.depleted_seconds,
        )
