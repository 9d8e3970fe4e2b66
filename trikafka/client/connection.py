"""A minimal Trio Kafka client connection: send kio requests, await kio responses.

Requests may be issued concurrently; they are written in call order and their answers are
matched by correlation id (the broker answers in order; a reader task checks it). Works over
any ``trio.abc.Stream``: TCP, TLS or the in-memory transport.

Cancellation: a request cancelled while its frame is being written leaves part of a frame on
the wire, after which nothing else can be framed; the connection is then closed (and every
other waiter gets :class:`ConnectionClosed`). Cancelled while awaiting its answer, the request
is simply forgotten — the answer is read and dropped when it comes. The high-level client
(:mod:`trikafka.client.client`) builds on this class.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from trikafka.client.lifetime import open_service_nursery
from trikafka.errors import FrameSizeError
from trikafka.protocol.framing import NEED_DATA, FrameDecoder
from trikafka.protocol.headers import decode_response, encode_request_parts
from trikafka.protocol.registry import ApiVersionSpec

__all__ = ["KafkaConnection", "open_connection", "connect_tcp", "ConnectionClosed", "ResponseDecodeError"]

#: The most one read takes: over glibc's mmap threshold (128 KiB, until it first rises) each
#: ``recv(n)`` maps fresh pages for ``n`` bytes; a large frame is received in place
#: (``FrameDecoder.unfilled``). See trikafka/network/connection.py's RECEIVE_SIZE.
RECEIVE_SIZE = 64 * 1024

@functools.cache
def _spec(api_key: int, version: int) -> ApiVersionSpec:
    """Any version kio knows (so tests can send what the broker refuses), resolved on first use."""
    return ApiVersionSpec.resolve(api_key, version)


async def _send_parts(sock: Any, parts: list[Any]) -> None:
    """Write every buffer of ``parts`` with scatter writes (``sendmsg``): a Produce request's
    record batches go to the kernel without first being joined into one frame."""
    views = [memoryview(part) for part in parts]
    try:
        while views:
            sent = await sock.sendmsg(views[:512])
            while sent:
                first = len(views[0])
                if sent >= first:
                    sent -= first
                    views.pop(0)
                else:
                    views[0] = views[0][sent:]
                    sent = 0
    except OSError as exc:
        raise trio.BrokenResourceError(f"socket write failed: {exc}") from exc


#: A large answer (a Fetch's) is received straight into a buffer of its declared size; one of
#: up to this size is kept for the next (fresh memory costs page faults on first touch).
_KEEP_SPARE = 64 * 1024 * 1024

#: Until the peer has answered one request as Kafka does (``handshake_done``), an answer may be
#: at most this large: an ApiVersions answer is a few kilobytes. A peer that is not Kafka (an
#: HTTP server: ``HTTP`` read as a size is 1.2 GB) is then recognised at its first bytes,
#: instead of the client allocating the size it seemed to declare and waiting for it.
HANDSHAKE_MAX_FRAME = 1024 * 1024
_MAX_FRAME = 2**31 - 1


def describe_answer(data: bytes) -> str:
    """What a peer that is not a Kafka broker sent, as a person reads it: its first bytes, and
    what they look like (an HTTP server, a TLS server)."""
    shown = data[:40]
    text = "".join(chr(b) if 32 <= b < 127 else "." for b in shown)
    if data.startswith(b"HTTP/"):
        looks = " (an HTTP server)"
    elif data[:1] == b"\x15" and data[1:2] == b"\x03":
        looks = " (a TLS server: security.protocol=SSL?)"
    elif data.startswith(b"SSH-"):
        looks = " (an SSH server)"
    else:
        looks = ""
    return f"it answered {text!r}{'…' if len(data) > len(shown) else ''}{looks}, not a Kafka response"


class ConnectionClosed(Exception):
    """The broker closed the connection before answering."""


class ResponseDecodeError(Exception):
    """An answer arrived whole but did not parse as the version asked for (an old broker
    answering ApiVersions at v0, as KIP-511 lets it). Raised to that request's caller only."""


def _spec_for(body: Any) -> ApiVersionSpec:
    return _spec(int(body.__api_key__), int(body.__version__))


