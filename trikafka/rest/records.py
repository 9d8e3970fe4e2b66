"""v3 produce: ``POST /v3/clusters/{cluster_id}/topics/{topic}/records``, one record or a stream.

The body is JSON values one after another. :class:`JsonValues` splits the bytes into
top-level values as they complete (sans-IO: ``feed(bytes)`` → the values finished so far),
so a record is produced as soon as its closing brace arrives.

A request sent with ``Transfer-Encoding: chunked`` is Confluent's streaming mode: the answer
is 200 at once and each record's result — ``{"error_code": 200, …}`` or a refusal's
``{"error_code", "message"}`` — is written on its own line as soon as it is known, while the
request goes on. Otherwise the body is read whole: one record is answered with its own HTTP
status, several with one line each.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import json
import logging
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from trikafka.client import KafkaError
from trikafka.rest import errors
from trikafka.rest.formats import SCHEMA_FORMATS
from trikafka.rest.http import (
    MAX_BODY_BYTES,
    V3_JSON,
    check_accept,
    check_plain_content_type,
    kafka_refusal,
    v3_cluster,
    validate,
)
from trikafka.rest.models import ProduceRecordV3

__all__ = ["JsonValues", "produce_records"]

log = logging.getLogger("trikafka.rest")

_SPACE = frozenset(b" \t\r\n")


class JsonValues:
    """Top-level JSON values out of a byte stream, each as soon as it is complete.

    Containers are found by depth (strings and escapes tracked, so a brace inside a string
    does not count); a bare scalar ends at whitespace or the end. A value that is not JSON
    becomes a :class:`~trikafka.rest.errors.RestError` in its place and the next one is read;
    one larger than ``limit`` bytes ends the stream (there is no telling where it stops).
    The buffer is never rescanned: ``_at`` is where the scan goes on.
    """

    def __init__(self, limit: int = MAX_BODY_BYTES) -> None:
        self.limit = limit
        self.count = 0
        self._buffer = bytearray()
        self._at = 0
        self._start: int | None = None
        self._depth = 0
        self._string = False
        self._escape = False
        self._scalar = False

    def feed(self, data: bytes) -> list[Any]:
        self._buffer += data
        found: list[Any] = []
        buffer = self._buffer
        i = self._at
        while i < len(buffer):
            byte = buffer[i]
            if self._start is None:
                if byte in _SPACE:
                    i += 1
                    continue
                self._start = i
                self._scalar = byte not in b"{[\""
                self._string = byte == 0x22  # a top-level string
                self._depth = 1 if byte in b"{[" else 0
                i += 1
                continue
            if self._string:
                if self._escape:
                    self._escape = False
                elif byte == 0x5C:  # backslash
                    self._escape = True
                elif byte == 0x22 and i > self._start:
                    self._string = False
                    if self._depth == 0:  # the top-level string ended
                        found.append(self._take(i + 1))
                        buffer, i = self._buffer, 0
                        continue
                i += 1
            elif self._scalar:
                if byte in _SPACE:
                    found.append(self._take(i))
                    buffer, i = self._buffer, 0
                    continue
                i += 1
            else:
                if byte == 0x22:
                    self._string = True
                elif byte in b"{[":
                    self._depth += 1
                elif byte in b"}]":
                    self._depth -= 1
                    if self._depth == 0:
                        found.append(self._take(i + 1))
                        buffer, i = self._buffer, 0
                        continue
                i += 1
            if self._start is not None and i - self._start > self.limit:
                raise errors.RestError(413, 413, f"record {self.count}: larger than {self.limit} bytes")
        self._at = i
        return found

    def finish(self) -> list[Any]:
        """What the end of the body completes: a scalar, or an error for a value cut off."""
        if self._start is None:
            return []
        if self._scalar:
            return [self._take(len(self._buffer))]
        self._buffer.clear()
        self._start = None
        self.count += 1
        return [errors.bad_request(f"record {self.count - 1}: the body ended inside it")]

    def _take(self, end: int) -> Any:
        assert self._start is not None
        raw = bytes(self._buffer[self._start : end])
        del self._buffer[:end]
        self._start, self._at, self._depth, self._string, self._escape = None, 0, 0, False, False
        number = self.count
        self.count += 1
        try:
            return json.loads(raw)
        except (ValueError, RecursionError) as exc:
            return errors.bad_request(f"record {number}: not JSON: {exc}")


_TYPES = {
    "BINARY": "binary", "JSON": "json", "STRING": "string", "AVRO": "avro", "JSONSCHEMA": "jsonschema",
    "PROTOBUF": "protobuf",
}


def _timestamp(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, int):
        return value
    try:
        parsed = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise errors.bad_request(f"timestamp {value!r}: an ISO 8601 date-time or epoch milliseconds") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.UTC)
    return int(parsed.timestamp() * 1000)


def _iso(ms: int) -> str:
    moment = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _encode_v3(proxy: Any, topic: str, data: Any, is_key: bool) -> tuple[bytes | None, dict[str, Any] | None]:
    if data is None:
        return None, None
    what = "key" if is_key else "value"
    kind = (data.type or "").upper()
    schema_text, schema_id = data.schema_, data.schema_id
    if not kind:
        if schema_id is not None:
            kind = {"AVRO": "AVRO", "JSON": "JSONSCHEMA", "PROTOBUF": "PROTOBUF"}[proxy.codec.schema_type(schema_id)]
        elif schema_text is not None:
            kind = "AVRO"
        else:
            kind = "JSON"
    fmt = _TYPES.get(kind)
    if fmt is None:
        raise errors.bad_request(f"{what}.type {data.type!r}: one of {', '.join(_TYPES)}")
    if fmt == "string":
        if not isinstance(data.data, str):
            raise errors.bad_request(f"{what}.data: a STRING is a JSON string")
        encoded: bytes | None = data.data.encode()
    elif fmt in SCHEMA_FORMATS:
        resolved = proxy.codec.schema_id(fmt, topic, is_key, schema_text, schema_id)
        if resolved is None:
            raise errors.key_schema_missing() if is_key else errors.value_schema_missing()
        encoded = proxy.codec.encode(fmt, data.data, resolved, what)
    else:
        encoded = proxy.codec.encode(fmt, data.data, None, what)
    if encoded is None and fmt == "json":
        encoded = b"null"
    return encoded, {"type": kind, "size": len(encoded or b"")}


async def _produce_one(proxy: Any, clients: Any, cluster_id: str, topic: str, raw: Any) -> dict[str, Any]:
    if isinstance(raw, errors.RestError):
        raise raw
    body = validate(ProduceRecordV3, raw)
    key, key_info = _encode_v3(proxy, topic, body.key, True)
    value, value_info = _encode_v3(proxy, topic, body.value, False)
    headers = []
    for i, header in enumerate(body.headers):
        try:
            decoded = None if header.value is None else base64.b64decode(header.value, validate=True)
            headers.append((header.name, decoded))
        except (binascii.Error, ValueError):
            raise errors.bad_request(f"headers.{i}.value: base64 is required") from None
    count = await proxy.partition_count(clients, topic)
    if body.partition_id is not None and body.partition_id >= count:
        raise errors.partition_not_found(topic, body.partition_id)
    try:
        future = await clients.producer.enqueue(
            topic, value, key=key, headers=headers or None, partition=body.partition_id,
            timestamp=_timestamp(body.timestamp),
        )
        meta = await future.wait()
    except KafkaError as exc:
        raise kafka_refusal(exc, topic) from None
    stamp = getattr(meta, "timestamp", None)
    return {
        "error_code": 200,
        "cluster_id": cluster_id,
        "topic_name": topic,
        "partition_id": meta.partition,
        "offset": meta.offset,
        "timestamp": _iso(stamp) if isinstance(stamp, int) and stamp >= 0 else None,
        "key": key_info,
        "value": value_info,
    }


async def _result(proxy: Any, clients: Any, cluster_id: str, topic: str, raw: Any) -> tuple[int, dict[str, Any]]:
    """(HTTP status, answer) of one record: its result or its refusal; never raises for it."""
    try:
        return 200, await _produce_one(proxy, clients, cluster_id, topic, raw)
    except errors.RestError as exc:
        return exc.status, exc.body()


async def produce_records(request: Request) -> Response:
    proxy = request.app.state.proxy
    check_plain_content_type(request, empty_ok=False)
    check_accept(request, V3_JSON)
    clients, cluster_id = await v3_cluster(request)
    topic = request.path_params["topic"]
    if "chunked" in request.headers.get("transfer-encoding", "").lower():
        return _Streamed(request, proxy, clients, cluster_id, topic)
    values = JsonValues()
    found: list[Any] = []
    async for chunk in request.stream():
        found += values.feed(chunk)
    found += values.finish()
    if not found:
        raise errors.unprocessable("a record (a JSON object) is required")
    if len(found) == 1:
        status, answer = await _result(proxy, clients, cluster_id, topic, found[0])
        return Response(json.dumps(answer), status_code=status, media_type=V3_JSON)
    lines = [json.dumps((await _result(proxy, clients, cluster_id, topic, raw))[1]) for raw in found]
    return Response("\n".join(lines) + "\n", media_type=V3_JSON)


class _Streamed(Response):
    """Confluent's streaming mode: 200 at once, then a line per record as it is produced,
    while the request body still streams in. Nothing may raise once the answer started."""

    def __init__(self, request: Request, proxy: Any, clients: Any, cluster_id: str, topic: str) -> None:
        super().__init__(media_type=V3_JSON)
        self.request, self.proxy, self.clients = request, proxy, clients
        self.cluster_id, self.topic = cluster_id, topic

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", V3_JSON.encode())]})
        values = JsonValues()
        try:
            async for chunk in self.request.stream():
                for raw in values.feed(chunk):
                    await self._answer(send, raw)
            for raw in values.finish():
                await self._answer(send, raw)
        except errors.RestError as exc:  # a record over the size limit: the stream cannot go on
            line = (json.dumps(exc.body()) + "\n").encode()
            await send({"type": "http.response.body", "body": line, "more_body": True})
        except Exception:  # a bug of ours, mid-answer: logged, and the answer ends here
            log.exception("HTTP proxy: streaming records to %r failed", self.topic)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _answer(self, send: Any, raw: Any) -> None:
        _, answer = await _result(self.proxy, self.clients, self.cluster_id, self.topic, raw)
        await send({"type": "http.response.body", "body": (json.dumps(answer) + "\n").encode(), "more_body": True})
