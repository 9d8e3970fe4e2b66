"""A connection's security steps: the TLS handshake and the SASL exchange, before (and, with
KIP-368, between) the requests the connection serves.

Split out of :class:`~trikafka.network.connection.Connection` by responsibility: the
connection moves requests through the mute cycle; :class:`ConnectionAuthentication` — one
per connection, holding a reference to it (composition, not a mixin) — decides who the
client is. Both run in the connection's own task, so a slow or failed handshake never holds
up the processor or any other connection.

The SASL requests are answered here by the sans-IO
:class:`~trikafka.security.sasl.authenticator.SaslServerAuthenticator`; ApiVersions before
authentication goes through the handlers like any request (:meth:`exchange`).
"""

from __future__ import annotations

import contextlib
import logging
import math
import ssl
from typing import TYPE_CHECKING, Any

import trio

from trikafka.network.connection_state import (
    NEED_DATA,
    SASL_TRANSITIONS,
    Closed,
    ConnectionState,
    RawFrame,
)
from trikafka.network.request_channel import Request
from trikafka.network.transport import TRANSPORT_ERRORS, StreamTransport
from trikafka.protocol.registry import ApiKey
from trikafka.security.listener import HANDSHAKE_TIMEOUT
from trikafka.security.sasl.authenticator import (
    MAX_RECEIVE_SIZE,
    SaslServerAuthenticator,
)
from trikafka.security.tls import principal_from_certificate

if TYPE_CHECKING:
    from trikafka.protocol.registry import ApiRegistry

__all__ = [
    "ALERT_GRACE",
    "PRE_AUTH_APIS",
    "ConnectionAuthentication",
    "release_tls_stream",
    "new_connection_state",
    "pending_tls_bytes",
    "send_tls_alert",
]

log = logging.getLogger("trikafka.network")

