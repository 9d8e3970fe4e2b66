"""The request path over the in-memory transport, in virtual time."""

from __future__ import annotations

import struct

import pytest
import trio
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.metadata.v12.request import MetadataRequest
from kio.serial import entity_reader

from trikafka.errors import ErrorCode
from trikafka.protocol.registry import IMPLEMENTED_APIS, ApiKey
from trikafka.server.request_handler import HANDLER_TASK_NAME
from trikafka.testing import open_test_broker
from trikafka.testing.frames import (
    api_versions_frame,
    api_versions_response,
    read_frames,
    read_until_closed,
)


async def test_fifty_pipelined_requests_come_back_in_order(autojump_clock):
    async with open_test_broker(num_io_threads=8) as tb:
        stream = await tb.connect()
        # All fifty in one write: they queue in the connection's buffer, not in the broker.
        await stream.send_all(b"".join(api_versions_frame(1000 + i) for i in range(50)))
        frames = await read_frames(stream, 50)
        ids = [api_versions_response(f)[0] for f in frames]
        assert ids == [1000 + i for i in range(50)]
        assert all(api_versions_response(f)[1].error_code == ErrorCode.none for f in frames)
        await stream.aclose()


def _task() -> str:
    return trio.lowlevel.current_task().name


async def test_ten_pipelined_requests_one_in_flight_each_answer_through_the_capacity_1_channel(autojump_clock):
    """Mute: with eight handlers free, one connection still has one request at a time, and
    each answer goes back through that connection's ``trio.open_memory_channel(1)`` — the
    connection is the one task waiting on it while the handler works."""
    in_flight = 0
    most = 0
    seen: list[tuple] = []
    async with open_test_broker(num_io_threads=8) as tb:
        path = tb.broker.path
        original = path.apis.handlers[ApiKey.API_VERSIONS]

        async def counting(request):
            nonlocal in_flight, most
            in_flight += 1
            most = max(most, in_flight)
            await trio.sleep(0.01)  # any other request of this connection would come now
            channel = request.response_send
            stats = channel.statistics()
            seen.append((
                request.correlation_id, channel, type(channel), stats.max_buffer_size,
                stats.tasks_waiting_receive, stats.current_buffer_used,
                path.request_channel.statistics().queue_size,
            ))
            in_flight -= 1
            return await original(request)

        path.apis.handlers[ApiKey.API_VERSIONS] = counting
        stream = await tb.connect()
        await stream.send_all(b"".join(api_versions_frame(i) for i in range(10)))
        frames = await read_frames(stream, 10)
    assert [api_versions_response(f)[0] for f in frames] == list(range(10))
    assert most == 1
    assert [s[0] for s in seen] == list(range(10))
    assert len({id(s[1]) for s in seen}) == 1  # the connection's one channel, every time
    for _cid, _channel, kind, capacity, receivers, buffered, queued in seen:
        assert kind is trio.MemorySendChannel and capacity == 1
        assert receivers == 1  # the connection awaits its answer there: muted
        assert buffered == 0 and queued == 0  # nothing else of it is anywhere in flight