class KafkaConnection:
    def __init__(
        self, stream: trio.abc.Stream, client_id: str | None = "trikafka-client", *, handshake: bool = False
    ) -> None:
        """``handshake``: the peer is not yet known to be Kafka — until :meth:`handshake_done`,
        an answer over ``HANDSHAKE_MAX_FRAME`` ends the connection with :attr:`not_kafka` set."""
        self.stream = stream
        self.client_id = client_id
        self._correlation = itertools.count(1)
        self._pending: dict[int, tuple[ApiVersionSpec, trio.MemorySendChannel[Any]]] = {}
        self._order: list[int] = []
        self._send_lock = trio.StrictFIFOLock()
        self._decoder = FrameDecoder(
            HANDSHAKE_MAX_FRAME if handshake else _MAX_FRAME, keep_spare=_KEEP_SPARE, trust_sizes=True
        )
        self._first_bytes = b""  # what the peer sent first, kept until it answered like Kafka
        self.closed = False
        self.broken_by: BaseException | None = None
        #: Why the peer is not a Kafka broker (its first bytes), when what it sent could not be
        #: a Kafka response: a size out of range, or an answer to no request sent.
        self.not_kafka: str | None = None

    def handshake_done(self) -> None:
        """The peer answered like a Kafka broker: answers of any size from now on."""
        self._decoder.max_size = _MAX_FRAME
        self._first_bytes = b""

    async def request(self, body: Any) -> Any:
        """Send a kio request entity; return the decoded response entity."""
        spec = _spec_for(body)
        if self.closed:
            raise ConnectionClosed(f"connection closed before sending {spec.name}")
        send, receive = trio.open_memory_channel(1)
        async with self._send_lock:
            # The reader may have ended (the broker closed the connection) while this caller
            # waited for the lock: nothing would ever read its answer, and a write after the
            # peer's FIN still succeeds, so it would wait forever.
            if self.closed:
                raise ConnectionClosed(f"connection closed before sending {spec.name}")
            # Registered only once the lock is ours: a caller cancelled while waiting for it
            # must leave no correlation id behind, or the next answer would look out of order.
            correlation_id = next(self._correlation)
            self._pending[correlation_id] = (spec, send)
            self._order.append(correlation_id)
            await self._write(encode_request_parts(spec, correlation_id, body, self.client_id), spec)
        try:
            result = await receive.receive()
        except trio.EndOfChannel:
            raise ConnectionClosed(f"connection closed awaiting {spec.name}") from None
        if isinstance(result, ResponseDecodeError):
            raise result
        return result

    async def send_no_response(self, body: Any) -> None:
        """Send a request that gets no answer (Produce with acks=0)."""
        spec = _spec_for(body)
        if self.closed:
            raise ConnectionClosed(f"connection closed before sending {spec.name}")
        frame = encode_request_parts(spec, next(self._correlation), body, self.client_id)
        async with self._send_lock:
            await self._write(frame, spec)

    async def _write(self, frame: list[Any], spec: ApiVersionSpec) -> None:
        """Write one whole frame (a list of buffers), or close the connection: half a frame
        poisons the stream."""
        try:
            if len(frame) == 1:
                await self.stream.send_all(frame[0])
            elif isinstance(self.stream, trio.SocketStream):
                await _send_parts(self.stream.socket, frame)
            else:
                for part in frame:
                    await self.stream.send_all(part)
        except BaseException as exc:
            self.closed = True
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(self.stream)
            if isinstance(exc, trio.BrokenResourceError | trio.ClosedResourceError):
                raise ConnectionClosed(f"connection closed while sending {spec.name}") from None
            raise

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Read answers until the stream closes (the reader task; run it in a nursery)."""
        await self._reader(task_status=task_status)

    async def _reader(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        decoder = self._decoder
        # Straight from the socket into a large frame's buffer where the stream is a socket.
        recv_into = self.stream.socket.recv_into if isinstance(self.stream, trio.SocketStream) else None
        try:
            while True:
                frame = decoder.next_frame()
                if frame is NEED_DATA:
                    into = decoder.unfilled() if recv_into is not None else None
                    if into is not None and recv_into is not None:
                        try:
                            count = await recv_into(into)
                        except OSError as exc:
                            raise trio.BrokenResourceError(f"socket read failed: {exc}") from exc
                        into = None  # dropped: the buffer may grow in place
                        if not count:
                            return
                        decoder.received_into(count)
                        continue
                    data = await self.stream.receive_some(RECEIVE_SIZE)
                    if not data:
                        return
                    if decoder.max_size != _MAX_FRAME and len(self._first_bytes) < 64:
                        self._first_bytes += bytes(data[: 64 - len(self._first_bytes)])
                    decoder.receive_data(data)
                    continue
                correlation_id = int.from_bytes(frame[:4], "big", signed=True)
                expected = self._order.pop(0) if self._order else None
                if correlation_id != expected:
                    # Kafka answers in order: this is not a Kafka broker, or the stream is
                    # corrupt. The connection ends; every waiter gets ConnectionClosed.
                    self.not_kafka = describe_answer(self._first_bytes) if self._first_bytes else (
                        f"it answered correlation id {correlation_id} where {expected} was due"
                    )
                    return
                spec, send = self._pending.pop(correlation_id)
                try:
                    _, body = decode_response(spec, frame)
                except Exception as exc:  # the frame is whole: only this answer is lost
                    body = ResponseDecodeError(f"cannot decode {spec.name} v{spec.version} answer: {exc!r}")
                send.send_nowait(body)
        except FrameSizeError:
            self.not_kafka = describe_answer(self._first_bytes)
            return
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            self.broken_by = exc.__cause__  # a TLS alert (ssl.SSLError) says why; see tls.py
            return
        finally:
            self.closed = True
            for _, send in self._pending.values():
                send.close()
            self._pending.clear()

    async def aclose(self) -> None:
        await self.stream.aclose()


@asynccontextmanager
async def open_connection(
    stream: trio.abc.Stream, client_id: str | None = "trikafka-client"
) -> AsyncIterator[KafkaConnection]:
    connection = KafkaConnection(stream, client_id)
    async with open_service_nursery("the connection") as nursery:
        await nursery.start(connection._reader)
        try:
            yield connection
        finally:
            # Close first, shielded, and only then cancel the reader: an await inside an
            # already-cancelled scope would raise Cancelled, which would replace whatever
            # the body raised — and the cancelled scope would then swallow it.
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(stream)
            nursery.cancel_scope.cancel()


@asynccontextmanager
async def connect_tcp(
    host: str, port: int, client_id: str | None = "trikafka-client"
) -> AsyncIterator[KafkaConnection]:
    stream = await trio.open_tcp_stream(host, port)
    async with open_connection(stream, client_id) as connection:
        yield connection
