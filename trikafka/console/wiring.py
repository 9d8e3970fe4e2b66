"""Building the console for what this process serves: one broker, or an in-process cluster.

Both are read duck-typed (a broker has ``statistics()`` and ``endpoints``; a cluster has
``nodes``, each with ``metrics`` and ``endpoints``) so that this module needs neither the
broker nor the cluster package, and the reads themselves go through the Kafka protocol to
the bootstrap servers (see ``reader.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import trio

import trikafka
from trikafka.client import open_admin
from trikafka.console.app import ConsoleApp
from trikafka.console.rates import ApiCounters
from trikafka.console.reader import ClusterReader

__all__ = ["CLIENT_ID", "console_app"]

#: How the client dials a broker (``trikafka.client.memory_connector`` for in-memory brokers).
Connector = Callable[[str, int], Awaitable[trio.abc.Stream]]

#: The console's client id: its own requests show under it in the broker's logs and rates.
CLIENT_ID = "trikafka-console"

#: A page waits this long for the cluster before it shows the 503 page.
_CLIENT_SETTINGS = {"client.id": CLIENT_ID, "request.timeout.ms": 10_000, "default.api.timeout.ms": 15_000}


def _counters(request_snapshots: list[Mapping[str, Any]]) -> dict[str, ApiCounters]:
    """Per API: requests summed over the brokers, TotalTimeMs percentiles of the worst one."""
    out: dict[str, ApiCounters] = {}
    for snapshots in request_snapshots:
        for api, snapshot in snapshots.items():
            total = snapshot["TotalTimeMs"]
            seen = out.get(api)
            if seen is None:
                out[api] = ApiCounters(snapshot["Requests"], total.p50, total.p99)
            else:
                out[api] = ApiCounters(
                    seen.requests + snapshot["Requests"], max(seen.p50_ms, total.p50), max(seen.p99_ms, total.p99)
                )
    return out


def _address(config: Any, endpoints: Mapping[str, Any]) -> str:
    """A broker's first PLAINTEXT listener: the console is a client without credentials.
    With none, its first listener — and pages then say why the cluster does not answer."""
    plain = [e for name, e in endpoints.items() if config.security.protocol(name) == "PLAINTEXT"]
    endpoint = (plain or list(endpoints.values()))[0]
    host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
    return f"{host}:{endpoint.port}"


def console_app(
    target: Any,
    *,
    bootstrap: str | None = None,
    connector: Connector | None = None,
    schema_registry_url: str | Callable[[], str | None] | None = None,
    rest_proxy_url: str | Callable[[], str | None] | None = None,
) -> ConsoleApp:
    """The console of ``target`` (a running ``Broker`` or ``Cluster``), read through
    ``bootstrap`` (default: its first listener; ``connector`` for the in-memory transport).
    ``schema_registry_url``: the Schema Registry whose schemas the console shows and decodes
    record values by (a URL, or a callable asked at each page, for a registry that binds its
    port after the console is built); None, the default: no schema pages, values as bytes.
    ``rest_proxy_url``: the HTTP proxy the topic page's produce form sends through (likewise
    a URL or a callable); None: no form."""
    nodes = getattr(target, "nodes", None)

    def registry() -> str | None:
        return schema_registry_url() if callable(schema_registry_url) else schema_registry_url

    def counters() -> dict[str, ApiCounters]:
        if nodes is None:
            return _counters([target.statistics().requests])
        return _counters(
            [{api: m.snapshot() for api, m in list(node.path.metrics.requests.items())} for node in nodes.values()]
        )

    def listeners() -> tuple[str, ...]:
        if nodes is None:
            return tuple(str(e) for e in target.endpoints.values())
        return tuple(
            f"broker {node_id}: {e}" for node_id, node in sorted(nodes.items()) for e in node.endpoints.values()
        )

    def servers() -> str:
        if bootstrap is not None:
            return bootstrap
        brokers = [target] if nodes is None else [nodes[i] for i in sorted(nodes)]
        return ",".join(_address(b.config, b.endpoints) for b in brokers)

    @asynccontextmanager
    async def open_reader() -> AsyncIterator[ClusterReader]:
        async with open_admin(servers(), connector=connector, **_CLIENT_SETTINGS) as admin:
            yield ClusterReader(admin)

    return ConsoleApp(
        open_reader,
        counters,
        version=trikafka.__version__,
        listeners=listeners,
        bootstrap=servers,
        registry=registry,
        client_metrics=target.client_metrics,
        rest_proxy=lambda: rest_proxy_url() if callable(rest_proxy_url) else rest_proxy_url,
    )
