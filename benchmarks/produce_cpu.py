"""Broker CPU per MB produced: ``python -m benchmarks.produce_cpu [CHECKOUT] [--sustained GB]``.

Starts ``python -m trikafka --in-memory`` from CHECKOUT (default: this checkout; pass an older
one to compare), produces with confluent-kafka as ``make bench`` does (acks=1, linger.ms=5,
partitions filled one after another: 200,000 x 100 B over 6, 20,000 x 10 KB over 48) and reads
the broker's user + system CPU from ``/proc`` (Linux only). CPU seconds per MB move far less
than MB/s when the machine is shared; the clock tick is 10 ms, so run it a few times.

``--sustained GB`` produces GB of 10 KB messages over 6 partitions instead: far past the dev
broker's retention window (``log.retention.bytes`` 128 MiB per partition, checked every
second), so most of the run is the steady state of a broker that lets go of as much as it
takes in. It also prints the broker's minor page faults per GB: one per 4 KiB is all new
memory, none is memory reused.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["cpu_seconds", "main"]

SHAPES = ((100, 200_000, 6), (10_000, 20_000, 48))  # value bytes, messages, partitions


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used so far (Linux ``/proc``; 10 ms ticks)."""
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def minor_faults(pid: int) -> int:
    """Minor page faults of a process so far: each a page of memory touched for the first time."""
    return int(_stat(pid)[7])


def main(argv: list[str] | None = None) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    parser = argparse.ArgumentParser(prog="python -m benchmarks.produce_cpu")
    parser.add_argument("checkout", nargs="?", default=None, help="trikafka checkout to run")
    parser.add_argument("--sustained", type=float, default=None, metavar="GB",
                        help="produce GB of 10 KB messages past the retention window instead")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    root = Path(args.checkout) if args.checkout else Path(__file__).resolve().parent.parent
    shapes = SHAPES if args.sustained is None else ((10_000, int(args.sustained * 1e5), 6),)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    port = _free_port()
    bootstrap = f"127.0.0.1:{port}"
    broker = subprocess.Popen(
        [sys.executable, "-m", "trikafka", "--in-memory", "--log-level", "WARNING",
         "--listeners", f"PLAINTEXT://{bootstrap}"],
        cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 1).close()
                break
            except OSError:
                if time.monotonic() > deadline or broker.poll() is not None:
                    raise
                time.sleep(0.1)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for size, count, partitions in shapes:
            topic = f"cpu-{size}"
            admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result()
            producer = Producer({
                "bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5,
                "queue.buffering.max.messages": count, "queue.buffering.max.kbytes": 2**21,
            })
            value, per = b"x" * size, count // partitions
            before, start = cpu_seconds(broker.pid), time.perf_counter()
            faults = minor_faults(broker.pid)
            for i in range(count):
                while True:
                    try:
                        producer.produce(topic, value, partition=min(i // per, partitions - 1))
                        break
                    except BufferError:
                        producer.poll(0.01)
            left = producer.flush(120)
            wall = time.perf_counter() - start
            used = cpu_seconds(broker.pid) - before
            faults = minor_faults(broker.pid) - faults
            mb = size * count / 1e6
            print(
                f"{root.name}: {size:>6} B x {count}: broker CPU {used:.2f} s = "
                f"{used / mb * 1000:.1f} ms/MB ({used / count * 1e6:.2f} µs/msg); "
                f"wall {mb / wall:.1f} MB/s; {faults / mb * 1000:,.0f} page faults/GB; "
                f"undelivered {left}; "
                f"load {os.getloadavg()[0]:.2f}"
            )
    finally:
        broker.terminate()
        broker.wait(10)


if __name__ == "__main__":
    main()
