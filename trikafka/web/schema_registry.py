"""The Schema Registry's REST API (Confluent's routes) as an ASGI app over a
:class:`~trikafka.registry.SchemaRegistry`.

Served by the broker's :class:`~trikafka.web.server.HttpServer` on ``schema.registry.port``
(see docs/schema-registry.md for every route). Path segments are taken from the raw path
and percent-decoded one by one, so a subject may hold ``/`` (as ``%2F``). Every answer is
JSON (``application/vnd.schemaregistry.v1+json``); every refusal Confluent's
``{"error_code", "message"}``: a registry error with its code, an unknown route 404, a
known route with another method 405, a body that is not JSON 422. Anything else would be a
bug of ours: it is logged with its traceback and answered 500 (error code 50001).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, unquote

from trikafka.registry import RegistryError, SchemaRegistry
from trikafka.registry.errors import bad_request
from trikafka.web.registry_routes import ROUTES, Request
from trikafka.web.server import ASGIApp, Receive, Scope, Send

__all__ = ["MAX_BODY_BYTES", "schema_registry_app"]

log = logging.getLogger("trikafka.web.schema_registry")

CONTENT_TYPE = b"application/vnd.schemaregistry.v1+json"
#: A larger request body is refused (422) without being read further.
MAX_BODY_BYTES = 16 * 1024 * 1024


def _match(segments: list[str], pattern: tuple[str, ...]) -> dict[str, str] | None:
    if len(segments) != len(pattern):
        return None
    found: dict[str, str] = {}
    for segment, expected in zip(segments, pattern, strict=True):
        if expected.startswith("{"):
            found[expected.strip("{}")] = segment
        elif segment != expected:
            return None
    return found


def _route(method: str, segments: list[str]) -> tuple[Callable[..., Any] | None, dict[str, str], bool]:
    """(handler, path parameters, whether the path is known with another method)."""
    known = False
    for route_method, pattern, handler in ROUTES:
        params = _match(segments, pattern)
        if params is None:
            continue
        if route_method == method:
            return handler, params, True
        known = True
    return None, {}, known


async def _read_body(receive: Receive) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise bad_request(f"the request body is larger than {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


def schema_registry_app(registry: SchemaRegistry) -> ASGIApp:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "websocket":
                await receive()
                await send({"type": "websocket.close", "code": 1000})
            return
        status, answer = await _answer(registry, scope, receive)
        body = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", CONTENT_TYPE), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})

    return app


async def _answer(registry: SchemaRegistry, scope: Scope, receive: Receive) -> tuple[int, Any]:
    method = scope.get("method", "GET").upper()
    raw = scope.get("raw_path") or scope.get("path", "/").encode()
    path = raw.decode("latin-1").partition("?")[0]
    try:
        segments = [unquote(s, errors="replace") for s in path.strip("/").split("/")] if path.strip("/") else []
        handler, params, known = _route(method, segments)
        if handler is None:
            if known:
                return 405, {"error_code": 405, "message": "HTTP 405 Method Not Allowed"}
            return 404, {"error_code": 404, "message": "HTTP 404 Not Found"}
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        body: Any = None
        if method in ("POST", "PUT"):
            data = await _read_body(receive)
            if data is None:
                return 400, {"error_code": 400, "message": "the client went away"}
            try:
                body = json.loads(data) if data.strip() else None
            except (ValueError, RecursionError) as exc:
                raise bad_request(f"the request body is not JSON: {exc}") from None
            if body is None:
                raise bad_request("a JSON request body is required")
        result = handler(registry, Request(params, query, body))
        return 200, result
    except RegistryError as exc:
        return exc.status, exc.body()
    except Exception:
        log.exception("schema registry: %s %s failed", method, path)
        return 500, {"error_code": 50001, "message": "Error in the backend data store"}
