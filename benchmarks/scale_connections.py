"""The scale section's connections curve: what idle connections cost a broker process.

For each count of ``CONNECTION_COUNTS`` a fresh ``python -m trikafka --in-memory`` (which
raises its own RLIMIT_NOFILE to the hard limit, as always; the harness raises its own too) is
given that many connections, each answered one ApiVersions and then left idle. Figures: the
growth of VmRSS per connection, and the p50/p99 of ``PRODUCE_SAMPLES`` acks=1 Produce requests
of one small record, one at a time, on another (busy) connection — what a working client pays
for the idle ones — with where the time went, per produce, from the broker's
``/proc/<pid>/schedstat``: its CPU time, and the time it was runnable but waiting for a CPU
(on a shared machine, other processes' time), for all produces and for the slowest 1%.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

from benchmarks import scale_report
from benchmarks.targets import ROOT, api_versions_request, recv_frame, request_response
from benchmarks.workloads import _settled_rss, raise_nofile
from trikafka.protocol.entities import build
from trikafka.protocol.headers import encode_request
from trikafka.protocol.records import build_batch
from trikafka.protocol.registry import ApiRegistry
from trikafka.testing.process import BrokerProcess

__all__ = ["CONNECTION_COUNTS", "connection_curve", "connection_point"]

CONNECTION_COUNTS = (1_000, 3_000, 10_000)
PRODUCE_SAMPLES = 2_000
TOPIC = "scale-busy"


def _produce_frame(correlation_id: int, record: bytes) -> bytes:
    spec = ApiRegistry().get(0, 9)
    body = build(spec.request_type, transactional_id=None, acks=1, timeout=10_000, topic_data=[
        {"name": TOPIC, "partition_data": [{"index": 0, "records": record}]}])
    return encode_request(spec, correlation_id, body, "bench-scale")


def _create_topic_frame() -> bytes:
    spec = ApiRegistry().get(19, 7)
    body = build(spec.request_type, timeout=10_000, validate_only=False, topics=[
        {"name": TOPIC, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}])
    return encode_request(spec, 1, body, "bench-scale")


def _schedstat(pid: int | str) -> tuple[float, float]:
    """(ms on a CPU, ms runnable but waiting for one) of the process's main thread, from
    ``/proc/<pid>/schedstat`` (zeros where there is none)."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            on_cpu, waiting, _ = f.read().split()
    except (OSError, ValueError):
        return 0.0, 0.0
    return int(on_cpu) / 1e6, int(waiting) / 1e6


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def connection_point(count: int) -> dict:
    raise_nofile(count + 512)
    broker = BrokerProcess("--in-memory", "--log-level", "WARNING", cwd=ROOT)
    sockets: list[socket.socket] = []
    try:
        broker.wait_ready(60)
        host, port = broker.host, broker.port
        request_response(host, port, _create_topic_frame())
        busy = socket.create_connection((host, port), timeout=30)
        sockets.append(busy)
        record = build_batch([(b"k", b"v" * 100, [], 1_700_000_000_000)])
        for i in range(50):  # warm: the topic's log, the handler's caches
            busy.sendall(_produce_frame(i, record))
            recv_frame(busy)
        before = _settled_rss(broker.process.pid)
        frame = api_versions_request(3)
        for first in range(0, count, 250):
            opened = []
            for _ in range(min(250, count - first)):
                sock = socket.create_connection((host, port), timeout=30)
                sock.sendall(frame)
                opened.append(sock)
            for sock in opened:
                recv_frame(sock)
            sockets.extend(opened)
        after = _settled_rss(broker.process.pid)
        latencies = []
        # Per produce: latency, the broker's CPU ms, its ms waiting for a CPU, and this load
        # generator's ms waiting for one (which includes the broker's run when the broker, woken
        # by the request, takes the CPU the load generator was on before it reached recv).
        samples = []
        pid = broker.process.pid
        for i in range(PRODUCE_SAMPLES):
            sched, mine = _schedstat(pid), _schedstat("self")  # outside the timed part
            started = time.perf_counter()
            busy.sendall(_produce_frame(1000 + i, record))
            recv_frame(busy)
            latencies.append((time.perf_counter() - started) * 1000)
            sched_after, mine_after = _schedstat(pid), _schedstat("self")
            samples.append((latencies[-1], sched_after[0] - sched[0], sched_after[1] - sched[1],
                            mine_after[1] - mine[1]))
    finally:
        for sock in sockets:
            sock.close()
        try:
            broker.stop(60)
        except Exception:  # noqa: BLE001 - killed by stop(); nothing more to do
            pass
    return {
        "connections": count,
        "kb_per_connection": (after - before) * 1024 / count / 1000,
        "rss_growth_mb": (after - before) * 1024 / 1e6,
        "produce_p50_ms": _percentile(latencies, 0.50),
        "produce_p99_ms": _percentile(latencies, 0.99),
        "produce_max_ms": max(latencies),
        # Where a produce's time went: the broker's CPU for it (its own work: the idle
        # connections' tasks, trio's scheduler, the collector would all show here), and the
        # time the broker was runnable but waited for a CPU (the OS running other processes).
        "broker_cpu_us_per_produce": sum(s[1] for s in samples) * 1000 / len(samples),
        **_tail(samples),
    }


