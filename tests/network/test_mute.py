"""The mute, as the card draws it: one request in flight per connection, each answer written
(in a write of its own) before the next frame is even looked at, in order; a long poll or a
closing connection never holds an earlier answer back.

The Connection runs over both transports (a real socket pair and the in-memory stream) with
hooks that answer at once; its writes are counted at the transport. The long-poll and
bad-frame cases run the whole broker over the in-memory transport in virtual time.
"""

from __future__ import annotations

import attrs
import pytest
import trio
import trio.testing

from trikafka.network.connection import Connection
from trikafka.network.request_channel import Request
from trikafka.protocol.headers import decode_response, encode_request
from trikafka.protocol.registry import ApiRegistry
from trikafka.testing import open_test_broker
from trikafka.testing.frames import (
    api_versions_frame,
    api_versions_response,
    read_frames,
    read_until_closed,
)

from ..server.test_topics_and_data import create_topic, fetch_request
from .test_transport import KINDS, _answer_frame, _answering_hooks, _settings, pair

REGISTRY = ApiRegistry()


class _CountingTransport:
    """The real transport, with each write call recorded (what went out in one call)."""

    def __init__(self, transport) -> None:
        self.transport = transport
        self.stream = transport.stream
        self.receive_some = transport.receive_some
        self.receive_into = transport.receive_into
        self.writes: list[bytes] = []

    async def send(self, data) -> None:
        self.writes.append(bytes(data))
        await self.transport.send(data)

    async def send_parts(self, parts) -> None:
        self.writes.append(b"".join(bytes(p) for p in parts))
        await self.transport.send_parts(parts)

    async def aclose(self) -> None:
        await self.transport.aclose()


async def _serve(kind, script, response_for=None, writes=None):
    """Run a Connection while ``script(peer)`` talks to it; return (writes, done, requests)."""
    transport, peer = await pair(kind)
    counting = _CountingTransport(transport)
    if writes is not None:
        counting.writes = writes
    seen: list[Request] = []
    done: list[tuple[int, float]] = []
    hooks = attrs.evolve(
        _answering_hooks(seen, [], response_for or (lambda r: _answer_frame(r.correlation_id, b"ok"))),
        request_done=lambda r, at: done.append((r.correlation_id, at)),
    )
    connection = Connection(counting, "c-0", "127.0.0.1", _settings(), hooks)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(connection.run)
            await script(peer)
            await peer.aclose()
    return counting.writes, done, seen


@pytest.mark.parametrize("kind", KINDS)
async def test_pipelined_requests_are_answered_one_write_each_before_the_next_is_read(kind):
    written_before: list[int] = []  # answers already written when each request was handed over
    writes: list[bytes] = []

    def response_for(request):
        written_before.append(len(writes))
        return _answer_frame(request.correlation_id, b"ok")

    async def script(peer):
        await peer.send_all(b"".join(api_versions_frame(i) for i in range(8)))
        frames = await read_frames(peer, 8)
        assert [int.from_bytes(f[:4], "big") for f in frames] == list(range(8))

    writes[:], done, _ = await _serve(kind, script, response_for, writes)
    assert writes == [_answer_frame(i, b"ok") for i in range(8)]
    assert written_before == list(range(8))  # request i left the connection after answer i-1
    assert [cid for cid, _ in done] == list(range(8))


@pytest.mark.parametrize("kind", KINDS)
async def test_a_lone_request_is_written_at_once(kind):
    async def script(peer):
        for i in range(3):  # ping-pong: nothing is buffered behind any request
            await peer.send_all(api_versions_frame(i))
            (frame,) = await read_frames(peer, 1)
            assert int.from_bytes(frame[:4], "big") == i

    writes, _done, _ = await _serve(kind, script)
    assert writes == [_answer_frame(i, b"ok") for i in range(3)]


@pytest.mark.parametrize("kind", KINDS)
async def test_an_answer_in_parts_is_one_scatter_gather_write(kind):
    def response_for(request):
        cid = request.correlation_id
        return (_answer_frame(cid, b"parts")[:8], b"parts")  # a fetch-like answer in parts

    async def script(peer):
        await peer.send_all(b"".join(api_versions_frame(i) for i in range(3)))
        await read_frames(peer, 3)

    writes, _, _ = await _serve(kind, script, response_for)
    assert writes == [_answer_frame(i, b"parts") for i in range(3)]


async def test_an_answer_is_not_held_behind_a_long_poll(autojump_clock):
    """Metadata, then a 30 s long-poll Fetch, pipelined: the Metadata answer is written when
    the fetch goes to the purgatory, not when its wait ends."""
    async with open_test_broker() as tb:
        async with tb.client() as admin:
            created = await create_topic(admin, "quiet")
        stream = await tb.connect()
        fetch = encode_request(
            REGISTRY.get(1, 12), 2, fetch_request(12, "quiet", created.topic_id, 0, 0, max_wait=30_000), "t"
        )
        start = trio.current_time()
        await stream.send_all(api_versions_frame(1) + fetch)
        (first,) = await read_frames(stream, 1)
        assert api_versions_response(first)[0] == 1
        assert trio.current_time() == start
        (second,) = await read_frames(stream, 1)
        correlation_id, _body = decode_response(REGISTRY.get(1, 12), second)
        assert correlation_id == 2
        assert trio.current_time() - start == pytest.approx(30.0)


async def test_answers_before_a_bad_frame_are_written_before_the_close(autojump_clock, caplog):
    async with open_test_broker() as tb:
        stream = await tb.connect()
        bad = (8).to_bytes(4, "big") + b"\xff" * 8  # api key 65535: not served
        await stream.send_all(api_versions_frame(1) + api_versions_frame(2) + bad)
        frames = await read_frames(stream, 2)
        assert [api_versions_response(f)[0] for f in frames] == [1, 2]
        assert await read_until_closed(stream) == b""
