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


# -- the stop path's parts, each alone (MockClock) ------------------------------------------


class _HeldHandler:
    """The handler side of a bare Processor: takes each request off the request channel and
    answers it when the test says (``answer``), or never."""

    def __init__(self, channel) -> None:
        self.channel = channel
        self.requests: list = []
        self.arrived = trio.Event()

    async def run(self) -> None:
        async for request in self.channel.request_receive:
            self.requests.append(request)
            self.arrived.set()

    def answer(self) -> None:
        from trikafka.network.request_channel import SendResponse

        request = self.requests.pop(0)
        frame = api_versions_frame(request.correlation_id)  # any bytes will do: the client reads a frame
        self.channel.send_response(request, SendResponse(frame))


async def _connect(processor, listener):
    """A client stream handed to ``processor`` as its acceptor would (quotas counted)."""
    accepted: list = []

    async def accept() -> None:
        accepted.append(await listener.accept())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(accept)
        client = await listener.connect()
    processor.quotas.inc("127.0.0.1")
    processor.new_connections_send.send_nowait(accepted[0])
    return client


def _bare_processor(grace_ms: int):
    from trikafka.metrics import BrokerMetrics
    from trikafka.network.processor import Processor, ProcessorSettings
    from trikafka.network.quotas import ConnectionQuotas
    from trikafka.network.request_channel import RequestChannel
    from trikafka.protocol.registry import ApiRegistry

    channel = RequestChannel(10)
    processor = Processor(
        0, "PLAINTEXT", settings=ProcessorSettings(shutdown_grace_ms=grace_ms), registry=ApiRegistry(),
        request_channel=channel, quotas=ConnectionQuotas(100, 100, {}), metrics=BrokerMetrics(),
    )
    return processor, _HeldHandler(channel)


@pytest.mark.parametrize("answered_after", [1.0, None])
async def test_a_processor_stops_when_its_new_connections_close(autojump_clock, answered_after):
    """Closing newConnections (what its acceptor does when it stops) is the processor's one
    stop signal: an idle connection closes at once; one with a response pending gets it
    written if it comes within shutdown.grace.ms, and the processor is done then — else the
    grace deadline closes it unanswered, to the moment."""
    from trikafka.testing import MemoryListener

    processor, handler = _bare_processor(grace_ms=2_000)
    listener = MemoryListener()
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(handler.run)
            done = trio.Event()

            async def run_processor() -> None:
                await processor.run()
                done.set()

            await nursery.start(_started, run_processor)
            idle = await _connect(processor, listener)
            busy = await _connect(processor, listener)
            await busy.send_all(api_versions_frame(7))
            await handler.arrived.wait()
            start = trio.current_time()
            await processor.new_connections_send.aclose()
            assert await read_until_closed(idle) == b""
            assert trio.current_time() == start  # the idle one at once
            if answered_after is not None:
                await trio.sleep(answered_after)
                handler.answer()
            received = await read_until_closed(busy)
            await done.wait()
            stopped_after = trio.current_time() - start
            nursery.cancel_scope.cancel()
    if answered_after is None:
        assert received == b""
        assert stopped_after == pytest.approx(2.0)  # shutdown.grace.ms, from the close
    else:
        (frame,) = await read_frames(_Replay(received), 1)
        assert frame[4:8] == (7).to_bytes(4, "big")  # its answer, then the close
        assert stopped_after == pytest.approx(answered_after)
    assert processor.connections == {}
    assert processor.quotas.statistics().total == 0


async def _started(run, *, task_status=trio.TASK_STATUS_IGNORED):
    """Start ``run`` (a coroutine function without task_status) as started at once."""
    task_status.started()
    await run()


