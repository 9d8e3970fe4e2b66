"""The Trio client in memory, in virtual time: linger.ms and transactions, exactly.

Run it with pytest (pytest-trio, trio_mode = true): ``pytest examples/test_trio_producer.py``.
"""

import pytest
import trio

from trikafka.client import open_producer
from trikafka.testing import open_test_broker


async def test_linger_and_transactions(autojump_clock):
    async with open_test_broker() as broker:  # in memory: no sockets
        async with open_producer(broker, transactional_id="t", linger_ms=200) as producer:
            async with producer.transaction():
                start = trio.current_time()
                record = await producer.send("events", b"one", key=b"k")
                assert trio.current_time() - start == pytest.approx(0.200)  # linger.ms, exactly
            with pytest.raises(KeyError):
                async with producer.transaction():
                    await producer.send("events", b"two", key=b"k")
                    raise KeyError("aborts the transaction")
        assert record.offset == 0
