"""The scale section's curves: whether each grows linearly, as tables, and as PNG plots.

A curve is a list of points ``{x_key: n, metric: value, ...}``. For a *total* cost (bytes of
RSS, seconds of creation) linear growth means a constant cost per unit: each step's marginal
cost ``(c(n2) - c(n1)) / (n2 - n1)`` stays near the first step's. For a cost that should stay
*flat* (a produce's p99 whatever the idle connections) it means no growth at all. A step is
flagged when its marginal cost is more than ``FASTER`` times the median step's (plus a small
absolute slack, so noise on tiny figures is not called growth); a flat cost when a point is
more than ``FASTER`` times the first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["FASTER", "GOALS", "Curve", "evaluate_goals", "growth_verdict", "markdown", "render_png"]

FASTER = 2.0  # a step whose marginal cost is more than this times the first one's grows faster


class Curve(dict):
    """``{"id", "title", "x": key, "x_label", "series": [{"metric", "label", "unit", "kind"}],
    "points": [...], "verdicts": {...}}``; ``kind`` is ``"total"`` (linear = constant
    marginal cost) or ``"flat"`` (linear = no growth)."""


def _steps(points: list[dict], x: str, metric: str) -> list[tuple[int, int, float]]:
    pts = [(p[x], p[metric]) for p in points if p.get(metric) is not None]
    return [(n1, n2, (c2 - c1) / (n2 - n1)) for (n1, c1), (n2, c2) in zip(pts, pts[1:], strict=False) if n2 > n1]


def growth_verdict(points: list[dict], x: str, metric: str, kind: str, slack: float = 0.0) -> dict[str, Any]:
    """Whether ``metric`` grows linearly in ``x``; the steps that grow faster, named."""
    if kind == "flat":
        pts = [(p[x], p[metric]) for p in points if p.get(metric) is not None]
        if len(pts) < 2:
            return {"linear": None, "faster": []}
        base = pts[0][1]
        faster = [
            {"from": pts[0][0], "to": n, "ratio": value / base if base else None}
            for n, value in pts[1:] if value > FASTER * base + slack
        ]
        return {"linear": not faster, "faster": faster, "kind": "flat"}
    steps = _steps(points, x, metric)
    if len(steps) < 2:
        return {"linear": None, "faster": []}
    # The typical step's marginal cost (the median: the small first steps are the noisiest on
    # a shared machine) is the baseline; a step costing more than FASTER times it grows faster.
    marginals = sorted(marginal for *_, marginal in steps)
    base = max(marginals[(len(marginals) - 1) // 2], 0.0)  # the lower median
    faster = [
        {"from": n1, "to": n2, "ratio": marginal / base if base else None}
        for n1, n2, marginal in steps if marginal > FASTER * base + slack
    ]
    return {"linear": not faster, "faster": faster, "kind": "total"}


#: (name, curve id, x at which it is read, metric, op, threshold, unit) — issue 36's goals,
#: reported by the run (never asserted).
GOALS = (
    ("in-memory partition RSS", "partitions-memory", 100_000, "kb_per_partition", "<=", 2.5, "KB"),
    ("100k in-memory partitions RSS", "partitions-memory", 100_000, "rss_growth_mb", "<=", 300, "MB"),
    (
        "Metadata all, 100k partitions, after a change",
        "partitions-memory",
        100_000,
        "metadata_after_one_ms",
        "<=",
        100,
        "ms",
    ),
    ("file-backed CreateTopics per partition", "partitions-file", 100_000, "create_ms_per_partition", "<=", 0.3, "ms"),
    ("clean restart, 20k file-backed partitions", "partitions-file", 20_000, "clean_restart_ms", "<=", 1000, "ms"),
)


def evaluate_goals(curves: list[dict]) -> list[dict[str, Any]]:
    """Each goal with the figure it is read from (None when that point was not measured)."""
    out = []
    by_id = {c["id"]: c for c in curves}
    for name, curve_id, x, metric, op, threshold, unit in GOALS:
        point = next((p for p in by_id.get(curve_id, {}).get("points", []) if p.get(by_id[curve_id]["x"]) == x), None)
        value = None if point is None else point.get(metric)
        met = None if value is None else (value <= threshold if op == "<=" else value >= threshold)
        out.append({"name": name, "at": x, "value": value, "goal": f"{'≤' if op == '<=' else '≥'} {threshold:g} {unit}",
                    "met": met})
    return out


def goals_text(goals: list[dict]) -> list[str]:
    lines = []
    for goal in goals:
        if goal["value"] is None:
            verdict = "not measured in this run"
        else:
            verdict = f"{_fmt(goal['value'])} ({goal['goal']}): {'met' if goal['met'] else 'missed'}"
        lines.append(f"- {goal['name']} (at {goal['at']:,}): {verdict}")
    return lines


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        if abs(value) >= 100:
            return f"{value:,.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def markdown(curves: list[dict]) -> str:
    """Every curve as a Markdown table, with its verdicts below it."""
    out: list[str] = []
    for curve in curves:
        out.append(f"### {curve['title']}\n")
        if curve.get("error"):
            out.append(f"ERROR: {curve['error']}\n")
        columns = [curve["x"]] + [c for c in curve["columns"] if c != curve["x"]]
        headers = [curve.get("labels", {}).get(c, c) for c in columns]
        out.append("| " + " | ".join(headers) + " |")
        out.append("|" + "|".join("---:" for _ in headers) + "|")
        for point in curve["points"]:
            out.append("| " + " | ".join(_fmt(point.get(c)) for c in columns) + " |")
        out.append("")
        for metric, verdict in curve.get("verdicts", {}).items():
            out.append(f"- {verdict_text(curve, metric, verdict)}")
        out.append("")
    return "\n".join(out)


def verdict_text(curve: dict, metric: str, verdict: dict) -> str:
    label = curve.get("labels", {}).get(metric, metric)
    if verdict["linear"] is None:
        return f"{label}: too few points to tell"
    if verdict["linear"] and verdict.get("kind") == "flat":
        return f"{label}: stays flat (no point above {FASTER:g}× the first)"
    if verdict["linear"]:
        return f"{label}: grows linearly (no step's marginal cost above {FASTER:g}× the median step's)"
    steps = ", ".join(
        f"{s['from']:,}→{s['to']:,}" + (f" ({s['ratio']:.1f}×)" if s["ratio"] else "") for s in verdict["faster"]
    )
    if verdict.get("kind") == "flat":
        return f"{label}: NOT FLAT, GROWS at {steps} (above {FASTER:g}× the first)"
    return f"{label}: GROWS FASTER than linearly at {steps}"


def render_png(curve: dict, path: Path) -> bool:
    """One PNG per curve: each plotted metric against x (log-log where x spans decades)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    plotted = curve.get("plot", [])
    if not plotted or not curve["points"]:
        return False
    fig, axes = plt.subplots(1, len(plotted), figsize=(4.6 * len(plotted), 3.6), squeeze=False)
    for ax, metric in zip(axes[0], plotted, strict=True):
        for series in curve.get("series_by", [None]):
            pts = [p for p in curve["points"] if series is None or p.get(curve["series_key"]) == series]
            xs = [p[curve["x"]] for p in pts if p.get(metric) is not None]
            ys = [p[metric] for p in pts if p.get(metric) is not None]
            if xs:
                ax.plot(xs, ys, marker="o", label=series or metric)
        ax.set_xlabel(curve.get("labels", {}).get(curve["x"], curve["x"]))
        ax.set_title(curve.get("labels", {}).get(metric, metric), fontsize=9)
        xs_all = [p[curve["x"]] for p in curve["points"]]
        if xs_all and min(xs_all) > 0 and max(xs_all) / min(xs_all) >= 30:
            ax.set_xscale("log")
        ax.set_ylim(bottom=0)  # from zero: a flat curve looks flat, not like noise magnified
        ax.grid(True, alpha=0.3)
        if curve.get("series_by"):
            ax.legend(fontsize=8)
    fig.suptitle(curve["title"], fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True
