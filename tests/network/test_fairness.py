"""One greedy client must not hold the broker's loop, over real sockets.

A request served from bytes already read needs no read, and a small answer written to a
socket with room takes no checkpoint; what gives everyone else a turn is the card's shape:
every request goes through the shared request channel to a handler task and its answer
comes back through the connection's capacity-1 channel. Over the in-memory transport every
write is a checkpoint, so only a real socket shows what a client pipelining a buffer full of
requests would do to everyone else.
"""

from __future__ import annotations

import os

import trio

from trikafka import open_broker
from trikafka.testing.frames import api_versions_frame, read_frames


async def test_a_pipelining_client_does_not_hold_the_loop():
    order: list[int] = []
    async with open_broker(listeners="PLAINTEXT://127.0.0.1:0") as broker:
        original = broker.path.apis.handlers[18]

        lone = api_versions_frame(10_000)

        async def noted(request):
            order.append(request.correlation_id)
            if request.correlation_id == 1:  # the greedy burst is being served: now the other
                assert os.write(other.socket.fileno(), lone) == len(lone)
            return await original(request)

        broker.path.apis.handlers[18] = noted
        greedy = await trio.open_tcp_stream("127.0.0.1", broker.port)
        other = await trio.open_tcp_stream("127.0.0.1", broker.port)
        for stream, cid in ((greedy, 100_000), (other, 100_001)):  # both accepted and served
            await stream.send_all(api_versions_frame(cid))
            await read_frames(stream, 1)
        order.clear()
        # 200 frames in one burst (one plain system call: the broker reads them in one
        # receive); the other client's request is written while the second of them is
        # being handled (above).
        burst = b"".join(api_versions_frame(i) for i in range(200))
        assert os.write(greedy.socket.fileno(), burst) == len(burst)
        await read_frames(other, 1)
        await read_frames(greedy, 200)
        await greedy.aclose()
        await other.aclose()
    served_before = order.index(10_000)
    assert served_before <= 8, f"{served_before} of the greedy client's requests went first"
