"""The commands' Schema Registry client: Confluent's REST API over ``urllib`` (no extra
dependency), and the decoder of Confluent-framed records (``consume --decode``).

Calls are blocking and run in a worker thread (``trio.to_thread``), each bounded by
``--timeout``. A refusal becomes a :class:`~trikafka.commands.common.CommandError` with the
registry's own message and code; an unreachable registry one line naming the URL.
"""

from __future__ import annotations

import base64
import io
import json
import struct
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import quote

import trio

from trikafka.commands.common import fail

__all__ = ["DEFAULT_REGISTRY", "RecordDecoder", "RegistryClient", "subject_path"]

DEFAULT_REGISTRY = "http://127.0.0.1:8081"


class RegistryClient:
    def __init__(self, url: str, timeout: float, *, authorization: str | None = None) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        #: An ``Authorization`` header value sent with every call (HTTP Basic), or None.
        self.authorization = authorization

    def call_sync(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/vnd.schemaregistry.v1+json", "Accept": "application/json"}
        if self.authorization:
            headers["Authorization"] = self.authorization
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310 - the user's URL
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            try:
                detail = json.loads(exc.read())
                message = f"{detail['message']} (error {detail['error_code']})"
            except (ValueError, KeyError, TypeError):
                message = f"HTTP {exc.code} {exc.reason}"
            raise fail(f"schema registry: {message}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise fail(f"cannot reach the schema registry at {self.url}: {reason}") from None

    async def call(self, method: str, path: str, body: Any = None) -> Any:
        return await trio.to_thread.run_sync(self.call_sync, method, path, body)


def subject_path(subject: str) -> str:
    return quote(subject, safe="")


class RecordDecoder:
    """Confluent-framed bytes (magic 0, 4-byte id, payload) → a JSON-able value, by the
    writer's schema fetched from the registry (cached per id). Other bytes are refused with a
    one-line reason, as the value's text."""

    def __init__(self, client: RegistryClient) -> None:
        self.client = client
        self._schemas: dict[int, tuple[str, Any]] = {}

    def _reference_texts(self, references: list[dict[str, Any]], texts: dict[str, str]) -> dict[str, str]:
        for ref in references or ():
            found = self.client.call_sync("GET", f"/subjects/{subject_path(ref['subject'])}/versions/{ref['version']}")
            self._reference_texts(found.get("references") or [], texts)
            texts[ref["name"]] = found["schema"]
        return texts

    def _schema(self, schema_id: int) -> tuple[str, Any]:
        if schema_id not in self._schemas:
            found = self.client.call_sync("GET", f"/schemas/ids/{schema_id}")
            schema_type = found.get("schemaType", "AVRO")
            texts = self._reference_texts(found.get("references") or [], {})
            if schema_type == "AVRO":
                from trikafka.registry.avro import parse_avro

                parsed: Any = parse_avro(found["schema"], texts)[0]
            elif schema_type == "PROTOBUF":
                from trikafka.registry.protobuf import parse_protobuf

                parsed = parse_protobuf(found["schema"], texts)
            else:
                parsed = None
            self._schemas[schema_id] = (schema_type, parsed)
        return self._schemas[schema_id]

    def decode_sync(self, data: bytes | None) -> Any:
        if data is None:
            return None
        if len(data) < 5 or data[0] != 0:
            return {
                "undecodable": "no schema id (magic byte 0 and a 4-byte id)",
                "base64": base64.b64encode(data).decode(),
            }
        (schema_id,) = struct.unpack_from(">i", data, 1)
        schema_type, parsed = self._schema(schema_id)
        payload = io.BytesIO(data[5:])
        if schema_type == "AVRO":
            from fastavro import schemaless_reader

            return schemaless_reader(payload, parsed, None)
        if schema_type == "JSON":
            return json.loads(payload.read())
        return _decode_protobuf(payload, parsed)

    async def decode(self, data: bytes | None) -> Any:
        return await trio.to_thread.run_sync(self.decode_sync, data)


def _varint(stream: io.BytesIO) -> int:
    shift = result = 0
    while True:
        byte = stream.read(1)
        if not byte:
            raise ValueError("truncated message indexes")
        result |= (byte[0] & 0x7F) << shift
        if not byte[0] & 0x80:
            return (result >> 1) ^ -(result & 1)  # zigzag
        shift += 7


def _decode_protobuf(payload: io.BytesIO, parsed: tuple[Any, dict[str, Any], Any]) -> Any:
    from google.protobuf import json_format, message_factory

    proto, _, pool = parsed
    count = _varint(payload)
    indexes = [_varint(payload) for _ in range(count)] if count else [0]
    messages = proto.message_type
    name = proto.package
    for index in indexes:
        message = messages[index]
        name = f"{name}.{message.name}" if name else message.name
        messages = message.nested_type
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName(name))
    return json_format.MessageToDict(cls.FromString(payload.read()))
