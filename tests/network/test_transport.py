"""Transports: the socket fast paths over real sockets, and the Connection over both kinds.

The socket adapter's paths — ``os.write`` that writes only part, ``sendmsg`` over more
buffers than one call takes, ``recv_into`` a frame's own buffer — run over a real
``socket.socketpair()``; every check is one body run against both transports (trio's
``check_two_way_stream`` idea), so the in-memory transport the other tests use is held to
the same contract. Then a :class:`Connection` with fake hooks (a handler that answers at
once) serves pipelined small and large requests over each transport.
"""

from __future__ import annotations

import os
import socket

import pytest
import trio
import trio.testing
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from trikafka.log.slices import FileSlice
from trikafka.network.connection import Connection, ConnectionHooks, ConnectionSettings
from trikafka.network.request_channel import Request, SendResponse
from trikafka.network.transport import (
    IOV_MAX,
    SocketTransport,
    StreamTransport,
    transport_for,
)
from trikafka.protocol.headers import encode_request
from trikafka.protocol.registry import ApiRegistry
from trikafka.testing import MemoryListener
from trikafka.testing.frames import api_versions_frame, read_frames, read_until_closed

REGISTRY = ApiRegistry()
KINDS = ["socket", "memory"]


async def _socket_pair(small_send_buffer: bool = False) -> tuple[object, trio.abc.Stream]:
    server, peer = trio.socket.socketpair()
    if small_send_buffer:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    transport = transport_for(trio.SocketStream(server))
    assert isinstance(transport, SocketTransport)
    return transport, trio.SocketStream(peer)


async def _memory_pair() -> tuple[object, trio.abc.Stream]:
    listener = MemoryListener()
    accepted: list[trio.abc.Stream] = []

    async def accept() -> None:
        accepted.append(await listener.accept())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(accept)
        peer = await listener.connect()
    transport = transport_for(accepted[0])
    assert isinstance(transport, StreamTransport)
    return transport, peer


async def pair(kind: str, small_send_buffer: bool = False) -> tuple[object, trio.abc.Stream]:
    """(the server's transport, the peer's stream)."""
    if kind == "memory":
        return await _memory_pair()
    return await _socket_pair(small_send_buffer)


async def _read_exactly(stream: trio.abc.Stream, count: int) -> bytes:
    received = bytearray()
    while len(received) < count:
        data = await stream.receive_some(65536)
        assert data, f"closed after {len(received)} of {count} bytes"
        received += data
    return bytes(received)


@pytest.mark.parametrize("kind", KINDS)
async def test_send_writes_everything_when_the_buffer_takes_only_part(kind):
    """os.write takes what the socket buffer holds; trio's send_all writes the rest."""
    transport, peer = await pair(kind, small_send_buffer=True)
    data = os.urandom(4 * 1024 * 1024)
    received: list[bytes] = []
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:

            async def read() -> None:
                received.append(await _read_exactly(peer, len(data)))

            nursery.start_soon(read)
            await transport.send(data)
    assert received[0] == data
    await transport.aclose()
    await peer.aclose()


@pytest.mark.parametrize("kind", KINDS)
async def test_send_parts_writes_every_part_in_order(kind):
    """More parts than one sendmsg takes, empty parts, memoryviews, and short writes."""
    transport, peer = await pair(kind, small_send_buffer=True)
    parts = []
    for index in range(IOV_MAX * 3 + 7):
        size = (index * 7919) % 3000
        part = os.urandom(size)
        parts.append(memoryview(part) if index % 3 == 0 else part)
    expected = b"".join(bytes(part) for part in parts)
    received: list[bytes] = []
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:

            async def read() -> None:
                received.append(await _read_exactly(peer, len(expected)))

            nursery.start_soon(read)
            await transport.send_parts(tuple(parts))
    assert received[0] == expected
    await transport.aclose()
    await peer.aclose()


@pytest.mark.parametrize("kind", KINDS)
async def test_send_parts_sends_file_regions_between_buffers(kind, tmp_path, monkeypatch):
    """Log file slices among the parts: the socket sends them with sendfile (past a full
    send buffer), any other stream in bounded blocks; every slice is closed once sent."""
    path = tmp_path / "segment.log"
    content = os.urandom(3 * 1024 * 1024)
    path.write_bytes(content)
    sendfiles: list[int] = []
    real_sendfile = FileSlice.sendfile

    def counting_sendfile(self, out_fd, offset, count):  # noqa: ANN001
        sent = real_sendfile(self, out_fd, offset, count)
        sendfiles.append(sent)
        return sent

    monkeypatch.setattr(FileSlice, "sendfile", counting_sendfile)
    slices = [
        FileSlice(os.open(path, os.O_RDONLY), 100, 2 * 1024 * 1024),
        FileSlice(os.open(path, os.O_RDONLY), 5, 70_000),
    ]
    parts = (b"header", slices[0], memoryview(b"middle"), b"", slices[1], b"trailer")
    expected = b"header" + content[100 : 100 + 2 * 1024 * 1024] + b"middle"
    expected += content[5:70_005] + b"trailer"
    transport, peer = await pair(kind, small_send_buffer=True)
    received: list[bytes] = []
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:

            async def read() -> None:
                received.append(await _read_exactly(peer, len(expected)))

            nursery.start_soon(read)
            await transport.send_parts(parts)
    assert received[0] == expected
    assert all(s._fd == -1 for s in slices)  # closed: no descriptor outlives its answer
    if kind == "socket":
        assert sum(sendfiles) == 2 * 1024 * 1024 + 70_000 and len(sendfiles) > 2
    else:
        assert sendfiles == []
    await transport.aclose()
    await peer.aclose()


