"""Acceptor hand-off and connection quotas."""

from __future__ import annotations

import trio
import trio.testing

from trikafka.metrics import BrokerMetrics
from trikafka.network.acceptor import Acceptor
from trikafka.network.processor import CONNECTION_QUEUE_SIZE, Processor, ProcessorSettings
from trikafka.network.quotas import ConnectionQuotas
from trikafka.network.request_channel import RequestChannel
from trikafka.testing import MemoryListener, open_test_broker
from trikafka.testing.frames import api_versions_frame, read_frames, read_until_closed


def _processors(count: int, registry) -> list[Processor]:
    channel = RequestChannel(10)
    quotas = ConnectionQuotas(100, 100, {})
    return [
        Processor(
            i,
            "PLAINTEXT",
            settings=ProcessorSettings(),
            registry=registry,
            request_channel=channel,
            quotas=quotas,
            metrics=BrokerMetrics(),
        )
        for i in range(count)
    ]


def _acceptor(processors: list[Processor]) -> Acceptor:
    return Acceptor("PLAINTEXT", MemoryListener(), processors, ConnectionQuotas(100, 100, {}), BrokerMetrics())


def _queued(processor: Processor) -> int:
    return processor.new_connections_send.statistics().current_buffer_used


async def test_new_connections_go_round_robin(registry):
    processors = _processors(3, registry)
    acceptor = _acceptor(processors)
    chosen = [(await acceptor.assign_new_connection(object())).id for _ in range(7)]
    assert chosen == [0, 1, 2, 0, 1, 2, 0]


async def test_full_processor_queue_falls_back_to_the_next(registry):
    processors = _processors(3, registry)
    acceptor = _acceptor(processors)
    for _ in range(CONNECTION_QUEUE_SIZE):
        processors[1].new_connections_send.send_nowait(object())
    acceptor.current_processor_index = 1
    chosen = await acceptor.assign_new_connection(object())
    assert chosen.id == 2  # processor 1 was full: Kafka tries the next without blocking
    assert _queued(processors[1]) == CONNECTION_QUEUE_SIZE
    assert acceptor.current_processor_index == 3


async def test_all_queues_full_blocks_on_the_last_try(autojump_clock, registry):
    processors = _processors(2, registry)
    acceptor = _acceptor(processors)
    for processor in processors:
        for _ in range(CONNECTION_QUEUE_SIZE):
            processor.new_connections_send.send_nowait(object())
    assigned: list[int] = []

    async def assign() -> None:
        assigned.append((await acceptor.assign_new_connection(object())).id)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(assign)
        await trio.testing.wait_all_tasks_blocked()
        assert assigned == []  # it waits: backpressure on accept
        await trio.sleep(1)
        # The last processor tried (index 1) frees a slot; the waiting hand-off lands there.
        processors[1]._new_connections_receive.receive_nowait()
    assert assigned == [1]
    assert acceptor.statistics().blocked_seconds == 1.0


async def test_per_ip_limit_closes_extra_connections(autojump_clock, caplog):
    async with open_test_broker(max_connections_per_ip=2) as tb:
        kept = [await tb.connect("10.0.0.1") for _ in range(2)]
        for stream in kept:
            await stream.send_all(api_versions_frame(1))
            await read_frames(stream, 1)
        extra = [await tb.connect("10.0.0.1") for _ in range(3)]
        for stream in extra:
            assert await read_until_closed(stream) == b""
        # Another address is not affected.
        other = await tb.connect("10.0.0.2")
        await other.send_all(api_versions_frame(2))
        await read_frames(other, 1)
        stats = tb.broker.statistics().connections["PLAINTEXT"]
        assert stats["rejected"] == 3
        assert stats["count"] == 3
        rejected_lines = [r for r in caplog.records if "rejected connection" in r.getMessage()]
        assert len(rejected_lines) == 1  # logged once per burst
        # A closed connection frees its slot.
        await kept[0].aclose()
        await trio.testing.wait_all_tasks_blocked()
        again = await tb.connect("10.0.0.1")
        await again.send_all(api_versions_frame(3))
        await read_frames(again, 1)


async def test_per_ip_override(autojump_clock):
    async with open_test_broker(
        max_connections_per_ip=1, max_connections_per_ip_overrides="10.0.0.9:3,10.0.0.8:0"
    ) as tb:
        favoured = [await tb.connect("10.0.0.9") for _ in range(3)]
        for i, stream in enumerate(favoured):
            await stream.send_all(api_versions_frame(i))
            await read_frames(stream, 1)
        assert await read_until_closed(await tb.connect("10.0.0.9")) == b""
        assert await read_until_closed(await tb.connect("10.0.0.8")) == b""
        plain = await tb.connect("10.0.0.7")
        await plain.send_all(api_versions_frame(9))
        await read_frames(plain, 1)
        assert await read_until_closed(await tb.connect("10.0.0.7")) == b""
        assert tb.broker.statistics().connections["PLAINTEXT"]["rejected"] == 3


async def test_max_connections_across_addresses(autojump_clock):
    async with open_test_broker(max_connections=2) as tb:
        for host in ("10.0.0.1", "10.0.0.2"):
            stream = await tb.connect(host)
            await stream.send_all(api_versions_frame(1))
            await read_frames(stream, 1)
        assert await read_until_closed(await tb.connect("10.0.0.3")) == b""
