"""The HTTP proxy's tests: a real broker on 127.0.0.1 with the proxy on a free port.

``proxy_server`` runs the broker and the proxy on a background Trio thread (TrioThread, as
the ``kafka_broker`` fixture does), so blocking clients — curl, confluent-kafka,
kafka-python, httpx's sync client, hypothesis — talk to it over real sockets from the test's
thread. The MockClock tests open their own broker in memory instead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
import trio

from trikafka.broker import open_broker
from trikafka.rest import serve_rest_proxy
from trikafka.testing.thread import TrioThread, test_broker_config


@attrs.frozen
class ProxyServer:
    url: str
    bootstrap_servers: str
    schema_registry_url: str
    cluster_id: str


@asynccontextmanager
async def open_proxy(config: dict[str, Any] | None = None) -> AsyncIterator[Any]:
    settings = {"rest.proxy.port": 0, "schema.registry.port": 0, "auto.create.topics.enable": "true", **(config or {})}
    async with open_broker(test_broker_config(settings)) as broker, trio.open_nursery() as nursery:
        proxy = serve_rest_proxy(broker)
        await nursery.start(proxy.run)
        yield broker
        nursery.cancel_scope.cancel()


def start_proxy(config: dict[str, Any] | None = None) -> tuple[TrioThread, ProxyServer]:
    thread = TrioThread("trikafka-rest-proxy")
    broker = thread.start(lambda: open_proxy(config))
    server = thread.call(
        lambda: ProxyServer(
            broker.rest_proxy_url, broker.bootstrap_servers, broker.schema_registry_url, broker.cluster_id
        )
    )
    return thread, server


@pytest.fixture(scope="module")
def proxy_server() -> Iterator[ProxyServer]:
    thread, server = start_proxy()
    try:
        yield server
    finally:
        thread.stop()