async def test_full_request_channel_pushes_back(autojump_clock):
    """queued.max.requests=2, the one handler held: two more requests fill the shared memory
    channel and the next connection's request waits in its send."""
    release = trio.Event()
    entered = trio.Event()
    handled_in: list[str] = []
    async with open_test_broker(num_io_threads=1, queued_max_requests=2) as tb:
        channel = tb.broker.path.request_channel
        assert isinstance(channel.request_send, trio.MemorySendChannel)
        assert channel.request_send.statistics().max_buffer_size == 2
        original = tb.broker.path.apis.handlers[ApiKey.API_VERSIONS]

        async def held(request):
            handled_in.append(_task())
            if request.correlation_id == 1:
                entered.set()
                await release.wait()
            return await original(request)

        tb.broker.path.apis.handlers[ApiKey.API_VERSIONS] = held
        streams = [await tb.connect() for _ in range(4)]
        await streams[0].send_all(api_versions_frame(1))
        await entered.wait()
        for cid, stream in enumerate(streams[1:], start=2):
            await stream.send_all(api_versions_frame(cid))
        await trio.testing.wait_all_tasks_blocked()
        stats = channel.statistics()
        assert stats.queue_size == 2  # the second and third requests wait in the channel
        assert stats.tasks_waiting_send == 1  # the fourth connection waits in its send
        with trio.move_on_after(5):
            await streams[1].receive_some(1)
            pytest.fail("second connection answered while the handler was held")
        release.set()
        for cid, stream in enumerate(streams, start=1):
            (frame,) = await read_frames(stream, 1)
            assert api_versions_response(frame)[0] == cid
    assert handled_in == [HANDLER_TASK_NAME.format(0)] * 4


async def test_handler_tasks_not_connection_tasks_run_kafka_apis_handle(autojump_clock):
    """Lone requests, pipelined ones and several connections at once: every request is
    handled in one of the num.io.threads handler tasks, never in a connection's task."""
    ran_in: list[str] = []
    async with open_test_broker(num_io_threads=2) as tb:
        apis = tb.broker.path.apis
        for key in (ApiKey.API_VERSIONS, ApiKey.METADATA):
            original = apis.handlers[key]

            async def noted(request, original=original):
                ran_in.append(_task())
                return await original(request)

            apis.handlers[key] = noted
        streams = [await tb.connect() for _ in range(3)]
        await streams[0].send_all(api_versions_frame(1))  # a lone request, handlers idle
        await read_frames(streams[0], 1)
        async with tb.client() as client:
            await client.request(
                MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
            )
        for stream in streams:
            await stream.send_all(b"".join(api_versions_frame(i) for i in range(5)))
        for stream in streams:
            await read_frames(stream, 5)
        stats = tb.broker.statistics()
        handled = tb.broker.path.handler_pool.handled
    handlers = {HANDLER_TASK_NAME.format(i) for i in range(2)}
    assert len(ran_in) >= 17 and set(ran_in) <= handlers, set(ran_in)
    assert handled >= 17 and stats.request_handler_avg_idle_percent <= 1.0


async def test_idle_connection_closes_at_exactly_max_idle_ms(autojump_clock):
    async with open_test_broker(connections_max_idle_ms=60_000) as tb:
        stream = await tb.connect()
        await stream.send_all(api_versions_frame(1))
        await read_frames(stream, 1)
        answered = trio.current_time()
        with trio.move_on_after(59.999):
            await stream.receive_some(1)
            pytest.fail("closed before connections.max.idle.ms")
        assert await stream.receive_some(1) == b""
        assert trio.current_time() - answered == pytest.approx(60.0)
        stats = tb.broker.statistics()
        assert stats.connections["PLAINTEXT"]["count"] == 0


async def test_activity_resets_the_idle_timer(autojump_clock):
    async with open_test_broker(connections_max_idle_ms=10_000) as tb:
        stream = await tb.connect()
        for i in range(5):
            await trio.sleep(9)
            await stream.send_all(api_versions_frame(i))
            await read_frames(stream, 1)
        last = trio.current_time()
        assert await stream.receive_some(1) == b""
        assert trio.current_time() - last == pytest.approx(10.0)


async def test_a_connection_busy_past_max_idle_ms_expires_idle_ms_after_its_answer(autojump_clock):
    """Only a connection waiting for a request can expire: one whose request is handled for
    longer than connections.max.idle.ms is answered, then closes idle ms after the answer."""
    release = trio.Event()
    async with open_test_broker(connections_max_idle_ms=10_000) as tb:
        original = tb.broker.path.apis.handlers[18]

        async def slow(request):
            await release.wait()
            return await original(request)

        tb.broker.path.apis.handlers[18] = slow
        stream = await tb.connect()
        other = await tb.connect()  # keeps the expiry task waking around the busy one
        await stream.send_all(api_versions_frame(1))
        await trio.sleep(25)
        release.set()
        await read_frames(stream, 1)
        answered = trio.current_time()
        assert await read_until_closed(other) == b""  # idle since its connect: long gone
        assert await stream.receive_some(1) == b""
        assert trio.current_time() - answered == pytest.approx(10.0)


