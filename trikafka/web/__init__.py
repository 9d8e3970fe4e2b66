"""The broker's HTTP surfaces: one server (:class:`HttpServer`), ``/metrics``, mounted apps.

Mount an ASGI app beside ``/metrics`` with ``broker.http_server.mount("/ui", app)`` (see
:mod:`trikafka.web.server` for what the app receives).
"""

from trikafka.web.metrics import KafkaCollector, metrics_app, metrics_registry
from trikafka.web.server import ASGIApp, HttpServer, Router

__all__ = [
    "ASGIApp",
    "HttpServer",
    "KafkaCollector",
    "Router",
    "console_app",
    "metrics_app",
    "metrics_registry",
]


def console_app(target: object, **options: object) -> ASGIApp:
    """The web console of a running broker or in-process cluster, to mount at ``/ui``
    (:func:`trikafka.web.console.console_app`). Imported on first use: the console's
    templates and client load only when ``--ui`` asks for them, not with every broker."""
    from trikafka.web.console import console_app as build

    return build(target, **options)  # type: ignore[arg-type]
