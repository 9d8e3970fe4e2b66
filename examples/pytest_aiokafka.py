"""An asyncio test (pytest-asyncio) of aiokafka code against ``kafka_broker``.

Run: ``pytest examples/pytest_aiokafka.py``. Waits from asyncio go through ``.aio``.
"""

import pytest
from aiokafka import AIOKafkaProducer


@pytest.mark.asyncio
async def test_producer_retries_a_timed_out_request(kafka_broker):
    kafka_broker.inject_error("Produce", "REQUEST_TIMED_OUT", count=1)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers)
    await producer.start()
    try:
        await producer.send_and_wait("events", b"clicked")
    finally:
        await producer.stop()
    assert await kafka_broker.aio.wait_for_high_watermark("events", 0, at_least=1) == 1
