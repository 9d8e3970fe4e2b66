"""One client connection: the Trio shell around a :class:`ConnectionState`.

The protocol — frames, request headers, the mute cycle — is the sans-IO
:class:`~trikafka.network.connection_state.ConnectionState`; this shell only moves bytes
and time. It gets a :class:`~trikafka.network.transport.Transport` (a socket, or any trio
stream), a frozen :class:`ConnectionSettings` and a frozen :class:`ConnectionHooks` of
callbacks — never its Processor, which it does not import.

Theory of operation — the mute cycle (Kafka's KafkaChannel states)::

  NOT_MUTED ──frame read──▶ MUTED ──request queued──▶ MUTED_AND_RESPONSE_PENDING
      ▲                                                          │
      └────────────────── response written ◀─────────────────────┘

While muted the connection reads nothing from the socket, so a client that pipelines
requests leaves them in the kernel's buffers (and in the frame decoder, if one read brought
several): the broker answers strictly in order, one request in flight per connection. The
mute is a channel, as on the card: each connection owns ``trio.open_memory_channel(1)`` for
its responses. It reads a frame, sends the request into the shared request channel (waiting
there while it is full: backpressure), awaits the response on its receive end, writes it,
and only then looks at the next frame. The states and their legal moves are the sans-IO
table in ``connection_state.py``; this task only moves bytes and time, and never handles a
request itself — the handler tasks do (``server/request_handler.py``).

Every request passes two checkpoints here (the send and the receive), so a client that
pipelines a buffer full of requests takes turns with everyone else; no streak counting.

Throttling (KIP-219): an answer over a client quota carries a deadline on its request; the
connection writes the answer at once, then reads nothing until the deadline passes
(MUTED_AND_THROTTLED) — in its own task, so nobody else waits.

Idle expiry (connections.max.idle.ms) is the processor's, as in Kafka's Selector: one task
cancels the read (``request_wait``, a cancel scope without a deadline) of a connection that
waited that long for a request, measured from its last activity — a byte received or a
response written — on trio's clock (``Processor._expire_idle_connections`` says why).

Stopping is cancellation: ``stop_reading()`` (the processor's, when the broker stops)
cancels the read in progress — the read scope, which also covers the TLS handshake and a
throttle's wait — and puts the sans-IO state where it hands out no more requests
(``ConnectionState.stop_reading``: where the next read would begin, its event is
``Closed``). So a connection waiting for its next request closes at once, and one with a
request in flight writes that answer first; the deadline on the processor's nursery
(shutdown.grace.ms) bounds the write, and cancelling the connection's task ends it at once.

``queued.max.request.bytes``: with a :class:`RequestMemoryPool` in the hooks, a frame's
declared size is reserved from the pool as soon as its prefix is read, before its body is
(Kafka's NetworkReceive taking its buffer from the pool); while the pool is spent the shell
starts no new frame and reads nothing (muted for memory, as Kafka's processor mutes a
channel) — the wait is part of the read, so shutdown and idle expiry end it as they end any
read. The bytes go back when the request is parsed (most APIs), when it is handled
(Produce, JoinGroup, SyncGroup: ``Request.memory``), or when the connection closes.

Security (TLS and SASL listeners) runs in this task too, before the first request and,
with KIP-368, between requests: the TLS handshake under its own deadline, then the SASL
exchange answered by the sans-IO ``SaslServerAuthenticator`` (ApiVersions before
authentication goes through the handlers like any request). A slow or failed handshake
holds up nobody else. The helpers that need no connection are in ``authentication.py``.

Nothing refers back to the connection, so a closed connection, its decoder and buffers are
freed by reference counting alone.

Errors: a bad frame or header is the client's fault — one log line, this connection closes,
nothing else notices. Transport errors (reset, broken pipe) just close.
"""

from __future__ import annotations

import logging
import math
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

