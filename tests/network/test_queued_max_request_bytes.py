"""queued.max.request.bytes: a broker-wide budget of request bytes read but not yet handled.

Kafka's request MemoryPool, non-strict: a frame is read while any budget is left, a Produce
(like any request with bytes fields) keeps its bytes until it is answered (other requests
are parsed into new objects and give theirs back at once), and while the budget is spent no
connection reads a new frame. All in
virtual time over the in-memory transport; handlers are held on events the tests control.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

from trikafka import BrokerConfig, ConfigError
from trikafka.errors import ErrorCode
from trikafka.network.request_channel import (
    FRAME_HOLDING_API_KEYS,
    RequestMemoryPool,
    frame_holding_api_keys,
)
from trikafka.protocol.entities import build
from trikafka.protocol.headers import encode_request
from trikafka.protocol.records import build_batch
from trikafka.protocol.registry import ApiRegistry
from trikafka.testing import open_test_broker
from trikafka.testing.frames import api_versions_frame, api_versions_response, read_frames

from ..server.test_topics_and_data import create_topic

REGISTRY = ApiRegistry()
BUDGET = 10_000


def _produce_frame(correlation_id: int, topic_id, value_size: int) -> bytes:
    batch = build_batch([(b"k", b"v" * value_size, [], 1_700_000_000_000)])
    body = build(
        REGISTRY.get(0, 9).request_type,
        transactional_id=None,
        acks=1,
        timeout=1000,
        topic_data=[
            {"name": "t", "topic_id": topic_id, "partition_data": [{"index": 0, "records": batch}]}
        ],
    )
    return encode_request(REGISTRY.get(0, 9), correlation_id, body, "raw")


def _hold_produce(tb, release: trio.Event, entered: list[int]) -> None:
    original = tb.broker.path.apis.handlers[0]

    async def held(request):
        entered.append(request.correlation_id)
        await release.wait()
        return await original(request)

    tb.broker.path.apis.handlers[0] = held


async def _two_held_produces(tb, release: trio.Event):
    """Two connections, each with a ~6 KB produce held in its handler; returns them."""
    async with tb.client() as admin:
        created = await create_topic(admin, "t", 1)
    entered: list[int] = []
    _hold_produce(tb, release, entered)
    first, second = await tb.connect(), await tb.connect()
    frame = _produce_frame(1, created.topic_id, 6_000)
    await first.send_all(frame)
    await trio.testing.wait_all_tasks_blocked()
    await second.send_all(_produce_frame(2, created.topic_id, 6_000))
    await trio.testing.wait_all_tasks_blocked()
    assert entered == [1, 2]
    return first, second, len(frame) - 4


@pytest.mark.parametrize("third_connects", ["after", "before"])
async def test_spent_budget_stops_reading_until_a_produce_is_answered(autojump_clock, third_connects):
    """'before': the third connection is already waiting in a read when the budget runs
    out, so the bytes arrive but are not turned into a request; 'after': it never reads."""
    release = trio.Event()
    async with open_test_broker(
        socket_request_max_bytes=BUDGET, queued_max_request_bytes=BUDGET, num_io_threads=4
    ) as tb:
        if third_connects == "before":
            third = await tb.connect()
        first, second, size = await _two_held_produces(tb, release)
        stats = tb.broker.path.request_channel.statistics()
        # Non-strict: the second produce was read with 10000 - size > 0 left, and overdraws.
        assert stats.memory_pool_available == BUDGET - 2 * size < 0
        assert stats.memory_pool_used == 2 * size

        if third_connects == "after":
            third = await tb.connect()
        await third.send_all(api_versions_frame(3))
        await trio.testing.wait_all_tasks_blocked()
        stats = tb.broker.path.request_channel.statistics()
        assert stats.tasks_waiting_memory == 1
        assert stats.queue_size == 0  # not read, not queued — two handlers are idle
        with trio.move_on_after(60):
            await third.receive_some(1)
            pytest.fail("a request was read while queued.max.request.bytes was spent")

        release.set()
        for stream in (first, second):
            (frame,) = await read_frames(stream, 1)
        (frame,) = await read_frames(third, 1)
        assert api_versions_response(frame)[0] == 3
        stats = tb.broker.path.request_channel.statistics()
        assert (stats.memory_pool_available, stats.memory_pool_used) == (BUDGET, 0)


async def test_unbounded_by_default_reads_on(autojump_clock):
    """The control: the same held produces, no budget — the third connection is answered."""
    release = trio.Event()
    async with open_test_broker(
        socket_request_max_bytes=BUDGET, queued_max_request_bytes=-1, num_io_threads=4
    ) as tb:
        first, second, _size = await _two_held_produces(tb, release)
        assert tb.broker.path.request_channel.statistics().memory_pool_available is None
        third = await tb.connect()
        await third.send_all(api_versions_frame(3))
        (frame,) = await read_frames(third, 1)
        assert api_versions_response(frame)[1].error_code == ErrorCode.none
        release.set()


async def test_a_connection_waiting_for_memory_closes_at_once_on_shutdown(autojump_clock):
    release = trio.Event()
    async with open_test_broker(
        socket_request_max_bytes=BUDGET, queued_max_request_bytes=BUDGET, num_io_threads=4,
        shutdown_grace_ms=30_000,
    ) as tb:
        first, _second, _size = await _two_held_produces(tb, release)
        third = await tb.connect()
        await third.send_all(api_versions_frame(3))
        await trio.testing.wait_all_tasks_blocked()
        start = trio.current_time()
        tb.broker.stop()
        assert await third.receive_some(1) == b""
        assert trio.current_time() == start  # not after the grace period
        release.set()
        (frame,) = await read_frames(first, 1)  # in flight: still answered


async def test_other_requests_hold_no_bytes(autojump_clock):
    async with open_test_broker(
        socket_request_max_bytes=BUDGET, queued_max_request_bytes=BUDGET
    ) as tb:
        stream = await tb.connect()
        await stream.send_all(b"".join(api_versions_frame(i) for i in range(400)))  # 14 KB
        frames = await read_frames(stream, 400)
        assert [api_versions_response(f)[0] for f in frames] == list(range(400))
        assert tb.broker.path.request_channel.statistics().memory_pool_available == BUDGET


async def test_pool_is_non_strict_and_wakes_waiters_when_budget_returns():
    pool = RequestMemoryPool(100)
    pool.allocate(99)
    await pool.wait_for_memory()  # 1 byte left: a frame of any size may still be read
    pool.allocate(500)
    assert pool.available == -499
    woken: list[int] = []
    async with trio.open_nursery() as nursery:
        for index in range(3):
            nursery.start_soon(_wait_then_note, pool, woken, index)
        await trio.testing.wait_all_tasks_blocked()
        assert pool.waiting == 3
        pool.release(499)  # back to 0: still spent
        await trio.testing.wait_all_tasks_blocked()
        assert woken == []
        pool.release(1)
    assert sorted(woken) == [0, 1, 2]


async def _wait_then_note(pool: RequestMemoryPool, woken: list[int], index: int) -> None:
    await pool.wait_for_memory()
    woken.append(index)


def test_config_key_default_and_kafkas_rule():
    assert BrokerConfig().queued_max_request_bytes == -1
    config = BrokerConfig.from_mapping({"queued.max.request.bytes": "209715200"})
    assert config.queued_max_request_bytes == 209715200
    assert BrokerConfig(queued_max_request_bytes=0).queued_max_request_bytes == 0  # unbounded
    with pytest.raises(ConfigError) as info:
        BrokerConfig.from_mapping({"queued.max.request.bytes": "1000"})
    message = str(info.value)
    assert "queued.max.request.bytes" in message and "1000" in message
    assert "socket.request.max.bytes (104857600)" in message
    with pytest.raises(ValueError):
        RequestMemoryPool(0)


def test_requests_with_bytes_or_records_hold_their_frame():
    """Kafka's requiresDelayedAllocation (less the forwarding clause): Produce's records,
    JoinGroup's protocol metadata, SyncGroup's assignments, SaslAuthenticate's token,
    AlterUserScramCredentials' salts and PushTelemetry's metrics."""
    assert frame_holding_api_keys(REGISTRY) == {0, 11, 14, 36, 51, 72} == FRAME_HOLDING_API_KEYS  # the table
    assert frame_holding_api_keys(ApiRegistry({18: (0, 4), 3: (0, 12)})) == frozenset()
