"""The broker's HTTP surfaces: one server (:class:`HttpServer`), ``/metrics``, mounted apps.

Mount an ASGI app beside ``/metrics`` with ``broker.http_server.mount("/ui", app)`` (see
:mod:`trikafka.web.server` for what the app receives). The web console is not here: it is an
edge of its own (:mod:`trikafka.console`), mounted by whoever runs the broker (the CLI, a
test), so that the broker imports this server and nothing above it.
"""

from typing import Any

from trikafka.web.server import ASGIApp, HttpServer, Router, not_attached_app

__all__ = ["ASGIApp", "HttpServer", "Router", "metrics_app", "not_attached_app", "schema_registry_app"]


def metrics_app(broker: Any) -> ASGIApp:
    """The ``/metrics`` ASGI app of ``broker`` (see :mod:`trikafka.web.metrics`); imported on
    first use, so a broker without ``metrics.port`` never loads prometheus_client."""
    from trikafka.web.metrics import metrics_app as make

    return make(broker)


def schema_registry_app(registry: Any, authorizer: Any = None) -> ASGIApp:
    """The Schema Registry's REST API over ``registry`` (a ``trikafka.registry.SchemaRegistry``),
    to mount at ``/`` of its own server (see :mod:`trikafka.web.schema_registry`); with
    ``authorizer`` (the broker's ACLs) each request is authorized as its caller."""
    from trikafka.web.schema_registry import schema_registry_app as make

    return make(registry, authorizer)