from trikafka.network.authentication import (
    ALERT_GRACE,
    MIN_REAUTH_INTERVAL,
    REAUTH_APIS,
    new_connection_state,
    release_tls_stream,
    send_tls_alert,
)
from trikafka.network.connection_state import (
    NEED_DATA,
    SHUTTING_DOWN,
    Closed,
    ConnectionStateError,
    MuteState,
    RawFrame,
)
from trikafka.network.request_channel import (
    ConnectionMemory,
    Request,
    RequestMemoryPool,
    open_response_channel,
)
from trikafka.network.transport import TRANSPORT_ERRORS, StreamTransport, Transport
from trikafka.protocol.framing import NeedData
from trikafka.protocol.headers import DecodedRequest
from trikafka.protocol.registry import ApiKey, ApiRegistry
from trikafka.security.listener import HANDSHAKE_TIMEOUT, ListenerSecurity
from trikafka.security.sasl.authenticator import MAX_RECEIVE_SIZE, SASL_HANDSHAKE, SaslServerAuthenticator
from trikafka.security.tls import ANONYMOUS, principal_from_certificate

__all__ = ["Connection", "ConnectionHooks", "ConnectionSettings", "RECEIVE_SIZE"]

log = logging.getLogger("trikafka.network")

#: The most one read takes. Not more than 64 KiB: ``recv(n)`` allocates ``n`` bytes before it
#: shrinks them to what came, and until glibc has freed one mapped chunk (raising its mmap
#: threshold above 128 KiB) it maps fresh pages for every such read — 256 KiB cost ~20 µs more
#: per read than 64 KiB in a fresh process. Larger frames are received in place
#: (``FrameDecoder.unfilled``), so the size does not bound them.
RECEIVE_SIZE = 64 * 1024


@attrs.frozen
class ConnectionSettings:
    """What a connection needs to know, fixed for its processor's lifetime."""

    processor_id: int
    listener_name: str
    registry: ApiRegistry
    max_request_size: int  # socket.request.max.bytes
    connections_max_idle_ms: int  # also bounds the TLS handshake (with HANDSHAKE_TIMEOUT)
    #: APIs whose bytes stay in the request memory pool until answered (Produce, …).
    held_api_keys: frozenset[int] = frozenset()
    #: TLS and SASL of the listener (None: plaintext, as for in-memory test listeners).
    security: ListenerSecurity | None = None


@attrs.frozen
class ConnectionHooks:
    """Everything a connection tells the world, as callbacks; one per processor."""

    #: Send a request into the shared request channel (waiting while it is full).
    submit: Callable[[Request], Awaitable[None]]
    #: The connection is gone (after its last response, before its stream closes).
    closed: Callable[[Connection], None]
    #: A connection closed because the client's bytes were bad (BrokerMetrics).
    closed_by_error: Callable[[], None]
    #: A request's response was written at ``done``; its timestamps are complete.
    request_done: Callable[[Request, float], None]
    #: Seconds spent turning a frame into a queued request (NetworkProcessorAvgIdlePercent).
    busy: Callable[[float], None]
    #: queued.max.request.bytes; None when unbounded.
    memory_pool: RequestMemoryPool | None = None
    #: KIP-368: a SASL session was renewed on its connection / an expired one was closed.
    reauthenticated: Callable[[], None] | None = None
    session_expired: Callable[[], None] | None = None


