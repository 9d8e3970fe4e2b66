"""What every route shares: content types, bodies, answers, and the map from errors to bodies.

v2 answers ``application/vnd.kafka.v2+json``, v3 ``application/json``; every refusal is
Confluent's ``{"error_code", "message"}`` (see :mod:`trikafka.rest.errors`). A request body
is read up to :data:`MAX_BODY_BYTES`, parsed as JSON (400 when it is not), and validated by
its pydantic model (422 naming the field).
"""

from __future__ import annotations

import json
import logging
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from trikafka.client import KafkaError
from trikafka.errors import ErrorCode
from trikafka.rest import errors
from trikafka.rest.formats import FORMATS
from trikafka.rest.models import describe_validation_error

__all__ = [
    "MAX_BODY_BYTES",
    "V2_JSON",
    "V3_JSON",
    "accepted_format",
    "answer",
    "check_accept",
    "check_plain_content_type",
    "content_type",
    "credentials_of",
    "error_response",
    "kafka_refusal",
    "produce_format",
    "read_json",
    "read_model",
    "v3_cluster",
    "validate",
]

log = logging.getLogger("trikafka.rest")

V2_JSON = "application/vnd.kafka.v2+json"
V3_JSON = "application/json"
#: A larger request body is refused (413) without being read further.
MAX_BODY_BYTES = 64 * 1024 * 1024

M = TypeVar("M", bound=BaseModel)


def _media(value: str) -> str:
    return value.split(";", 1)[0].strip().lower()


def _embedded(media: str) -> str | None:
    """``application/vnd.kafka.<fmt>.v2+json`` → fmt; ``application/vnd.kafka.v2+json`` → ""."""
    if not media.startswith("application/vnd.kafka."):
        return None
    rest = media[len("application/vnd.kafka.") :]
    if rest in ("v2+json", "json"):
        return ""
    fmt, dot, tail = rest.partition(".")
    if dot and tail in ("v2+json", "json") and fmt in FORMATS:
        return fmt
    return None


def content_type(request: Request) -> str:
    return _media(request.headers.get("content-type", ""))


def produce_format(request: Request) -> str:
    """The embedded format a v2 produce's Content-Type names (binary for plain JSON)."""
    media = content_type(request)
    if media in ("application/json", "application/octet-stream", "application/vnd.kafka+json"):
        return "binary"
    fmt = _embedded(media)
    if not fmt:
        raise errors.unsupported_media_type(
            f"Content-Type {media or '(none)'!r}: produce takes application/vnd.kafka.<format>.v2+json, "
            f"format one of {', '.join(FORMATS)}"
        )
    return fmt


_PLAIN = ("application/vnd.kafka.v2+json", "application/vnd.kafka+json", "application/json", "application/octet-stream")


def check_plain_content_type(request: Request, *, empty_ok: bool) -> None:
    media = content_type(request)
    if not media and empty_ok:
        return
    if media in _PLAIN or _embedded(media) is not None:
        return
    raise errors.unsupported_media_type(
        f"Content-Type {media or '(none)'!r}: this route takes application/vnd.kafka.v2+json"
    )


def _accepts(request: Request) -> list[str]:
    header = request.headers.get("accept", "")
    return [m for m in (_media(p) for p in header.split(",")) if m]


def check_accept(request: Request, produces: str = V2_JSON) -> None:
    """406 when an Accept header is given and takes nothing this route answers."""
    accepts = _accepts(request)
    if not accepts:
        return
    for media in accepts:
        if media in ("*/*", "application/*", "application/json", produces) or _embedded(media) is not None:
            return
    raise errors.not_acceptable(f"Accept {request.headers.get('accept')!r}: this route answers {produces}")


def accepted_format(request: Request, default: str) -> str:
    """The embedded format a records request's Accept names, or ``default``."""
    for media in _accepts(request):
        fmt = _embedded(media)
        if fmt:
            return fmt
        if fmt == "" or media in ("*/*", "application/*", "application/json"):
            return default
    if _accepts(request):
        raise errors.not_acceptable(
            f"Accept {request.headers.get('accept')!r}: records are answered as "
            "application/vnd.kafka.<format>.v2+json"
        )
    return default


async def read_json(request: Request, *, required: bool = True) -> Any:
    size = 0
    chunks = []
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise errors.RestError(413, 413, f"the request body is larger than {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
    data = b"".join(chunks)
    if not data.strip():
        if required:
            raise errors.unprocessable("a JSON request body is required")
        return None
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise errors.bad_request(f"the request body is not JSON: {exc}") from None


def validate(model: type[M], body: Any) -> M:
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise errors.unprocessable(describe_validation_error(exc)) from None


async def read_model(request: Request, model: type[M], *, required: bool = True) -> M:
    body = await read_json(request, required=required)
    return validate(model, {} if body is None else body)


def credentials_of(request: Request) -> Any:
    """``(mechanism, username, password)`` the authentication in front set, or None."""
    found = request.scope.get("trikafka.credentials")
    return tuple(found) if found else None


def answer(content: Any, status: int = 200, media_type: str = V2_JSON) -> Response:
    if status == 204:
        return Response(status_code=204)
    return JSONResponse(content, status_code=status, media_type=media_type)


def error_response(exc: errors.RestError, media_type: str = V2_JSON) -> Response:
    return JSONResponse(exc.body(), status_code=exc.status, media_type=media_type)


_AUTHORIZATION = {
    ErrorCode.topic_authorization_failed,
    ErrorCode.group_authorization_failed,
    ErrorCode.cluster_authorization_failed,
    ErrorCode.transactional_id_authorization_failed,
}


def kafka_refusal(exc: Exception, topic: str | None = None) -> errors.RestError:
    """A Kafka client error as Confluent's body: not found, not authorized, or 50002/50003."""
    code = getattr(exc, "error_code", None)
    if code == ErrorCode.unknown_topic_or_partition and topic is not None:
        return errors.topic_not_found(topic)
    if code == ErrorCode.sasl_authentication_failed:
        return errors.RestError(401, 40101, f"Authentication failed: {exc}")
    if code in _AUTHORIZATION:
        return errors.RestError(403, 40301, f"Not authorized: {exc}")
    if code in (ErrorCode.invalid_partitions, ErrorCode.invalid_replication_factor, ErrorCode.invalid_config,
                ErrorCode.invalid_topic_exception, ErrorCode.invalid_request, ErrorCode.policy_violation):
        return errors.RestError(400, 40002, f"Kafka refused the request: {exc}")
    if code == ErrorCode.topic_already_exists:
        return errors.RestError(400, 40002, f"Topic already exists: {exc}")
    if code == ErrorCode.group_id_not_found:
        return errors.RestError(404, 404, f"Consumer group not found: {exc}")
    retriable = bool(getattr(exc, "retriable", False)) or not isinstance(exc, KafkaError)
    return errors.kafka_error(exc, retriable=retriable)


async def v3_cluster(request: Request) -> tuple[Any, str]:
    """The caller's clients (metadata fresh) and the cluster id a v3 path names (404 if
    another cluster's)."""
    clients = await request.app.state.proxy.clients_for(request)
    try:
        await clients.admin.list_topics(internal=True)
    except KafkaError as exc:
        raise kafka_refusal(exc) from None
    cluster_id = clients.admin.client.cluster.cluster_id or ""
    asked = request.path_params.get("cluster_id")
    if asked is not None and asked != cluster_id:
        raise errors.RestError(404, 404, f"Cluster {asked!r} not found (this one is {cluster_id!r})")
    return clients, cluster_id
