"""Graceful shutdown: stop accepting, finish what is in flight, close, drain."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from trikafka.testing import open_test_broker
from trikafka.testing.frames import (
    api_versions_frame,
    api_versions_response,
    read_frames,
    read_until_closed,
)


def _hold(tb, release: trio.Event, entered: trio.Event) -> None:
    original = tb.broker.path.apis.handlers[18]

    async def held(request):
        entered.set()
        await release.wait()
        return await original(request)

    tb.broker.path.apis.handlers[18] = held


async def test_in_flight_response_is_written_before_close(autojump_clock):
    release, entered = trio.Event(), trio.Event()
    async with open_test_broker(shutdown_grace_ms=30_000) as tb:
        _hold(tb, release, entered)
        busy = await tb.connect()
        idle = await tb.connect()
        await busy.send_all(api_versions_frame(5))
        await entered.wait()
        tb.broker.stop()
        # The idle connection closes at once; the busy one waits for its response.
        assert await read_until_closed(idle) == b""
        with pytest.raises(trio.ClosedResourceError):
            await tb.listener.connect()
        await trio.sleep(1)
        release.set()
        received = await read_until_closed(busy)
        (frame,) = await read_frames(_Replay(received), 1)
        assert api_versions_response(frame)[0] == 5
        await tb.broker.stopped.wait()


async def test_grace_period_bounds_shutdown(autojump_clock):
    release, entered = trio.Event(), trio.Event()
    async with open_test_broker(shutdown_grace_ms=2_000) as tb:
        _hold(tb, release, entered)
        stuck = await tb.connect()
        await stuck.send_all(api_versions_frame(1))
        await entered.wait()
        start = trio.current_time()
        tb.broker.stop()
        assert await read_until_closed(stuck) == b""
        assert trio.current_time() - start == pytest.approx(2.0)
        await tb.broker.stopped.wait()
        assert trio.current_time() - start == pytest.approx(2.0)


async def test_leaving_open_broker_stops_everything(autojump_clock):
    async with open_test_broker() as tb:
        stream = await tb.connect()
        await stream.send_all(api_versions_frame(1))
        await read_frames(stream, 1)
    assert tb.broker.stopped.is_set()
    assert await read_until_closed(stream) == b""
    assert tb.broker.statistics().connections["PLAINTEXT"]["count"] == 0


class _Replay(trio.abc.ReceiveStream):
    """Bytes already received, replayed as a stream for the frame reader."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    async def receive_some(self, max_bytes=None):
        await trio.lowlevel.checkpoint()
        data, self._data = self._data, b""
        return data

    async def aclose(self) -> None:
        pass


async def test_pipelined_requests_behind_the_one_in_flight_are_not_served(autojump_clock):
    """Shutdown answers what is in flight, not what a client pipelined behind it."""
    release, entered = trio.Event(), trio.Event()
    async with open_test_broker(shutdown_grace_ms=30_000) as tb:
        _hold(tb, release, entered)
        busy = await tb.connect()
        await busy.send_all(b"".join(api_versions_frame(i) for i in (1, 2, 3)))
        await entered.wait()
        tb.broker.stop()
        await trio.sleep(1)
        release.set()
        received = await read_until_closed(busy)
        frames = await read_frames(_Replay(received), 1)
        assert [api_versions_response(f)[0] for f in frames] == [1]
        assert len(received) == 4 + len(frames[0])  # and nothing after it
        await tb.broker.stopped.wait()


async def test_a_tls_connection_handed_over_after_shutdown_began_closes_without_a_handshake():
    """A stream still queued for its processor when shutdown begins gets a connection that
    never reads (stop_reading first). On a TLS listener that must close it too: the
    handshake's timeout, min(10 s, idle), was minus infinity there, and trio refused it with
    a ValueError that escaped the connection's task."""
    import ssl

    from trikafka.network.connection import Connection
    from trikafka.security.listener import ListenerSecurity

    from .test_transport import _answering_hooks, _settings, pair

    transport, peer = await pair("memory")
    closed: list[Connection] = []
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    settings = _settings(listener_name="SSL", security=ListenerSecurity("SSL", "SSL", context))
    connection = Connection(transport, "c-0", "127.0.0.1", settings, _answering_hooks([], closed, None))
    connection.stop_reading()
    with trio.fail_after(5):
        await connection.run()
    assert connection.close_reason == "broker shutting down"
    assert closed == [connection]
