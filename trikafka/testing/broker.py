"""A broker on the in-memory transport, for deterministic tests under trio's MockClock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import trio

from trikafka.broker import Broker, open_broker
from trikafka.client import KafkaConnection, open_connection
from trikafka.config import BrokerConfig
from trikafka.network.memory import MemoryListener, MemoryStream
from trikafka.testing.faults import Faults
from trikafka.testing.surface import BrokerControls

if TYPE_CHECKING:
    from trikafka.server.awaitable import GroupSnapshot

__all__ = ["TestBroker", "open_test_broker"]


class TestBroker(BrokerControls):
    """A running broker plus the in-memory listener that reaches it, with every control of
    :class:`~trikafka.testing.surface.BrokerControls` (``inject_error``, ...; the
    ``wait_for_*`` are coroutines with a 10 s default ``timeout``)."""

    __test__ = False  # not a pytest class

    def __init__(self, broker: Broker, listener: MemoryListener) -> None:
        # The Kafka-protocol helpers (create_topic, produce, read) dial the in-memory listener.
        super().__init__(lambda: [Faults.of(broker)], lambda: broker, lambda: self)
        self.broker = broker
        self.listener = listener

    @property
    def bootstrap_servers(self) -> str:
        """The in-memory listener's ``host:port`` (``memory:9092``); the clients given this
        TestBroker itself reach it in memory."""
        return f"{self.listener.host}:{self.listener.port}"

    @property
    def rack(self) -> str | None:
        """The broker's rack (``broker.rack``), as Metadata shows it; None without one."""
        return self.broker.rack

    @property
    def faults(self) -> Faults:
        """The broker's injected faults and request recorder (``trikafka.testing.faults``)."""
        return Faults.of(self.broker)

    def group_snapshot(self, group_id: str) -> GroupSnapshot | None:
        return self.broker.group_snapshot(group_id)

    def partition_log(self, topic: str, partition: int) -> Any:
        return self.broker.partition_log(topic, partition)

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
async def open_test_broker(
    config: BrokerConfig | None = None,
    *,
    kafka_defaults: bool = False,
    client_telemetry: bool | None = None,
    **overrides: object,
) -> AsyncIterator[TestBroker]:
    """Open a broker whose only listener is in memory (named PLAINTEXT, port 9092).

    Keyword arguments are config overrides in either spelling (``num_io_threads=1``); keys not
    given take the dev defaults (``trikafka.config.dev``; ``kafka_defaults=True``: Kafka's own).
    A BrokerConfig is taken as it is.
    """
    listener = MemoryListener("memory", 9092)
    base: BrokerConfig | dict[str, Any] = config or {"listeners": "PLAINTEXT://memory:9092"}
    async with open_broker(
        base,
        trio_listeners={"PLAINTEXT": listener},
        kafka_defaults=kafka_defaults,
        client_telemetry=client_telemetry,
        **overrides,
    ) as broker:
        yield TestBroker(broker, listener)
    await trio.lowlevel.checkpoint()
