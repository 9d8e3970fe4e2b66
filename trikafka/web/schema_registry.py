"""The Schema Registry's REST API (Confluent's routes) as a Starlette app over a
:class:`~trikafka.registry.SchemaRegistry`.

Served by the broker's :class:`~trikafka.web.server.HttpServer` on ``schema.registry.port``
(see docs/schema-registry.md for every route). Path segments are taken from the raw path
and percent-decoded one by one, so a subject may hold ``/`` (as ``%2F``): before Starlette
routes the request, each decoded segment is re-escaped (``%`` and ``/`` only) so that it
stays one segment, and the route unescapes its parameters. Every answer is JSON
(``application/vnd.schemaregistry.v1+json``); every refusal Confluent's
``{"error_code", "message"}``: a registry error with its code, an unknown route 404, a
known route with another method 405, a body that is not JSON 422, a caller the broker's
ACLs refuse 403 (40301). Anything else would be a bug of ours: it is logged with its
traceback and answered 500 (error code 50001).

With an authorizer (the broker's ACLs) every route is checked as :func:`registry_routes.access`
says, for the caller the HTTP authentication found (``scope["trikafka.credentials"]``) or
``User:ANONYMOUS``.
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import unquote

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request as StarletteRequest
from starlette.responses import Response
from starlette.routing import Route

from trikafka.registry import RegistryError, SchemaRegistry
from trikafka.registry.errors import bad_request
from trikafka.security.authorizer import AclOperation, ResourceType
from trikafka.web.registry_routes import ROUTES, Access, Handler, Request, access
from trikafka.web.server import ASGIApp, Receive, Scope, Send

__all__ = ["MAX_BODY_BYTES", "schema_registry_app"]

log = logging.getLogger("trikafka.web.schema_registry")

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
#: A larger request body is refused (422) without being read further.
MAX_BODY_BYTES = 16 * 1024 * 1024
CLUSTER = "kafka-cluster"


def _answer(status: int, answer: Any) -> Response:
    body = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
    return Response(body, status_code=status, media_type=CONTENT_TYPE)


def _escape(segment: str) -> str:
    return segment.replace("%", "%25").replace("/", "%2F")


async def _read_body(request: StarletteRequest) -> Any:
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise bad_request(f"the request body is larger than {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
    data = b"".join(chunks)
    try:
        body = json.loads(data) if data.strip() else None
    except (ValueError, RecursionError) as exc:
        raise bad_request(f"the request body is not JSON: {exc}") from None
    if body is None:
        raise bad_request("a JSON request body is required")
    return body


class _Guard:
    """The ACL checks of one request (see :func:`registry_routes.access`)."""

    def __init__(self, authorizer: Any, request: StarletteRequest) -> None:
        self.authorizer = authorizer
        credentials = request.scope.get("trikafka.credentials")
        self.principal = f"User:{credentials[1]}" if credentials else "User:ANONYMOUS"
        client = request.scope.get("client")
        self.host = client[0] if client else ""

    def allows(self, operation: str, resource: ResourceType, name: str) -> bool:
        return bool(self.authorizer.authorize(self.principal, self.host, AclOperation[operation], resource, name))

    def refuse(self, what: str) -> RegistryError:
        log.warning("schema registry: %s denied %s", self.principal, what)
        return RegistryError(403, 40301, f"{self.principal} is not authorized to {what}")

    def check(self, registry: SchemaRegistry, rule: Access, params: dict[str, str]) -> None:
        if rule is None:
            return
        operation, target = rule
        if target == "subject":
            subject = params["subject"]
            if not self.allows(operation, ResourceType.TOPIC, subject):
                raise self.refuse(f"{operation} subject '{subject}'")
        elif target == "cluster":
            if not self.allows(operation, ResourceType.CLUSTER, CLUSTER):
                raise self.refuse(f"{operation} the registry's global settings")
        elif target == "schema" and "id" in params:
            try:
                subjects = registry.id_subjects(params["id"], deleted=True)
            except RegistryError:
                return  # not there: the route answers its 404
            if subjects and not any(self.allows("READ", ResourceType.TOPIC, s) for s in subjects):
                raise self.refuse(f"READ schema {params['id']}")

    def check_answer(self, registry: SchemaRegistry, rule: Access, answer: Any) -> Any:
        if rule == ("READ", "listed") and isinstance(answer, list):
            return [s for s in answer if not isinstance(s, str) or self.allows("READ", ResourceType.TOPIC, s)]
        if rule == ("READ", "schema") and isinstance(answer, dict) and "id" in answer:
            self.check(registry, rule, {"id": str(answer["id"])})
        return answer


def _endpoint(registry: SchemaRegistry, authorizer: Any, method: str, handler: Handler, rule: Access) -> Any:
    async def endpoint(request: StarletteRequest) -> Response:
        params = {name: unquote(value) for name, value in request.path_params.items()}
        try:
            guard = _Guard(authorizer, request) if authorizer is not None else None
            if guard is not None:
                guard.check(registry, rule, params)
            query: dict[str, list[str]] = {}
            for name, value in request.query_params.multi_items():
                query.setdefault(name, []).append(value)
            body = await _read_body(request) if method in ("POST", "PUT") else None
            answer = handler(registry, Request(params, query, body))
            if guard is not None:
                answer = guard.check_answer(registry, rule, answer)
            return _answer(200, answer)
        except RegistryError as exc:
            return _answer(exc.status, exc.body())
        except Exception:
            log.exception("schema registry: %s %s failed", method, request.url.path)
            return _answer(500, {"error_code": 50001, "message": "Error in the backend data store"})

    return endpoint


async def _on_http_exception(request: StarletteRequest, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return _answer(exc.status_code, {"error_code": exc.status_code, "message": f"HTTP {exc.status_code} {exc.detail}"})


def schema_registry_app(registry: SchemaRegistry, authorizer: Any = None) -> ASGIApp:
    """The registry's routes; ``authorizer`` (the broker's ``StandardAuthorizer``, or None for
    no ACLs) decides each request as :func:`registry_routes.access` says."""
    routes = [
        Route(
            "/" + "/".join(pattern),
            _endpoint(registry, authorizer, method, handler, access(method, pattern)),
            methods=[method],
            include_in_schema=False,
        )
        for method, pattern, handler in ROUTES
    ]
    starlette = Starlette(routes=routes, exception_handlers={HTTPException: _on_http_exception})

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            raw = scope.get("raw_path") or scope.get("path", "/").encode()
            path = raw.decode("latin-1").partition("?")[0]
            segments = [_escape(unquote(s, errors="replace")) for s in path.split("/")]
            scope = dict(scope, path="/".join(segments))
        await starlette(scope, receive, send)

    return app
