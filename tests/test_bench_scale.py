"""The scale section's verdicts: which curves it calls linear, which steps it prints as growing
faster, and the goals it reads — on synthetic curves, no servers."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.scale_report import evaluate_goals, growth_verdict, markdown  # noqa: E402

SIZES = (1_000, 3_000, 10_000, 20_000, 30_000, 100_000)


def _curve(cost) -> list[dict]:
    return [{"partitions": n, "cost": cost(n)} for n in SIZES]


def test_a_linear_cost_with_an_intercept_and_noise_on_the_small_steps_is_linear():
    points = _curve(lambda n: 400 + 0.025 * n)
    points[0]["cost"] += 250  # a noisy first point, as on a shared machine
    verdict = growth_verdict(points, "partitions", "cost", "total")
    assert verdict["linear"] is True and verdict["faster"] == []


def test_a_quadratic_cost_is_flagged_at_its_large_steps():
    verdict = growth_verdict(_curve(lambda n: n * n / 1e6), "partitions", "cost", "total")
    assert verdict["linear"] is False
    assert (verdict["faster"][-1]["from"], verdict["faster"][-1]["to"]) == (30_000, 100_000)


def test_a_flat_cost_that_climbs_is_flagged_and_one_that_stays_is_not():
    climbing = [{"n": n, "p99": 0.3 * (1 + n / 1_000)} for n in (1_000, 3_000, 10_000)]
    assert growth_verdict(climbing, "n", "p99", "flat")["linear"] is False
    steady = [{"n": n, "p99": p} for n, p in ((1_000, 0.31), (3_000, 0.30), (10_000, 0.33))]
    assert growth_verdict(steady, "n", "p99", "flat")["linear"] is True


def test_the_table_says_what_grows_faster_and_the_goals_read_their_point():
    points = [{"partitions": n, "kb_per_partition": 1.8, "cost": n * n / 1e6} for n in SIZES]
    curve = {"id": "partitions-memory", "title": "t", "x": "partitions", "columns": ["cost"], "points": points,
             "verdicts": {"cost": growth_verdict(points, "partitions", "cost", "total")}}
    assert "GROWS FASTER than linearly at 30,000→100,000" in markdown([curve])
    goals = {g["name"]: g for g in evaluate_goals([curve])}
    assert goals["in-memory partition RSS"]["value"] == 1.8 and goals["in-memory partition RSS"]["met"] is True
    assert goals["clean restart, 20k file-backed partitions"]["value"] is None  # no such curve


def test_a_flat_curve_that_climbs_is_not_called_faster_than_linear():
    points = [{"n": n, "us": us} for n, us in ((1_000, 3.0), (10_000, 5.0), (100_000, 16.0))]
    curve = {"id": "c", "title": "t", "x": "n", "columns": ["us"], "points": points,
             "verdicts": {"us": growth_verdict(points, "n", "us", "flat")}}
    assert "us: NOT FLAT, GROWS at 1,000→100,000 (5.3×)" in markdown([curve])
