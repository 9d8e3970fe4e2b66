"""The pipeline example under MockClock: a minute of virtual time in milliseconds.

Run it with pytest (pytest-trio, trio_mode = true): ``pytest examples/test_trio_pipeline.py``.
"""

from functools import partial

import trio
from trio_pipeline import run_pipeline, seed

from trikafka.client.cluster import TopicPartition
from trikafka.client.consumer import open_consumer
from trikafka.client.producer import open_producer
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


async def test_exactly_once_while_a_member_joins_and_another_leaves(autojump_clock):
    """Two copies of the app in one KIP-848 group: b joins while a works, a leaves while input
    still flows; every input record is in the output once."""
    async with open_test_broker(num_partitions=4) as tb:
        done = {}

        async def member(name, **kw):
            done[name] = await run_pipeline(
                tb, input_topic="words", output_topic="shouted", transactional_id=f"pipeline-{name}", **kw
            )

        async with trio.open_nursery() as nursery, open_producer(tb) as producer:
            nursery.start_soon(partial(member, "a", run_for_s=20))
            for i in range(120):
                if i == 20:
                    nursery.start_soon(partial(member, "b", idle_timeout_s=15))
                await producer.send("words", b"word-%d" % i, key=b"%d" % i)
                await trio.sleep(0.25)  # 30 virtual seconds of input
        assert done["a"] > 0 and done["b"] > 0 and done["a"] + done["b"] == 120

        out = []
        async with open_consumer(tb, isolation_level="read_committed", auto_offset_reset="earliest") as reader:
            reader.assign([TopicPartition("shouted", p) for p in range(4)])
            for _ in range(5):
                batches = await reader.getmany(timeout_ms=1000)
                out += [r.value for records in batches.values() for r in records]
        assert sorted(out) == sorted(b"WORD-%d!" % i for i in range(120))
