"""The scale section's restart-vs-data-size curve (see benchmarks.scale).

``restart-data``  one file-backed broker process, one topic of ``PARTITIONS`` partitions filled
                  by confluent-kafka's Producer (values of ``VALUE_BYTES``) up to each size of
                  ``DATA_SIZES_MB``. At each size the broker is stopped cleanly (SIGTERM) and
                  started again, then killed (SIGKILL) and started again. Two figures each
                  time: spawn → the first ApiVersions answered (``*_restart_ms``), and then one
                  ListOffsets for every partition (``*_first_use_ms``), which opens each
                  partition's log — after a kill, recovering the segments past its recovery
                  point. A start reads no segment (logs are opened on first use), so the
                  restart stays flat in the data size; the first use after a kill grows with
                  the data to recover.
"""

from __future__ import annotations

import struct
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks import scale_report
from benchmarks.scale_broker import ScaleBroker
from benchmarks.targets import recv_frame

__all__ = ["DATA_SIZES_MB", "restart_data_curve"]

DATA_SIZES_MB = (16, 64, 256)
PARTITIONS = 100
VALUE_BYTES = 1024
TOPIC = "restart-data"


def list_offsets_request(topic: str, partitions: int) -> bytes:
    """ListOffsets v1 (latest) for every partition of ``topic``, header v1."""
    client_id = b"bench-scale"
    name = topic.encode()
    body = struct.pack(">ii", -1, 1) + struct.pack(">h", len(name)) + name + struct.pack(">i", partitions)
    body += b"".join(struct.pack(">iq", p, -1) for p in range(partitions))
    payload = struct.pack(">hhih", 2, 1, 7, len(client_id)) + client_id + body
    return struct.pack(">i", len(payload)) + payload


def _first_use_ms(broker: ScaleBroker) -> float:
    import socket

    started = time.perf_counter()
    with socket.create_connection((broker.process.host, broker.process.port), timeout=600) as sock:
        sock.sendall(list_offsets_request(TOPIC, PARTITIONS))
        recv_frame(sock)
    return (time.perf_counter() - started) * 1000


def _fill(broker: ScaleBroker, megabytes: int, produced: int) -> int:
    """Produce until ``megabytes`` of values are in the topic; returns the bytes produced."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.process.address, "linger.ms": 5, "acks": 1,
                         "batch.size": 16384, "log_level": 3})
    value = b"x" * VALUE_BYTES
    i = 0
    while produced < megabytes * 1_000_000:
        try:
            producer.produce(TOPIC, value, partition=i % PARTITIONS)
        except BufferError:  # the producer's queue is full: let it drain
            producer.poll(0.05)
            continue
        produced += VALUE_BYTES
        i += 1
        producer.poll(0)
    assert producer.flush(600) == 0, "records left unsent"
    return produced


def restart_data_curve(max_mb: int | None, log: Callable[[str], None] = print) -> dict:
    sizes = tuple(s for s in DATA_SIZES_MB if max_mb is None or s <= max_mb) or DATA_SIZES_MB[:1]
    curve = {
        "id": "restart-data",
        "title": f"Restart vs data size (file-backed, one topic of {PARTITIONS} partitions, "
                 f"{VALUE_BYTES:,}-byte values, batches of 16 KB)",
        "x": "data_mb",
        "columns": ["clean_restart_ms", "clean_first_use_ms", "kill9_restart_ms", "kill9_first_use_ms"],
        "labels": {"data_mb": "data MB", "clean_restart_ms": "clean restart ms",
                   "clean_first_use_ms": "then ListOffsets all partitions ms",
                   "kill9_restart_ms": "kill -9 restart ms",
                   "kill9_first_use_ms": "then ListOffsets all (recovery) ms"},
        "plot": ["clean_restart_ms", "kill9_restart_ms", "kill9_first_use_ms"],
        "points": [],
    }
    tmp = tempfile.TemporaryDirectory(prefix="trikafka-scale-restart-")
    broker = ScaleBroker(Path(tmp.name) / "data")
    try:
        broker.start()
        from confluent_kafka.admin import NewTopic

        futures = broker.admin().create_topics([NewTopic(TOPIC, PARTITIONS, 1)], request_timeout=600)
        futures[TOPIC].result(timeout=600)
        produced = 0
        for size in sizes:
            produced = _fill(broker, size, produced)
            broker.stop()
            point: dict = {"data_mb": produced / 1e6, "clean_restart_ms": broker.start()}
            point["clean_first_use_ms"] = _first_use_ms(broker)
            broker.kill()
            point["kill9_restart_ms"] = broker.start()
            point["kill9_first_use_ms"] = _first_use_ms(broker)
            curve["points"].append(point)
            log(f"  scale restart {point['data_mb']:>7.0f} MB: " + ", ".join(
                f"{k} {scale_report._fmt(v)}" for k, v in point.items() if k != "data_mb"))
    except Exception as exc:  # noqa: BLE001 - recorded and shown; the other curves still run
        curve["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        try:
            broker.stop()
        finally:
            tmp.cleanup()
    pts = curve["points"]
    curve["verdicts"] = {  # a start reads no segment: flat; the recovery at first use: linear
        "clean_restart_ms": scale_report.growth_verdict(pts, "data_mb", "clean_restart_ms", "flat", 100),
        "kill9_restart_ms": scale_report.growth_verdict(pts, "data_mb", "kill9_restart_ms", "flat", 100),
        "kill9_first_use_ms": scale_report.growth_verdict(pts, "data_mb", "kill9_first_use_ms", "total", 1.0),
    }
    return curve
