"""Forty bytes no longer hold a gigabyte: a broker process over TCP, its RSS from /proc.

Issue 33's black-box run: ten connections each sending only a 4-byte size prefix of
104,857,600 took a broker from 43 MB to 1.07 GB of RSS, kept after they closed. Here the
same against ``python -m trikafka --in-memory`` with a request memory pool big enough to
let every claim in (so it is the frame decoder alone that is measured): the ten prefixes are
read and reserved (MemoryPoolUsed on /metrics says so), RSS rises by less than 50 MB, and
closing them gives every byte back to the pool.
"""

from __future__ import annotations

import socket
import struct
import time
import urllib.request
from pathlib import Path

import pytest

from trikafka.testing.process import BrokerProcess

CLAIM = 104_857_600  # socket.request.max.bytes' default: the largest a client may claim
POOL = 2 * 1024 * 1024 * 1024  # room for all ten claims


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def scrape(url: str, name: str) -> float:
    with urllib.request.urlopen(url, timeout=10) as reply:
        for line in reply.read().decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not served")


def wait_for_metric(url: str, name: str, expected: float, timeout: float = 60) -> None:
    """Poll /metrics until ``name`` reads ``expected`` (the broker's own account of it)."""
    deadline = time.monotonic() + timeout
    while (seen := scrape(url, name)) != expected:
        assert time.monotonic() < deadline, f"{name} stayed {seen}, expected {expected}"
        time.sleep(0.05)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads RSS from /proc")
def test_ten_100_mb_prefixes_over_tcp_cost_less_than_50_mb_of_rss(tmp_path):
    broker = BrokerProcess(
        "--in-memory", "--override", "metrics.port=0", "--override", f"queued.max.request.bytes={POOL}",
        cwd=tmp_path,
    )
    try:
        broker.wait_ready()
        url = broker.wait_for_output("metrics on").split("metrics on", 1)[1].strip()
        pid = broker.process.pid
        host, port = broker.address.rsplit(":", 1)
        before = rss_bytes(pid)
        sockets = []
        for _ in range(10):
            sock = socket.create_connection((host, int(port)), timeout=10)
            sock.sendall(struct.pack(">i", CLAIM))
            sockets.append(sock)
        wait_for_metric(url, "kafka_network_socketserver_memorypoolused", 10 * CLAIM)
        held = rss_bytes(pid) - before
        for sock in sockets:
            sock.close()
        wait_for_metric(url, "kafka_network_socketserver_memorypoolused", 0)
        wait_for_metric(url, "kafka_server_socketservermetrics_connection_count", 0)
        after = rss_bytes(pid) - before
    finally:
        broker.stop(15)
    print(f"RSS before {before / 1e6:.1f} MB; ten 100 MB prefixes +{held / 1e6:.1f} MB; closed +{after / 1e6:.1f} MB")
    assert held < 50 * 1000 * 1000, f"ten prefixes raised RSS by {held:,} bytes"
    assert after < 50 * 1000 * 1000