#: What a SASL listener serves before authentication (Kafka's SaslServerAuthenticator).
PRE_AUTH_APIS = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
#: What a connection may send while it re-authenticates (KIP-368).
REAUTH_APIS = frozenset({ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
#: At most this long (and never past the handshake deadline) to hand a refused client its TLS
#: alert: the alert is a few dozen bytes, so only a client that does not read waits it out.
ALERT_GRACE = 1.0
#: Kafka's MIN_REAUTH_INTERVAL_ONE_SECOND: a SaslHandshake sooner after the last
#: re-authentication began goes to the handlers as any request (ILLEGAL_SASL_STATE).
MIN_REAUTH_INTERVAL = 1.0


def new_connection_state(
    connection_id: str, registry: ApiRegistry, max_request_size: int, sasl: bool
) -> ConnectionState:
    """The sans-IO state of a new connection: with the SASL states first on a SASL listener."""
    if not sasl:
        return ConnectionState(connection_id, registry, max_request_size)
    state = ConnectionState(
        connection_id, registry, max_request_size,
        transitions=SASL_TRANSITIONS,  # type: ignore[arg-type]
    )
    state.start_authentication(PRE_AUTH_APIS, MAX_RECEIVE_SIZE)
    return state


def pending_tls_bytes(stream: trio.SSLStream[Any]) -> bytes | None:
    """The TLS records OpenSSL has written that trio has not sent; None if out of reach.

    After a refused handshake these are the alert that tells the client why (certificate
    required, unknown CA, protocol version). trio's ``SSLStream._retry`` marks the stream
    broken on ``ssl.SSLError`` and raises before it sends what OpenSSL left in its outgoing
    memory BIO, so without this a client sees a bare EOF or reset where Kafka (SSLEngine)
    sends the alert. The BIO is trio's private ``_outgoing``: if a trio release renames it,
    this returns None, the broker closes as before (no alert, no exception), and
    ``tests/security/test_tls_alert.py`` fails so the loss is noticed. Should trio send the
    alert itself one day (python-trio/trio#3413 proposes it for certificate errors), this
    finds nothing left and sends nothing.
    """
    outgoing = getattr(stream, "_outgoing", None)
    if not isinstance(outgoing, ssl.MemoryBIO):
        return None
    return outgoing.read()


async def send_tls_alert(stream: trio.SSLStream[Any]) -> None:
    """Write what OpenSSL left after a failed handshake (its alert) to the raw transport.

    The caller bounds it in time: a client that does not read must not hold the connection
    open. A transport already broken loses the alert, as it would have been lost anyway.
    """
    pending = pending_tls_bytes(stream)
    if pending:
        with contextlib.suppress(*TRANSPORT_ERRORS):
            await stream.transport_stream.send_all(pending)


async def _handshake_done() -> None:
    """What a closed SSLStream would run if asked to handshake now: nothing."""


def release_tls_stream(stream: object) -> None:
    """After a TLS connection closed: let reference counting free its SSLStream.

    trio's ``SSLStream`` holds itself in a reference cycle (its handshake-once object keeps
    the stream's own bound ``_do_handshake``), so the stream, its SSL object and buffers and
    the socket under it would wait for the cyclic garbage collector. A closed stream never
    handshakes again (every method checks for CLOSED first), so the cycle is cut there. A
    trio without that attribute leaves nothing to do.
    """
    once = getattr(stream, "_handshook", None)
    if once is not None and hasattr(once, "_afn"):
        once._afn = _handshake_done


class ConnectionAuthentication:
    """The TLS handshake and SASL exchange of one connection.

    Each step is given ``conn``, the :class:`~trikafka.network.connection.Connection` that
    owns this object (not imported here: the connection imports this module). It keeps no
    reference back, so a closed connection is freed by reference counting alone, without
    waiting for the cyclic garbage collector (issue 33).
    """

    __slots__ = ("reauthentication_started", "__weakref__")

    def __init__(self) -> None:
        #: When the last re-authentication began (trio time), for MIN_REAUTH_INTERVAL.
        self.reauthentication_started = -math.inf

    async def tls_handshake(self, conn: Any, context: ssl.SSLContext) -> bool:
        """Wrap the stream in TLS, here in this connection's own task, under a deadline.

        A failed or stalled handshake is this client's problem alone: one log line, the
        connection closes, and neither the processor nor any other connection waited. A
        refused client is first sent the TLS alert that says why (:func:`send_tls_alert`).
        """
        if conn.idle_seconds == -math.inf:  # handed over after shutdown began: never read
            conn.close_reason = "broker shutting down"
            return False
        stream = trio.SSLStream(conn.stream, context, server_side=True)
        timeout = min(HANDSHAKE_TIMEOUT, conn.idle_seconds)
        failure: trio.BrokenResourceError | None = None
        with trio.move_on_after(timeout) as scope:
            conn.read_scope = scope  # shutdown cancels a handshake as it cancels a read
            try:
                await stream.do_handshake()
            except trio.BrokenResourceError as exc:
                failure = exc
        conn.read_scope = None
        if failure is not None or scope.cancelled_caught:
            try:
                if failure is not None:
                    return await self._refused(conn, stream, failure, scope.deadline)
                if conn.idle_seconds == -math.inf:
                    conn.close_reason = "broker shutting down"
                    return False
                return self._failed(conn, f"TLS handshake not done within {timeout:g} s")
            finally:
                release_tls_stream(stream)  # never handed to the connection: cut its cycle here
                failure = None  # its traceback holds this frame: no cycle left behind
        conn.stream = stream
        conn.transport = StreamTransport(stream)
        conn.principal = principal_from_certificate(stream.getpeercert())
        return True

    async def _refused(
        self, conn: Any, stream: trio.SSLStream[Any], failure: trio.BrokenResourceError, deadline: float
    ) -> bool:
        """A refused handshake: the client gets OpenSSL's alert first, as from Kafka, within
        the handshake's deadline and at most ALERT_GRACE; then one log line and the close."""
        with trio.move_on_at(min(deadline, trio.current_time() + ALERT_GRACE)) as grace:
            conn.read_scope = grace  # shutdown cancels it as it cancels a read
            await send_tls_alert(stream)
        conn.read_scope = None
        cause = failure.__cause__
        reason = getattr(cause, "reason", None) or cause or failure
        return self._failed(conn, f"TLS handshake failed: {reason}")

    def _failed(self, conn: Any, reason: str) -> bool:
        conn.reject(Closed(reason, client_fault=True))
        return False

    def wants_reauthentication(self, now: float) -> bool:
        """A SaslHandshake on an authenticated connection: re-authenticate (KIP-368)?"""
        return now - self.reauthentication_started >= MIN_REAUTH_INTERVAL

    async def reauthenticate(self, conn: Any, responses: trio.MemorySendChannel[Any], handshake: Any) -> bool:
        """KIP-368: run the SASL exchange again, beginning with ``handshake`` (already
        received); same mechanism and principal, or the connection closes."""
        self.reauthentication_started = trio.current_time()
        previous = conn.authenticator
        authenticator = conn.settings.security.authenticator_factory(
            reauth_of=(previous.mechanism, conn.principal)
        )
        conn.protocol.reauthentication_started(REAUTH_APIS, MAX_RECEIVE_SIZE)
        if not await self.authenticate(conn, responses, authenticator, handshake):
            return False
        conn.authenticator = authenticator
        if conn.hooks.reauthenticated is not None:
            conn.hooks.reauthenticated()
        log.debug("connection %s re-authenticated %s", conn.connection_id, conn.principal)
        return True

    async def authenticate(
        self,
        conn: Any,
        responses: trio.MemorySendChannel[Any],
        authenticator: SaslServerAuthenticator,
        first: Any = None,
    ) -> bool:
        """Kafka's SASL exchange, before the first ordinary request (or, KIP-368, from the
        ``first`` request of a re-authentication): True once authenticated.

        A failure is answered, logged once (mechanism, principal claimed, peer — never the
        secret) and closes this connection. Success starts the session's lifetime.
        """
        state = conn.protocol
        while True:
            event, first = (conn.next_event() if first is None else first), None
            if event is NEED_DATA:
                event = await conn.receive_event()
                if event is None:
                    return False
            if event.__class__ is Closed:
                conn.reject(event)
                return False
            if event.__class__ is RawFrame:
                step = authenticator.receive_token(event.data)
            elif event.header.request_api_key == ApiKey.API_VERSIONS:
                if not await self.exchange(conn, responses, event, conn.last_activity):
                    return False
                continue
            else:
                step = authenticator.receive(event)
            if step.data:
                await conn.transport.send(step.data)
            conn.last_activity = trio.current_time()
            if step.failure is not None:
                conn.reject(Closed(step.failure, client_fault=True))
                # Kafka's connection.failed.authentication.delay.ms: let the client read the
                # answer (an immediate close can reset it away), in this task alone.
                await trio.sleep(conn.settings.security.failed_authentication_delay)
                return False
            if authenticator.complete:
                state.authenticated()
                conn.principal = authenticator.principal or conn.principal
                lifetime = authenticator.session_lifetime_ms
                conn.session_expiry = None if lifetime is None else conn.last_activity + lifetime / 1000
                return True
            state.answered()
            state.raw_frames = authenticator.raw_tokens

    async def exchange(self, conn: Any, responses: trio.MemorySendChannel[Any], event: Any, start: float) -> bool:
        """One request through the handlers and its answer written (the slow path of the
        connection's serve loop, for requests before authentication); False: it closed."""
        state = conn.protocol
        request = Request(
            processor=conn.settings.processor_id,
            connection_id=conn.connection_id,
            listener_name=conn.settings.listener_name,
            client_host=conn.client_host,
            header=event.header,
            body=event.body,
            spec=event.spec,
            size=state.frame_size,
            response_channel=responses,
            principal=conn.principal,
            start_time=start,
        )
        await conn.hooks.submit(request)
        state.request_queued()
        response = await conn.responses.receive()
        request.response_dequeue_time = trio.current_time()
        out = state.send_response(response)
        if out.__class__ is Closed:
            conn.close_reason = out.reason
            return False
        if out.__class__ is tuple:
            await conn.transport.send_parts(out)
        elif out is not None:
            await conn.transport.send(out)
        conn.last_activity = done = trio.current_time()
        conn.hooks.request_done(request, done)
        return True
