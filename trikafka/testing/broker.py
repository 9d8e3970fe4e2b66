"""A broker on the in-memory transport, for deterministic tests under trio's MockClock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from trikafka.broker import Broker, open_broker
from trikafka.client import KafkaConnection, open_connection
from trikafka.config import BrokerConfig
from trikafka.network.memory import MemoryListener, MemoryStream
from trikafka.testing.faults import Faults

__all__ = ["TestBroker", "open_test_broker"]


class TestBroker:
    """A running broker plus the in-memory listener that reaches it."""

    __test__ = False  # not a pytest class

    def __init__(self, broker: Broker, listener: MemoryListener) -> None:
        self.broker = broker
        self.listener = listener

    @property
    def bootstrap_servers(self) -> str:
        """The in-memory listener's ``host:port`` (``memory:9092``); the clients given this
        TestBroker itself reach it in memory."""
        return f"{self.listener.host}:{self.listener.port}"

    @property
    def faults(self) -> Faults:
        """The broker's injected faults and request recorder (``trikafka.testing.faults``)."""
        return Faults.of(self.broker)

    def recorded(self, api: str | int | None = None, *, client_id: str | None = None) -> list[Any]:
        """Requests received while recording, in order (the fixture records from the start)."""
        return Faults.of(self.broker).recorder.requests(api, client_id=client_id)

    def __getattr__(self, name: str) -> Any:
        """``wait_for_*`` and the state readers of the broker (``AwaitableState``)."""
        if name.startswith("wait_for_") or name in (
            "committed",
            "transaction_state",
            "group_snapshot",
            "partition_log",
        ):
            return getattr(self.broker, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    async def connect(self, client_host: str = "127.0.0.1") -> MemoryStream:
        """A raw client stream, for tests that write bytes themselves."""
        return await self.listener.connect(client_host)

    @asynccontextmanager
    async def client(
        self, client_host: str = "127.0.0.1", client_id: str | None = "trikafka-test"
    ) -> AsyncIterator[KafkaConnection]:
        stream = await self.connect(client_host)
        async with open_connection(stream, client_id) as connection:
            yield connection


@asynccontextmanager
async def open_test_broker(config: BrokerConfig | None = None, **overrides: Any) -> AsyncIterator[TestBroker]:
    """Open a broker whose only listener is in memory (named PLAINTEXT, port 9092).

    Keyword arguments are config overrides in either spelling (``num_io_threads=1``).
    """
    listener = MemoryListener("memory", 9092)
    base = config or BrokerConfig(listeners="PLAINTEXT://memory:9092")
    async with open_broker(base, trio_listeners={"PLAINTEXT": listener}, **overrides) as broker:
        yield TestBroker(broker, listener)
    await trio.lowlevel.checkpoint()
