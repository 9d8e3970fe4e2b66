"""What one listener's connections need from security, built once when the broker starts.

The processor hands a :class:`ListenerSecurity` to each of its connections; the connection
runs the TLS handshake and the SASL exchange in its own task, so a slow or failed one
never holds up the processor or any other connection.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable
from functools import partial
from typing import Any

import attrs

from trikafka.security.config import SecurityConfig
from trikafka.security.sasl.authenticator import SaslServerAuthenticator
from trikafka.security.sasl.credentials import ScramCredentials
from trikafka.security.sasl.oauthbearer import OAuthBearerServer
from trikafka.security.sasl.plain import PlainServer
from trikafka.security.sasl.scram import MECHANISMS as SCRAM_MECHANISMS
from trikafka.security.sasl.scram import ScramServer
from trikafka.security.tls import server_ssl_context

__all__ = ["HANDSHAKE_TIMEOUT", "ListenerSecurity", "listener_security"]

log = logging.getLogger("trikafka.security")

#: Seconds a client has to finish the TLS handshake (or connections.max.idle.ms if shorter).
#: Kafka bounds it only by the idle timeout; ten minutes of a half-open handshake is a cheap
#: way to hold a connection slot, so the bound here is tighter.
HANDSHAKE_TIMEOUT = 10.0


@attrs.frozen
class ListenerSecurity:
    listener_name: str
    protocol: str  # PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
    ssl_context: ssl.SSLContext | None = None
    #: ``() -> SaslServerAuthenticator`` for SASL listeners (``reauth_of=(mechanism,
    #: principal)`` for a KIP-368 re-authentication), else None.
    authenticator_factory: Callable[..., SaslServerAuthenticator] | None = None
    #: connection.failed.authentication.delay.ms, in seconds: a failed authentication's
    #: answer is written, and the connection closes this much later (so the client reads it).
    failed_authentication_delay: float = 0.1
    #: connections.max.reauth.ms (KIP-368); 0: a session never expires.
    max_reauth_ms: int = 0


def listener_security(
    config: SecurityConfig, listener: str, scram: ScramCredentials | None = None
) -> ListenerSecurity:
    protocol = config.protocol(listener)
    ssl_context = server_ssl_context(config, listener) if protocol in ("SSL", "SASL_SSL") else None
    factory = None
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        enabled = config.mechanisms(listener)
        servers: dict[str, Callable[[], Any]] = {}
        if "PLAIN" in enabled:
            entry = config.jaas(listener, "PLAIN")
            servers["PLAIN"] = partial(PlainServer, entry.users() if entry else {})
        store = scram if scram is not None else ScramCredentials()
        for mechanism in SCRAM_MECHANISMS:
            if mechanism in enabled:
                servers[mechanism] = partial(ScramServer, mechanism, store.get)
        if "OAUTHBEARER" in enabled:
            entry = config.jaas(listener, "OAUTHBEARER")
            servers["OAUTHBEARER"] = partial(OAuthBearerServer, dict(entry.options) if entry else {})
            log.warning(
                "listener %s: OAUTHBEARER uses Kafka's unsecured JWS validator (alg none): "
                "any client can claim any principal; for development only", listener,
            )
        reauth_ms = int(config.get("connections.max.reauth.ms", listener))
        factory = partial(SaslServerAuthenticator, enabled, servers, reauth_ms)
    else:
        reauth_ms = 0
    delay = int(config.get("connection.failed.authentication.delay.ms")) / 1000
    return ListenerSecurity(listener, protocol, ssl_context, factory, delay, reauth_ms)
