"""A fake transport for client tests: a stream that loses the broker's answer to chosen requests.

``LosingConnector(real)`` wraps a connector. ``lose(api_key, times)`` arms it: the next
``times`` answers to requests with that api key are *swallowed and the connection closed* —
the broker has handled the request (a Produce is in the log), the client never hears of it.
That is the failure idempotence exists for. Whole frames are passed through, so a cut never
falls inside another answer.
"""

from __future__ import annotations

import struct

import trio

__all__ = ["LosingConnector"]


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
        self.lost = 0

    def lose(self, api_key: int, times: int = 1) -> None:
        self.armed[api_key] = self.armed.get(api_key, 0) + times

    async def __call__(self, host: str, port: int) -> trio.abc.Stream:
        return _LosingStream(await self.real(host, port), self)
