"""What a client can make the broker hold (issue 33), in memory and virtual time.

- Ten connections that send a 100 MB size prefix and nothing more cost kilobytes, not a
  gigabyte (the frame buffer grows with the bytes that arrive), and closing them gives it all
  back — without the cyclic garbage collector.
- ``queued.max.request.bytes`` is reserved at the prefix, before the body: with a 64 MiB pool,
  five concurrent 50 MB produces are read and served one or two at a time (Kafka's non-strict
  pool lets a frame in while any byte is free, so a second may overdraw), none refused, none
  lost, and the pool never holds more than itself plus one frame.
Measured with tracemalloc and the pool's own statistics (deterministic).
"""

from __future__ import annotations

import gc
import struct
import tracemalloc

import pytest
import trio
import trio.testing

from trikafka.errors import ErrorCode
from trikafka.protocol.entities import build
from trikafka.protocol.headers import decode_response, encode_request
from trikafka.protocol.records import build_batch
from trikafka.protocol.registry import ApiRegistry
from trikafka.testing import open_test_broker
from trikafka.testing.frames import read_frames

from ..server.test_topics_and_data import create_topic

MB = 1000 * 1000
MiB = 1024 * 1024
REGISTRY = ApiRegistry()
PRODUCE = REGISTRY.get(0, 9)


def _connections(tb) -> int:
    return sum(len(p.connections) for p in tb.broker.path.socket_server.all_processors())


@pytest.mark.parametrize("pool", [-1, 2048 * MiB, 256 * MiB], ids=["unbounded", "room-for-all", "test-default"])
async def test_ten_100_mb_prefixes_cost_kilobytes_and_closing_gives_it_back(pool, autojump_clock):
    async with open_test_broker(queued_max_request_bytes=pool) as tb:
        channel = tb.broker.path.request_channel
        gc.collect()
        gc.disable()
        tracemalloc.start()
        try:
            baseline = tracemalloc.get_traced_memory()[0]
            streams = [await tb.connect(f"10.0.0.{i}") for i in range(10)]
            for stream in streams:
                # 100 MB claimed (socket.request.max.bytes is 104857600), then a header's worth.
                await stream.send_all(struct.pack(">i", 100 * MB) + b"\x00\x00\x00\x12")
            await trio.testing.wait_all_tasks_blocked()
            assert _connections(tb) == 10
            held = tracemalloc.get_traced_memory()[0] - baseline
            stats = channel.statistics()
            if pool == 2048 * MiB:
                assert stats.memory_pool_used == 10 * 100 * MB  # every prefix read and reserved
            elif pool == 256 * MiB:
                # Non-strict: three claims fit while a byte was free; seven wait, muted, unread.
                assert stats.memory_pool_used == 3 * 100 * MB
                assert stats.tasks_waiting_memory == 7 and stats.memory_pool_waits == 7
            for stream in streams:
                await stream.aclose()
            del stream, streams
            await trio.testing.wait_all_tasks_blocked()
            assert _connections(tb) == 0
            left = tracemalloc.get_traced_memory()[0] - baseline
        finally:
            tracemalloc.stop()
            gc.enable()
        assert held < 50 * MB, f"ten 100 MB prefixes held {held:,} bytes"
        assert held < 2 * MB  # in fact: ten 64 KiB first chunks and the connections themselves
        assert left < 256 * 1024, f"{left:,} bytes still held after the connections closed"
        stats = channel.statistics()
        assert stats.memory_pool_used == 0 and stats.tasks_waiting_memory == 0


def _produce_frame(correlation_id: int, topic_id, value: bytes) -> bytes:
    batch = build_batch([(b"k", value, [], 1_700_000_000_000)])
    body = build(
        PRODUCE.request_type, transactional_id=None, acks=1, timeout=30_000,
        topic_data=[{"name": "big", "topic_id": topic_id, "partition_data": [{"index": 0, "records": batch}]}],
    )
    return encode_request(PRODUCE, correlation_id, body, "big-producer")


async def test_five_50_mb_produces_through_a_64_mib_pool(autojump_clock):
    """Served one or two at a time, none refused, none lost; the pool's high-water mark is
    at most the pool plus one frame (non-strict: a frame is let in while any byte is free)."""
    config = dict(
        queued_max_request_bytes=64 * MiB, socket_request_max_bytes=60 * MiB, message_max_bytes=60 * MiB,
    )
    async with open_test_broker(**config) as tb:
        async with tb.client() as admin:
            created = await create_topic(admin, "big", 1)
        in_handler = 0
        most_in_handler = 0
        original = tb.broker.path.apis.handlers[0]

        async def produce(request):
            nonlocal in_handler, most_in_handler
            in_handler += 1
            most_in_handler = max(most_in_handler, in_handler)
            try:
                await trio.sleep(1)  # a slow disk: the pool stays spent a while (virtual time)
                return await original(request)
            finally:
                in_handler -= 1

        tb.broker.path.apis.handlers[0] = produce
        value = bytes(range(256)) * (50 * MB // 256)
        frames = [_produce_frame(i, created.topic_id, value) for i in range(5)]
        size = len(frames[0]) - 4
        answers: dict[int, object] = {}

        async def producer(i: int) -> None:
            stream = await tb.connect(f"10.0.1.{i}")
            await stream.send_all(frames[i])
            (raw,) = await read_frames(stream, 1)
            answers[i] = decode_response(PRODUCE, raw)
            await stream.aclose()

        async with trio.open_nursery() as producers:
            for i in range(5):
                producers.start_soon(producer, i)

        for i in range(5):
            correlation_id, response = answers[i]
            assert correlation_id == i
            (partition,) = response.responses[0].partition_responses
            assert partition.error_code == ErrorCode.none, partition
        log = tb.broker.replica_manager.get_log("big", 0)
        assert log.high_watermark.value == 5  # none lost
        stats = tb.broker.path.request_channel.statistics()
        assert 1 <= most_in_handler <= 2
        assert stats.memory_pool_waits >= 3  # the others waited, muted
        assert stats.memory_pool_high_water <= 64 * MiB + size  # Kafka's non-strict bound
        assert (stats.memory_pool_used, stats.tasks_waiting_memory) == (0, 0)
