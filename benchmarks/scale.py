"""The scale section of ``make bench``: how the broker's cost grows with the work.

``python -m benchmarks --scale [--scale-max N]`` (and a full ``make bench``). Curves, not points:

``partitions``  one broker process per storage (``--in-memory``; ``--data-dir``), topics of
                ``TOPIC_PARTITIONS`` partitions created through confluent-kafka's AdminClient
                in requests of ``TOPICS_PER_REQUEST`` topics, up to each size of ``SIZES``
                (1k → 100k, capped by ``--scale-max``). At each size: VmRSS growth per
                partition, CreateTopics time per partition of the step, and the latency of a
                Metadata request for all topics on a raw socket (the first after the step —
                the answer is not cached yet — and the median of the next ``METADATA_SAMPLES``),
                and the first Metadata after one more topic is created (what a small change
                costs: the other topics' entries are reused).
``goals``       issue 36's goals read from the curves (benchmarks.scale_report.GOALS):
                reported, never asserted.
``restart``     the file-backed broker at each size: stopped cleanly (SIGTERM) and started
                again on its directory, then killed (SIGKILL) and started again; the figure is
                spawn → the first ApiVersions answered, beside the same for an empty directory.
``connections`` and ``groups`` (benchmarks.scale_more): idle connections and group sizes.

Each curve says whether its cost grows linearly (benchmarks.scale_report) and the run prints
every step that grows faster. Results: ``scale.json``, ``scale.md`` and ``scale-*.png`` under
the output directory (``benchmarks/results/`` by default).
"""

from __future__ import annotations

import json
import socket
import struct
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks import scale_report
from benchmarks.scale_broker import TOPIC_PARTITIONS, TOPICS_PER_REQUEST, ScaleBroker
from benchmarks.targets import recv_frame
from benchmarks.workloads import _settled_rss, raise_nofile

__all__ = ["SIZES", "main_scale", "partition_curve", "run_scale"]

SIZES = (1_000, 3_000, 10_000, 20_000, 30_000, 100_000)
METADATA_SAMPLES = 5


def metadata_request(correlation_id: int = 1) -> bytes:
    """Metadata v1 for every topic (a null topic array), header v1."""
    client_id = b"bench-scale"
    payload = struct.pack(">hhih", 3, 1, correlation_id, len(client_id)) + client_id + struct.pack(">i", -1)
    return struct.pack(">i", len(payload)) + payload


