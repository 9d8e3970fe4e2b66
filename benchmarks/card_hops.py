"""What the card's hand-offs cost, and what each speed-up inside the shape saves.

``python -m benchmarks.card_hops``. No sockets, no Kafka: ``connections`` tasks each hand a
token through a shared ``trio.open_memory_channel(500)`` to 8 handler tasks and await it
back on their own ``trio.open_memory_channel(1)`` — trikafka's request path with nothing
in it. CPU µs per request (``time.process_time``), the best of a few runs, for each variant:

* connection: ``await send`` vs ``send_nowait`` first (``RequestChannel.send_request``);
* handler: ``await receive`` vs ``receive_nowait`` first (``RequestHandlerPool``).

Joining answers into one write is not a variant: with one request in flight per connection
there is never a second answer of the same connection to join (the mute).
"""

from __future__ import annotations

import argparse
import time

import trio

__all__ = ["main", "measure"]

HANDLERS = 8


async def _run(connections: int, requests: int, send_nowait_first: bool, drain: bool) -> float:
    send, receive = trio.open_memory_channel(500)

    async def handler() -> None:
        while True:
            if drain:
                try:
                    token, answer = receive.receive_nowait()
                except trio.WouldBlock:
                    token, answer = await receive.receive()
            else:
                token, answer = await receive.receive()
            answer.send_nowait(token)

    async def connection() -> None:
        answers_send, answers = trio.open_memory_channel(1)
        for i in range(requests // connections):
            if send_nowait_first:
                try:
                    send.send_nowait((i, answers_send))
                except trio.WouldBlock:
                    await send.send((i, answers_send))
            else:
                await send.send((i, answers_send))
            await answers.receive()

    async with trio.open_nursery() as nursery:
        for _ in range(HANDLERS):
            nursery.start_soon(handler)
        await trio.lowlevel.checkpoint()
        start = time.process_time()
        async with trio.open_nursery() as clients:
            for _ in range(connections):
                clients.start_soon(connection)
        cpu = time.process_time() - start
        nursery.cancel_scope.cancel()
    return cpu / requests * 1e6


def measure(requests: int = 40_000, repeats: int = 5) -> dict[str, float]:
    out = {}
    for connections in (1, 16):
        for send_first, drain, name in (
            (False, False, "await send, await receive"),
            (True, False, "send_nowait first, await receive"),
            (True, True, "send_nowait first, receive_nowait first (trikafka)"),
        ):
            best = min(trio.run(_run, connections, requests, send_first, drain) for _ in range(repeats))
            out[f"{connections} conn: {name}"] = best
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=40_000)
    args = parser.parse_args()
    print("| hand-off variant | CPU µs per request |\n|---|---|")
    for name, value in measure(args.requests).items():
        print(f"| {name} | {value:.2f} |")


if __name__ == "__main__":
    main()
