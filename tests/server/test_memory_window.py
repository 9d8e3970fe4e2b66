"""``--in-memory``'s window: with its settings (``cli.MEMORY_DEFAULTS``, scaled down 1024
times so the test produces a few hundred KB), an in-memory partition stays bounded while
produce goes on, and Kafka's retention moves the log start offset."""

from __future__ import annotations

import trio

from trikafka.cli import MEMORY_DEFAULTS
from trikafka.errors import ErrorCode
from trikafka.protocol.records import build_batch
from trikafka.testing import open_test_broker

from .test_topics_and_data import create_topic, produce

SCALE = 1024
RETENTION = int(MEMORY_DEFAULTS["log.retention.bytes"]) // SCALE
SEGMENT = int(MEMORY_DEFAULTS["log.segment.bytes"]) // SCALE
CHECK_MS = int(MEMORY_DEFAULTS["log.retention.check.interval.ms"])


async def test_an_in_memory_partition_keeps_a_bounded_window(autojump_clock):
    settings = {
        "log.retention.bytes": RETENTION,
        "log.segment.bytes": SEGMENT,
        "log.retention.check.interval.ms": CHECK_MS,
    }
    async with open_test_broker(**settings) as tb, tb.client() as client:
        created = await create_topic(client, "window")
        batch = build_batch([(None, b"x" * 1000, [], 0)])
        largest = 0
        for _ in range(8):  # 8 x 100 KB produced, well past the window
            for _ in range(100):
                response = await produce(client, 9, "window", created.topic_id, 0, batch, acks=1)
                assert response.responses[0].partition_responses[0].error_code == ErrorCode.none
            await trio.sleep(CHECK_MS / 1000)  # virtual time: one retention check runs
            log = tb.partition_log("window", 0)
            largest = max(largest, log.size_in_bytes)
        assert log.log_start_offset > 0
        assert log.log_end_offset == 800
        # retention + the oldest kept segment + the active one, plus what arrived in between
        assert largest <= RETENTION + 2 * SEGMENT + 100 * len(batch)
