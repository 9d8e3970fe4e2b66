"""A Trio test (pytest-trio) with ``trikafka_broker``: in memory, under the test's MockClock.

Run: ``pytest examples/pytest_trio_broker.py`` (trio_mode, or mark the test ``@pytest.mark.trio``).
"""

import trio
from kio.schema.metadata.v12.request import MetadataRequest


async def test_a_slow_broker_in_virtual_time(trikafka_broker, autojump_clock):
    trikafka_broker.add_latency(30.0, api="Metadata")  # 30 s, on trio's clock
    async with trikafka_broker.client() as client:
        start = trio.current_time()
        await client.request(
            MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        )
        assert trio.current_time() - start == 30.0  # and the test took milliseconds
    assert [r.api for r in trikafka_broker.recorded()] == ["Metadata"]
