"""Metrics carry Kafka's names and measure on trio's clock."""

from __future__ import annotations

import pytest
import trio

from trikafka.metrics import TIME_PARTS
from trikafka.testing import open_test_broker
from trikafka.testing.frames import api_versions_frame, read_frames


async def test_total_time_split_in_virtual_time(autojump_clock):
    async with open_test_broker() as tb:
        original = tb.broker.apis.handlers[18]

        async def slow(request):
            await trio.sleep(0.25)  # 250 ms of local time, on the MockClock
            return await original(request)

        tb.broker.apis.handlers[18] = slow
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
