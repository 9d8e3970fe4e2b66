"""ApiVersions requests/s against a broker over K connections (a simple load, not the suite).

Each connection keeps ``--depth`` requests pipelined (the broker answers one at a time per
connection; the rest wait in the socket buffer), so the client is rarely the bottleneck.

    python benchmarks/api_versions_rate.py --connections 16 --seconds 5          # starts a broker
    python benchmarks/api_versions_rate.py --bootstrap 127.0.0.1:9092           # uses yours
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from trikafka.testing.frames import api_versions_frame  # noqa: E402
from trikafka.testing.process import broker_process  # noqa: E402


def _worker(host: str, port: int, depth: int, stop_at: float, counts: list[int], index: int) -> None:
    sock = socket.create_connection((host, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    frame = api_versions_frame(1)
    sock.sendall(frame * depth)
    buffer = bytearray()
    done = 0
    while time.monotonic() < stop_at:
        data = sock.recv(1 << 16)
        if not data:
            break
        buffer += data
        answered = 0
        while len(buffer) >= 4:
            (size,) = struct.unpack_from(">i", buffer)
            if len(buffer) < 4 + size:
                break
            del buffer[: 4 + size]
            answered += 1
        done += answered
        if answered:
            sock.sendall(frame * answered)
    counts[index] = done
    sock.close()


def measure(host: str, port: int, connections: int, depth: int, seconds: float) -> float:
    counts = [0] * connections
    stop_at = time.monotonic() + seconds
    threads = [
        threading.Thread(target=_worker, args=(host, port, depth, stop_at, counts, i))
        for i in range(connections)
    ]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / (time.monotonic() - start)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--depth", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    if args.bootstrap:
        host, port = args.bootstrap.rsplit(":", 1)
        rate = measure(host, int(port), args.connections, args.depth, args.seconds)
    else:
        with broker_process("--in-memory", "--log-level", "WARNING") as broker:
            measure(broker.host, broker.port, args.connections, args.depth, 1.0)  # warm-up
            rate = measure(broker.host, broker.port, args.connections, args.depth, args.seconds)
    print(f"ApiVersions v3, {args.connections} connections, depth {args.depth}: {rate:,.0f} requests/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
