"""A deterministic test: ten minutes of idle time pass in milliseconds under MockClock.

Run it with pytest (pytest-trio, trio_mode = true): ``pytest examples/test_virtual_time.py``.
"""

import trio

from trikafka.testing import open_test_broker
from trikafka.testing.frames import api_versions_frame, read_frames


async def test_idle_connection_is_closed(autojump_clock):
    async with open_test_broker() as tb:  # in-memory listener, no sockets
        stream = await tb.connect()
        await stream.send_all(api_versions_frame(correlation_id=1))
        await read_frames(stream, 1)
        start = trio.current_time()
        assert await stream.receive_some(1) == b""  # closed by the broker...
        assert trio.current_time() - start == 600.0  # ...at connections.max.idle.ms
