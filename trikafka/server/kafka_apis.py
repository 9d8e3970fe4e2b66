"""KafkaApis: one coroutine per API, and the rules every answer follows.

``handle`` never lets an exception escape: the client's mistakes (``KafkaProtocolError``)
become that API's error response with the Kafka error code, or a closed connection where
Kafka closes it; our own bugs become UNKNOWN_SERVER_ERROR with the traceback logged once.
Either way the handler task lives on and every other connection is served.

A handler returns one of:
* an :class:`Answer` — the response's fields as ``build`` takes them, encoded straight to
  bytes (no kio entity is built: building and kio-writing a response cost more than the
  rest of a small request);
* a kio response entity — encoded with the request's version and correlation id;
* a ``SendResponse`` / ``NoOpResponse`` / ``CloseConnectionResponse`` — sent as is;
* ``None`` — it handed the request to the purgatory, which responds later.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

from trikafka.config import BrokerConfig
from trikafka.errors import ErrorCode, KafkaProtocolError
from trikafka.metrics import BrokerMetrics
from trikafka.network.request_channel import (
    CloseConnectionResponse,
    NoOpResponse,
    Request,
    RequestChannel,
    SendResponse,
)
from trikafka.protocol.entities import error_response
from trikafka.protocol.headers import encode_response, response_parts
from trikafka.protocol.registry import ApiRegistry
from trikafka.server.awaitable import StateChanges
from trikafka.server.faults import Faults
from trikafka.server.metadata_cache import MetadataCache
from trikafka.server.purgatory import Purgatory

__all__ = ["Answer", "ApiContext", "ApiFamily", "KafkaApis"]

log = logging.getLogger("trikafka.server")

Handler = Callable[[Request], Awaitable[Any]]

#: Responses at least this big with several parts (record sets) are written scatter-gather,
#: without joining them into one buffer first.
SCATTER_GATHER_BYTES = 64 * 1024


class Answer:
    """A response described by its fields — keyword arguments and nested dicts/lists, exactly
    what :func:`~trikafka.protocol.entities.build` takes — for the request's version."""

    __slots__ = ("values",)

    def __init__(self, **values: Any) -> None:
        self.values = values

    def __repr__(self) -> str:
        return f"Answer({self.values!r})"


def _wall_ms() -> float:
    import time

    return time.time() * 1000


@attrs.define
class ApiContext:
    """What API families share: config, registry, caches, the purgatory, the channel."""

    config: BrokerConfig
    registry: ApiRegistry
    metadata_cache: MetadataCache
    purgatory: Purgatory
    channel: RequestChannel
    metrics: BrokerMetrics
    extras: dict[str, Any] = attrs.Factory(dict)
    now_ms: Callable[[], float] = attrs.Factory(lambda: _wall_ms)
    state_changes: StateChanges = attrs.Factory(StateChanges)  # awaitable broker state

    def respond(self, request: Request, body: Any) -> None:
        """Send ``body`` (a kio entity or a Response) as the answer to ``request``.

        Never raises: a response that cannot be encoded is our bug, answered with
        UNKNOWN_SERVER_ERROR (or, failing that, a closed connection) and logged — the task
        calling this (a handler or a purgatory operation) must survive it.
        """
        self.channel.send_response(request, to_response(request, body))
        self.state_changes.bump()


_READY = (SendResponse, NoOpResponse, CloseConnectionResponse)


def to_response(request: Request, body: Any) -> Any:
    if isinstance(body, _READY):
        return body
    try:
        is_answer = isinstance(body, Answer)
        parts = response_parts(
            request.spec, request.correlation_id, body.values if is_answer else body, is_answer
        )
        if len(parts) > 2 and sum(map(len, parts)) >= SCATTER_GATHER_BYTES:
            return SendResponse(tuple(parts))
        return SendResponse(b"".join(parts))
    except Exception:
        log.exception("cannot encode %s v%s response", request.spec.name, request.api_version)
    try:
        fallback = error_response(request.spec.response_type, ErrorCode.unknown_server_error)
        return SendResponse(encode_response(request.spec, request.correlation_id, fallback))
    except Exception:
        log.exception("cannot encode an error response for %s", request.spec.name)
        return CloseConnectionResponse()


class ApiFamily:
    """A group of related APIs sharing the broker's context; ``handlers()`` lists them."""

    def __init__(self, context: ApiContext) -> None:
        self.context = context

    @property
    def replicas(self) -> Any:
        return self.context.extras["replica_manager"]

    def handlers(self) -> dict[int, Handler]:
        raise NotImplementedError


class KafkaApis:
    def __init__(self, context: ApiContext, families: list[Any]) -> None:
        self.context = context
        self.handlers: dict[int, Handler] = {}
        for family in families:
            self.handlers.update(family.handlers())
        missing = set(context.registry.supported) - set(self.handlers)
        if missing:
            raise RuntimeError(f"registry advertises api keys with no handler: {sorted(missing)}")
        self.faults = Faults(context, self.handlers)  # injected faults, request recorder

    async def handle(self, request: Request, intercept: bool = True) -> None:
        if intercept and self.faults.active:
            await self.faults.intercept(request, self.handle)
            return
        context = self.context
        try:
            handler = self.handlers[request.api_key]
            result = await handler(request)
        except KafkaProtocolError as exc:
            if exc.close_connection:
                log.warning(
                    "closing connection %s: %s %s",
                    request.connection_id,
                    request.spec.name if request.spec else request.api_key,
                    exc,
                )
                result = CloseConnectionResponse()
            else:
                result = self._error_response(request, exc.error_code)
        except trio.Cancelled:
            raise
        except Exception:
            log.exception(
                "error handling %s v%s from %s (%s)",
                request.spec.name if request.spec else request.api_key,
                request.api_version,
                request.connection_id,
                request.client_id,
            )
            result = self._error_response(request, ErrorCode.unknown_server_error)
        if result is None:
            return  # the purgatory answers later
        context.respond(request, result)

    def _error_response(self, request: Request, code: ErrorCode) -> Any:
        builder = getattr(self.handlers.get(request.api_key), "error_response", None)
        if builder is not None:
            return builder(request, code)
        return error_response(request.spec.response_type, code)
