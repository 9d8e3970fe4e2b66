"""How often the broker's garbage collector runs under a busy-polling consumer, and for how long.

``python -m benchmarks.gc_pressure [--messages 4000] [--fetch-wait-ms 0]``. A broker
(``open_broker``, memory logs: ``benchmarks.embedded_broker``) runs in a child process; the
parent runs ``make bench``'s latency loop against it (confluent-kafka, one 100-byte message
at a time, ``fetch.wait.max.ms=0``: the busy poll; 100 for the long-poll row), once to warm
up, then timed while the broker times its collections (``gc-start`` … ``gc-stop``). Prints
the collections per generation during the timed loop, their median and longest pause, and
the loop's latency.

Why it matters: a collection pauses every connection, and objects that outlive the
generation-0 threshold (700 tracked allocations) make one every few dozen requests. In the
busy-poll loop each pause lands inside one message's round trip. What is alive when the
timing starts is frozen first (``gc.freeze``, as the CLI does once it is up), so only what
requests leave behind is counted.
"""

from __future__ import annotations

import argparse
import json
import time

__all__ = ["main", "measure"]


def measure(messages: int = 4000, fetch_wait_ms: int = 0) -> dict:
    from benchmarks.targets import EmbeddedTrikafkaTarget
    from benchmarks.workloads import Settings, _latency

    broker = EmbeddedTrikafkaTarget()
    try:
        _latency(broker, Settings(), 200, fetch_wait_ms)  # connections, metadata, first fetches
        broker.command("gc-start")
        started = time.perf_counter()
        latency = _latency(broker, Settings(), messages, fetch_wait_ms)
        seconds = time.perf_counter() - started
        pauses = json.loads(broker.command("gc-stop"))
    finally:
        broker.stop()
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
