"""Which Python runs trikafka fastest: the same ``make bench`` rows on each interpreter, side by side.

``python -m benchmarks.pythons`` (``make bench-pythons``). Each interpreter is a venv with trikafka
and its ``bench`` extra: this one (``sys.executable``) and ``.venv-py3.12``, ``.venv-py3.13`` when
present (``make bench-pythons`` builds them). Every round runs ``python -m benchmarks --rounds 1
--only <rows>`` under each interpreter in turn, the order reversed in the next round, so every
server (trikafka, its clients, the references) runs on that interpreter; the figures are the
rounds' medians of trikafka's figure, which decides which interpreter is fastest, and of its ratio
to the row's reference (the mock, the card ceiling, confluent-kafka) on that interpreter.

Writes ``benchmarks/results/pythons.json`` and ``pythons.md`` (the table docs/performance.md
shows under "Which Python").
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks.report import round_ratios

__all__ = ["ROWS", "main"]

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
# (workload, metric, reference, label, higher is better)
ROWS = (
    ("tiny_apiversions_c16", "requests_per_s", "card", "ApiVersions @16 conn, req/s", True),
    ("tiny_metadata_c16", "requests_per_s", "card", "Metadata @16 conn, req/s", True),
    ("tiny_latency", "p99_ms", "card", "ApiVersions round trip p99, ms", False),
    ("latency", "p99_ms", "mock", "E2E busy-poll p99, ms", False),
    ("produce_10KB", "mb_per_s", "mock", "Produce 10 KB, MB/s", True),
    ("produce_10KB", "cpu_s_per_gb", "mock", "Produce 10 KB, CPU s per GB", False),
    ("trio_produce_100B", "mb_per_s", None, "Trio producer 100 B, MB/s", True),
    ("trio_consume_10KB", "mb_per_s", None, "Trio consumer 10 KB, MB/s", True),
    ("breakdown_apiversions_sum", "us", None, "ApiVersions, in-process stages, µs", False),
    ("breakdown_produce_sum", "us", None, "Produce 1 record, in-process stages, µs", False),
    ("breakdown_fetch_sum", "us", None, "Empty Fetch, in-process stages, µs", False),
    ("breakdown_apiversions_cpu", "us", None, "ApiVersions, broker CPU per request, µs", False),
)


def interpreters() -> dict[str, str]:
    """Python version → interpreter path, for this one and the venvs beside it."""
    found = {}
    for path in (sys.executable, *(str(p / "bin" / "python") for p in sorted(ROOT.glob(".venv-py3.*")))):
        if not Path(path).exists():
            continue
        version = subprocess.run(
            [path, "-c", "import platform; print(platform.python_version())"],
            capture_output=True, text=True, timeout=60,
        ).stdout.strip()
        if version:
            found.setdefault(version, path)
    return dict(sorted(found.items(), key=lambda item: tuple(int(x) for x in item[0].split("."))))


def _run_one(python: str, output: Path) -> dict:
    only = ",".join(sorted({workload for workload, *_ in ROWS if not workload.startswith("breakdown")}))
    subprocess.run(
        [python, "-m", "benchmarks", "--rounds", "1", "--only", only, "--output", str(output)],
        cwd=ROOT, check=False, timeout=1800, capture_output=True,
    )
    data = json.loads((output / "latest.json").read_text())
    # The interpreter's own speed, least disturbed by the machine's load: the breakdown's
    # in-process stages (minimum over repeats) and the broker's CPU per request.
    figures = output / "breakdown.json"
    done = subprocess.run(
        [python, "-m", "benchmarks.breakdown", "--count", "2000", "--seconds", "1.5", "--json", str(figures)],
        cwd=ROOT, check=False, timeout=900, capture_output=True,
    )
    if done.returncode == 0:
        breakdown = json.loads(figures.read_text())["workloads"]
        for name, key, workload in (
            ("ApiVersions", "sum_us", "breakdown_apiversions_sum"),
            ("Produce 1 record", "sum_us", "breakdown_produce_sum"),
            ("Fetch empty", "sum_us", "breakdown_fetch_sum"),
            ("ApiVersions", "broker_cpu_us", "breakdown_apiversions_cpu"),
        ):
            if name in breakdown:
                data["workloads"].append({"id": workload, "rounds": {"trikafka": [{"us": breakdown[name][key]}]}})
    return data


def measure(rounds: int, log=print) -> dict:  # noqa: ANN001
    pythons = interpreters()
    runs: dict[str, list[dict]] = {v: [] for v in pythons}
    for r in range(rounds):
        order = list(pythons) if r % 2 == 0 else list(pythons)[::-1]
        for version in order:
            output = ROOT / "benchmarks" / "build" / "pythons" / version / f"round{r}"
            runs[version].append(_run_one(pythons[version], output))
            log(f"[round {r + 1}/{rounds}] Python {version} done")
    table = []
    for workload, metric, reference, label, higher in ROWS:
        row = {"workload": workload, "metric": metric, "label": label, "higher": higher, "by_python": {}}
        for version, datas in runs.items():
            values, ratios = [], []
            for data in datas:
                item = next((w for w in data["workloads"] if w["id"] == workload), None)
                if item is None:
                    continue
                figures = item["rounds"].get("trikafka", [{}])[0]
                if isinstance(figures.get(metric), (int, float)):
                    values.append(figures[metric])
                if reference:
                    ratios += round_ratios(item, metric, reference)
                elif isinstance(figures.get("ratio"), (int, float)):
                    ratios.append(figures["ratio"])
            row["by_python"][version] = {
                "value": statistics.median(values) if values else None,
                "ratio": statistics.median(ratios) if ratios else None,
            }
        table.append(row)
    return {"pythons": pythons, "rounds": rounds, "rows": table}


def markdown(data: dict) -> str:
    versions = list(data["pythons"])
    lines = [
        "| row | " + " | ".join(f"Python {v}" for v in versions) + " | fastest |",
        "|---|" + "---:|" * len(versions) + "---|",
    ]
    wins: dict[str, int] = dict.fromkeys(versions, 0)
    for row in data["rows"]:
        cells, scored = [], {}
        for v in versions:
            figure = row["by_python"].get(v, {})
            value, ratio = figure.get("value"), figure.get("ratio")
            if value is None:
                cells.append("—")
                continue
            text = f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
            if ratio is not None:
                text += f" ({ratio:.2f}×)"
            cells.append(text)
            scored[v] = value  # the figure itself: a reference written in Python gets faster too
        if scored:
            best = max(scored, key=scored.get) if row["higher"] else min(scored, key=scored.get)
            wins[best] += 1
        else:
            best = "—"
        lines.append(f"| {row['label']} | " + " | ".join(cells) + f" | {best} |")
    most = max(wins.values()) if wins else 0
    leaders = [v for v, n in wins.items() if n == most]
    # A tie on rows is broken by the in-process stages: the interpreter's own speed.
    fastest = leaders[0] if len(leaders) == 1 else _least_cpu(data, leaders)
    text = "\n".join(lines) + "\n"
    text += (
        f"\nMedians of {data['rounds']} rounds, the interpreters alternating. In brackets: the ratio to the "
        f"row's reference in the same round (card ceiling, mock, confluent-kafka) on that interpreter; "
        f"\"fastest\" is decided on the figure itself, since the card ceiling and the Python clients "
        f"speed up with the interpreter too. "
    )
    if fastest:
        rows = sum(any(r["by_python"].get(v, {}).get("value") is not None for v in versions) for r in data["rows"])
        text += f"**Python {fastest}** was fastest on {wins[fastest]} of {rows} rows"
        text += " (a tie, broken by the in-process stages)" if len(leaders) > 1 else ""
        text += ": run trikafka on it.\n"
    return text


def _least_cpu(data: dict, versions: list[str]) -> str | None:
    totals = {}
    for v in versions:
        values = [
            row["by_python"].get(v, {}).get("value") for row in data["rows"] if row["workload"].startswith("breakdown")
        ]
        if values and all(x is not None for x in values):
            totals[v] = sum(values)
    return min(totals, key=totals.get) if totals else (versions[0] if versions else None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pythons", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    data = measure(args.rounds)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "pythons.json").write_text(json.dumps(data, indent=1) + "\n")
    (RESULTS / "pythons.md").write_text(markdown(data))
    print(markdown(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
