"""The harness's report: goals judged on medians, with the rounds' own spread beside them.

Synthetic runs, no servers: what the table and the goals say of three rounds whose figures
are known.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.report import evaluate_goals, markdown_table, round_ratios, summarize  # noqa: E402

METRIC = {"key": "mb_per_s", "label": "MB/s", "unit": "MB/s", "higher_is_better": True, "digits": 1}


def _workload(ours: list[dict], mock: list[dict]) -> dict:
    return {
        "id": "produce_100B",
        "title": "Produce 100B",
        "targets": ["trikafka", "mock"],
        "metrics": [METRIC],
        "rounds": {"trikafka": ours, "mock": mock},
        "summary": {"trikafka": summarize(ours), "mock": summarize(mock)},
    }


def _run(ours: list[dict], mock: list[dict]) -> dict:
    data = {"workloads": [_workload(ours, mock)]}
    data["goals"] = evaluate_goals(data)
    return data


def _goal(data: dict) -> dict:
    (goal,) = [g for g in data["goals"] if (g["workload"], g["metric"]) == ("produce_100B", "mb_per_s")]
    return goal


def test_round_ratios_pair_each_round_with_the_same_round_of_the_reference() -> None:
    item = _workload([{"mb_per_s": 90}, {"mb_per_s": 120}, {"mb_per_s": 100}],
                     [{"mb_per_s": 100}, {"mb_per_s": 100}, {"mb_per_s": 125}])
    assert round_ratios(item, "mb_per_s", "mock") == [0.9, 1.2, 0.8]


def test_a_round_that_failed_on_either_side_is_left_out() -> None:
    item = _workload([{"mb_per_s": 90}, {"error": "boom"}, {"mb_per_s": 100}],
                     [{"mb_per_s": 100}, {"mb_per_s": 100}, {"error": "boom"}])
    assert round_ratios(item, "mb_per_s", "mock") == [0.9]


def test_a_goal_carries_the_rounds_spread_and_how_many_rounds_met_it() -> None:
    goal = _goal(_run([{"mb_per_s": 90}, {"mb_per_s": 120}, {"mb_per_s": 100}],
                      [{"mb_per_s": 100}, {"mb_per_s": 100}, {"mb_per_s": 125}]))
    assert goal["value"] == 1.0  # medians: 100 ÷ 100, judged met
    assert goal["met"] is True
    assert (goal["value_min"], goal["value_max"]) == (0.8, 1.2)
    assert (goal["rounds_met"], goal["rounds"]) == (1, 3)


def test_the_table_shows_the_rounds_ratio_range_beside_the_median_ratio() -> None:
    table = markdown_table(_run([{"mb_per_s": 90}, {"mb_per_s": 120}, {"mb_per_s": 100}],
                                [{"mb_per_s": 100}, {"mb_per_s": 100}, {"mb_per_s": 125}]))
    (row,) = [line for line in table.splitlines() if line.startswith("| Produce 100B |")]
    assert "| 1.00× (0.80–1.20) |" in row


def test_one_round_shows_no_range() -> None:
    data = _run([{"mb_per_s": 90}], [{"mb_per_s": 100}])
    (row,) = [line for line in markdown_table(data).splitlines() if line.startswith("| Produce 100B |")]
    assert "| 0.90× |" in row
    assert (_goal(data)["rounds_met"], _goal(data)["rounds"]) == (0, 1)