def _metadata_ms(host: str, port: int, samples: int) -> tuple[float, float, int]:
    """(first request's ms, median of the next ``samples``, response bytes) on one connection."""
    times = []
    size = 0
    with socket.create_connection((host, port), timeout=120) as sock:
        for i in range(samples + 1):
            start = time.perf_counter()
            sock.sendall(metadata_request(i + 1))
            size = len(recv_frame(sock))
            times.append((time.perf_counter() - start) * 1000)
    rest = sorted(times[1:]) or times
    return times[0], rest[len(rest) // 2], size


def partition_curve(backend: str, sizes: tuple[int, ...], log: Callable[[str], None] = print) -> list[dict]:
    """The points of the partitions curve for one storage (``memory`` or ``file``), with the
    restart figures at each size for ``file``."""
    tmp = tempfile.TemporaryDirectory(prefix="trikafka-scale-") if backend == "file" else None
    broker = ScaleBroker(Path(tmp.name) / "data" if tmp else None)
    points: list[dict] = []
    try:
        empty_start = broker.start()
        base = _settled_rss(broker.pid)
        empty = {}
        if tmp:
            empty["clean_restart_ms"] = _restart(broker, clean=True)
            empty["kill9_restart_ms"] = _restart(broker, clean=False)
        points.append({"backend": backend, "partitions": 0, "start_ms": empty_start, **empty})
        topics = 0
        for size in sizes:
            wanted = size // TOPIC_PARTITIONS
            seconds = broker.create(topics, wanted - topics)
            step = (wanted - topics) * TOPIC_PARTITIONS
            topics = wanted
            rss = _settled_rss(broker.pid)
            first, warm, size_bytes = _metadata_ms(broker.process.host, broker.process.port, METADATA_SAMPLES)
            broker.create_named(f"scale-extra-{size}")  # one more topic: what a small change costs
            after_one, _, _ = _metadata_ms(broker.process.host, broker.process.port, 0)
            point = {
                "backend": backend,
                "partitions": size,
                "create_ms_per_partition": seconds * 1000 / step,
                "create_s": seconds,
                "rss_mb": rss * 1024 / 1e6,
                "rss_growth_mb": (rss - base) * 1024 / 1e6,
                "kb_per_partition": (rss - base) * 1024 / size / 1000,
                "metadata_first_ms": first,
                "metadata_ms": warm,
                "metadata_after_one_ms": after_one,
                "metadata_bytes": size_bytes,
            }
            if tmp:
                point["clean_restart_ms"] = _restart(broker, clean=True)
                point["restart_rss_mb"] = _settled_rss(broker.pid) * 1024 / 1e6
                point["kill9_restart_ms"] = _restart(broker, clean=False)
            points.append(point)
            log(f"  scale {backend:<6} {size:>7,} partitions: " + ", ".join(
                f"{k} {scale_report._fmt(v)}" for k, v in point.items() if k not in ("backend", "partitions")))
    finally:
        try:
            broker.stop()
        finally:
            if tmp:
                tmp.cleanup()
    return points


def _restart(broker: ScaleBroker, *, clean: bool) -> float:
    if clean:
        broker.stop()
    else:
        broker.kill()
    return broker.start()


PARTITION_LABELS = {
    "partitions": "partitions",
    "backend": "storage",
    "kb_per_partition": "RSS KB/partition",
    "rss_growth_mb": "RSS growth MB",
    "create_ms_per_partition": "CreateTopics ms/partition",
    "create_s": "CreateTopics s (step)",
    "metadata_first_ms": "Metadata all, first ms",
    "metadata_ms": "Metadata all, ms",
    "metadata_after_one_ms": "Metadata all after 1 new topic, ms",
    "metadata_bytes": "Metadata bytes",
    "clean_restart_ms": "clean restart ms",
    "kill9_restart_ms": "kill -9 restart ms",
    "restart_rss_mb": "RSS after restart MB",
    "start_ms": "start ms",
}


def partition_curves(sizes: tuple[int, ...], log: Callable[[str], None]) -> list[dict]:
    curves = []
    for backend in ("memory", "file"):
        curve = {
            "id": f"partitions-{backend}",
            "title": f"Partitions ({'in memory' if backend == 'memory' else 'file-backed'}): "
                     f"topics of {TOPIC_PARTITIONS}, {TOPICS_PER_REQUEST} per CreateTopics",
            "x": "partitions",
            "columns": ["rss_growth_mb", "kb_per_partition", "create_ms_per_partition", "metadata_first_ms",
                        "metadata_ms", "metadata_after_one_ms", "metadata_bytes"]
                       + (["clean_restart_ms", "kill9_restart_ms", "restart_rss_mb"] if backend == "file" else []),
            "labels": PARTITION_LABELS,
            "plot": ["rss_growth_mb", "create_ms_per_partition", "metadata_after_one_ms"]
                    + (["clean_restart_ms", "kill9_restart_ms"] if backend == "file" else []),
            "points": [],
        }
        try:
            curve["points"] = partition_curve(backend, sizes, log)
        except Exception as exc:  # noqa: BLE001 - recorded and shown; the other curves still run
            curve["error"] = f"{type(exc).__name__}: {exc}"
        pts = [p for p in curve["points"] if p["partitions"] > 0]
        curve["verdicts"] = {
            "rss_growth_mb": scale_report.growth_verdict(pts, "partitions", "rss_growth_mb", "total", 0.5e-3),
            "create_ms_per_partition": scale_report.growth_verdict(
                pts, "partitions", "create_ms_per_partition", "flat", 0.05
            ),
            "metadata_ms": scale_report.growth_verdict(pts, "partitions", "metadata_ms", "total", 0.002),
            "metadata_after_one_ms": scale_report.growth_verdict(
                pts, "partitions", "metadata_after_one_ms", "total", 0.002
            ),
        }
        if backend == "file":
            for key in ("clean_restart_ms", "kill9_restart_ms"):
                curve["verdicts"][key] = scale_report.growth_verdict(pts, "partitions", key, "total", 0.01)
        curves.append(curve)
    return curves


def run_scale(max_partitions: int | None = None, log: Callable[[str], None] = print,
              only: tuple[str, ...] = ()) -> dict:
    """Measure every scale curve; returns the JSON-able result."""
    raise_nofile(4096)
    sizes = tuple(s for s in SIZES if max_partitions is None or s <= max_partitions) or (SIZES[0],)
    started = time.perf_counter()
    curves: list[dict] = []
    if not only or "partitions" in only:
        curves += partition_curves(sizes, log)
    if not only or set(only) - {"partitions"}:
        from benchmarks import scale_more

        curves += scale_more.more_curves(max_partitions, log, only)
    return {"seconds": time.perf_counter() - started, "sizes": list(sizes), "curves": curves,
            "goals": scale_report.evaluate_goals(curves)}


def write_scale(data: dict, output: Path) -> list[Path]:
    output.mkdir(parents=True, exist_ok=True)
    paths = [output / "scale.json", output / "scale.md"]
    paths[0].write_text(json.dumps(data, indent=1) + "\n")
    goals = "\n".join(["### Goals (reported, never asserted)\n", *scale_report.goals_text(data["goals"])])
    paths[1].write_text("## Scale\n\n" + scale_report.markdown(data["curves"]) + "\n" + goals + "\n")
    for curve in data["curves"]:
        png = output / f"scale-{curve['id']}.png"
        if scale_report.render_png(curve, png):
            paths.append(png)
    return paths


def main_scale(max_partitions: int | None, output: Path, log: Callable[[str], None] = print,
               only: tuple[str, ...] = ()) -> int:
    data = run_scale(max_partitions, log, only)
    paths = write_scale(data, output)
    log(scale_report.markdown(data["curves"]))
    faster = [
        (curve["id"], metric, verdict)
        for curve in data["curves"] for metric, verdict in curve.get("verdicts", {}).items()
        if verdict["linear"] is False
    ]
    for curve_id, metric, verdict in faster:
        curve = next(c for c in data["curves"] if c["id"] == curve_id)
        log(f"GROWS FASTER: {curve_id}: {scale_report.verdict_text(curve, metric, verdict)}")
    for line in scale_report.goals_text(data["goals"]):
        log(line)
    log(f"wrote {', '.join(str(p) for p in paths)} in {data['seconds']:.0f} s")
    return 1 if any(c.get("error") for c in data["curves"]) else 0
