"""Summaries, goals, the table (rich and Markdown) and the chart, from the harness's JSON.

Every figure is a median over rounds with its min–max; ratios and goals use medians. Beside a
ratio stands the range of the rounds' own ratios (each round measures every target once, so
round i of trikafka is set against round i of the reference): a goal missed by a median
inside that range is within the run's noise, one missed by every round is not.
``python -m benchmarks.report [results.json]`` re-derives the goals, the Markdown table and
the chart of a saved run (rewriting them next to it) without measuring anything.
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "GOALS",
    "PAGE",
    "write_page",
    "Goal",
    "evaluate_goals",
    "format_number",
    "markdown_table",
    "render_chart",
    "rich_tables",
    "round_ratios",
    "summarize",
]

TARGET_LABELS = {
    "trikafka": "trikafka", "mock": "librdkafka mock", "ceiling": "Trio ceiling", "card": "Trio card ceiling",
}
TARGET_COLORS = {"trikafka": "#d95f02", "mock": "#1b9e77", "ceiling": "#7570b3", "card": "#e7298a"}


@dataclass(frozen=True)
class Goal:
    name: str
    workload: str
    metric: str
    op: str  # ">=", "<=", "<"
    threshold: float
    reference: str | None = None  # a target: the goal is on trikafka ÷ reference
    unit: str = ""

    def text(self) -> str:
        op = {">=": "≥", "<=": "≤", "<": "<"}[self.op]
        if self.reference:
            return f"{op} {self.threshold:g}× {TARGET_LABELS[self.reference]}"
        return f"{op} {self.threshold:g} {self.unit}"

    def met(self, value: float) -> bool:
        return {
            ">=": value >= self.threshold,
            "<=": value <= self.threshold,
            "<": value < self.threshold,
        }[self.op]


# The rows of the speed table in docs/performance.md, each with its goal. The tiny-request rows
# are judged against the card-shaped ceiling (benchmarks/trio_card_ceiling.py: the same tree of
# tasks and channels with nothing in it), the Kafka rows against librdkafka's mock cluster.
TINY_CONNECTIONS = (1, 16, 256)
GOALS = (
    *(
        Goal(f"{title} @{c} conn vs card, req/s", f"tiny_{api}_c{c}", "requests_per_s", ">=", 0.85, "card")
        for api, title in (("apiversions", "ApiVersions"), ("metadata", "Metadata"))
        for c in TINY_CONNECTIONS
    ),
    Goal("ApiVersions round trip p99 vs card", "tiny_latency", "p99_ms", "<=", 1.1, "card"),
    Goal("E2E latency p99", "latency", "p99_ms", "<=", 1.5, "mock"),
    Goal("Produce 100 B, MB/s", "produce_100B", "mb_per_s", ">=", 1.0, "mock"),
    Goal("Produce 10 KB, MB/s", "produce_10KB", "mb_per_s", ">=", 1.0, "mock"),
    Goal("Produce 100 B random, MB/s", "produce_random_100B", "mb_per_s", ">=", 1.0, "mock"),
    Goal("Produce 10 KB random, MB/s", "produce_random_10KB", "mb_per_s", ">=", 1.0, "mock"),
    *(
        Goal(f"CPU per GB, {title}", workload, "cpu_s_per_gb", "<=", 1.5, "mock")
        for workload, title in (
            ("produce_100B", "produce 100 B"), ("produce_10KB", "produce 10 KB"),
            ("produce_random_100B", "produce 100 B random"), ("produce_random_10KB", "produce 10 KB random"),
        )
    ),
    Goal("Consume 100 B, MB/s", "consume_100B", "mb_per_s", ">=", 1.0, "mock"),
    Goal("Consume 10 KB, MB/s", "consume_10KB", "mb_per_s", ">=", 1.0, "mock"),
    Goal("Consume 10 KB file log, MB/s", "consume_file_10KB", "mb_per_s", ">=", 1.0, "mock"),
    Goal("CPU per GB produced, 10 KB file", "produce_file_10KB", "cpu_s_per_gb", "<=", 1.0,
         unit="s/GB"),
    Goal("Memory per idle connection", "idle_connections", "kb_per_connection", "<=", 20, unit="KB"),
    Goal("Embedded start, open_broker()", "startup_embedded", "open_ms", "<", 50, unit="ms"),
    Goal("CLI start → 1st ApiVersions", "startup_costs", "cli_ms", "<=", 300, unit="ms"),
    Goal("pytest plugin ÷ import pytest", "startup_costs", "plugin_vs_pytest", "<=", 1.2, unit="×"),
    # The Trio client beside confluent-kafka and aiokafka, same broker, same round
    # (benchmarks/trio_client.py, trio_consumer.py); the figure is the rounds' median ratio.
    *(
        Goal(f"Trio {role} {label} vs {ref}", f"trio_{role}_{label}", metric, ">=", floor, unit="×")
        for role, vs_confluent in (("produce", 0.9), ("consume", 1.0))
        for label in ("100B", "10KB")
        for ref, metric, floor in (("confluent-kafka", "ratio", vs_confluent), ("aiokafka", "ratio_aiokafka", 2.0))
    ),
)


def summarize(rounds: list[dict]) -> dict[str, dict[str, float]]:
    """Median, min and max over rounds of every numeric figure (failed rounds left out)."""
    values: dict[str, list[float]] = {}
    for figures in rounds:
        if "error" in figures:
            continue
        for key, value in figures.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                values.setdefault(key, []).append(float(value))
    return {
        key: {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v)}
        for key, v in values.items()
    }


def _workload(data: dict, workload: str) -> dict | None:
    return next((item for item in data["workloads"] if item["id"] == workload), None)


def _median(data: dict, workload: str, target: str, metric: str) -> float | None:
    item = _workload(data, workload)
    figure = item["summary"].get(target, {}).get(metric) if item else None
    return figure["median"] if figure else None


def round_ratios(item: dict, metric: str, reference: str) -> list[float]:
    """trikafka ÷ ``reference`` round by round, for the rounds in which both have the figure."""
    rounds = item["rounds"]
    ratios = []
    # Every round records every target (a failure as {"error": ...}), so the lists line up.
    for ours, ref in zip(rounds.get("trikafka", []), rounds.get(reference, []), strict=False):
        a, b = ours.get(metric), ref.get(metric)
        if "error" in ours or "error" in ref or not isinstance(a, (int, float)) or not b:
            continue
        ratios.append(a / b)
    return ratios


def evaluate_goals(data: dict) -> list[dict[str, Any]]:
    out = []
    for goal in GOALS:
        ours = _median(data, goal.workload, "trikafka", goal.metric)
        ref = _median(data, goal.workload, goal.reference, goal.metric) if goal.reference else None
        if ours is None or (goal.reference and not ref):
            value = None
        else:
            value = ours / ref if goal.reference else ours
        item = _workload(data, goal.workload)
        if item is None or value is None:
            spread: list[float] = []
        elif goal.reference:
            spread = round_ratios(item, goal.metric, goal.reference)
        else:
            spread = [
                figures[goal.metric] for figures in item["rounds"].get("trikafka", [])
                if "error" not in figures and isinstance(figures.get(goal.metric), (int, float))
            ]
        out.append(
            {
                "name": goal.name,
                "workload": goal.workload,
                "metric": goal.metric,
                "trikafka": ours,
                "reference": goal.reference,
                "reference_value": ref,
                "value": value,
                # The rounds' own figures (ratios round by round for a ratio goal): how far
                # the run's noise reaches on either side of the median.
                "value_min": min(spread) if spread else None,
                "value_max": max(spread) if spread else None,
                "rounds_met": sum(goal.met(v) for v in spread),
                "rounds": len(spread),
                "kind": "ratio" if goal.reference else "absolute",
                "goal": goal.text(),
                "met": None if value is None else goal.met(value),
            }
        )
    return out


def format_number(value: float | None, digits: int) -> str:
    if value is None:
        return "—"
    if digits == 0 or abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:,.{digits}f}"


def _cell(summary: dict, metric: dict) -> str:
    figure = summary.get(metric["key"])
    if not figure:
        return "—"
    d = metric["digits"]
    text = format_number(figure["median"], d)
    if figure["n"] > 1:
        text += f" ({format_number(figure['min'], d)}–{format_number(figure['max'], d)})"
    return text


def _figure_name(metric: dict) -> str:
    """``requests/s``, ``MB/s``: the label is the unit; ``p99 (ms)`` otherwise."""
    if "/s" in metric["label"]:
        return metric["label"]
    return f"{metric['label']} ({metric['unit']})"


def _rows(data: dict) -> list[list[str]]:
    """Workload, metric, one cell per target, ratio, goal, met."""
    goals = {(g["workload"], g["metric"]): g for g in data["goals"]}
    # Workloads judged on an absolute figure (memory, start-up) get no ratio column.
    absolute = {
        g["workload"] for g in data["goals"]
        if g["kind"] == "absolute" and not g["workload"].startswith("produce")
    }
    rows = []
    for item in data["workloads"]:
        for metric in item["metrics"]:
            cells = [
                _cell(item["summary"].get(t, {}), metric) if t in item["targets"] else ""
                for t in TARGET_LABELS
            ]
            goal = goals.get((item["id"], metric["key"]))
            ratio = goal_text = met = ""
            reference = "card" if item["id"].startswith("tiny_") else "mock"
            if goal and goal["kind"] == "absolute":
                goal_text = goal["goal"]
            elif item["id"] not in absolute:
                ours = item["summary"].get("trikafka", {}).get(metric["key"])
                ref = item["summary"].get(reference, {}).get(metric["key"])
                if ours and ref and ref["median"] and reference in item["targets"]:
                    ratio = f"{ours['median'] / ref['median']:.2f}×"
                    per_round = round_ratios(item, metric["key"], reference)
                    if len(per_round) > 1:
                        ratio += f" ({min(per_round):.2f}–{max(per_round):.2f})"
                if goal:
                    goal_text = goal["goal"]
            if goal:
                met = "—" if goal["met"] is None else ("✅" if goal["met"] else "❌")
            rows.append(
                [item["title"], _figure_name(metric), *cells, ratio, goal_text, met]
            )
    return rows


HEADERS = ["workload", "figure", *TARGET_LABELS.values(), "trikafka ÷ ref", "goal", "met"]


def _split_rows(data: dict) -> list[list[str]]:
    item = next((w for w in data["workloads"] if w["id"] == "tiny_split"), None)
    if not item or "trikafka" not in item["summary"]:
        return []
    s = item["summary"]["trikafka"]
    parts = ["RequestQueueTimeMs", "LocalTimeMs", "RemoteTimeMs", "ResponseQueueTimeMs",
             "ResponseSendTimeMs", "TotalTimeMs"]
    rows = []
    for api, title in (("apiversions", "ApiVersions v3"), ("metadata", "Metadata v12")):
        for c in data["settings"]["tiny_connections"]:
            key = f"{api}_c{c}"
            if f"{key}_requests_per_s" not in s:
                continue
            rows.append(
                [f"{title}, {c} conn", format_number(s[f"{key}_requests_per_s"]["median"], 0)]
                + [format_number(s.get(f"{key}_{p}", {}).get("median"), 3) for p in parts]
            )
    return rows


SPLIT_HEADERS = ["embedded trikafka", "req/s", "RequestQueue", "Local", "Remote", "ResponseQueue",
                 "ResponseSend", "Total (mean ms)"]


def rich_tables(data: dict) -> list:
    from rich.table import Table

    table = Table(title="trikafka benchmarks — median (min–max) over rounds", show_lines=False)
    for i, header in enumerate(HEADERS):
        table.add_column(header, justify="left" if i < 2 else "right", no_wrap=i >= 2)
    for row in _rows(data):
        table.add_row(*row)
    tables = [table]
    split = _split_rows(data)
    if split:
        t = Table(title="trikafka's TotalTimeMs split, mean ms per request (broker.statistics())")
        for i, header in enumerate(SPLIT_HEADERS):
            t.add_column(header, justify="left" if i == 0 else "right")
        for row in split:
            t.add_row(*row)
        tables.append(t)
    return tables


def markdown_table(data: dict) -> str:
    def md(headers: list[str], rows: list[list[str]]) -> str:
        lines = ["| " + " | ".join(headers) + " |",
                 "|" + "|".join("---" if i < 2 else "---:" for i in range(len(headers))) + "|"]
        lines += ["| " + " | ".join(cell or " " for cell in row) + " |" for row in rows]
        return "\n".join(lines)

    out = md(HEADERS, _rows(data))
    split = _split_rows(data)
    if split:
        out += "\n\nTotalTimeMs split of the same tiny requests, read from `broker.statistics()` of an\n"
        out += "embedded trikafka (mean ms per request):\n\n" + md(SPLIT_HEADERS, split)
    return out + "\n"


def render_chart(data: dict, path: Path) -> bool:
    """A PNG of the headline figures with min–max whiskers; False when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False

    by_id = {w["id"]: w for w in data["workloads"]}

    def fig(workload: str, target: str, metric: str) -> tuple[float, float, float] | None:
        f = by_id.get(workload, {}).get("summary", {}).get(target, {}).get(metric)
        return (f["median"], f["median"] - f["min"], f["max"] - f["median"]) if f else None

    def bars(ax, groups: list[tuple[str, str]], targets: tuple[str, ...], metric: str,  # noqa: ANN001
             ylabel: str, log: bool = False, goal: float | None = None) -> None:
        width = 0.8 / len(targets)
        plotted = False
        for t_index, target in enumerate(targets):
            xs, ys, lo, hi = [], [], [], []
            for g_index, (workload, _) in enumerate(groups):
                value = fig(workload, target, metric)
                if value:
                    xs.append(g_index + (t_index - (len(targets) - 1) / 2) * width)
                    ys.append(value[0])
                    lo.append(value[1])
                    hi.append(value[2])
            ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, color=TARGET_COLORS[target],
                   label=TARGET_LABELS[target])
            plotted = plotted or any(y > 0 for y in ys)
        ax.set_xticks(range(len(groups)), [label for _, label in groups], fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.tick_params(axis="y", labelsize=8)
        if log and plotted:  # a partial run (--only) leaves some panels empty
            ax.set_yscale("log")
        if goal is not None:
            ax.axhline(goal, color="red", linestyle="--", linewidth=1, label="goal")
        ax.grid(axis="y", alpha=0.3)

    figure, axes = plt.subplots(2, 4, figsize=(17, 7.5))
    sizes = [label for label, _, _ in (tuple(p) for p in data["settings"]["produce"])]
    bars(axes[0][0], [(f"produce_{s}", f"produce\n{s}") for s in sizes]
         + [(f"consume_{s}", f"consume\n{s}") for s in sizes], ("trikafka", "mock"),
         "mb_per_s", "MB/s (payload)", log=True)
    axes[0][0].set_title("Throughput", fontsize=10)
    ax = axes[0][1]
    for t_index, target in enumerate(("trikafka", "mock")):
        for m_index, metric in enumerate(("p50_ms", "p99_ms")):
            value = fig("latency", target, metric)
            if value:
                ax.bar([m_index + (t_index - 0.5) * 0.4], [value[0]], 0.4,
                       yerr=[[value[1]], [value[2]]], capsize=2, color=TARGET_COLORS[target])
    ax.set_xticks([0, 1], ["p50", "p99"], fontsize=8)
    ax.set_ylabel("ms", fontsize=8)
    ax.tick_params(axis="y", labelsize=8)
    ax.grid(axis="y", alpha=0.3)
    axes[0][1].set_title("E2E latency, busy poll (lower is better)", fontsize=10)
    conns = data["settings"]["tiny_connections"]
    for ax, api, title in ((axes[0][2], "apiversions", "ApiVersions v3"),
                           (axes[0][3], "metadata", "Metadata v12, 1 topic")):
        bars(ax, [(f"tiny_{api}_c{c}", f"{c} conn") for c in conns],
             ("trikafka", "mock", "ceiling"), "requests_per_s", "requests/s")
        ax.set_title(f"Tiny requests: {title}", fontsize=10)
    bars(axes[1][0], [("idle_connections", "")], ("trikafka", "mock", "ceiling"),
         "kb_per_connection", "KB per connection", goal=20)
    axes[1][0].set_title("Memory per idle connection (RSS)", fontsize=10)
    bars(axes[1][1], [("startup_embedded", "in-process")], ("trikafka", "mock", "ceiling"),
         "open_ms", "ms", log=True, goal=50)
    axes[1][1].set_title("Start in-process: open_broker() (goal 50 ms)", fontsize=10)
    bars(axes[1][2], [("startup_cli", "process → answer")], ("trikafka", "mock", "ceiling"),
         "ms", "ms", log=True, goal=500)
    axes[1][2].set_title("Start a process (goal 500 ms)", fontsize=10)

    ax = axes[1][3]
    goals = [g for g in data["goals"] if g["value"] is not None]
    scores, names, colors = [], [], []
    for g in goals:
        spec = next(x for x in GOALS if (x.workload, x.metric) == (g["workload"], g["metric"]))
        # 1.0 = exactly at the goal; above 1 = met, whatever the direction of the goal.
        # (A figure of 0, e.g. CPU below the 10 ms clock tick of a --quick run, is capped.)
        if spec.op == ">=":
            score = g["value"] / spec.threshold
        else:
            score = spec.threshold / g["value"] if g["value"] > 0 else 10.0
        scores.append(score)
        names.append(g["name"])
        colors.append("#1b9e77" if g["met"] else "#d95f02")
    ax.barh(range(len(scores)), scores, color=colors)
    ax.set_yticks(range(len(scores)), names, fontsize=7)
    ax.invert_yaxis()
    ax.axvline(1.0, color="red", linestyle="--", linewidth=1)
    ax.set_xscale("log")
    ax.set_title("Goals: score (≥ 1 met)", fontsize=10)
    ax.tick_params(axis="x", labelsize=8)

    handles, labels = axes[0][2].get_legend_handles_labels()
    figure.legend(handles, labels, loc="upper center", ncol=3, fontsize=9, frameon=False)
    meta = data["meta"]
    figure.suptitle(
        f"trikafka benchmarks · {meta['machine']['cpus']} cores · Python {meta['versions']['python']}"
        f" · {data['settings']['rounds']} rounds, median with min–max",
        fontsize=10, y=0.005, va="bottom",
    )
    figure.tight_layout(rect=(0, 0.03, 1, 0.95))
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return True


PAGE = Path(__file__).resolve().parent.parent / "docs" / "performance.md"
PAGE_START, PAGE_END = "<!-- bench:figures -->", "<!-- bench:end -->"


def _goal_value(data: dict, workload: str, metric: str) -> dict | None:
    return next((g for g in data["goals"] if (g["workload"], g["metric"]) == (workload, metric)), None)


def _ratio(data: dict, workload: str, metric: str, reference: str) -> float | None:
    ours, ref = _median(data, workload, "trikafka", metric), _median(data, workload, reference, metric)
    return ours / ref if ours is not None and ref else None


def headline(data: dict) -> list[str]:
    """The few ratios a reader deciding on trikafka wants first, one line each."""
    lines = []

    def span(values: list[float | None]) -> str:
        got = [v for v in values if v is not None]
        if not got:
            return "—"
        return f"{min(got):.2f}×" if min(got) == max(got) else f"{min(got):.2f}–{max(got):.2f}×"

    conns = data["settings"]["tiny_connections"]
    tiny = [f"tiny_{api}_c{c}" for api in ("apiversions", "metadata") for c in conns]
    lines.append(
        f"**Small requests** (ApiVersions, Metadata; {', '.join(map(str, conns))} connections): "
        f"{span([_ratio(data, w, 'requests_per_s', 'card') for w in tiny])} the card-shaped Trio ceiling, "
        f"{span([_ratio(data, w, 'requests_per_s', 'mock') for w in tiny])} librdkafka's mock cluster "
        f"(requests per second)."
    )
    p99 = _ratio(data, "tiny_latency", "p99_ms", "card")
    e2e = _ratio(data, "latency", "p99_ms", "mock")
    lines.append(
        f"**Latency**: an ApiVersions round trip's p99 is {span([p99])} the card ceiling's; a produce → "
        f"busy-polling consumer's p99 is {span([e2e])} the mock's "
        f"({format_number(_median(data, 'latency', 'trikafka', 'p99_ms'), 3)} ms)."
    )
    produce = [f"produce_{label}" for label, _, _ in (tuple(p) for p in data["settings"]["produce"])]
    produce += [f"produce_random_{label}" for label, _, _ in (tuple(p) for p in data["settings"]["produce"])]
    consume = [f"consume_{label}" for label, _, _ in (tuple(p) for p in data["settings"]["produce"])]
    produced = span([_ratio(data, w, "mb_per_s", "mock") for w in produce])
    lines.append(
        f"**Throughput** against the mock (MB/s): produce {produced}, "
        f"consume {span([_ratio(data, w, 'mb_per_s', 'mock') for w in consume])}; server CPU per GB produced "
        f"{span([_ratio(data, w, 'cpu_s_per_gb', 'mock') for w in produce])} the mock's."
    )
    cli = _median(data, "startup_cli", "trikafka", "ms")
    embedded = _median(data, "startup_embedded", "trikafka", "open_ms")
    lines.append(
        f"**Start-up**: a broker process answers its first request {format_number(cli, 0)} ms after it "
        f"starts (the mock: {format_number(_median(data, 'startup_cli', 'mock', 'ms'), 0)} ms); "
        f"`open_broker()` in a running program takes {format_number(embedded, 1)} ms."
    )
    scale = PAGE.parent.parent / "benchmarks" / "results" / "scale.json"
    try:
        curves = {c["id"]: c for c in json.loads(scale.read_text())["curves"]}
    except (OSError, ValueError, KeyError, TypeError):
        curves = {}
    for curve_id, storage in (("partitions-memory", "in memory"), ("partitions-file", "file-backed")):
        last = (curves.get(curve_id) or {}).get("points")
        last = last[-1] if isinstance(last, list) and last else None
        if last:
            lines.append(
                f"**Cost per partition** ({storage}, at {last['partitions']:,} partitions, "
                f"`python -m benchmarks --scale`): {last['kb_per_partition']:.2f} KB of memory, "
                f"{last['create_ms_per_partition']:.2f} ms to create; a Metadata request for every topic "
                f"{last['metadata_ms']:.1f} ms."
            )
    clients = []
    for role, label in (("produce", "100B"), ("produce", "10KB"), ("consume", "100B"), ("consume", "10KB")):
        ratio = _median(data, f"trio_{role}_{label}", "trikafka", "ratio")
        aio = _median(data, f"trio_{role}_{label}", "trikafka", "ratio_aiokafka")
        if ratio is not None:
            clients.append(f"{role} {label}: {ratio:.2f}× confluent-kafka, {aio:.2f}× aiokafka")
    if clients:
        lines.append("**The Trio client** (messages per second, same broker): " + "; ".join(clients) + ".")
    return lines


def goals_markdown(data: dict) -> str:
    lines = ["| row | trikafka | reference | ratio (rounds) | goal | met |", "|---|---:|---:|---:|---|---|"]
    for g in data["goals"]:
        if g["value"] is None:
            lines.append(f"| {g['name']} | — | — | — | {g['goal']} | no figure |")
            continue
        digits = 2 if abs(g["value"]) < 10 else 1
        value = f"{g['value']:.2f}×" if g["kind"] == "ratio" else format_number(g["value"], digits)
        if g["rounds"] > 1 and g["value_min"] is not None:
            value += f" ({g['value_min']:.2f}–{g['value_max']:.2f})"
        ours = format_number(g["trikafka"], 3 if g["trikafka"] and g["trikafka"] < 10 else 0)
        ref = format_number(g["reference_value"], 3 if g["reference_value"] and g["reference_value"] < 10 else 0)
        lines.append(f"| {g['name']} | {ours} | {ref if g['reference'] else ''} | {value} | {g['goal']} | "
                     f"{'met' if g['met'] else 'missed'} |")
    return "\n".join(lines) + "\n"


def figures_markdown(data: dict, assets: str = "assets") -> str:
    """The generated part of docs/performance.md: chart, headline, goals, every row, breakdown."""
    from benchmarks.breakdown import table as breakdown_table

    meta = data["meta"]
    v = meta["versions"]
    load = meta.get("load_average_per_round") or []
    out = [
        f"![trikafka beside librdkafka's mock cluster and the Trio ceilings]({assets}/bench-latest.png)",
        "",
        *(f"- {line}" for line in headline(data)),
        "",
        f"Run `{meta['command']}` on {meta['date'][:10]}: {meta['machine']['cpus']} cores "
        f"({meta['machine']['cpu_model']}), Python {v['python']}, trio {v.get('trio')}, kio {v.get('kio')}, "
        f"librdkafka {v.get('librdkafka')}; {data['settings']['rounds']} rounds, medians (min–max)"
        + (f"; load average {min(load):.1f}–{max(load):.1f} during the run" if load else "") + ".",
        "",
        "### Goals",
        "",
        goals_markdown(data),
        "### Every row",
        "",
        markdown_table(data),
    ]
    if data.get("breakdown"):
        out += [
            "### Where one request's time goes",
            "",
            "µs per request in each stage (`python -m benchmarks.breakdown`, minimum over repeats); the",
            "last rows are the broker's CPU and the round trip on a socket, one client, one request in",
            "flight, beside the card ceiling's for the same client.",
            "",
            breakdown_table(data["breakdown"]),
        ]
        flames = data["breakdown"].get("flame_graphs") or {}
        if flames:
            out += ["Flame graphs of the broker under each request (py-spy, one client): "
                    + ", ".join(f"[{'the card ceiling (ApiVersions)' if name == 'card' else name}]"
                               f"({assets}/{Path(path).name})" for name, path in flames.items()) + ".", ""]
    pythons = PAGE.parent.parent / "benchmarks" / "results" / "pythons.md"
    if pythons.exists():
        out += ["### Which Python", "", pythons.read_text()]
    return "\n".join(out)


def write_page(data: dict, page: Path, output: Path) -> None:
    """Put this run's figures between the page's markers; its chart and flame graphs in assets/."""
    import shutil

    assets = page.parent / "assets"
    assets.mkdir(parents=True, exist_ok=True)
    chart = output / "latest.png"
    if chart.exists():
        shutil.copyfile(chart, assets / "bench-latest.png")
    for path in (data.get("breakdown") or {}).get("flame_graphs", {}).values():
        if Path(path).exists():
            shutil.copyfile(path, assets / Path(path).name)
    text = page.read_text()
    start, end = text.index(PAGE_START) + len(PAGE_START), text.index(PAGE_END)
    page.write_text(text[:start] + "\n" + figures_markdown(data) + "\n" + text[end:])


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console

    argv = sys.argv[1:] if argv is None else argv
    path = Path(argv[0]) if argv else Path(__file__).parent / "results" / "latest.json"
    data = json.loads(path.read_text())
    # Re-derive what is derived (goals, table, chart) from the saved figures.
    data["goals"] = evaluate_goals(data)
    path.write_text(json.dumps(data, indent=1) + "\n")
    path.with_suffix(".md").write_text(markdown_table(data))
    console = Console() if sys.stdout.isatty() else Console(width=200)
    for table in rich_tables(data):
        console.print(table)
    if render_chart(data, path.with_suffix(".png")):
        console.print(f"chart: {path.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
