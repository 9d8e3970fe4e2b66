"""A fake transport for client tests: a stream that loses the broker's answer to chosen requests.

``LosingConnector(real)`` wraps a connector. ``lose(api_key, times)`` arms it: the next
``times`` answers to requests with that api key are *swallowed and the connection closed* —
the broker has handled the request (a Produce is in the log), the client never hears of it.
That is the failure idempotence exists for. ``drop(api_key, times)`` loses the requests
themselves: the connection drops before the broker sees them. Whole frames are passed through, so a cut never
falls inside another answer.
"""

from __future__ import annotations

import struct

import trio

__all__ = ["CountingConnector", "LosingConnector"]


class _LosingStream(trio.abc.Stream):
    def __init__(self, inner: trio.abc.Stream, owner: LosingConnector) -> None:
        self.inner = inner
        self.owner = owner
        self.marked: set[int] = set()
        self.buffer = bytearray()
        self.ready = bytearray()

    async def send_all(self, data) -> None:
        data = bytes(data)
        position = 0
        while position + 12 <= len(data):
            size, api_key, _version, correlation = struct.unpack_from(">ihhi", data, position)
            if self.owner.unsent.get(api_key, 0) > 0:
                self.owner.unsent[api_key] -= 1
                self.owner.lost += 1
                await self.inner.aclose()  # the request never reaches the broker
                raise trio.BrokenResourceError("connection dropped by the test")
            if self.owner.armed.get(api_key, 0) > 0:
                self.owner.armed[api_key] -= 1
                self.marked.add(correlation)
            position += 4 + size
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes=None):
        while not self.ready:
            data = await self.inner.receive_some(65536)
            if not data:
                return b""
            self.buffer += data
            while len(self.buffer) >= 8:
                size, correlation = struct.unpack_from(">ii", self.buffer, 0)
                if len(self.buffer) < 4 + size:
                    break
                frame = bytes(self.buffer[: 4 + size])
                del self.buffer[: 4 + size]
                if correlation in self.marked:
                    self.owner.lost += 1
                    await self.inner.aclose()
                    return b""
                self.ready += frame
        out = bytes(self.ready[: max_bytes or len(self.ready)])
        del self.ready[: len(out)]
        return out

    async def aclose(self) -> None:
        await self.inner.aclose()


class LosingConnector:
    def __init__(self, real) -> None:
        self.real = real
        self.armed: dict[int, int] = {}
        self.unsent: dict[int, int] = {}
        self.lost = 0

    def lose(self, api_key: int, times: int = 1) -> None:
        """The broker handles the next ``times`` such requests; their answers are lost."""
        self.armed[api_key] = self.armed.get(api_key, 0) + times

    def drop(self, api_key: int, times: int = 1) -> None:
        """The next ``times`` such requests never reach the broker (the connection drops)."""
        self.unsent[api_key] = self.unsent.get(api_key, 0) + times

    async def __call__(self, host: str, port: int) -> trio.abc.Stream:
        return _LosingStream(await self.real(host, port), self)


class CountingConnector:
    """Counts requests of one api key sent but not yet answered, and the most ever
    outstanding at once. ``answer_delay`` (trio seconds) holds every answer back that long,
    as a slow broker would."""

    def __init__(self, real, api_key: int, answer_delay: float = 0.0) -> None:
        self.real = real
        self.api_key = api_key
        self.answer_delay = answer_delay
        self.outstanding = 0
        self.most = 0

    async def __call__(self, host: str, port: int) -> trio.abc.Stream:
        return _CountingStream(await self.real(host, port), self)


class _CountingStream(trio.abc.Stream):
    def __init__(self, inner: trio.abc.Stream, owner: CountingConnector) -> None:
        self.inner = inner
        self.owner = owner
        self.marked: set[int] = set()
        self.buffer = bytearray()

    async def send_all(self, data) -> None:
        data = bytes(data)
        position = 0
        while position + 12 <= len(data):
            size, api_key, _version, correlation = struct.unpack_from(">ihhi", data, position)
            if api_key == self.owner.api_key:
                self.marked.add(correlation)
                self.owner.outstanding += 1
                self.owner.most = max(self.owner.most, self.owner.outstanding)
            position += 4 + size
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes=None):
        data = await self.inner.receive_some(max_bytes)
        if data and self.owner.answer_delay:
            await trio.sleep(self.owner.answer_delay)
        self.buffer += data
        while len(self.buffer) >= 8:
            size, correlation = struct.unpack_from(">ii", self.buffer, 0)
            if len(self.buffer) < 4 + size:
                break
            del self.buffer[: 4 + size]
            if correlation in self.marked:
                self.marked.discard(correlation)
                self.owner.outstanding -= 1
        return data

    async def aclose(self) -> None:
        await self.inner.aclose()
