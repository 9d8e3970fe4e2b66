"""The HTTP proxy: Confluent's REST Proxy API (v2 and v3) as a Starlette app over the Trio client.

::

    RestProxy.run                      (the proxy's nursery; its clients close with it)
    ├── client sets                    a producer and an admin client per caller (clients.py)
    ├── consumer instances             one Trio consumer each (consumers.py)
    └── expiry watch                   closes instances unused for consumer.instance.timeout.ms

The broker serves the app on ``rest.proxy.port`` with its HTTP server (hypercorn's Trio
worker, which drives Starlette through anyio); :func:`serve_rest_proxy` mounts it there and
runs the proxy in the broker's nursery. The routes are declared in one table per API
version (:mod:`trikafka.rest.v2`, :mod:`trikafka.rest.v3`); every refusal, of a route or of
Starlette's router (404, 405), is Confluent's ``{"error_code", "message"}``; an unexpected
exception is logged with its traceback and answered 500 (error code 50001) — a bug of ours.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Mapping
from typing import Any

import trio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from trikafka.client import KafkaError, KafkaTimeoutError
from trikafka.rest import errors
from trikafka.rest.clients import Clients, ClientSet, credentials_config
from trikafka.rest.consumers import ConsumerInstances
from trikafka.rest.formats import Codec
from trikafka.rest.http import V2_JSON, V3_JSON, credentials_of, error_response, kafka_refusal

__all__ = ["RestProxy", "serve_rest_proxy"]

log = logging.getLogger("trikafka.rest")

#: Confluent's consumer.request.timeout.ms default: how long ``GET …/records`` waits.
CONSUMER_REQUEST_TIMEOUT_MS = 1000


def _media_for(request: Request) -> str:
    return V3_JSON if request.url.path.startswith("/v3") else V2_JSON


async def _on_rest_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, errors.RestError)
    if exc.status >= 500:
        log.warning("HTTP proxy: %s %s: %s", request.method, request.url.path, exc.message)
    return error_response(exc, _media_for(request))


async def _on_http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    messages = {404: "HTTP 404 Not Found", 405: "HTTP 405 Method Not Allowed"}
    message = messages.get(exc.status_code, str(exc.detail))
    return error_response(errors.RestError(exc.status_code, exc.status_code, message), _media_for(request))


async def _on_kafka_error(request: Request, exc: Exception) -> Response:
    return await _on_rest_error(request, kafka_refusal(exc))


async def _on_bug(request: Request, exc: Exception) -> Response:
    log.error("HTTP proxy: %s %s failed", request.method, request.url.path, exc_info=exc)
    body = errors.RestError(500, 50001, f"Internal server error: {type(exc).__name__}")
    return error_response(body, _media_for(request))


class RestProxy:
    """Confluent's REST Proxy API over ``bootstrap`` (anything the Trio client takes: a
    ``host:port`` string, a ``Broker``, a ``TestBroker``); ``registry`` is the broker's
    :class:`~trikafka.registry.SchemaRegistry` for the schema formats (None: refused)."""

    def __init__(
        self,
        bootstrap: Any,
        *,
        registry: Any = None,
        client_config: Mapping[str, Any] | None = None,
        consumer_instance_timeout_ms: int = 300_000,
        consumer_request_timeout_ms: int = CONSUMER_REQUEST_TIMEOUT_MS,
        metadata_wait_ms: int = 5000,
    ) -> None:
        from trikafka.rest import v2, v3

        self.bootstrap = bootstrap
        self.client_config = dict(client_config or {})
        self.codec = Codec(registry)
        self.consumer_instance_timeout_ms = consumer_instance_timeout_ms
        self.consumer_request_timeout_ms = consumer_request_timeout_ms
        #: The longest a ``GET …/records`` waits whatever its ``timeout`` asks.
        self.max_poll_timeout_ms = 30_000
        #: How long a produce waits for an unknown topic to appear (auto-creation) before 40401.
        self.metadata_wait_ms = metadata_wait_ms
        self._numbers = itertools.count(1)
        self._clients: Clients | None = None
        self._consumers: ConsumerInstances | None = None
        self.app = Starlette(
            routes=[*v2.ROUTES, *v3.ROUTES],
            exception_handlers={
                errors.RestError: _on_rest_error,
                HTTPException: _on_http_exception,
                KafkaError: _on_kafka_error,
                Exception: _on_bug,
            },
        )
        self.app.state.proxy = self
        self.started = trio.Event()
        self._stop = trio.Event()

    # --- lifecycle --------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[RestProxy] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._clients = Clients(self.bootstrap, self.client_config, nursery)
            self._consumers = ConsumerInstances(
                self.bootstrap, nursery, timeout_ms=self.consumer_instance_timeout_ms
            )
            nursery.start_soon(self._consumers.run_expiry, name="rest-proxy-expiry")
            self.started.set()
            task_status.started(self)
            try:
                await self._stop.wait()
                await self._consumers.close_all_and_wait()
            finally:
                self._consumers.close_all()
                self._clients = None
                nursery.cancel_scope.cancel()

    async def aclose(self) -> None:
        """Stop: every consumer instance closes (leaving its group), then the clients; ``run``
        returns. A broker's graceful stop awaits this first (``serve_rest_proxy``)."""
        self._stop.set()
        if self._consumers is not None:
            await self._consumers.close_all_and_wait()

    # --- what the routes use ----------------------------------------------------------

    @property
    def consumers(self) -> ConsumerInstances:
        if self._consumers is None:
            raise errors.RestError(503, 50301, "the HTTP proxy is not running")
        return self._consumers

    async def clients_for(self, request: Request) -> ClientSet:
        if self._clients is None:
            raise errors.RestError(503, 50301, "the HTTP proxy is not running")
        try:
            return await self._clients.get(credentials_of(request))
        except KafkaError as exc:
            raise kafka_refusal(exc) from None

    def consumer_config(self, request: Request) -> dict[str, Any]:
        return credentials_config(self.client_config, credentials_of(request))

    def next_instance_number(self) -> int:
        return next(self._numbers)

    async def partition_count(self, clients: ClientSet, topic: str) -> int:
        """The topic's partition count, waiting a little for auto-creation; 40401 if none."""
        client = clients.producer.client
        if client.cluster.topic_error(topic) is not None:
            # An earlier refusal is not kept: the topic may exist now, an ACL may allow it now.
            client.cluster.forget(topic)
        try:
            return await client.wait_for_topic(topic, self.metadata_wait_ms / 1000)
        except (KafkaTimeoutError, KafkaError) as exc:
            code = getattr(exc, "error_code", None)
            if isinstance(exc, KafkaTimeoutError) or code is not None and int(code) in (3, 17):
                raise errors.topic_not_found(topic) from None
            raise kafka_refusal(exc, topic) from None


