"""Helpers of the Schema Registry tests: a registry over an in-memory ``_schemas`` log, and
an ASGI call of its REST app without a socket (the socket path is tested with real clients).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from trikafka.log.memory import MemoryLog
from trikafka.registry import SchemaRegistry
from trikafka.web import schema_registry_app


class LogHolder:
    """The ``_schemas`` partition: absent until the registry first writes."""

    def __init__(self) -> None:
        self.log: MemoryLog | None = None

    def __call__(self, create: bool) -> MemoryLog | None:
        if self.log is None and create:
            self.log = MemoryLog("_schemas", 0)
        return self.log


@pytest.fixture
def schemas_log() -> LogHolder:
    return LogHolder()


@pytest.fixture
def registry(schemas_log: LogHolder) -> SchemaRegistry:
    return SchemaRegistry(schemas_log, lambda: 0)


async def call_app(app: Any, method: str, path: str, body: Any = None, *, raw: bytes | None = None) -> tuple[int, Any]:
    """(status, decoded JSON or text) of one request to the ASGI ``app``."""
    data = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
    target, _, query = path.partition("?")
    scope = {
        "type": "http", "method": method, "path": target, "raw_path": target.encode(),
        "query_string": query.encode(), "headers": [], "root_path": "",
    }
    sent: list[dict[str, Any]] = []
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if delivered:
            await trio.sleep_forever()
        delivered = True
        return {"type": "http.request", "body": data, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    status = sent[0]["status"]
    payload = b"".join(m.get("body", b"") for m in sent[1:])
    try:
        return status, json.loads(payload)
    except ValueError:
        return status, payload.decode()


@pytest.fixture
def app(registry: SchemaRegistry) -> Any:
    return schema_registry_app(registry)