@pytest.mark.parametrize("kind", KINDS)
async def test_receive_into_fills_a_view_until_end_of_stream(kind):
    transport, peer = await pair(kind)
    data = os.urandom(300_000)
    buffer = bytearray(len(data))
    view = memoryview(buffer)
    filled = 0
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:

            async def write() -> None:
                await peer.send_all(data)
                await peer.aclose()

            nursery.start_soon(write)
            while filled < len(data):
                count = await transport.receive_into(view[filled:])
                assert count > 0
                filled += count
        assert await transport.receive_into(memoryview(bytearray(10))) == 0
        assert await transport.receive_some(10) == b""
    assert buffer == data
    await transport.aclose()


def _answering_hooks(log: list[Request], closed: list[Connection], response_for) -> ConnectionHooks:
    """Hooks whose 'handler' answers every request at once: no Processor, no channel."""

    async def submit(request: Request) -> None:
        log.append(request)
        request.response_send.send_nowait(SendResponse(response_for(request)))

    return ConnectionHooks(
        submit=submit,
        closed=closed.append,
        closed_by_error=lambda: None,
        request_done=lambda request, done: None,
        busy=lambda seconds: None,
    )


def _settings(**overrides) -> ConnectionSettings:
    values = dict(
        processor_id=0,
        listener_name="PLAINTEXT",
        registry=REGISTRY,
        max_request_size=1024 * 1024,
        connections_max_idle_ms=600_000,
    )
    values.update(overrides)
    return ConnectionSettings(**values)


def _answer_frame(correlation_id: int, body: bytes) -> bytes:
    return (4 + len(body)).to_bytes(4, "big") + correlation_id.to_bytes(4, "big") + body


@pytest.mark.parametrize("kind", KINDS)
async def test_connection_serves_pipelined_small_and_large_requests(kind):
    """The same Connection code over both transports: small frames from the shared read
    buffer, a 100 KB frame received into its own buffer, a 2 MB answer written in parts."""
    transport, peer = await pair(kind)
    big = encode_request(
        REGISTRY.get(18, 3),
        2,
        ApiVersionsRequest(client_software_name="x" * 100_000, client_software_version="1"),
        "raw",
    )
    large_answer = os.urandom(2 * 1024 * 1024)

    def response_for(request: Request):
        cid = request.correlation_id
        if cid == 2:
            head = _answer_frame(cid, b"")[:8]
            head = (4 + len(large_answer)).to_bytes(4, "big") + head[4:]
            return (head, large_answer[:1000], memoryview(large_answer)[1000:])
        return _answer_frame(cid, b"ok%d" % cid)

    seen: list[Request] = []
    closed: list[Connection] = []
    connection = Connection(
        transport, "c-0", "127.0.0.1", _settings(), _answering_hooks(seen, closed, response_for)
    )
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(connection.run)
            await peer.send_all(api_versions_frame(1) + big + api_versions_frame(3))
            frames = await read_frames(peer, 3)
            await peer.aclose()
    assert [bytes(frame[:4]) for frame in frames] == [b"\0\0\0\1", b"\0\0\0\2", b"\0\0\0\3"]
    assert frames[0][4:] == b"ok1" and frames[2][4:] == b"ok3"
    assert frames[1][4:] == large_answer
    assert [request.size for request in seen] == [
        len(api_versions_frame(1)) - 4,
        len(big) - 4,
        len(api_versions_frame(3)) - 4,
    ]
    assert seen[1].body.client_software_name == "x" * 100_000
    assert closed == [connection]
    assert connection.close_reason == "closed by the client"
    assert connection.state == "CLOSED"


@pytest.mark.parametrize("kind", KINDS)
async def test_stop_reading_closes_a_waiting_connection_at_once(kind):
    transport, peer = await pair(kind)
    closed: list[Connection] = []
    connection = Connection(
        transport, "c-0", "127.0.0.1", _settings(),
        _answering_hooks([], closed, lambda r: _answer_frame(r.correlation_id, b"")),
    )
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(connection.run)
            await peer.send_all(api_versions_frame(1))
            await read_frames(peer, 1)
            await trio.testing.wait_all_tasks_blocked()
            connection.stop_reading()
            assert await read_until_closed(peer) == b""
    assert connection.close_reason == "broker shutting down"
    assert closed == [connection]


def test_socket_streams_get_the_socket_transport():
    a, b = socket.socketpair()
    try:
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(a))
        assert isinstance(transport_for(stream), SocketTransport)
        assert isinstance(transport_for(trio.testing.memory_stream_pair()[0]), StreamTransport)
    finally:
        b.close()
        a.close()


async def test_an_illegal_move_closes_only_its_connection(caplog):
    """A mute-cycle bug (here: a table missing the REQUEST_QUEUED row) is logged and closes
    the connection; run() returns normally, so the processor and broker keep serving."""
    from trikafka.network.connection_state import (
        TRANSITIONS,
        ConnectionEvent,
        ConnectionState,
        MuteState,
    )

    transport, peer = await pair("memory")
    closed: list[Connection] = []
    connection = Connection(
        transport, "c-0", "127.0.0.1", _settings(),
        _answering_hooks([], closed, lambda r: _answer_frame(r.correlation_id, b"")),
    )
    broken = {**TRANSITIONS, MuteState.MUTED: {ConnectionEvent.CLOSE: MuteState.CLOSED}}
    connection.protocol = ConnectionState("c-0", REGISTRY, 1024 * 1024, transitions=broken)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(connection.run)
            await peer.send_all(api_versions_frame(1))
            assert await read_until_closed(peer) == b""
    assert closed == [connection]
    assert connection.close_reason == "internal error"
    (record,) = [r for r in caplog.records if "illegal mute-cycle move" in r.getMessage()]
    assert "REQUEST_QUEUED is not allowed in state MUTED" in record.exc_text
