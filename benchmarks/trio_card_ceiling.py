"""The card-shaped Trio ceiling: the fastest server Trio can be *in trikafka's shape*.

The bare ceiling (``trio_ceiling.py``) answers in the connection's own task. This one keeps
that server's protocol — 4-byte length-prefixed frames, each answered with the same fixed
frame, one request in flight per connection — but moves every request along the card's
tree, exactly as trikafka's request path does, with nothing else (no parsing, no metrics)::

    acceptor ──newConnections (open_memory_channel(20) per processor, round-robin)──▶
    processor ──▶ connection task ──shared open_memory_channel(queued.max.requests)──▶
    handler task (num.io.threads) ──connection's open_memory_channel(1)──▶ connection: write

A connection reads a frame, sends it into the shared channel, awaits its answer on its
capacity-1 channel, writes it, and only then looks at its next frame (the mute). As in
trikafka, a connection tries ``send_nowait`` before awaiting ``send`` and handlers drain with
``receive_nowait`` before awaiting ``receive``. What trikafka adds on top of
*this* — headers, kio, the APIs, metrics, quotas — is what separates it from this ceiling;
the distance to the bare ceiling is the price of the shape itself.

Protocol with the parent: prints ``READY 127.0.0.1:<port> <startup_ms>`` once listening;
exits when stdin reaches EOF (or on SIGTERM).
"""

from __future__ import annotations

import time

_T0 = time.perf_counter()

import sys  # noqa: E402

import trio  # noqa: E402

from benchmarks.trio_ceiling import REPLY, announce_and_serve, run  # noqa: E402

__all__ = ["HANDLERS", "PROCESSORS", "QUEUED_MAX_REQUESTS", "main"]

# trikafka's defaults (num.network.threads, num.io.threads, queued.max.requests).
PROCESSORS = 3
HANDLERS = 8
QUEUED_MAX_REQUESTS = 500
CONNECTION_QUEUE_SIZE = 20
_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError)


async def connection(stream: trio.SocketStream, requests: trio.MemorySendChannel) -> None:
    responses_send, responses = trio.open_memory_channel(1)  # the mute
    send_nowait = requests.send_nowait
    send_request = requests.send
    receive_response = responses.receive
    buffer = bytearray()
    start = 0
    try:
        while True:
            while len(buffer) - start >= 4:
                size = int.from_bytes(buffer[start : start + 4], "big")
                if len(buffer) - start < 4 + size:
                    break
                frame = bytes(buffer[start + 4 : start + 4 + size])
                start += 4 + size
                try:  # as trikafka's connection: wait in send only while the channel is full
                    send_nowait((frame, responses_send))
                except trio.WouldBlock:
                    await send_request((frame, responses_send))
                answer = await receive_response()
                await stream.send_all(answer)
            if start:
                del buffer[:start]
                start = 0
            data = await stream.receive_some(65536)
            if not data:
                return
            buffer += data
    except _ERRORS:
        return
    finally:
        responses.close()
        await trio.aclose_forcefully(stream)


async def handler(requests: trio.MemoryReceiveChannel) -> None:
    receive_nowait = requests.receive_nowait
    receive = requests.receive
    while True:
        try:
            _frame, respond = receive_nowait()
        except trio.WouldBlock:
            try:
                _frame, respond = await receive()
            except trio.EndOfChannel:
                return
        try:
            respond.send_nowait(REPLY)
        except _ERRORS:
            pass  # the connection went away


async def processor(new_connections: trio.MemoryReceiveChannel, requests: trio.MemorySendChannel) -> None:
    async with trio.open_nursery() as nursery:
        async for stream in new_connections:
            nursery.start_soon(connection, stream, requests)


async def acceptor(listener: trio.SocketListener, processors: list[trio.MemorySendChannel]) -> None:
    index = 0
    count = len(processors)
    while True:
        stream = await listener.accept()
        for attempt in range(count):  # round-robin; await only on the last try
            target = processors[(index + attempt) % count]
            if attempt == count - 1:
                await target.send(stream)
            else:
                try:
                    target.send_nowait(stream)
                except trio.WouldBlock:
                    continue
            index = (index + attempt + 1) % count
            break


async def _main() -> None:
    requests_send, requests = trio.open_memory_channel(QUEUED_MAX_REQUESTS)
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    async with trio.open_nursery() as nursery:
        for _ in range(HANDLERS):
            nursery.start_soon(handler, requests)
        channels = []
        for _ in range(PROCESSORS):
            send, receive = trio.open_memory_channel(CONNECTION_QUEUE_SIZE)
            channels.append(send)
            nursery.start_soon(processor, receive, requests_send)
        nursery.start_soon(acceptor, listeners[0], channels)
        await announce_and_serve(listeners, nursery, _T0)


def main() -> int:
    return run(_main)


if __name__ == "__main__":
    sys.exit(main())
