"""The benchmark harness runs end to end and produces a figure for every target and workload.

``python -m benchmarks --quick`` (tiny counts, one round, a few tens of seconds) in a
subprocess with a timeout, as ``make bench`` would run it in full. The harness builds its C
load generator with gcc when it is missing, so this also covers a fresh clone.

These tests assert that figures exist and are well-formed — never how fast anything is: a
busy machine must not fail the suite.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import confluent_kafka  # noqa: E402,F401 - installed by the test extra; must not skip
import pytest

from benchmarks.catalog import build_workloads  # noqa: E402
from benchmarks.report import GOALS  # noqa: E402
from benchmarks.workloads import Settings  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RUN_TIMEOUT = 240  # seconds; a quick run takes ~40 s on this 2-core machine

# The module's tests read one quick run (a module-scoped fixture): under pytest-xdist they stay
# on one worker (``--dist loadgroup``), or each worker would run the harness again.
pytestmark = pytest.mark.xdist_group("bench_harness")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path, str]:
    output = tmp_path_factory.mktemp("bench")
    harness = subprocess.Popen(
        [sys.executable, "-m", "benchmarks", "--quick", "--output", str(output)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = harness.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        # SIGTERM first: the harness unwinds and stops the servers it started.
        harness.terminate()
        stdout, stderr = harness.communicate(timeout=60)
        pytest.fail(f"the quick run took over {RUN_TIMEOUT} s:\n{stdout[-6000:]}{stderr[-6000:]}")
    log = stdout[-6000:] + stderr[-6000:]
    assert harness.returncode == 0, log
    return json.loads((output / "latest.json").read_text()), output, log


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def test_every_workload_has_figures_for_every_target(quick_run: tuple[dict, Path, str]) -> None:
    data, _, log = quick_run
    by_id = {w["id"]: w for w in data["workloads"]}
    expected = build_workloads(Settings.quick())
    assert set(by_id) == {w.id for w in expected}
    for workload in expected:
        item = by_id[workload.id]
        assert set(item["rounds"]) == set(workload.targets), workload.id
        for target in workload.targets:
            (figures,) = item["rounds"][target]  # one round in --quick
            assert "error" not in figures, (workload.id, target, figures, log)
            for metric in workload.metrics:
                assert _number(figures.get(metric.key)), (workload.id, target, metric.key, figures)
                summary = item["summary"][target][metric.key]
                assert summary["min"] <= summary["median"] <= summary["max"]


def test_rates_and_times_are_positive(quick_run: tuple[dict, Path, str]) -> None:
    data, _, _ = quick_run
    for item in data["workloads"]:
        for metric in item["metrics"]:
            if metric["key"] == "kb_per_connection":
                continue  # a difference of two RSS readings: its sign is the server's business
            if metric["key"] == "cpu_s_per_gb":
                # /proc counts 10 ms ticks: a --quick produce may use none of them.
                for target in item["targets"]:
                    assert item["summary"][target][metric["key"]]["median"] >= 0
                continue
            for target in item["targets"]:
                assert item["summary"][target][metric["key"]]["median"] > 0, (item["id"], target)


def test_trikafka_request_time_split_is_reported(quick_run: tuple[dict, Path, str]) -> None:
    data, _, _ = quick_run
    (split,) = [w for w in data["workloads"] if w["id"] == "tiny_split"]
    (figures,) = split["rounds"]["trikafka"]
    for api in ("apiversions", "metadata"):
        for connections in Settings.quick().tiny_connections:
            key = f"{api}_c{connections}"
            assert figures[f"{key}_requests_per_s"] > 0
            for part in ("RequestQueueTimeMs", "LocalTimeMs", "RemoteTimeMs",
                         "ResponseQueueTimeMs", "ResponseSendTimeMs", "TotalTimeMs"):
                assert _number(figures[f"{key}_{part}"]), (key, part)
            assert figures[f"{key}_TotalTimeMs"] > 0


def test_every_goal_is_evaluated(quick_run: tuple[dict, Path, str]) -> None:
    data, _, _ = quick_run
    assert [g["name"] for g in data["goals"]] == [g.name for g in GOALS]
    for goal in data["goals"]:
        if goal["metric"] == "cpu_s_per_gb" and goal["reference"] and not goal["reference_value"]:
            continue  # /proc counts 10 ms ticks: a --quick produce may cost the mock none of them
        assert _number(goal["value"]), goal
        assert isinstance(goal["met"], bool), goal
        # One round in --quick: the rounds' spread is that round's figure.
        assert goal["rounds"] == 1, goal
        assert goal["value_min"] == goal["value_max"] == goal["value"], goal
        assert goal["rounds_met"] == int(goal["met"]), goal


def test_outputs_are_written(quick_run: tuple[dict, Path, str]) -> None:
    data, output, _ = quick_run
    table = (output / "latest.md").read_text()
    assert table.startswith("| workload |")
    assert data["meta"]["machine"]["cpus"] >= 1
    assert data["meta"]["versions"]["librdkafka"]
    assert (ROOT / "benchmarks" / "build" / "loadgen").exists()  # built by the harness if missing
    # Processes start from cached bytecode, as an installed trikafka does, whatever the
    # environment says about writing it (benchmarks.run.cache_bytecode).
    assert list((ROOT / "benchmarks" / "build" / "pycache").rglob("broker*.pyc"))
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert (output / "latest.png").stat().st_size > 0
