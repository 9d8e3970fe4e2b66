"""The Trio ceiling: the fastest request/response server Trio can be on this machine.

It speaks only 4-byte big-endian length-prefixed frames, answers each with the same fixed
frame, and — like a Kafka broker with its mute — handles one request at a time per
connection: read a frame, write its answer, then look at the next. No parsing, no queues, no
tasks besides one per connection. Whatever trikafka adds on top of this (headers, kio,
the request channel, handler tasks, metrics) is what separates it from the ceiling.

Protocol with the parent: prints ``READY 127.0.0.1:<port> <startup_ms>`` once listening
(startup_ms: from before ``import trio`` to listening); exits when stdin reaches EOF (or on
SIGTERM).
"""

from __future__ import annotations

import time

_T0 = time.perf_counter()

import functools  # noqa: E402
import sys  # noqa: E402
from collections.abc import Awaitable, Callable  # noqa: E402

import trio  # noqa: E402

__all__ = ["REPLY", "announce_and_serve", "main", "run", "serve_connection"]

# A fixed answer frame: size 8, correlation id 0, an empty tagged-field byte and 3 zero bytes.
REPLY = (8).to_bytes(4, "big") + bytes(8)


async def serve_connection(stream: trio.SocketStream) -> None:
    buffer = bytearray()
    start = 0
    try:
        while True:
            # Answer every whole frame already buffered, one at a time.
            while len(buffer) - start >= 4:
                size = int.from_bytes(buffer[start : start + 4], "big")
                if len(buffer) - start < 4 + size:
                    break
                start += 4 + size
                await stream.send_all(REPLY)
            if start:
                del buffer[:start]
                start = 0
            data = await stream.receive_some(65536)
            if not data:
                return
            buffer += data
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return


async def _main() -> None:
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, serve_connection, 0, host="127.0.0.1")
        )
        await announce_and_serve(listeners, nursery, _T0)


async def announce_and_serve(listeners: list[trio.SocketListener], nursery: trio.Nursery, t0: float) -> None:
    """Print ``READY host:port startup_ms`` (from ``t0``), serve until stdin reaches EOF (the
    parent's "stop"), then cancel ``nursery``: the protocol of both ceilings."""
    host, port = listeners[0].socket.getsockname()[:2]
    print(f"READY {host}:{port} {(time.perf_counter() - t0) * 1000:.3f}", flush=True)
    await trio.to_thread.run_sync(sys.stdin.read, abandon_on_cancel=True)
    nursery.cancel_scope.cancel()


def run(entry: Callable[[], Awaitable[None]]) -> int:
    """``trio.run(entry)``; Ctrl-C is a normal stop."""
    try:
        trio.run(entry)
    except KeyboardInterrupt:
        pass
    return 0


def main() -> int:
    return run(_main)


if __name__ == "__main__":
    sys.exit(main())