def serve_rest_proxy(broker: Any) -> RestProxy:
    """A proxy over ``broker`` (its first listener — its first SASL_PLAINTEXT listener when the
    HTTP ports ask for the broker's users, so each caller logs in as itself —, its schema
    registry and its ``consumer.instance.timeout.ms``), mounted on the broker's ``rest.proxy.port`` server.
    Run it in a nursery: ``await nursery.start(serve_rest_proxy(broker).run)``; the broker's
    graceful stop closes it first, so its consumer instances leave their groups."""
    proxy = RestProxy(
        _LoginListener(broker) if getattr(broker, "http_users", None) is not None else broker,
        registry=broker.core.schemas,
        consumer_instance_timeout_ms=broker.config.consumer_instance_timeout_ms,
    )
    broker.rest_proxy_server.mount("/", proxy.app)
    broker.before_stop.append(proxy.aclose)
    return proxy


class _LoginListener:
    """The broker's first SASL_PLAINTEXT listener as a bootstrap (looked up when a client
    opens, after the broker bound its listeners); the first listener if it has none."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker

    @property
    def bootstrap_servers(self) -> str:
        security = self.broker.config.security
        for name in self.broker.endpoints:
            if security.protocol(name) == "SASL_PLAINTEXT":
                return str(self.broker.address(name))
        return str(self.broker.bootstrap_servers)
