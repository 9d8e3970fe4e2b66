"""Metrics carry Kafka's names and measure on trio's clock."""

from __future__ import annotations

import pytest
import trio

from trikafka.metrics import TIME_PARTS
from trikafka.testing import open_test_broker
from trikafka.testing.frames import api_versions_frame, read_frames


async def test_total_time_split_in_virtual_time(autojump_clock):
    async with open_test_broker() as tb:
        original = tb.broker.path.apis.handlers[18]

        async def slow(request):
            await trio.sleep(0.25)  # 250 ms of local time, on the MockClock
            return await original(request)

        tb.broker.path.apis.handlers[18] = slow
        stream = await tb.connect()
        await stream.send_all(api_versions_frame(1))
        await read_frames(stream, 1)
        await trio.testing.wait_all_tasks_blocked()
        stats = tb.broker.statistics()
        api = stats.requests["ApiVersions"]
        assert api["Requests"] == 1
        assert set(TIME_PARTS) <= set(api)
        assert api["LocalTimeMs"].max == pytest.approx(250.0)
        assert api["TotalTimeMs"].max == pytest.approx(250.0)
        assert api["RequestQueueTimeMs"].max == 0.0
        assert stats.request_queue_size == 0
        assert 0.0 <= stats.request_handler_avg_idle_percent < 1.0
        assert 0.0 <= stats.network_processor_avg_idle_percent <= 1.0
        assert stats.connections["PLAINTEXT"]["count"] == 1
        assert stats.connections["PLAINTEXT"]["created"] == 1


def test_request_times_split_into_the_six_parts_in_milliseconds():
    """RequestMetrics.record takes the request's timestamps (seconds on trio's clock) and
    keeps each TIME_PARTS histogram: count, mean, max and percentiles within 25 %."""
    from trikafka.metrics import RequestMetrics

    metrics = RequestMetrics()
    for i in range(100):
        start = 10.0 + i
        # queue 1 ms, local 2 ms, remote i ms (a long poll), response queue 0, send 0.5 ms
        dequeued = start + 0.001
        local = dequeued + 0.002
        remote = local + i / 1000
        metrics.record(start, dequeued, local, remote, remote, remote + 0.0005)
    snapshot = metrics.snapshot()
    assert snapshot["Requests"] == 100
    assert snapshot["RequestQueueTimeMs"].mean == pytest.approx(1.0)
    assert snapshot["LocalTimeMs"].max == pytest.approx(2.0)
    assert snapshot["RemoteTimeMs"].max == pytest.approx(99.0)
    assert snapshot["RemoteTimeMs"].mean == pytest.approx(49.5)
    assert 99.0 / 1.25 <= snapshot["RemoteTimeMs"].p99 <= 99.0 + 1e-9
    assert 49.0 / 1.25 <= snapshot["RemoteTimeMs"].p50 <= 50.0 * 1.25
    assert snapshot["ResponseQueueTimeMs"].max == 0.0
    assert snapshot["ResponseSendTimeMs"].mean == pytest.approx(0.5)
    assert snapshot["TotalTimeMs"].max == pytest.approx(1 + 2 + 99 + 0.5)