class Connection:
    def __init__(
        self,
        transport: Transport,
        connection_id: str,
        client_host: str,
        settings: ConnectionSettings,
        hooks: ConnectionHooks,
    ) -> None:
        self.transport = transport
        self.stream = transport.stream
        self.connection_id = connection_id
        self.client_host = client_host
        self.settings = settings
        self.hooks = hooks
        security = settings.security
        self.authenticator: SaslServerAuthenticator | None = None
        if security is not None and security.authenticator_factory is not None:
            self.authenticator = security.authenticator_factory()
        self.protocol = new_connection_state(
            connection_id, settings.registry, settings.max_request_size, self.authenticator is not None
        )
        #: This connection's share of queued.max.request.bytes; None when unbounded.
        pool = hooks.memory_pool
        self.memory = None if pool is None else ConnectionMemory(pool, settings.held_api_keys)
        #: KIP-368: when the SASL session ends (trio time), None if it never does.
        self.session_expiry: float | None = None
        #: When the last re-authentication began (trio time), for MIN_REAUTH_INTERVAL.
        self.reauthentication_started = -math.inf
        self.last_activity = trio.current_time()
        #: What ``stop_reading`` cancels: a read, the TLS handshake, a throttle's wait.
        self.read_scope: trio.CancelScope | None = None
        #: A read waiting for the next request (idle expiry cancels it); None while busy.
        self.request_wait: trio.CancelScope | None = None
        self.close_reason: str | None = None
        #: Kafka's principal: from the client certificate or SASL, else User:ANONYMOUS.
        self.principal = ANONYMOUS
        self._now = trio.current_time
        #: The mute (module docstring): the send end goes with each request to the handlers,
        #: the receive end is where this task awaits the one response in flight.
        self.response_send, self.response_receive = open_response_channel()

    @property
    def state(self) -> str:
        """The mute state's Kafka name (NOT_MUTED, MUTED, …)."""
        return str(self.protocol.state)

    def stop_reading(self) -> None:
        """The broker is stopping: end the current read and serve no further request.

        The state hands out nothing more (``ConnectionState.stop_reading``: pipelined
        requests not yet handed out are dropped), the half-read frame's memory goes back,
        and the read in progress is cancelled; a request in flight is answered first.
        """
        self.protocol.stop_reading()
        if self.memory is not None:
            self.memory.release_reserved()  # the frame half read is gone
        if self.read_scope is not None:
            self.read_scope.cancel()

    async def run(self) -> None:
        try:
            security = self.settings.security
            if security is not None and security.ssl_context is not None:
                if not await self._tls_handshake(security.ssl_context):
                    return
            authenticator = self.authenticator
            if authenticator is not None and not await self._authenticate(authenticator):
                return
            await self._serve()
        except TRANSPORT_ERRORS as exc:
            self.close_reason = self.close_reason or f"transport: {type(exc).__name__}"
        except ConnectionStateError:
            # Our bug, not the client's: this connection closes, the broker keeps serving.
            log.exception("closing connection %s: illegal mute-cycle move", self.connection_id)
            self.close_reason = "internal error"
        finally:
            self.response_receive.close()  # a handler answering now finds it gone (not an error)
            self.response_send.close()
            self.protocol.close()
            if self.memory is not None:
                self.memory.release_all()  # a frame half read, a request never queued
            self.hooks.closed(self)
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(self.stream)
            release_tls_stream(self.stream)

    async def _serve(self) -> None:
        # trio's clock (the MockClock in tests) without trio.current_time()'s three layers
        # of calls; it is read several times per request.
        now = self._now = trio.lowlevel.current_clock().current_time
        state = self.protocol
        transport = self.transport
        settings = self.settings
        hooks = self.hooks
        submit = hooks.submit
        response_send = self.response_send
        receive_response = self.response_receive.receive
        memory = self.memory
        processor_id = settings.processor_id
        listener_name = settings.listener_name
        sasl = self.authenticator is not None
        event: DecodedRequest | RawFrame | Closed | NeedData | None
        # One cancel scope for the connection's whole life, not one per read (entering and
        # leaving a scope cost ~3 µs a request): idle expiry and stop_reading cancel it only
        # while a read is waiting (``request_wait``/``read_scope`` are set around each read),
        # and a cancel that lands as a read completes is caught right after it
        # (``receive_event``), so a request in flight is never cancelled by them.
        with trio.CancelScope() as reads:
            while True:
                if not state.buffered:
                    event = NEED_DATA  # nothing pipelined: straight to the read
                elif memory is None:
                    event = state.next_event()
                elif memory.may_read():
                    event = self.next_event()
                else:
                    event = NEED_DATA  # the read waits for memory first
                if event is NEED_DATA:
                    event = await self.receive_event(reads)
                    if event is None:
                        return
                    start = self.last_activity  # the request's last byte arrived then
                else:
                    start = now()  # pipelined: already read, after the previous answer went out
                if event.__class__ is Closed:
                    self.reject(event)
                    return
                if sasl and not await self._session_check(event):
                    if state.state is MuteState.NOT_MUTED:
                        continue  # re-authenticated
                    return
                size = state.frame_size
                request = Request(
                    processor=processor_id,
                    connection_id=self.connection_id,
                    listener_name=listener_name,
                    client_host=self.client_host,
                    header=event.header,  # type: ignore[union-attr]  # a DecodedRequest by now
                    body=event.body,  # type: ignore[union-attr]  # as above
                    spec=event.spec,  # type: ignore[union-attr]  # as above
                    size=size,
                    response_send=response_send,
                    principal=self.principal,
                    start_time=start,
                )
                if memory is not None:
                    request.memory = memory.take_held()  # the handler gives it back (send_response)
                hooks.busy(now() - start)
                await submit(request)  # the shared request channel; waits while it is full
                state.request_queued()
                response = await receive_response()  # muted until the one answer comes
                request.response_dequeue_time = now()
                throttled_until = request.throttle_deadline
                if throttled_until:
                    state.throttle_started()
                out = state.send_response(response)
                if out is None:
                    pass  # nothing to write (acks=0)
                elif out.__class__ is Closed:
                    self.close_reason = out.reason
                    return
                elif out.__class__ is tuple:
                    await transport.send_parts(out)
                else:
                    await transport.send(out)  # type: ignore[arg-type]  # bytes: the other kinds went above
                done = now()
                self.last_activity = done
                hooks.request_done(request, done)
                if throttled_until:
                    await self._throttled(throttled_until)
        closed = self.read_cancelled()  # only a cancelled read leaves the loop this way
        if closed is not None:
            self.reject(closed)

    async def _session_check(self, event: Any) -> bool:
        """KIP-368, before a request on a SASL connection: True to serve it as usual.

        A SaslHandshake re-authenticates (False, and NOT_MUTED again if that worked); any
        other request after the session expired closes the connection, unanswered, as Kafka.
        """
        now = self._now()
        api_key = event.header.request_api_key
        if api_key == SASL_HANDSHAKE and now - self.reauthentication_started >= MIN_REAUTH_INTERVAL:
            await self._reauthenticate(event)
            return False
        expiry = self.session_expiry
        if expiry is not None and now >= expiry:
            self.protocol.close()
            self.close_reason = "SASL session expired (connections.max.reauth.ms)"
            if self.hooks.session_expired is not None:
                self.hooks.session_expired()
            log.info("closing connection %s of %s: %s", self.connection_id, self.principal, self.close_reason)
            return False
        return True

    async def _throttled(self, until: float) -> None:
        """KIP-219: the answer was over a client quota; read nothing more until ``until``.

        Only this task waits. ``stop_reading`` cancels the wait as it cancels a read (the
        next event is then ``Closed``).
        """
        with trio.CancelScope(deadline=until) as scope:
            self.read_scope = scope
            await trio.sleep_forever()
        self.read_scope = None
        self.protocol.throttle_ended()
        self.last_activity = self._now()

    async def receive_event(
        self, reads: trio.CancelScope | None = None
    ) -> DecodedRequest | RawFrame | Closed | NeedData | None:
        """Read until the state has an event (a request or Closed); None at end of stream
        or idle expiry.

        ``reads`` is the scope that idle expiry and ``stop_reading`` cancel to end the read
        (the serve loop's, which lives as long as the connection; without one, a scope of
        its own). It is exposed as ``request_wait``/``read_scope`` only while a read waits;
        a cancel that came as the read completed is honoured right after it, so the
        caller's scope is never cancelled with a request in flight.
        """
        if reads is None:
            with trio.CancelScope() as reads:
                return await self.receive_event(reads)
            return self.read_cancelled()
        state = self.protocol
        if state.reading_stopped:  # the broker is stopping: no read begins
            return self.next_event()  # Closed
        transport = self.transport
        memory = self.memory
        now = self._now
        self.read_scope = self.request_wait = reads
        try:
            while True:
                if memory is not None and not memory.may_read():
                    await memory.pool.wait_for_memory()  # muted: no new frame, no read
                    event = self.next_event()  # a frame may be buffered already
                    if event is not NEED_DATA:
                        return event
                into = state.unfilled()
                data: bytes | bytearray | None
                if into is None:
                    data = await transport.receive_some(RECEIVE_SIZE)
                    count = len(data)
                else:
                    count = await transport.receive_into(into)
                    data = into = None  # the view dropped: the buffer may grow in place
                if reads.cancel_called:
                    # Expired or stopped as the bytes came: the read ends here, as if the
                    # cancel had come first; the bytes are dropped with the connection.
                    return self.read_cancelled()
                if not count:
                    self.close_reason = "closed by the client"
                    return None
                self.last_activity = now()
                if data is None:
                    state.received_into(count)
                else:
                    state.receive_data(data)
                if memory is None:
                    event = state.next_event()
                elif memory.may_read():  # else no new frame: wait above
                    event = self.next_event()
                else:
                    continue
                if event is not NEED_DATA:
                    return event
        finally:
            self.read_scope = self.request_wait = None

    def read_cancelled(self) -> Closed | None:
        """After ``reads`` was cancelled: Closed if the broker is stopping, else the
        connection idled out (None)."""
        if self.protocol.reading_stopped:
            return self.next_event()  # type: ignore[return-value]  # Closed once reading stopped
        self.close_reason = "idle"
        log.debug("closing idle connection %s", self.connection_id)
        return None

    def next_event(self) -> DecodedRequest | RawFrame | Closed | NeedData:
        """The state's next event, its bytes accounted in the request memory pool (if any)."""
        event = self.protocol.next_event()
        if self.memory is not None:
            self.memory.account(self.protocol, event)
        return event

    def reject(self, closed: Closed) -> None:
        self.close_reason = closed.reason
        if closed.client_fault:
            self.hooks.closed_by_error()
            log.warning(
                "closing connection %s from %s: %s",
                self.connection_id,
                self.client_host,
                closed.reason,
            )

    # -- TLS -------------------------------------------------------------------------------

    async def _tls_handshake(self, context: ssl.SSLContext) -> bool:
        """Wrap the stream in TLS, here in this connection's own task, under a deadline.

        A failed or stalled handshake is this client's problem alone: one log line, the
        connection closes, and neither the processor nor any other connection waited. A
        refused client is first sent the TLS alert that says why (``send_tls_alert``).
        """
        if self.protocol.reading_stopped:  # handed over after the broker began stopping
            self.close_reason = SHUTTING_DOWN
            return False
        stream = trio.SSLStream(self.stream, context, server_side=True)
        timeout = min(HANDSHAKE_TIMEOUT, self.settings.connections_max_idle_ms / 1000)
        failure: trio.BrokenResourceError | None = None
        with trio.move_on_after(timeout) as scope:
            self.read_scope = scope  # stop_reading cancels a handshake as it cancels a read
            try:
                await stream.do_handshake()
            except trio.BrokenResourceError as exc:
                failure = exc
        self.read_scope = None
        if failure is not None or scope.cancelled_caught:
            try:
                if failure is not None:
                    return await self._tls_refused(stream, failure, scope.deadline)
                if self.protocol.reading_stopped:
                    self.close_reason = SHUTTING_DOWN
                    return False
                self.reject(Closed(f"TLS handshake not done within {timeout:g} s", client_fault=True))
                return False
            finally:
                release_tls_stream(stream)  # never handed to the connection: cut its cycle here
                failure = None  # its traceback holds this frame: no cycle left behind
        self.stream = stream
        self.transport = StreamTransport(stream)
        self.principal = principal_from_certificate(stream.getpeercert())
        return True

    async def _tls_refused(
        self, stream: trio.SSLStream[Any], failure: trio.BrokenResourceError, deadline: float
    ) -> bool:
        """A refused handshake: the client gets OpenSSL's alert first, as from Kafka, within
        the handshake's deadline and at most ALERT_GRACE; then one log line and the close."""
        with trio.move_on_at(min(deadline, trio.current_time() + ALERT_GRACE)) as grace:
            self.read_scope = grace  # stop_reading cancels it as it cancels a read
            await send_tls_alert(stream)
        self.read_scope = None
        cause = failure.__cause__
        reason = getattr(cause, "reason", None) or cause or failure
        self.reject(Closed(f"TLS handshake failed: {reason}", client_fault=True))
        return False

    # -- SASL ------------------------------------------------------------------------------

    async def _reauthenticate(self, handshake: Any) -> bool:
        """KIP-368: run the SASL exchange again, beginning with ``handshake`` (already
        received); same mechanism and principal, or the connection closes."""
        self.reauthentication_started = trio.current_time()
        previous = self.authenticator
        security = self.settings.security
        assert previous is not None and security is not None and security.authenticator_factory is not None  # SASL
        authenticator = security.authenticator_factory(reauth_of=(previous.mechanism, self.principal))
        self.protocol.reauthentication_started(REAUTH_APIS, MAX_RECEIVE_SIZE)
        if not await self._authenticate(authenticator, handshake):
            return False
        self.authenticator = authenticator
        if self.hooks.reauthenticated is not None:
            self.hooks.reauthenticated()
        log.debug("connection %s re-authenticated %s", self.connection_id, self.principal)
        return True

    async def _authenticate(self, authenticator: SaslServerAuthenticator, first: Any = None) -> bool:
        """Kafka's SASL exchange, before the first ordinary request (or, KIP-368, from the
        ``first`` request of a re-authentication): True once authenticated.

        A failure is answered, logged once (mechanism, principal claimed, peer — never the
        secret) and closes this connection. Success starts the session's lifetime.
        """
        state = self.protocol
        while True:
            event, first = (self.next_event() if first is None else first), None
            if event is NEED_DATA:
                event = await self.receive_event()
                if event is None:
                    return False
            if event.__class__ is Closed:
                self.reject(event)
                return False
            if event.__class__ is RawFrame:
                step = authenticator.receive_token(event.data)
            elif event.header.request_api_key == ApiKey.API_VERSIONS:  # type: ignore[union-attr]  # a DecodedRequest by now
                if not await self._exchange(event, self.last_activity):
                    return False
                continue
            else:
                step = authenticator.receive(event)  # type: ignore[arg-type]  # a DecodedRequest by now
            if step.data:
                await self.transport.send(step.data)
            self.last_activity = trio.current_time()
            if step.failure is not None:
                self.reject(Closed(step.failure, client_fault=True))
                # Kafka's connection.failed.authentication.delay.ms: let the client read the
                # answer (an immediate close can reset it away), in this task alone.
                assert self.settings.security is not None  # a SASL listener
                await trio.sleep(self.settings.security.failed_authentication_delay)
                return False
            if authenticator.complete:
                state.authenticated()
                self.principal = authenticator.principal or self.principal
                lifetime = authenticator.session_lifetime_ms
                self.session_expiry = None if lifetime is None else self.last_activity + lifetime / 1000
                return True
            state.answered()
            state.raw_frames = authenticator.raw_tokens

    async def _exchange(self, event: Any, start: float) -> bool:
        """One request through the handlers and its answer written (the slow path of the
        serve loop, for requests before authentication); False: the connection closes."""
        state = self.protocol
        request = Request(
            processor=self.settings.processor_id,
            connection_id=self.connection_id,
            listener_name=self.settings.listener_name,
            client_host=self.client_host,
            header=event.header,
            body=event.body,
            spec=event.spec,
            size=state.frame_size,
            response_send=self.response_send,
            principal=self.principal,
            start_time=start,
        )
        await self.hooks.submit(request)
        state.request_queued()
        response = await self.response_receive.receive()
        request.response_dequeue_time = trio.current_time()
        out = state.send_response(response)
        if out.__class__ is Closed:
            self.close_reason = out.reason
            return False
        if out.__class__ is tuple:
            await self.transport.send_parts(out)
        elif out is not None:
            await self.transport.send(out)  # type: ignore[arg-type]  # bytes: the other kinds went above
        self.last_activity = done = trio.current_time()
        self.hooks.request_done(request, done)
        return True
