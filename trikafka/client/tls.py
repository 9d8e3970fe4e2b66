"""TLS for the Trio client: ``security.protocol`` SSL and SASL_SSL.

The keys are librdkafka's (``ssl.ca.location``, ``ssl.certificate.location``,
``ssl.key.location``, ``ssl.key.password``, ``ssl.endpoint.identification.algorithm``,
``enable.ssl.certificate.verification``) because those are what users of kcat and
confluent-kafka already hold in their ``.properties`` files; PEM files only, as the standard
:mod:`ssl` module reads them.

TLS is a wrapper around any connector (:mod:`trikafka.client.transport`): the plain stream is
opened, wrapped in a :class:`trio.SSLStream` and the handshake is done before the connection
sees a byte — so TLS works over TCP and, in tests, over the in-memory transport alike. The
handshake runs inside the caller's connect deadline (``request.timeout.ms`` on trio's clock); a
handshake that fails (an unknown CA, a name mismatch, a plaintext port) is not retried: like
Java's ``SslAuthenticationException`` it is one non-retriable :class:`SslAuthenticationError`
naming the broker, since retrying cannot make a certificate valid (callers waiting on metadata
get it as a non-retriable KafkaError with the same text).
"""

from __future__ import annotations

import ssl
from typing import Any

import trio

from trikafka.client.errors import KafkaConnectionError, KafkaError
from trikafka.client.transport import Connector
from trikafka.errors import ConfigError, ErrorCode

__all__ = [
    "TLS_PROTOCOLS",
    "SslAuthenticationError",
    "client_ssl_context",
    "closed_during_api_versions",
    "handshake_failure",
    "tls_connector",
]

#: The values of ``security.protocol`` that speak TLS.
TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})


class SslAuthenticationError(KafkaError):
    """The TLS handshake with a broker failed (Java: ``SslAuthenticationException``)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.network_exception, message, retriable=False)


def client_ssl_context(config: Any) -> ssl.SSLContext:
    """The :class:`ssl.SSLContext` the settings describe; a ConfigError names the key whose file
    cannot be read, so a bad path fails when the client is made, not at the first connect."""
    verify = config["enable.ssl.certificate.verification"]
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    ctx.check_hostname = verify and config["ssl.endpoint.identification.algorithm"] == "https"
    if not verify:
        ctx.verify_mode = ssl.CERT_NONE
    ca = config["ssl.ca.location"]
    if ca is not None:
        try:
            ctx.load_verify_locations(cafile=ca)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                "ssl.ca.location", ca, f"a readable PEM file of CA certificates is required ({_reason(exc)})"
            ) from None
    cert, key = config["ssl.certificate.location"], config["ssl.key.location"]
    if key is not None and cert is None:
        raise ConfigError("ssl.key.location", key, "needs ssl.certificate.location (the certificate of that key)")
    if cert is not None:
        try:
            ctx.load_cert_chain(cert, keyfile=key, password=config["ssl.key.password"])
        except (OSError, ssl.SSLError) as exc:
            bad = (
                "ssl.certificate.location"
                if key is None or isinstance(exc, FileNotFoundError) and exc.filename == cert
                else "ssl.key.location"
            )
            allowed = "a readable PEM certificate (and key) with the right ssl.key.password is required"
            raise ConfigError(bad, config[bad], f"{allowed} ({_reason(exc)})") from None
    return ctx


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError) and exc.reason:
        return str(exc.reason).replace("_", " ").lower()
    return getattr(exc, "strerror", None) or str(exc)


def tls_connector(inner: Connector, config: Any) -> Connector:
    """``inner`` with TLS on top: each stream it opens is wrapped and handshaken."""
    ctx = client_ssl_context(config)

    async def connect(host: str, port: int) -> trio.abc.Stream:
        plain = await inner(host, port)
        stream = trio.SSLStream(plain, ctx, server_hostname=host)
        try:
            await stream.do_handshake()
        except trio.BrokenResourceError as exc:
            await trio.aclose_forcefully(plain)
            raise handshake_failure(host, port, exc.__cause__) from None
        except BaseException:
            await trio.aclose_forcefully(plain)
            raise
        return stream

    return connect


def handshake_failure(host: str, port: int, cause: BaseException | None) -> SslAuthenticationError:
    """The one error for a failed handshake, with what the user can change. Under TLS 1.3 a
    broker refuses a missing client certificate only after the client's handshake is done, so
    the client meets that alert on its first read; it is reported here all the same."""
    if isinstance(cause, ssl.SSLCertVerificationError):
        reason = (
            f"certificate verify failed: {cause.verify_message} (check ssl.ca.location and that the "
            f"certificate names {host})"
        )
    elif isinstance(cause, ssl.SSLError) and "certificate required" in _reason(cause):
        reason = f"{_reason(cause)}: the broker wants a client certificate (ssl.certificate.location, ssl.key.location)"
    elif cause is None:
        reason = f"the connection was closed (is {host}:{port} a TLS listener?)"
    else:
        reason = f"{_reason(cause)} (is {host}:{port} a TLS listener?)"
    return SslAuthenticationError(f"SSL handshake with {host}:{port} failed: {reason}")


def closed_during_api_versions(where: str, host: str, port: int, broken_by: BaseException | None) -> KafkaError:
    """A new connection closed before ApiVersions was answered. A TLS alert then (TLS 1.3: a
    client certificate refused after the handshake) is final; a bare EOF stays retriable, since
    a broker crash looks the same — but the message says what else it may be."""
    if isinstance(broken_by, ssl.SSLError) and not isinstance(broken_by, ssl.SSLEOFError):
        return handshake_failure(host, port, broken_by)
    if isinstance(broken_by, ssl.SSLEOFError):
        return KafkaConnectionError(
            f"{where} closed the TLS connection during ApiVersions (under TLS 1.3 so does a broker"
            " that wants a client certificate: ssl.certificate.location)"
        )
    return KafkaConnectionError(f"{where} closed the connection during ApiVersions")
