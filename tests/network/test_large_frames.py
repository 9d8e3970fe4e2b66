"""Large request frames over a real socket: received into their own (reused) buffer.

Frames of 64 KiB and more skip the shared read buffer (``FrameDecoder.large_frame``) and the
connection receives them with ``recv_into``; the buffer is reused for the next large frame.
Several big produces pipelined on one connection, with small requests between them, must
land byte for byte — a reused buffer overwritten too early, or a frame boundary lost, shows
up as a CRC error or wrong records here.
"""

from __future__ import annotations

import trio

import trikafka
from trikafka.client import connect_tcp
from trikafka.errors import ErrorCode
from trikafka.protocol.records import build_batch

from ..server.test_topics_and_data import create_topic, fetch_request, produce, records_of


async def test_pipelined_large_produces_land_byte_for_byte():
    values = [bytes([i]) * size for i, size in enumerate((70_000, 1_000, 300_000, 65_536, 1_000_000, 10))]
    with trio.fail_after(60):
        async with trikafka.open_broker(listeners="PLAINTEXT://127.0.0.1:0") as broker:
            async with connect_tcp("127.0.0.1", broker.port) as client:
                created = await create_topic(client, "big", 1)
                results: dict[int, object] = {}

                async def send(index: int, value: bytes) -> None:
                    batch = build_batch([(b"k%d" % index, value, [], 1_700_000_000_000)])
                    results[index] = await produce(client, 9, "big", created.topic_id, 0, batch, acks=1)

                async with trio.open_nursery() as nursery:
                    for index, value in enumerate(values):  # all in flight at once, in order
                        nursery.start_soon(send, index, value)
                        await trio.lowlevel.checkpoint()
                for response in results.values():
                    assert response.responses[0].partition_responses[0].error_code == ErrorCode.none
                fetched = []
                offset = 0
                while offset < len(values):
                    response = await client.request(
                        fetch_request(12, "big", created.topic_id, 0, offset, max_bytes=50_000_000,
                                      partition_max_bytes=50_000_000)
                    )
                    got = records_of(response.responses[0].partitions[0].records)
                    fetched.extend(got)
                    offset = got[-1][0] + 1
    assert [offset for offset, _, _ in fetched] == list(range(len(values)))
    assert sorted((key, value) for _, key, value in fetched) == sorted(
        (b"k%d" % i, v) for i, v in enumerate(values)
    )
