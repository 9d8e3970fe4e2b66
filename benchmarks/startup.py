"""Start-up costs of each entry point, each beside bare ``import trio`` and ``import pytest``.

pytest imports trikafka's plugin (``pytest11``) in every run where trikafka is installed, and
``python -m trikafka --help`` or a dev broker should answer at once, so each entry point is
timed as a user meets it: a fresh interpreter from spawn to exit (or, for the broker, to its
first answered ApiVersions). On a shared machine a figure alone says little; the baselines
are measured in the same samples, interleaved, in an order that rotates each sample:

=====================  ==========================================================================
``python_ms``          ``python -c pass``: the interpreter alone
``trio_ms``            ``python -c "import trio"``
``pytest_ms``          ``python -c "import pytest"``
``trikafka_ms``        ``python -c "import trikafka"``
``plugin_ms``          ``python -c "import trikafka.testing.pytest_plugin"``
``plugin_vs_pytest``   plugin_ms ÷ pytest_ms (medians): the goal is ≤ 1.2
``help_ms``            ``python -m trikafka --help``
``cli_ms``             ``python -m trikafka --in-memory`` spawned → its first ApiVersions answered
                       (the readiness banner gives the port): the goal is ≤ 300 ms
``open_ms``            ``open_broker()`` called → ready, inside a fresh interpreter
                       (``benchmarks.embedded_broker --startup``)
``pytest_run_ms``      ``pytest --collect-only`` of an empty directory with trikafka's plugin
``pytest_bare_ms``     the same with ``-p no:trikafka``: what a run without Kafka tests pays
                       for having trikafka installed is the difference
=====================  ==========================================================================

Goals are reported in the table (benchmarks/report.py), never asserted. ``python -X
importtime -c "import trikafka.testing.pytest_plugin"`` shows where a figure goes.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import entry_points

from benchmarks.targets import ROOT, api_versions_request, make_target, request_response
from benchmarks.workloads import Metric, Settings, Workload

__all__ = ["COMMANDS", "startup_costs", "startup_workloads"]

#: figure → the command whose wall time from spawn to exit it is.
COMMANDS: dict[str, tuple[str, ...]] = {
    "python_ms": ("-c", "pass"),
    "trio_ms": ("-c", "import trio"),
    "pytest_ms": ("-c", "import pytest"),
    "trikafka_ms": ("-c", "import trikafka"),
    "plugin_ms": ("-c", "import trikafka.testing.pytest_plugin"),
    "help_ms": ("-m", "trikafka", "--help"),
}
#: The import figures take this many samples for each of the broker's (they cost ~0.1 s).
IMPORT_SAMPLES_PER_BROKER_SAMPLE = 3
TIMEOUT = 60


def _env() -> dict[str, str]:
    """The checkout's trikafka first on the path, as for the broker process (BrokerProcess)."""
    env = dict(os.environ, NO_COLOR="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def _wall_ms(args: tuple[str, ...], env: dict[str, str], cwd: object = ROOT, ok: tuple[int, ...] = (0,)) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, timeout=TIMEOUT,
    )
    elapsed = (time.perf_counter() - start) * 1000
    if done.returncode not in ok:
        raise RuntimeError(f"{' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")
    return elapsed


def _pytest_runs() -> dict[str, tuple[str, ...]]:
    """``pytest --collect-only`` of an empty directory, with and without the plugin: through
    its ``pytest11`` entry point where trikafka is installed, by ``-p`` where it is not."""
    base = ("-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider")
    if "trikafka" in {ep.name for ep in entry_points(group="pytest11")}:
        return {"pytest_run_ms": base, "pytest_bare_ms": (*base, "-p", "no:trikafka")}
    return {"pytest_run_ms": (*base, "-p", "trikafka.testing.pytest_plugin"), "pytest_bare_ms": base}


def _cli_to_api_versions_ms() -> float:
    start = time.perf_counter()
    target = make_target("trikafka")
    try:
        request_response(target.host, target.port, api_versions_request(target.api_versions_version))
        return (time.perf_counter() - start) * 1000
    finally:
        target.stop()


def _open_broker_ms(env: dict[str, str]) -> float:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.embedded_broker", "--startup"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT,
    )
    if done.returncode != 0:
        raise RuntimeError(f"embedded start failed: {done.stderr[-2000:]}")
    return float(json.loads(done.stdout.strip().splitlines()[-1])["open_broker_ms"])


def startup_costs(name: str, settings: Settings) -> dict:
    """One round: the median of each figure over its samples (see the module doc)."""
    env = _env()
    runs = _pytest_runs()
    samples: dict[str, list[float]] = {key: [] for key in (*COMMANDS, *runs, "cli_ms", "open_ms")}
    keys = list(COMMANDS)
    with tempfile.TemporaryDirectory(prefix="trikafka-bench-") as empty:
        for i in range(settings.startup_samples * IMPORT_SAMPLES_PER_BROKER_SAMPLE):
            shift = i % len(keys)
            for key in keys[shift:] + keys[:shift]:
                samples[key].append(_wall_ms(COMMANDS[key], env))
            if i % IMPORT_SAMPLES_PER_BROKER_SAMPLE == 0:
                samples["cli_ms"].append(_cli_to_api_versions_ms())
                samples["open_ms"].append(_open_broker_ms(env))
                for key in (list(runs) if i % 2 == 0 else list(runs)[::-1]):
                    # Exit code 5: no tests collected, which is the point.
                    samples[key].append(_wall_ms(runs[key], env, cwd=empty, ok=(0, 5)))
    figures = {key: statistics.median(values) for key, values in samples.items()}
    figures["plugin_vs_pytest"] = figures["plugin_ms"] / figures["pytest_ms"]
    return figures


def startup_workloads(settings: Settings) -> list[Workload]:
    ms = "ms"
    return [
        Workload(
            "startup_costs",
            "Start-up, fresh process",
            ("trikafka",),
            (
                Metric("plugin_ms", "pytest plugin import", ms, False, 0),
                Metric("pytest_ms", "bare import pytest", ms, False, 0),
                Metric("plugin_vs_pytest", "plugin ÷ import pytest", "×", False, 2),
                Metric("trikafka_ms", "import trikafka", ms, False, 0),
                Metric("trio_ms", "bare import trio", ms, False, 0),
                Metric("python_ms", "python -c pass", ms, False, 0),
                Metric("help_ms", "CLI --help", ms, False, 0),
                Metric("cli_ms", "CLI → 1st ApiVersions", ms, False, 0),
                Metric("open_ms", "open_broker() → ready", ms, False, 1),
                Metric("pytest_run_ms", "pytest, no tests, with the plugin", ms, False, 0),
                Metric("pytest_bare_ms", "pytest, no tests, -p no:trikafka", ms, False, 0),
            ),
            startup_costs,
            fresh=True,
        )
    ]
