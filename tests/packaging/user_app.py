"""A user's program against the installed package: a broker, a producer and a consumer.

``tests/packaging/test_wheel.py`` copies it into a venv that holds the wheel alone, runs it there
(``python user_app.py HOST:PORT`` against the broker process the test started; without an
argument it opens a broker of its own) and type-checks it with ``mypy --strict``, as a user of
the package would.
"""

from __future__ import annotations

import sys

import trio

from trikafka import open_broker
from trikafka.client import TopicPartition, open_consumer, open_producer

TOPIC = "from-the-wheel"


async def round_trip(bootstrap_servers: str, value: bytes) -> list[object]:
    """Produce ``value`` to partition 0 of :data:`TOPIC`, then read that partition from the start."""
    async with open_producer(bootstrap_servers) as producer:
        await producer.send(TOPIC, value, key=b"user", partition=0)
    partition = TopicPartition(TOPIC, 0)
    values: list[object] = []
    async with open_consumer(bootstrap_servers, auto_offset_reset="earliest") as consumer:
        consumer.assign([partition])
        with trio.fail_after(30):
            while not values:
                batches = await consumer.getmany(timeout_ms=1000)
                values.extend(record.value for record in batches.get(partition, []))
    return values


async def main() -> None:
    value = b"hello"
    if len(sys.argv) > 1:
        values = await round_trip(sys.argv[1], value)
    else:
        async with open_broker(listeners="PLAINTEXT://127.0.0.1:0", log_dirs="") as broker:
            values = await round_trip(broker.bootstrap_servers, value)
    assert values == [value], values
    print(f"round trip: {values!r}")


if __name__ == "__main__":
    trio.run(main)