async def test_connections_expire_each_at_its_own_time(autojump_clock):
    """Connections opened a second apart close a second apart, each idle ms after its
    last request: one expiry task serves them all."""
    lifetimes: list[float] = []

    async def idle(stream, answered: float) -> None:
        assert await stream.receive_some(1) == b""
        lifetimes.append(trio.current_time() - answered)

    async with open_test_broker(connections_max_idle_ms=5_000) as tb, trio.open_nursery() as nursery:
        for i in range(20):
            stream = await tb.connect()
            await stream.send_all(api_versions_frame(i))
            await read_frames(stream, 1)
            nursery.start_soon(idle, stream, trio.current_time())
            await trio.sleep(1)
    assert lifetimes == [pytest.approx(5.0)] * 20


async def test_reads_leave_no_cancel_scopes_behind(autojump_clock):
    """A read waits in a cancel scope without a deadline: trio keeps a deadline's scope in
    its heap until a prune a thousand scopes later, and those the collector had to walk
    (generation-0 collections every few dozen requests of a busy-polling consumer)."""
    import gc

    def scopes() -> int:
        return sum(1 for o in gc.get_objects() if type(o) is trio.CancelScope)

    async with open_test_broker() as tb:
        stream = await tb.connect()
        for i in range(10):
            await stream.send_all(api_versions_frame(i))
            await read_frames(stream, 1)
        before = scopes()
        for i in range(500):
            await stream.send_all(api_versions_frame(i))
            await read_frames(stream, 1)
        assert scopes() - before < 20  # a deadline per read left ~500


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(struct.pack(">i", 104857601), id="oversized"),
        pytest.param(struct.pack(">i", -1), id="negative"),
        pytest.param(struct.pack(">i", 6) + b"\xff\xfe\x00\x00zz", id="garbage"),
        pytest.param(struct.pack(">i", 12) + b"\x00\x12\x00\x03\x00\x00\x00\x01\x00\x05ab", id="truncated-header"),
        pytest.param(struct.pack(">ihhi", 8, 3, 99, 1), id="unsupported-metadata-version"),
        pytest.param(struct.pack(">ihhi", 8, 9999, 0, 1), id="unknown-api-key"),
    ],
)
async def test_bad_frame_closes_only_its_connection(autojump_clock, bad, caplog):
    async with open_test_broker() as tb:
        good = await tb.connect()
        victim = await tb.connect()
        await good.send_all(api_versions_frame(1))
        await read_frames(good, 1)
        await victim.send_all(bad)
        assert await read_until_closed(victim) == b""
        # The other connection is still served.
        await good.send_all(api_versions_frame(2))
        (frame,) = await read_frames(good, 1)
        assert api_versions_response(frame)[0] == 2
        closing = [r for r in caplog.records if "closing connection" in r.getMessage()]
        assert len(closing) == 1
        assert tb.broker.path.metrics.closed_by_error == 1


async def test_oversized_frame_is_refused_before_its_body(autojump_clock):
    """The size check happens on the prefix: the broker never waits for 100 MiB."""
    async with open_test_broker(socket_request_max_bytes=1024) as tb:
        victim = await tb.connect()
        await victim.send_all(struct.pack(">i", 1025) + b"x" * 10)
        assert await read_until_closed(victim) == b""


