"""What every HTTP port of a broker or cluster takes from its security settings.

One rule for the registry, the HTTP proxy and the console, whoever builds their servers (the
broker, the CLI's in-process cluster, the test kit's cluster):

* HTTP Basic with the broker's SASL users (:class:`~trikafka.security.http_users.HttpUsers`)
  when ``http.authentication.method`` says BASIC, or, left empty, whenever a listener uses
  SASL_PLAINTEXT or SASL_SSL — a broker that asks Kafka clients who they are asks HTTP
  callers too;
* HTTPS when ``http.ssl.keystore.location`` (or ``http.ssl.keystore.certificate.chain``) is
  set, with the broker's ``ssl.*`` keys for whatever ``http.ssl.*`` key is not given;
* ``/metrics`` and the console (``metrics.port``) are test tools: ``metrics.host`` must be
  loopback unless ``metrics.allow.remote=true``.
"""

from __future__ import annotations

import ssl
from typing import Any

import attrs

from trikafka.errors import ConfigError
from trikafka.security.config import HTTP_PORTS
from trikafka.security.http_users import HttpUsers
from trikafka.security.tls import server_ssl_context

__all__ = ["HttpSecurity", "check_metrics_host", "http_security"]

_LOOPBACK = ("localhost", "::1")


@attrs.frozen
class HttpSecurity:
    #: The users HTTP Basic checks against; None: no login asked.
    users: HttpUsers | None
    #: The TLS context of every HTTP port; None: plain HTTP.
    ssl_context: ssl.SSLContext | None

    def server_options(self) -> dict[str, Any]:
        """Keyword arguments for :class:`~trikafka.web.server.HttpServer`."""
        return {"users": self.users, "ssl_context": self.ssl_context}


def http_security(config: Any, scram: Any) -> HttpSecurity:
    """From a ``BrokerConfig`` and the broker's (or cluster's) SCRAM credentials store."""
    check_metrics_host(config)
    listeners = [spec.name for spec in config.listeners]
    users = HttpUsers(config.security, listeners, scram) if config.security.http_authentication(listeners) else None
    context = server_ssl_context(config.security, HTTP_PORTS) if config.security.http_tls() else None
    return HttpSecurity(users, context)


def check_metrics_host(config: Any) -> None:
    """``/metrics`` and the console stay on loopback unless ``metrics.allow.remote``."""
    host = config.metrics_host
    if config.metrics_port >= 0 and not config.metrics_allow_remote and not (
        host in _LOOPBACK or host.startswith("127.")
    ):
        raise ConfigError(
            "metrics.host", host,
            "metrics.port serves /metrics and the console, test tools kept on loopback "
            "(127.0.0.1, ::1, localhost); set metrics.allow.remote=true to serve them on another address",
        )
