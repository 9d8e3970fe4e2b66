"""``make bench``: every workload against every target, in rounds, then a table and a chart.

The plan
--------
A round starts fresh servers (trikafka's CLI process, librdkafka's mock cluster, the Trio
ceiling), runs each workload against each target in turn — A B C, then C B A in the next
round, so neither side always goes first on a shared, noisy machine — and stops them. Topics
are never deleted: each round's data goes away with its process.
Workloads that measure a process's own start or memory (idle connections, start-up) start
fresh processes themselves, after the round's servers are stopped. The figures are medians
over rounds with min–max; ratios against the reference use medians.

Outputs (``--output``, default ``benchmarks/results/``; ``--quick`` defaults to
``benchmarks/build/quick/`` so a test run never overwrites the published figures):

``latest.json``  every round's figures, the summaries, the goals, the machine and versions
``latest.md``    the table in Markdown, for README's Performance section
``latest.png``   the chart (needs matplotlib: ``pip install -e '.[bench]'``)

Everything binds 127.0.0.1; every process is started here, bounded in time, and stopped by
its PID (helpers also die with the harness through PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import signal
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

from benchmarks import breakdown, loadgen, report
from benchmarks.catalog import build_workloads
from benchmarks.targets import ROOT, Target, make_target
from benchmarks.workloads import RoundState, Settings, Workload, raise_nofile

__all__ = ["main", "run"]

RESULTS = ROOT / "benchmarks" / "results"
QUICK_RESULTS = ROOT / "benchmarks" / "build" / "quick"
TARGET_ORDER = ("trikafka", "mock", "ceiling", "card")  # trikafka-file stands in for trikafka


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny counts, one round (seconds)")
    parser.add_argument("--rounds", type=int, help="rounds (default 3; --quick: 1)")
    parser.add_argument("--output", type=Path, help="directory for latest.json/.md/.png")
    parser.add_argument("--only", help="comma-separated workload ids (prefixes match)")
    parser.add_argument("--scale", action="store_true",
                        help="only the scale section (benchmarks/scale.py): cost vs partitions, "
                             "connections, group size, share-group members, data size")
    parser.add_argument("--scale-max", type=int, metavar="N",
                        help="the scale section's largest partition count (default 100,000)")
    parser.add_argument("--no-scale", action="store_true", help="a full run without the scale section")
    parser.add_argument("--page", type=Path, metavar="MD",
                        help="write the figures into this page (default for a full run: docs/performance.md)")
    parser.add_argument("--scale-only", help="comma-separated scale curves: partitions, connections, "
                                             "groups, sessions, share, restart")
    return parser.parse_args(argv)


def _machine() -> dict:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        kib = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f"{kib / 1024 / 1024:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "memory": memory,
        "kernel": platform.release(),
        "platform": platform.platform(),
    }


def _versions() -> dict:
    import confluent_kafka

    out = {"python": platform.python_version()}
    for dist in ("trikafka", "trio", "kio", "confluent-kafka"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    out["librdkafka"] = confluent_kafka.libversion()[0]
    try:
        gcc = subprocess.run(["gcc", "--version"], capture_output=True, text=True, timeout=10)
        out["gcc"] = gcc.stdout.splitlines()[0] if gcc.stdout else None
    except (OSError, subprocess.SubprocessError):
        out["gcc"] = None
    return out


def _headline(workload: Workload, figures: dict) -> str:
    if "error" in figures:
        return f"ERROR {figures['error']}"
    shown = [
        f"{report.format_number(figures[m.key], m.digits)} {m.unit}" for m in workload.metrics if m.key in figures
    ]
    return ", ".join(shown) or f"{len(figures)} figures"


def _stop_all(running: dict[str, Target]) -> None:
    for target in running.values():
        target.stop()
    running.clear()


def run(settings: Settings, only: list[str] | None = None, log=print) -> dict:  # noqa: ANN001
    """Measure; returns the JSON-able result (not yet written anywhere)."""
    raise_nofile(settings.idle_connections + 512)  # before any child starts: they inherit it
    loadgen.ensure_built()
    workloads = [
        w for w in build_workloads(settings) if not only or any(w.id.startswith(o) for o in only)
    ]
    rounds: dict[str, dict[str, list[dict]]] = {w.id: {t: [] for t in w.targets} for w in workloads}
    started = time.perf_counter()
    load: list[float] = []  # 1-minute load average as each round starts: how busy the box was
    for r in range(settings.rounds):
        order = TARGET_ORDER if r % 2 == 0 else TARGET_ORDER[::-1]
        state = RoundState(r)
        load.append(os.getloadavg()[0])
        running: dict[str, Target] = {}
        try:
            for workload in workloads:
                if workload.once and r > 0:
                    continue
                if workload.fresh:
                    _stop_all(running)  # a quiet machine for start-up and memory figures
                for name in order:
                    if name not in workload.targets:
                        continue
                    step = time.perf_counter()
                    try:
                        if workload.fresh:
                            figures = workload.run(name, settings)
                        else:
                            server = workload.server(name)
                            if server not in running:
                                running[server] = make_target(server)
                            figures = workload.run(running[server], settings, state)
                    except Exception as exc:  # noqa: BLE001 - recorded, shown, and the run goes on
                        figures = {"error": f"{type(exc).__name__}: {exc}"}
                        server = workload.server(name)
                        if server in running:  # a server that failed once is not trusted again
                            running.pop(server).stop()
                    rounds[workload.id][name].append(figures)
                    log(
                        f"[round {r + 1}/{settings.rounds}] {workload.id:<22} {name:<9} "
                        f"{_headline(workload, figures)}  ({time.perf_counter() - step:.1f} s)"
                    )
        finally:
            _stop_all(running)
    data = {
        "meta": {
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "command": "python -m benchmarks " + " ".join(sys.argv[1:]),
            "seconds": time.perf_counter() - started,
            "machine": _machine(),
            "load_average_per_round": load + [os.getloadavg()[0]],
            "versions": _versions(),
        },
        "settings": dataclasses.asdict(settings),
        "workloads": [
            {
                "id": w.id,
                "title": w.title,
                "targets": list(w.targets),
                "metrics": [dataclasses.asdict(m) for m in w.metrics],
                "rounds": rounds[w.id],
                "summary": {t: report.summarize(rs) for t, rs in rounds[w.id].items()},
            }
            for w in workloads
        ],
    }
    data["goals"] = report.evaluate_goals(data)
    return data


def write(data: dict, output: Path) -> dict[str, Path]:
    output.mkdir(parents=True, exist_ok=True)
    paths = {"json": output / "latest.json", "md": output / "latest.md"}
    tmp = paths["json"].with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    tmp.replace(paths["json"])
    paths["md"].write_text(report.markdown_table(data))
    chart = output / "latest.png"
    if report.render_chart(data, chart):
        paths["png"] = chart
    return paths


def breakdown_figures(quick: bool, output: Path, flames: bool, log) -> dict | None:  # noqa: ANN001
    """``benchmarks.breakdown`` in a process of its own (an embedded broker, nothing else
    running); with ``flames``, a py-spy flame graph per workload is written to ``output``."""
    output.mkdir(parents=True, exist_ok=True)
    out = output / "breakdown.json"
    command = [sys.executable, "-m", "benchmarks.breakdown", "--json", str(out)]
    command += ["--count", "200", "--seconds", "0.3"] if quick else ["--count", "3000", "--seconds", "2"]
    if flames:
        command += ["--flame", str(output)]
    try:
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:
        log("the breakdown took over 15 minutes: left out")
        return None
    if done.returncode != 0:
        log(f"the breakdown failed: {done.stderr.strip()[-2000:]}")
        return None
    return json.loads(out.read_text())


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds through every finally: servers are stopped


def cache_bytecode() -> None:
    """Let every process the run starts use Python's cached bytecode, as users' do.

    pip compiles an installed wheel's modules, and a checkout writes ``__pycache__`` on its
    first import; an environment that forbids writing it (``PYTHONDONTWRITEBYTECODE``, as
    some CI images and sandboxes set) would make every fresh broker, ceiling and client
    compile its source again — ~100 ms of the CLI's start-up that no installed trikafka
    pays. The cache lives in ``benchmarks/build/pycache``, outside the sources.
    """
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(ROOT / "benchmarks" / "build" / "pycache")


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console

    args = _parse_args(argv)
    cache_bytecode()
    output = args.output or (QUICK_RESULTS if args.quick else RESULTS)
    scale_only = tuple(args.scale_only.split(",")) if args.scale_only else ()
    if args.scale:
        from benchmarks.scale import main_scale

        return main_scale(args.scale_max, output, print, scale_only)
    settings = Settings.quick() if args.quick else Settings()
    if args.rounds:
        settings = dataclasses.replace(settings, rounds=args.rounds)
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGHUP, _terminate)
    console = Console() if sys.stdout.isatty() else Console(width=200)
    def log(line: str) -> None:
        console.print(line, markup=False, highlight=False)

    data = run(settings, args.only.split(",") if args.only else None, log=log)
    full = not args.quick and not args.only
    if not args.only or "breakdown" in args.only.split(","):
        data["breakdown"] = breakdown_figures(args.quick, output, full, log)
    paths = write(data, output)
    for table in report.rich_tables(data):
        console.print(table)
    for goal in data["goals"]:
        if goal["value"] is None:
            verdict = "no figure"
        else:
            digits = 2 if goal["kind"] == "ratio" or abs(goal["value"]) < 10 else 1
            shown = f"{goal['value']:.{digits}f}" + ("×" if goal["kind"] == "ratio" else "")
            verdict = f"{shown} (goal {goal['goal']}): {'met' if goal['met'] else 'missed'}"
            if goal["rounds"] > 1:
                verdict += f"; met in {goal['rounds_met']} of {goal['rounds']} rounds"
        console.print(f"  {goal['name']:<30} {verdict}")
    if data.get("breakdown"):
        console.print("Where one request's time goes (python -m benchmarks.breakdown):")
        console.print(breakdown.table(data["breakdown"]), markup=False, highlight=False)
    page = args.page or (report.PAGE if full else None)
    if page is not None:
        report.write_page(data, page, output)
        console.print(f"wrote {page}")
    if "png" not in paths:
        console.print("no chart: matplotlib is not installed (pip install -e '.\\[bench]')",
                      style="yellow")
    console.print(f"wrote {', '.join(str(p) for p in paths.values())} "
                  f"in {data['meta']['seconds']:.0f} s")
    errors = [
        (w["id"], t) for w in data["workloads"] for t, rs in w["rounds"].items()
        if any("error" in r for r in rs)
    ]
    code = 0
    if errors:
        console.print(f"[red]{len(errors)} workload/target pairs had errors: {errors}")
        code = 1
    if full and not args.no_scale:  # a full `make bench` ends with the scale section
        from benchmarks.scale import main_scale

        code |= main_scale(args.scale_max, output, log, scale_only)
    return code
