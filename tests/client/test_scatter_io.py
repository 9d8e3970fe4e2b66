"""The client connection's copy-free paths over real sockets: a frame of several buffers
written with scatter writes that the kernel takes in pieces, and a large answer received
straight into its buffer."""

from __future__ import annotations

import random
import socket

import trio

from trikafka.broker import open_broker
from trikafka.client import TopicPartition
from trikafka.client.connection import _send_parts
from trikafka.client.consumer import open_consumer
from trikafka.client.producer import open_producer


async def test_a_frame_of_buffers_arrives_whole_through_a_small_send_buffer():
    left, right = trio.socket.socketpair()
    left.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)  # sendmsg takes it in pieces
    parts = [b"head", random.randbytes(3 * 1024 * 1024), bytearray(b"mid"), memoryview(random.randbytes(70_000))]
    expected = b"".join(parts)
    received = bytearray()

    async def read() -> None:
        while len(received) < len(expected):
            received.extend(await right.recv(65536))

    with left, right:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            await _send_parts(left, parts)
    assert received == expected


async def test_large_records_go_out_and_come_back_over_tcp():
    values = [random.randbytes(size) for size in (10, 20_000, 300_000, 1_000_000)] * 3
    async with open_broker() as broker:  # TCP on 127.0.0.1: sendmsg and recv_into, not the in-memory stream
        bootstrap = f"127.0.0.1:{broker.port}"
        async with open_producer(bootstrap, linger_ms=0) as producer:
            for value in values:
                await producer.enqueue("scatter", value, partition=0)
            await producer.flush()

        async with open_consumer(bootstrap, auto_offset_reset="earliest") as consumer:
            consumer.assign([TopicPartition("scatter", 0)])
            got: list[bytes] = []
            with trio.fail_after(30):
                while len(got) < len(values):
                    for records in (await consumer.getmany(timeout_ms=500)).values():
                        got.extend(r.value for r in records)
    assert got == values
