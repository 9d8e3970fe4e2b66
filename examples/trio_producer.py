"""The Trio client over TCP: create a topic, produce keyed records in a transaction.

Run a broker (``python -m trikafka``), then ``python examples/trio_producer.py 127.0.0.1:9092``.
"""

import sys

import trio

from trikafka.client import NewTopic, open_admin, open_producer


async def main(bootstrap: str) -> None:
    async with open_admin(bootstrap) as admin:
        await admin.create_topics([NewTopic("greetings", num_partitions=3)])
    async with open_producer(bootstrap, transactional_id="greeter", compression_type="zstd") as producer:
        async with producer.transaction():  # commits here; an exception would abort
            for name in ("ada", "grace", "linus"):
                record = await producer.send("greetings", f"hello {name}", key=name)
                print(record.topic, record.partition, record.offset)


trio.run(main, sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:9092")
