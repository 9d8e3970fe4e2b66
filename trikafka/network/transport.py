"""Transports: the one interface a Connection reads and writes through.

Why an adapter: the broker's fast paths are socket system calls trio's ``Stream`` does not
offer — ``os.write`` straight to a non-blocking socket, ``sendmsg`` scatter-gather,
``recv_into`` a frame's own buffer, a read that waits for the socket before it tries. The
Connection speaks to a :class:`Transport`, so the
in-memory transport of the tests runs the same Connection code: :class:`SocketTransport`
implements it with those system calls over a plaintext TCP socket, and
:class:`StreamTransport` with any ``trio.abc.Stream`` — the in-memory ``MemoryStream``, and
the ``trio.SSLStream`` of a TLS listener (its bytes must pass through OpenSSL, so none of
the socket paths apply). The socket paths have their own tests over real sockets.

A part of a multi-part answer may also be a *file region* (:class:`FileRegion`, e.g. the
log's ``FileSlice``): a reference to bytes of a segment file, read only as it is written.
The socket transport hands it to the kernel with ``os.sendfile``; any other stream (the
in-memory one, TLS) gets it in bounded blocks. Either way a slow reader costs the broker
what its socket buffer holds, not its whole answer.

Errors are not translated here: the Connection treats ``trio.BrokenResourceError``,
``trio.ClosedResourceError`` and ``OSError`` alike (:data:`TRANSPORT_ERRORS`) — the peer
is gone.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterator
from typing import Protocol

import trio
from trio.lowlevel import wait_readable

__all__ = [
    "FileRegion",
    "IOV_MAX",
    "TRANSPORT_ERRORS",
    "SocketTransport",
    "StreamTransport",
    "Transport",
    "transport_for",
]

IOV_MAX = 512  # buffers per sendmsg call (Linux allows 1024)
TRANSPORT_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)

#: Buffers and file regions, written in order, never joined.
Parts = tuple["bytes | bytearray | memoryview | FileRegion", ...]

_BUFFERS = (bytes, bytearray, memoryview)


class FileRegion(Protocol):
    """Bytes of a file, read only when written (the log's ``FileSlice`` is one)."""

    def __len__(self) -> int: ...

    def sendfile(self, out_fd: int, offset: int, count: int) -> int:
        """``os.sendfile`` of up to ``count`` bytes from ``offset``; the bytes sent."""

    def iter_blocks(self) -> Iterator[bytes]:
        """The region in bounded blocks, each read when asked for."""

    def close(self) -> None: ...


class Transport(Protocol):
    """What a Connection needs from the bytes under it."""

    @property
    def stream(self) -> trio.abc.Stream: ...

    @property
    def receive_some(self) -> Callable[[int], Awaitable[bytes | bytearray]]:
        """Up to ``max_bytes``; ``b""`` at end of stream."""

    @property
    def receive_into(self) -> Callable[[memoryview], Awaitable[int]]:
        """Fill the start of ``view``; the count (0 at end of stream)."""

    async def send(self, data: bytes | bytearray | memoryview) -> None:
        """Write all of ``data``. May return without a checkpoint when it fits at once
        (the caller has just waited for its response, which was one)."""

    async def send_parts(self, parts: Parts) -> None:
        """Write every part, in order, never joined into one buffer."""

    async def aclose(self) -> None: ...


class StreamTransport:
    """Any ``trio.abc.Stream``: the in-memory transport of the tests, and TLS connections."""

    __slots__ = ("stream", "receive_some", "__weakref__")

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
        send_all = self.stream.send_all
        for part in parts:
            if isinstance(part, _BUFFERS):
                await send_all(part)
                continue
            try:
                for block in part.iter_blocks():
                    await send_all(block)
            finally:
                part.close()

    async def aclose(self) -> None:
        await self.stream.aclose()


class SocketTransport:
    """A ``trio.SocketStream`` with the system calls that make the broker fast."""

    __slots__ = ("stream", "receive_some", "receive_into", "_fd", "_sendmsg", "__weakref__")

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.receive_some = self._receive_some
        # Large frames are received straight into their own buffer (FrameDecoder.unfilled).
        self.receive_into = stream.socket.recv_into
        self._sendmsg = stream.socket.sendmsg
        self._fd = stream.socket.fileno()

    async def _receive_some(self, max_bytes: int) -> bytes:
        # Wait for the socket first, then read. trio's receive_some tries the read first and
        # waits only when it fails; but a connection reads only after its last answer went
        # out, when the client's next request has rarely arrived, so that try is nearly
        # always one system call (EAGAIN) and one exception wasted per request. The wait is
        # the checkpoint; a wake-up with nothing to read waits again. (``wait_readable`` is
        # trio.lowlevel for the reason given at ``_sendfile_all``: no stream method waits on a
        # raw descriptor; it is I/O, not scheduling.) ``os.read`` on the
        # socket's descriptor is ``recv`` without flags, as ``send`` writes with ``os.write``.
        fd = self._fd
        await wait_readable(fd)
        while True:
            try:
                return os.read(fd, max_bytes)
            except BlockingIOError:
                await wait_readable(fd)

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
        # File regions between them go out with sendfile: the kernel copies the log file.
        buffers: list[memoryview] = []
        for index, part in enumerate(parts):
            if isinstance(part, _BUFFERS):
                if len(part):
                    buffers.append(memoryview(part).cast("B"))
                continue
            try:
                await self._sendmsg_all(buffers)
                buffers = []
                await self._sendfile_all(part)
            except BaseException:
                for rest in parts[index + 1 :]:
                    if not isinstance(rest, _BUFFERS):
                        rest.close()
                raise
            finally:
                part.close()
        await self._sendmsg_all(buffers)

    async def _sendfile_all(self, region: FileRegion) -> None:
        offset, size = 0, len(region)
        # trio.lowlevel here: Trio has no public API for "wait until this fd is writable"
        # (sendfile(2) and sendmsg(2) on the raw socket are not stream methods), nor for a
        # cancellation check that does not also yield when the kernel took every byte.
        while offset < size:
            await trio.lowlevel.checkpoint_if_cancelled()
            try:
                sent = region.sendfile(self._fd, offset, size - offset)
            except BlockingIOError:
                await trio.lowlevel.wait_writable(self._fd)
                continue
            if not sent:  # the file is shorter than the region: the answer cannot be whole
                raise OSError(f"{region!r} ended after {offset} of {size} bytes")
            offset += sent

    async def _sendmsg_all(self, pending: list[memoryview]) -> None:
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
