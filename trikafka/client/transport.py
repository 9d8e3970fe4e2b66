"""How the client reaches a broker: a *connector*, ``async (host, port) -> trio.abc.Stream``.

TCP is the default (:func:`tcp_connector`, trio's ``open_tcp_stream``, which sets
TCP_NODELAY). Tests use the in-memory transport: :func:`memory_connector` dials a
:class:`~trikafka.testing.MemoryListener` for the host and port that listener advertises
(``memory:9092`` for ``open_test_broker()``), so metadata — which names brokers by host and
port — routes exactly as it does over TCP.

:func:`resolve_bootstrap` accepts either shape a user writes::

    open_producer("127.0.0.1:9092")                  # TCP
    open_producer(test_broker)                       # in memory: anything with a .listener
    open_producer("memory:9092", connector=memory_connector(test_broker.listener))
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, TypeAlias

import trio

from trikafka.errors import ConfigError

__all__ = [
    "Bootstrap", "Connector", "HasBootstrapServers", "MemoryDialable", "memory_connector", "parse_bootstrap",
    "resolve_bootstrap", "tcp_connector",
]

Connector = Callable[[str, int], Awaitable[trio.abc.Stream]]


class HasBootstrapServers(Protocol):
    """A broker, a cluster or a test handle: anything with a ``bootstrap_servers`` string."""

    @property
    def bootstrap_servers(self) -> str: ...


class MemoryDialable(Protocol):
    """An in-memory listener (``trikafka.testing.MemoryListener``): its address, and ``connect()``."""

    @property
    def host(self) -> str: ...

    @property
    def port(self) -> int: ...

    async def connect(self) -> trio.abc.Stream: ...


#: What ``open_producer``/``open_consumer``/``open_admin`` take as their first argument: a
#: ``host:port[,host:port]`` string, a list of them, or an object with ``bootstrap_servers``
#: (an object with an in-memory ``listener``, a ``TestBroker``, is dialled in memory).
Bootstrap: TypeAlias = "str | Sequence[str] | HasBootstrapServers"


async def tcp_connector(host: str, port: int) -> trio.abc.Stream:
    return await trio.open_tcp_stream(host, port)


def memory_connector(*listeners: MemoryDialable) -> Connector:
    """A connector over in-memory listeners (each with ``host``, ``port`` and ``connect()``)."""
    by_address = {(listener.host, int(listener.port)): listener for listener in listeners}

    async def connect(host: str, port: int) -> trio.abc.Stream:
        listener = by_address.get((host, int(port)))
        if listener is None:
            known = ", ".join(f"{h}:{p}" for h, p in by_address)
            raise OSError(f"no in-memory listener at {host}:{port} (known: {known})")
        try:
            return await listener.connect()
        except trio.ClosedResourceError as exc:
            raise OSError(f"in-memory listener {host}:{port} is closed") from exc

    return connect


_BOOTSTRAP = "bootstrap.servers"
_BOOTSTRAP_FORM = "'host:port' entries, comma-separated or in a list, or an object with a bootstrap_servers string"


def parse_bootstrap(servers: str | Sequence[str]) -> list[tuple[str, int]]:
    """``"h1:9092,h2:9092"`` or ``["h1:9092", …]`` → [(host, port), …]; ``[::1]:9092`` too.

    Anything else is a :class:`ConfigError` naming the value, before a connection is tried:
    the Java client refuses such a list when it is constructed, not at its first request. A
    scheme (``PLAINTEXT://h:9092``, ``http://h:9092``) is refused too, saying what to write:
    otherwise it would be looked up as a host name until ``max.block.ms``.
    """
    if isinstance(servers, str):
        items: Sequence[object] = servers.split(",")
    elif isinstance(servers, Sequence):
        items = list(servers)
    else:
        hint = " (a method: call it)" if callable(servers) else ""
        raise ConfigError(_BOOTSTRAP, servers, f"{_BOOTSTRAP_FORM}{hint}")
    out = []
    for item in items:
        if not isinstance(item, str):
            raise ConfigError(_BOOTSTRAP, servers, f"{_BOOTSTRAP_FORM}; {item!r} is not a string")
        item = item.strip()
        if not item:
            continue
        scheme, found, rest = item.partition("://")
        if found:
            raise ConfigError(
                _BOOTSTRAP, servers,
                f"{_BOOTSTRAP_FORM}, without a scheme: {item!r} should be {rest.rstrip('/')!r} "
                f"({scheme}:// names a listener or a URL; the protocol is security.protocol's)",
            )
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(_BOOTSTRAP, servers, f"{_BOOTSTRAP_FORM}; {item!r} has no port 1..65535")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ConfigError(_BOOTSTRAP, servers, f"{_BOOTSTRAP_FORM}; none given")
    return out


def resolve_bootstrap(
    bootstrap: Bootstrap, connector: Connector | None
) -> tuple[str | Sequence[str], Connector]:
    """(bootstrap servers, connector) from what the user passed.

    A string or a list of ``host:port``; or any object with a ``bootstrap_servers`` string
    (a ``Broker``, a ``Cluster`` or one of its nodes, the thread-hosted ``kafka_broker``, a
    cluster handle), read duck-typed so that the client imports no broker. An object with a
    ``listener`` that has ``connect()`` (a ``TestBroker``) means "in memory, to that
    broker"; a connector given as well wins.
    """
    listener = getattr(bootstrap, "listener", None)
    if listener is not None and hasattr(listener, "connect"):
        return f"{listener.host}:{listener.port}", connector or memory_connector(listener)
    if not isinstance(bootstrap, str | Sequence):
        servers = getattr(bootstrap, "bootstrap_servers", None)
        if isinstance(servers, str):
            return servers, connector or tcp_connector
    return bootstrap, connector or tcp_connector  # type: ignore[return-value]  # parse_bootstrap names a wrong one
