"""How long does the broker's event loop stall while a producer fsyncs every batch?

An embedded broker on 127.0.0.1 with file logs and ``log.flush.interval.messages=1`` (each
produce is fsynced before its answer); a probe task in the broker's own trio loop sleeps
1 ms at a time and records how late it wakes (the loop's stall); a producer *process*
(confluent-kafka, acks=all, one message in flight) writes MESSAGES records of SIZE bytes.
Prints the probe's max and p99 lateness and the producer's throughput.

    python -m benchmarks.loop_stall [--messages 3000] [--size 1000] [--inline-fsync]

``--inline-fsync`` makes the broker fsync on the event loop (the log's own inline flush),
for the "before" figure.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time

import trio

from trikafka.broker import open_broker

PRODUCER = r"""
import sys, time
from confluent_kafka import Producer
bootstrap, count, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
              "max.in.flight.requests.per.connection": 1, "enable.idempotence": False})
value = b"x" * size
start = time.perf_counter()
for i in range(count):
    p.produce("stall", value)
    p.flush()
print(count / (time.perf_counter() - start))
"""


async def main(messages: int, size: int, inline: bool) -> None:
    lateness: list[float] = []
    with tempfile.TemporaryDirectory() as data:
        async with open_broker(
            {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": data, "log.flush.interval.messages": "1"}
        ) as broker:
            broker.replica_manager.create_topic("stall", 1)
            if inline:  # the "before": fsync where the log appends, on the event loop
                log = broker.log_manager.get_log("stall", 0)
                original = log.append

                def append_and_flush(*args, **kwargs):
                    kwargs["flush_inline"] = True
                    return original(*args, **kwargs)

                log.append = append_and_flush

            async def probe() -> None:
                while True:
                    start = time.perf_counter()
                    await trio.sleep(0.001)
                    lateness.append(time.perf_counter() - start - 0.001)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(probe)
                result = await trio.run_process(
                    [sys.executable, "-c", PRODUCER, broker.bootstrap_servers, str(messages), str(size)],
                    capture_stdout=True,
                )
                nursery.cancel_scope.cancel()
    lateness.sort()
    rate = float(result.stdout.decode().strip())
    print(
        f"{'inline' if inline else 'worker-thread'} fsync: {messages} x {size} B acks=all, "
        f"{rate:.0f} msg/s; loop stall max {lateness[-1] * 1000:.1f} ms, "
        f"p99 {lateness[int(len(lateness) * 0.99)] * 1000:.2f} ms, p50 {lateness[len(lateness) // 2] * 1000:.2f} ms "
        f"({len(lateness)} probes)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--inline-fsync", action="store_true")
    args = parser.parse_args()
    trio.run(main, args.messages, args.size, args.inline_fsync)