def _tail(samples: list[tuple[float, float, float, float]]) -> dict:
    """The slowest 1% of the produces: their mean latency, the broker's CPU and its wait for one."""
    slow = sorted(samples)[-max(len(samples) // 100, 1):]
    return {
        "slowest_1pct_ms": sum(s[0] for s in slow) / len(slow),
        "slowest_1pct_broker_cpu_ms": sum(s[1] for s in slow) / len(slow),
        "slowest_1pct_broker_wait_ms": sum(s[2] for s in slow) / len(slow),
        "slowest_1pct_loadgen_wait_ms": sum(s[3] for s in slow) / len(slow),
    }


def connection_curve(log: Callable[[str], None], counts: tuple[int, ...] = CONNECTION_COUNTS) -> dict:
    curve = {
        "id": "connections",
        "title": "Idle connections: RSS per connection and a busy connection's produce latency",
        "x": "connections",
        "columns": ["rss_growth_mb", "kb_per_connection", "produce_p50_ms", "produce_p99_ms", "produce_max_ms",
                    "broker_cpu_us_per_produce", "slowest_1pct_ms", "slowest_1pct_broker_cpu_ms",
                    "slowest_1pct_broker_wait_ms", "slowest_1pct_loadgen_wait_ms"],
        "labels": {"connections": "idle connections", "rss_growth_mb": "RSS growth MB",
                   "kb_per_connection": "RSS KB/connection", "produce_p50_ms": "produce p50 ms",
                   "produce_p99_ms": "produce p99 ms", "produce_max_ms": "produce max ms",
                   "broker_cpu_us_per_produce": "broker CPU µs/produce",
                   "slowest_1pct_ms": "slowest 1%: ms", "slowest_1pct_broker_cpu_ms": "of which broker CPU ms",
                   "slowest_1pct_broker_wait_ms": "broker waiting for a CPU ms",
                   "slowest_1pct_loadgen_wait_ms": "load generator waiting for a CPU ms"},
        "plot": ["rss_growth_mb", "produce_p99_ms", "broker_cpu_us_per_produce"], "points": [],
    }
    try:
        for count in counts:
            point = connection_point(count)
            curve["points"].append(point)
            log(f"  scale connections {count:>6,}: {point['kb_per_connection']:.1f} KB each, "
                f"produce p99 {point['produce_p99_ms']:.2f} ms")
    except Exception as exc:  # noqa: BLE001 - recorded and shown
        curve["error"] = f"{type(exc).__name__}: {exc}"
    curve["verdicts"] = {
        "rss_growth_mb": scale_report.growth_verdict(curve["points"], "connections", "rss_growth_mb", "total", 1e-3),
        "produce_p99_ms": scale_report.growth_verdict(curve["points"], "connections", "produce_p99_ms", "flat", 0.5),
        "broker_cpu_us_per_produce": scale_report.growth_verdict(
            curve["points"], "connections", "broker_cpu_us_per_produce", "flat", 20.0
        ),
    }
    return curve
