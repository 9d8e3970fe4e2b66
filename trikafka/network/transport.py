"""Transports: the one interface a Connection reads and writes through.

Why an adapter: the broker's fast paths are socket system calls trio's ``Stream`` does not
offer — ``os.write`` straight to a non-blocking socket, ``sendmsg`` scatter-gather,
``recv_into`` a frame's own buffer. Reaching for them inside the Connection left the
in-memory transport of the tests on a different code path. Now the Connection speaks to a
:class:`Transport`; :class:`SocketTransport` implements it with those system calls and
:class:`StreamTransport` with any ``trio.abc.Stream`` (the in-memory ``MemoryStream``, TLS
later), so tests and production run the same Connection code, and the socket paths have
their own tests over real sockets.

Errors are not translated here: the Connection treats ``trio.BrokenResourceError``,
``trio.ClosedResourceError`` and ``OSError`` alike (:data:`TRANSPORT_ERRORS`) — the peer
is gone.
"""

from __future__ import annotations

import os
from typing import Protocol

import trio

__all__ = [
    "IOV_MAX",
    "TRANSPORT_ERRORS",
    "SocketTransport",
    "StreamTransport",
    "Transport",
    "transport_for",
]

IOV_MAX = 512  # buffers per sendmsg call (Linux allows 1024)
TRANSPORT_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)

Parts = tuple  # of bytes | bytearray | memoryview, written in order without joining


class Transport(Protocol):
    """What a Connection needs from the bytes under it."""

    stream: trio.abc.Stream

    async def receive_some(self, max_bytes: int) -> bytes | bytearray:
        """Up to ``max_bytes``; ``b""`` at end of stream."""

    async def receive_into(self, view: memoryview) -> int:
        """Fill the start of ``view``; the count (0 at end of stream)."""

    async def send(self, data: bytes | bytearray | memoryview) -> None:
        """Write all of ``data``. May return without a checkpoint when it fits at once
        (the caller has just waited for its response, which was one)."""

    async def send_parts(self, parts: Parts) -> None:
        """Write every part, in order, never joined into one buffer."""

    async def aclose(self) -> None: ...


class StreamTransport:
    """Any ``trio.abc.Stream``: the in-memory transport of the tests, later TLS."""

    __slots__ = ("stream", "receive_some")

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.receive_some = stream.receive_some  # the bound method: no wrapper on the hot path

    async def receive_into(self, view: memoryview) -> int:
        data = await self.stream.receive_some(len(view))
        count = len(data)
        view[:count] = data
        return count

    async def send(self, data: bytes | bytearray | memoryview) -> None:
        await self.stream.send_all(data)

    async def send_parts(self, parts: Parts) -> None:
        for part in parts:
            await self.stream.send_all(part)

    async def aclose(self) -> None:
        await self.stream.aclose()


class SocketTransport:
    """A ``trio.SocketStream`` with the system calls that make the broker fast."""

    __slots__ = ("stream", "receive_some", "receive_into", "_fd", "_sendmsg")

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.receive_some = stream.receive_some
        # Large frames are received straight into their own buffer (FrameDecoder.unfilled).
        self.receive_into = stream.socket.recv_into
        self._sendmsg = stream.socket.sendmsg
        self._fd = stream.socket.fileno()

    async def send(self, data: bytes | bytearray | memoryview) -> None:
        # Try the non-blocking socket first: a small answer nearly always fits in the send
        # buffer, and trio's send_all would then pass through the scheduler once more after
        # the system call — a tenth of a tiny request's cost.
        try:
            sent = os.write(self._fd, data)
        except BlockingIOError:
            sent = 0
        if sent == len(data):
            return
        await self.stream.send_all(memoryview(data)[sent:])

    async def send_parts(self, parts: Parts) -> None:
        # Scatter-gather: header and record chunks go out in as few sendmsg calls as the
        # socket takes, never joined into one buffer (a 1 MiB fetch joined was a fresh MiB).
        pending = [memoryview(part).cast("B") for part in parts if len(part)]
        sendmsg = self._sendmsg
        while pending:
            sent = await sendmsg(pending[:IOV_MAX])
            while sent and pending:
                if sent >= len(pending[0]):
                    sent -= len(pending.pop(0))
                else:
                    pending[0] = pending[0][sent:]
                    sent = 0

    async def aclose(self) -> None:
        await self.stream.aclose()


def transport_for(stream: trio.abc.Stream) -> Transport:
    """The fastest transport ``stream`` supports."""
    if isinstance(stream, trio.SocketStream):
        return SocketTransport(stream)
    return StreamTransport(stream)
