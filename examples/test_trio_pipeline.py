"""The pipeline example under MockClock: a minute of virtual time in milliseconds.

Run it with pytest (pytest-trio, trio_mode = true): ``pytest examples/test_trio_pipeline.py``.
"""

import trio
from trio_pipeline import run_pipeline, seed

from trikafka.client.cluster import TopicPartition
from trikafka.client.consumer import open_consumer
from trikafka.testing import open_test_broker


async def test_pipeline_transforms_every_record_once(autojump_clock):
    async with open_test_broker(num_partitions=3) as tb:  # in-memory listener, no sockets
        await seed(tb, "words", 30)
        start = trio.current_time()
        assert await run_pipeline(tb, input_topic="words", output_topic="shouted", idle_timeout_s=10) == 30
        assert trio.current_time() - start >= 10  # virtual seconds, elapsed in milliseconds

        out = []
        async with open_consumer(tb, isolation_level="read_committed", auto_offset_reset="earliest") as reader:
            reader.assign([TopicPartition("shouted", p) for p in range(3)])
            while len(out) < 30:
                batches = await reader.getmany(timeout_ms=1000)
                out += [r.value for records in batches.values() for r in records]
        assert sorted(out) == sorted(b"WORD-%d!" % i for i in range(30))
