"""``python -m benchmarks.spark`` measures every row: figures checked for shape, never speed."""

from __future__ import annotations

import math

import pyarrow  # noqa: F401 - installed by the spark extra; must not skip
import pyspark  # noqa: F401

from benchmarks.spark import GOALS, markdown, measure


def test_every_spark_bench_figure_is_positive(spark, kafka):
    figures = measure(spark, kafka.bootstrap, records=600, sink_records=300, rounds=1)

    assert set(figures) == {
        "consumer_records_per_s", "source_records_per_s", "at_least_once_records_per_s",
        "exactly_once_records_per_s", *GOALS,
    }
    for value in figures.values():
        assert isinstance(value, float) and math.isfinite(value) and value > 0
    table = markdown(figures, {"records": 600, "sink_records": 300, "rounds": 1, "load": 1.0})
    assert "trikafka sink, exactly-once" in table and table.count("| met |") + table.count("| missed |") == 2
