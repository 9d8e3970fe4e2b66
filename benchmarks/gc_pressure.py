"""How often the broker's garbage collector runs under a busy-polling consumer, and for how long.

``python -m benchmarks.gc_pressure [--messages 4000] [--fetch-wait-ms 0]``. A broker
(``open_broker``, memory logs) runs in a child process with ``gc.callbacks`` timing every
collection; the parent runs ``make bench``'s latency loop against it (confluent-kafka, one
100-byte message at a time, ``fetch.wait.max.ms=0``: the busy poll; 100 for the long-poll
row). Prints the collections per generation during the loop, their median and longest
pause, and the loop's latency.

Why it matters: a collection pauses every connection, and objects that outlive the
generation-0 threshold (700 tracked allocations) make one every few dozen requests. In the
busy-poll loop each pause lands inside one message's round trip. The broker's start-up
objects are frozen first (``gc.freeze``, as the CLI does), so only what requests leave
behind is counted.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

__all__ = ["main", "measure"]

BROKER = r"""
import gc, json, sys, time
import trio
from trikafka import open_broker

pauses = {0: [], 1: [], 2: []}
started = [0.0]

def timed(phase, info):
    if phase == "start":
        started[0] = time.perf_counter()
    else:
        pauses[info["generation"]].append(time.perf_counter() - started[0])

async def main():
    async with open_broker(listeners="PLAINTEXT://127.0.0.1:0") as broker:
        gc.freeze()
        print(broker.bootstrap_servers(), flush=True)
        await trio.to_thread.run_sync(sys.stdin.readline)  # the loop is warm: count from here
        gc.callbacks.append(timed)
        await trio.to_thread.run_sync(sys.stdin.readline)
        gc.callbacks.remove(timed)
        broker.stop()
    print(json.dumps(pauses), flush=True)

trio.run(main)
"""


class _Broker:
    """What ``workloads._latency`` needs of a target: a bootstrap and topic creation."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka.admin import AdminClient

        self.bootstrap = bootstrap
        self._admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})

    def create_topic(self, name: str, partitions: int) -> None:
        from confluent_kafka.admin import NewTopic

        self._admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=30)


def measure(messages: int = 4000, fetch_wait_ms: int = 0) -> dict:
    from benchmarks.workloads import Settings, _latency

    child = subprocess.Popen(
        [sys.executable, "-c", BROKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        broker = _Broker(child.stdout.readline().strip())  # type: ignore[union-attr]
        _latency(broker, Settings(), 200, 0)  # connections, topic metadata, first fetches
        child.stdin.write("\n")  # type: ignore[union-attr]
        child.stdin.flush()  # type: ignore[union-attr]
        started = time.perf_counter()
        latency = _latency(broker, Settings(), messages, fetch_wait_ms)
        seconds = time.perf_counter() - started
        child.stdin.write("\n")  # type: ignore[union-attr]
        child.stdin.flush()  # type: ignore[union-attr]
        pauses = json.loads(child.stdout.readline())  # type: ignore[union-attr]
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    return {"messages": messages, "seconds": seconds, "latency": latency, "pauses": pauses}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=4000)
    parser.add_argument("--fetch-wait-ms", type=int, default=0, help="the consumer's fetch.wait.max.ms (0: busy poll)")
    args = parser.parse_args()
    result = measure(args.messages, args.fetch_wait_ms)
    print(f"loop with fetch.wait.max.ms={args.fetch_wait_ms}: {result['messages']:,} messages in "
          f"{result['seconds']:.1f} s; "
          f"p50 {result['latency']['p50_ms']:.3f} ms, p99 {result['latency']['p99_ms']:.3f} ms")
    print("| generation | collections | per 1,000 messages | median pause µs | longest µs |")
    print("|---|---:|---:|---:|---:|")
    for generation, pauses in sorted(result["pauses"].items()):
        pauses = sorted(pauses)
        median = f"{pauses[len(pauses) // 2] * 1e6:.0f}" if pauses else "-"
        longest = f"{pauses[-1] * 1e6:.0f}" if pauses else "-"
        print(f"| {generation} | {len(pauses)} | {len(pauses) * 1000 / result['messages']:.1f} "
              f"| {median} | {longest} |")


if __name__ == "__main__":
    main()
