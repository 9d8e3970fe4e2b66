"""What a connection's security steps use that needs no connection: the sans-IO state of a
new (SASL) connection, the APIs allowed before and during authentication, and the TLS
helpers — the alert a refused client is owed, and freeing a closed ``SSLStream``.

The steps themselves — the TLS handshake and the SASL exchange, before (and, with KIP-368,
between) the requests — run in the connection's own task and read and set its state, so they
are methods of :class:`~trikafka.network.connection.Connection`.
"""

from __future__ import annotations

import contextlib
import ssl
from typing import TYPE_CHECKING, Any

import trio

from trikafka.network.connection_state import SASL_TRANSITIONS, ConnectionState
from trikafka.network.transport import TRANSPORT_ERRORS
from trikafka.protocol.registry import ApiKey
from trikafka.security.sasl.authenticator import MAX_RECEIVE_SIZE

if TYPE_CHECKING:
    from trikafka.protocol.registry import ApiRegistry

__all__ = [
    "ALERT_GRACE",
    "MIN_REAUTH_INTERVAL",
    "PRE_AUTH_APIS",
    "REAUTH_APIS",
    "new_connection_state",
    "pending_tls_bytes",
    "release_tls_stream",
    "send_tls_alert",
]

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
        transitions=SASL_TRANSITIONS,
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
