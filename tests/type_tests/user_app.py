"""A small application as a user writes it: a broker, a producer and a consumer.

``mypy --strict`` passes over it (``make typecheck``, ``tests/type_tests/test_public_api_types.py``):
what a user of the installed package gets from trikafka's annotations (``py.typed``).
"""

from __future__ import annotations

import json

import trio

from trikafka import open_broker
from trikafka.client import ConsumerRecord, open_consumer, open_producer


def decode(raw: bytes) -> dict[str, int]:
    loaded: dict[str, int] = json.loads(raw)
    return loaded


async def main() -> list[int]:
    async with open_broker(listeners="PLAINTEXT://127.0.0.1:0", num_partitions=1) as broker:
        async with open_producer(broker, value_serializer=lambda v: json.dumps(v).encode()) as producer:
            for n in range(3):
                metadata = await producer.send("numbers", {"n": n}, key=str(n).encode())
                print(f"wrote offset {metadata.offset} of {metadata.topic}-{metadata.partition}")
        seen: list[int] = []
        async with open_consumer(broker, group_id="app", auto_offset_reset="earliest") as consumer:
            consumer.subscribe(["numbers"])
            with trio.move_on_after(10):
                async for record in consumer:
                    seen.append(number(record))
                    if len(seen) == 3:
                        break
        return seen


def number(record: ConsumerRecord) -> int:
    if record.value is None:
        raise ValueError(f"a tombstone at offset {record.offset}")
    return decode(record.value)["n"]


if __name__ == "__main__":
    print(trio.run(main))