async def test_request_path_aclose_honours_the_grace_deadline(autojump_clock):
    """``RequestPath.aclose`` is the graceful stop: the listener stops accepting at once, a
    connection waiting for its next request closes at once, one whose answer never comes is
    closed at shutdown.grace.ms; it returns then, and the handlers are cancelled."""
    release, entered = trio.Event(), trio.Event()
    async with open_test_broker(shutdown_grace_ms=3_000) as tb:
        _hold(tb, release, entered)
        stuck = await tb.connect()
        idle = await tb.connect()
        await stuck.send_all(api_versions_frame(1))
        await entered.wait()
        start = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(tb.broker.path.aclose)
            assert await read_until_closed(idle) == b""
            assert trio.current_time() == start
            with pytest.raises(trio.ClosedResourceError):
                await tb.listener.connect()
            assert await read_until_closed(stuck) == b""
        assert trio.current_time() - start == pytest.approx(3.0)  # shutdown.grace.ms


async def test_a_stop_during_a_throttle_closes_at_once(autojump_clock):
    """A connection muted by a client quota (KIP-219) waits in its own task; a stop ends
    that wait as it ends a read, and the connection closes without waiting the throttle out."""
    from trikafka.network.connection import Connection

    from .test_transport import _answering_hooks, _settings, pair

    transport, peer = await pair("memory")
    closed: list[Connection] = []

    def throttled_answer(request):
        request.throttle_deadline = trio.current_time() + 60  # muted for a minute after it
        return api_versions_frame(request.correlation_id)

    connection = Connection(transport, "c-0", "127.0.0.1", _settings(), _answering_hooks([], closed, throttled_answer))
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(connection.run)
            await peer.send_all(api_versions_frame(1))
            await read_frames(peer, 1)
            await trio.testing.wait_all_tasks_blocked()
            assert connection.state == "MUTED_AND_THROTTLED"
            start = trio.current_time()
            connection.stop_reading()
            assert await read_until_closed(peer) == b""
            assert trio.current_time() == start
    assert connection.close_reason == "broker shutting down"
    assert closed == [connection]


async def test_cancelling_a_processor_closes_the_streams_still_queued_for_it(autojump_clock):
    """A stop without grace is cancellation: streams handed to a processor but not yet
    started are its own too, closed at once (the client sees the close, not silence)."""
    from trikafka.testing import MemoryListener

    processor, _handler = _bare_processor(grace_ms=60_000)
    listener = MemoryListener()
    with trio.fail_after(5):
        with trio.CancelScope() as scope:
            scope.cancel()  # the processor never gets to start a connection
            queued = await _connect_shielded(processor, listener)
            await processor.run()
        assert await read_until_closed(queued) == b""
    assert processor.quotas.statistics().total == 0


async def _connect_shielded(processor, listener):
    with trio.CancelScope(shield=True):
        return await _connect(processor, listener)


@pytest.mark.parametrize("cancel", ["idle expiry", "stop_reading"])
async def test_a_cancel_that_lands_as_a_read_completes_ends_the_read_not_a_request(cancel):
    """A connection reads under one cancel scope for its whole life; idle expiry and
    stop_reading cancel it only while a read waits. A cancel can still land in the moment
    the read's bytes come back (trio's receive yields once after the system call): the
    read must end there, with nothing handed to the handlers, and never carry the cancel
    into the request those bytes hold (it would be cancelled while a handler answers it)."""
    from trikafka.network.connection import Connection
    from trikafka.network.transport import StreamTransport

    from .test_transport import _answering_hooks, _settings, pair

    transport, peer = await pair("memory")
    submitted: list = []
    closed: list = []

    class CancelledAsTheBytesCome(StreamTransport):
        def __init__(self, inner: StreamTransport) -> None:
            super().__init__(inner.stream)
            self.receive_some = self._receive_some

        async def _receive_some(self, max_bytes: int) -> bytes:
            data = await self.stream.receive_some(max_bytes)
            if cancel == "idle expiry":
                connection.request_wait.cancel()  # what Processor._expire_idle_connections does
            else:
                connection.stop_reading()
            return data

    hooks = _answering_hooks(submitted, closed, lambda request: api_versions_frame(request.correlation_id))
    connection = Connection(CancelledAsTheBytesCome(transport), "c-0", "127.0.0.1", _settings(), hooks)
    await peer.send_all(api_versions_frame(1))
    with trio.fail_after(5):
        await connection.run()
    assert submitted == []
    assert connection.close_reason == ("idle" if cancel == "idle expiry" else "broker shutting down")
    assert closed == [connection]
    assert await read_until_closed(peer) == b""
