"""An in-memory transport, so a broker runs with no sockets under trio's MockClock.

A transport like TCP, not a test tool: the in-process cluster puts its brokers on it, and
``trikafka.testing`` re-exports it for tests (``from trikafka.testing import MemoryListener``).

``MemoryListener.connect()`` makes a connected stream pair, hands the server end to
``accept()`` and returns the client end. Each end carries ``local_address`` and
``remote_address``, so connection ids, per-IP quotas and logs look as they do over TCP —
and a test can pretend to come from any address.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from trio.testing import MemoryReceiveStream, MemorySendStream

__all__ = ["MemoryListener", "MemoryStream"]


class MemoryStream(trio.abc.HalfCloseableStream):
    """One end of an in-memory connection that knows the addresses of both ends."""

    def __init__(
        self,
        inner: trio.StapledStream[MemorySendStream, MemoryReceiveStream],
        local: tuple[str, int],
        remote: tuple[str, int],
    ) -> None:
        self.inner = inner
        self.local_address = local
        self.remote_address = remote

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.inner.receive_some(max_bytes)

    async def send_eof(self) -> None:
        await self.inner.send_eof()

    async def aclose(self) -> None:
        await self.inner.aclose()


class MemoryListener(trio.abc.Listener[trio.abc.Stream]):
    def __init__(self, host: str = "memory", port: int = 9092) -> None:
        self.host = host
        self.port = port
        self._send, self._receive = trio.open_memory_channel[trio.abc.Stream](0)
        self._client_ports = itertools.count(50000)
        self.closed = False

    async def connect(self, client_host: str = "127.0.0.1") -> MemoryStream:
        """Open a connection to this listener as if from ``client_host``."""
        if self.closed:
            raise trio.ClosedResourceError("listener is closed")
        # Imported here, not at the top: trio.testing imports pytest (~80 ms), and every
        # broker imports this module — the CLI must not pay for what only tests use.
        from trio.testing import memory_stream_pair

        client, server = memory_stream_pair()
        client_address = (client_host, next(self._client_ports))
        server_address = (self.host, self.port)
        server_end = MemoryStream(server, server_address, client_address)
        try:
            await self._send.send(server_end)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise trio.ClosedResourceError("listener is closed") from None
        return MemoryStream(client, client_address, server_address)

    async def accept(self) -> trio.abc.Stream:
        return await self._receive.receive()

    async def aclose(self) -> None:
        self.closed = True
        await self._receive.aclose()
        await trio.lowlevel.checkpoint()
