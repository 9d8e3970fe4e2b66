"""What one listener's connections need from security, built once when the broker starts.

The processor hands a :class:`ListenerSecurity` to each of its connections; the connection
runs the TLS handshake and the SASL exchange in its own task, so a slow or failed one
never holds up the processor or any other connection.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from typing import Any

import attrs

from trikafka.security.config import SecurityConfig
from trikafka.security.tls import server_ssl_context

__all__ = ["HANDSHAKE_TIMEOUT", "ListenerSecurity", "listener_security"]

#: Seconds a client has to finish the TLS handshake (or connections.max.idle.ms if shorter).
#: Kafka bounds it only by the idle timeout; ten minutes of a half-open handshake is a cheap
#: way to hold a connection slot, so the bound here is tighter.
HANDSHAKE_TIMEOUT = 10.0


@attrs.frozen
class ListenerSecurity:
    listener_name: str
    protocol: str  # PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
    ssl_context: ssl.SSLContext | None = None
    #: ``(connection_id, peer host) -> authenticator`` for SASL listeners, else None.
    authenticator_factory: Callable[[str, str], Any] | None = None


def listener_security(config: SecurityConfig, listener: str) -> ListenerSecurity:
    protocol = config.protocol(listener)
    ssl_context = server_ssl_context(config, listener) if protocol in ("SSL", "SASL_SSL") else None
    return ListenerSecurity(listener, protocol, ssl_context)
