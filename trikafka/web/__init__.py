"""The broker's HTTP surfaces: one server (:class:`HttpServer`), ``/metrics``, mounted apps.

Mount an ASGI app beside ``/metrics`` with ``broker.http_server.mount("/ui", app)`` (see
:mod:`trikafka.web.server` for what the app receives).
"""

from trikafka.web.metrics import KafkaCollector, metrics_app, metrics_registry
from trikafka.web.server import ASGIApp, HttpServer, Router

__all__ = ["ASGIApp", "HttpServer", "KafkaCollector", "Router", "metrics_app", "metrics_registry"]
