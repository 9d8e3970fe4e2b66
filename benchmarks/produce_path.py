"""The broker's produce path in process: ``python -m benchmarks.produce_path [--file] [--profile SHAPE]``.

Not part of ``make bench`` (no socket, no client): an embedded broker's Produce handler is
called with decoded requests of a few shapes — one partition or six, 100-byte or 10 KB
records, and six one-record partitions where the per-partition Python is all there is — and
timed per request, the request's decode and the response's encode included. CPU time of this
process (``process_time``), best of ``--rounds``, with the cost per request, per partition and
per record beside CPU seconds per GB, so a change to validation, the append or the handler's
loop shows without the network path and the client around it. Each round writes ~100 MB to a
topic of its own and deletes it after, so later rounds reuse the memory the earlier ones let go
of, as a broker does under retention (the first touch of new memory is ``first_touch``'s
figure, not this one's). ``--file`` uses a file log in a temporary directory instead of the
in-memory one; ``--profile SHAPE`` prints cProfile's top
functions for that shape. Compare checkouts with ``PYTHONPATH=<checkout>`` from outside a
checkout, alternating.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import time
import uuid

import trio

from trikafka import open_broker
from trikafka.network.request_channel import Request, open_response_channel
from trikafka.protocol.entities import build
from trikafka.protocol.headers import LastRequest, decode_request, encode_request
from trikafka.protocol.records import build_batch
from trikafka.protocol.registry import ApiRegistry
from trikafka.server.kafka_apis import to_response

__all__ = ["main"]

REGISTRY = ApiRegistry()
PRODUCE = REGISTRY.get(0, 10)
#: name: (value bytes, records per batch, partitions) — librdkafka's batches at linger.ms=5
SHAPES = {
    "100B-1p": (100, 5000, 1),
    "100B-6p": (100, 800, 6),
    "10KB-1p": (10_000, 90, 1),
    "10KB-6p": (10_000, 15, 6),
    "1rec-6p": (100, 1, 6),
}
BYTES_PER_ROUND = 100_000_000


def _frame(topic: str, size: int, per: int, partitions: int) -> bytes:
    batch = build_batch([(None, b"x" * size, (), 1 + i) for i in range(per)])
    body = build(
        PRODUCE.request_type, transactional_id=None, acks=1, timeout=30000,
        topic_data=[{"name": topic, "partition_data": [{"index": p, "records": batch} for p in range(partitions)]}],
    )
    return encode_request(PRODUCE, 1, body, "rdkafka")[4:]


async def _run(rounds: int, profile: str | None, data_dir: str | None) -> None:
    overrides: dict[str, object] = {"listeners": "PLAINTEXT://127.0.0.1:0"}
    if data_dir is not None:
        overrides["log.dirs"] = data_dir
    async with open_broker(**overrides) as broker:
        apis = broker.path.apis
        send, receive = open_response_channel()
        for name, (size, per, partitions) in SHAPES.items():
            if profile and name != profile:
                continue
            body = _frame("t", size, per, partitions)

            def request(body: bytes = body) -> Request:
                decoded = decode_request(body, REGISTRY, LastRequest())
                return Request(
                    processor=0, connection_id="bench", listener_name="PLAINTEXT", client_host="127.0.0.1",
                    header=decoded.header, body=decoded.body, spec=decoded.spec, size=len(body),
                    response_send=send, principal="User:ANONYMOUS", start_time=time.perf_counter(),
                )

            count = min(max(200, BYTES_PER_ROUND // len(body)), 20_000)
            profiler = cProfile.Profile() if profile else None
            best = float("inf")
            for _ in range(rounds):
                topic = f"bench-{uuid.uuid4().hex[:8]}"  # a new topic per round: memory let go
                broker.replica_manager.create_topic(topic, partitions, 1)
                body = _frame(topic, size, per, partitions)
                await apis.handle(request(body))  # lazy parts built here, not timed
                receive.receive_nowait()
                handler = apis.handlers[0]
                start = time.process_time()
                if profiler is not None:
                    profiler.enable()
                for _ in range(count):
                    req = request(body)
                    to_response(req, await handler(req))
                if profiler is not None:
                    profiler.disable()
                best = min(best, (time.process_time() - start) / count)
                broker.replica_manager.delete_topic(topic)
            us = best * 1e6
            print(
                f"{name:8} {len(body) / 1e3:7.1f} KB/request: {us:7.1f} µs/request, "
                f"{best / len(body) * 1e9:6.3f} s/GB, {us / partitions:6.1f} µs/partition, "
                f"{us / partitions / per * 1e3:8.1f} ns/record"
            )
            if profiler is not None:
                pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
        broker.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.produce_path")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", choices=sorted(SHAPES), help="cProfile this shape alone")
    parser.add_argument("--file", action="store_true", help="a file log (temporary directory)")
    args = parser.parse_args(argv)
    if args.file:
        with tempfile.TemporaryDirectory(prefix="trikafka-produce-path-") as directory:
            trio.run(_run, args.rounds, args.profile, directory)
    else:
        trio.run(_run, args.rounds, args.profile, None)


if __name__ == "__main__":
    main()