async def test_api_versions_v99_gets_v0_error_with_supported_range(autojump_clock):
    async with open_test_broker() as tb:
        stream = await tb.connect()
        # ApiVersions v99, request header v2 with client id and empty tagged fields.
        header = struct.pack(">hhih", 18, 99, 77, 3) + b"cli" + b"\x00"
        await stream.send_all(struct.pack(">i", len(header) + 1) + header + b"\x00")
        (frame,) = await read_frames(stream, 1)
        # Response header v0 (correlation id only), then an ApiVersions v0 body.
        (correlation_id,) = struct.unpack_from(">i", frame)
        body, _ = entity_reader(ApiVersionsResponseV0)(frame, 4)
        assert correlation_id == 77
        assert body.error_code == ErrorCode.unsupported_version
        lo, hi = IMPLEMENTED_APIS[18]
        assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(18, lo, hi)]
        # The connection stays open and a supported version works afterwards.
        await stream.send_all(api_versions_frame(78))
        (frame,) = await read_frames(stream, 1)
        assert api_versions_response(frame)[1].error_code == ErrorCode.none


async def test_api_versions_advertises_exactly_the_registry(autojump_clock):
    """Everything implemented with client telemetry on; without it, all but its two APIs."""
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    for telemetry in (True, False):
        async with open_test_broker(client_telemetry=telemetry) as tb, tb.client() as client:
            response = await client.request(
                ApiVersionsRequest(client_software_name="t", client_software_version="1")
            )
            advertised = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
            expected = {k: v for k, v in IMPLEMENTED_APIS.items() if telemetry or k not in (71, 72)}
            assert advertised == expected


async def test_invalid_software_name_gets_invalid_request(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        from kio.schema.api_versions.v3.request import ApiVersionsRequest

        response = await client.request(
            ApiVersionsRequest(client_software_name="-bad name", client_software_version="1")
        )
        assert response.error_code == ErrorCode.invalid_request


async def test_handler_exception_becomes_error_response(autojump_clock, caplog):
    async with open_test_broker() as tb, tb.client() as client:

        async def broken(request):
            raise RuntimeError("boom")

        tb.broker.path.apis.handlers[3] = broken
        response = await client.request(
            MetadataRequest(
                topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
            )
        )
        assert response.brokers == ()
        assert any("boom" in (r.exc_text or "") or r.exc_info for r in caplog.records)
        # The handler task survived: the same connection is served again.
        from kio.schema.api_versions.v3.request import ApiVersionsRequest

        ok = await client.request(
            ApiVersionsRequest(client_software_name="t", client_software_version="1")
        )
        assert ok.error_code == ErrorCode.none


async def test_metadata_lists_this_broker_and_cluster(autojump_clock):
    async with open_test_broker(node_id=7, cluster_id="test-cluster") as tb, tb.client() as client:
        response = await client.request(
            MetadataRequest(
                topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
            )
        )
        assert [(b.node_id, b.host, b.port) for b in response.brokers] == [(7, "memory", 9092)]
        assert response.cluster_id == "test-cluster"
        assert response.controller_id == 7
        assert response.topics == ()


async def test_unencodable_response_is_an_error_not_a_dead_broker(autojump_clock, caplog):
    """A handler bug that produces a bad entity is answered, logged, and survived."""
    async with open_test_broker() as tb, tb.client() as client:
        from kio.schema.api_versions.v3.request import ApiVersionsRequest

        async def broken(request):
            import datetime

            return request.spec.response_type(  # constructs, but a str is no broker: unencodable
                throttle_time=datetime.timedelta(0), brokers=("no broker",), cluster_id=None, controller_id=1, topics=()
            )

        tb.broker.path.apis.handlers[3] = broken
        response = await client.request(
            MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        )
        assert response.brokers == ()
        messages = [r.getMessage() for r in caplog.records]
        assert "cannot encode Metadata v12 response" in messages
        assert not any(m.startswith("error handling") for m in messages)
        ok = await client.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        assert ok.error_code == ErrorCode.none
