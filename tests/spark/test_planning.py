"""Offset planning of the Spark source, without Spark: dicts in, dicts out."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trikafka.spark.offsets import (
    KafkaDataLossError,
    OffsetRange,
    OffsetSpec,
    TopicPartition,
    delay_batch,
    offsets_from_json,
    offsets_to_json,
    plan_ranges,
    rate_limit,
    resolve_offsets,
    resume_after_out_of_range,
    split_ranges,
)

A0, A1, A2 = (TopicPartition("a", p) for p in range(3))
B0 = TopicPartition("b", 0)


def no_new(partitions):
    raise AssertionError(f"earliest offsets looked up for {list(partitions)}")


# --- JSON ---------------------------------------------------------------------------------


def test_json_is_sparks_checkpoint_format_in_a_stable_order():
    offsets = {B0: 7, A2: 3, A0: 1, TopicPartition("a", 10): 5}
    encoded = offsets_to_json(offsets)
    assert json.dumps(encoded) == '{"a": {"0": 1, "2": 3, "10": 5}, "b": {"0": 7}}'
    assert offsets_from_json(json.dumps(encoded)) == offsets
    # The same offsets built in another order give the same text: Spark compares the text.
    assert json.dumps(offsets_to_json(dict(reversed(list(offsets.items()))))) == json.dumps(encoded)


@given(st.dictionaries(st.tuples(st.sampled_from("abc"), st.integers(0, 50)), st.integers(0, 2**62)))
def test_json_round_trips(raw):
    offsets = {TopicPartition(t, p): o for (t, p), o in raw.items()}
    assert offsets_from_json(json.loads(json.dumps(offsets_to_json(offsets)))) == offsets


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("nonsense", "expected 'earliest', 'latest' or JSON"),
        ("[1, 2]", "expected a JSON object of topics"),
        ('{"a": 3}', "topic 'a' must map partitions to offsets"),
        ('{"a": {"x": 3}}', "partition 'x' of topic 'a' is not a number"),
        ('{"a": {"0": "3"}}', "offset of a-0 must be an integer"),
        ('{"a": {"0": true}}', "offset of a-0 must be an integer"),
    ],
)
def test_bad_json_names_the_problem(text, problem):
    with pytest.raises(ValueError, match=problem):
        offsets_from_json(text, what="startingOffsets")


# --- maxOffsetsPerTrigger -------------------------------------------------------------------


def test_delay_batch_waits_for_min_offsets_until_max_trigger_delay():
    start = {A0: 10, A1: 0}
    few = {A0: 13, A1: 4}  # 7 new
    enough = {A0: 15, A1: 5}  # 10 new
    kwargs = {"max_delay_ms": 1000}
    # The first trigger of a query runs whatever there is (Spark's lastTriggerMillis = 0).
    assert delay_batch(10, start, few, now_ms=5, last_trigger_ms=None, **kwargs) is False
    assert delay_batch(10, start, few, now_ms=500, last_trigger_ms=0, **kwargs) is True
    assert delay_batch(10, start, enough, now_ms=500, last_trigger_ms=0, **kwargs) is False
    assert delay_batch(10, start, few, now_ms=1000, last_trigger_ms=0, **kwargs) is False  # delay passed
    assert delay_batch(10, start, start, now_ms=1000, last_trigger_ms=0, **kwargs) is False
    # A partition new since the start counts from offset 0, as in Spark.
    assert delay_batch(10, {A0: 10}, {A0: 10, B0: 10}, now_ms=1, last_trigger_ms=0, **kwargs) is False


def test_rate_limit_spreads_the_limit_by_lag():
    start = {A0: 0, A1: 0, A2: 100}
    latest = {A0: 60, A1: 30, A2: 100}
    assert rate_limit(30, start, latest, no_new) == {A0: 20, A1: 10, A2: 100}


def test_rate_limit_gives_every_lagging_partition_at_least_one_offset():
    start = {A0: 0, A1: 0}
    latest = {A0: 1000, A1: 1}
    # A1's share is 10 * 1/1001 < 1: rounded up, not starved; A0's share rounds down.
    assert rate_limit(10, start, latest, no_new) == {A0: 9, A1: 1}


def test_rate_limit_never_passes_the_latest_offset_and_returns_latest_when_caught_up():
    assert rate_limit(10**9, {A0: 5}, {A0: 8}, no_new) == {A0: 8}
    assert rate_limit(10, {A0: 8, A1: 3}, {A0: 8, A1: 3}, no_new) == {A0: 8, A1: 3}


def test_rate_limit_counts_new_partitions_from_their_earliest_offset():
    looked_up = []

    def earliest(partitions):
        looked_up.extend(partitions)
        return {B0: 10}

    assert rate_limit(20, {A0: 0}, {A0: 30, B0: 40}, earliest) == {A0: 10, B0: 20}
    assert looked_up == [B0]


@given(
    st.integers(1, 10_000),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 10_000)), min_size=1, max_size=8),
)
def test_rate_limit_stays_within_start_and_latest(limit, spans):
    start = {TopicPartition("t", i): lo for i, (lo, _) in enumerate(spans)}
    latest = {TopicPartition("t", i): max(lo, hi) for i, (lo, hi) in enumerate(spans)}
    end = rate_limit(limit, start, latest, no_new)
    assert set(end) == set(latest)
    for tp in latest:
        assert start[tp] <= end[tp] <= latest[tp]
    lagging = sum(1 for tp in latest if latest[tp] > start[tp])
    # Each lagging partition may be rounded up by less than one offset.
    assert sum(end[tp] - start[tp] for tp in latest) <= limit + lagging
    if any(latest[tp] > start[tp] for tp in latest):
        assert end != start  # always progress


def test_the_micro_batches_of_a_backlog():
    """Repeated ``latestOffset`` calls walk a backlog down in limit-sized batches."""
    latest = {A0: 60, A1: 30, A2: 0}
    start = {A0: 0, A1: 0, A2: 0}
    sizes = []
    while True:
        end = rate_limit(30, start, latest, no_new)
        if end == start:
            break
        sizes.append(sum(end[tp] - start[tp] for tp in end))
        start = end
    assert sizes == [30, 30, 30]


# --- partitions -----------------------------------------------------------------------------


def test_plan_ranges_one_range_per_partition_with_data():
    ranges, warnings = plan_ranges({A0: 0, A1: 5}, {A0: 3, A1: 5}, {}, fail_on_data_loss=True)
    assert ranges == [OffsetRange(A0, 0, 3)]
    assert warnings == []


def test_new_partitions_start_at_their_earliest_offset():
    ranges, _ = plan_ranges({A0: 2}, {A0: 4, A1: 3}, {A1: 0}, fail_on_data_loss=True)
    assert ranges == [OffsetRange(A0, 2, 4), OffsetRange(A1, 0, 3)]


@pytest.mark.parametrize(
    ("start", "end", "earliest_of_new", "detail"),
    [
        ({A0: 5}, {A0: 5, A1: 9}, {A1: 4}, "Added partition a-1 starts from 4 instead of 0"),
        ({A0: 5}, {A0: 5, A1: 9}, {}, "Cannot find earliest offsets of [a-1]"),
        ({A0: 5, B0: 1}, {A0: 5}, {}, "[b-0] are gone"),
        ({A0: 5}, {A0: 3}, {}, "Partition a-0's offset was changed from 5 to 3"),
    ],
)
def test_plan_ranges_data_loss(start, end, earliest_of_new, detail):
    with pytest.raises(KafkaDataLossError) as failure:
        plan_ranges(start, end, earliest_of_new, fail_on_data_loss=True)
    assert detail in str(failure.value)
    assert "failOnDataLoss' to 'false'" in str(failure.value)

    ranges, warnings = plan_ranges(start, end, earliest_of_new, fail_on_data_loss=False)
    assert len(warnings) == 1 and detail in warnings[0]
    assert all(r.until_offset > r.from_offset for r in ranges)


def test_split_ranges_leaves_enough_ranges_alone():
    ranges = [OffsetRange(A0, 0, 100), OffsetRange(A1, 0, 1)]
    assert split_ranges(ranges, None) == ranges
    assert split_ranges(ranges, 2) == ranges


def test_split_ranges_splits_the_large_ones_like_spark():
    # Cases of Spark's KafkaOffsetRangeCalculatorSuite.
    assert split_ranges([OffsetRange(A0, 1, 11)], 3) == [
        OffsetRange(A0, 1, 4),
        OffsetRange(A0, 4, 7),
        OffsetRange(A0, 7, 11),
    ]
    # SPARK-28489: a small range stays whole and is left out of the proportions.
    ranges = [OffsetRange(A0, 0, 10), OffsetRange(A1, 0, 10), OffsetRange(A2, 0, 1)]
    assert split_ranges(ranges, 6) == [
        OffsetRange(A0, 0, 3),
        OffsetRange(A0, 3, 6),
        OffsetRange(A0, 6, 10),
        OffsetRange(A1, 0, 3),
        OffsetRange(A1, 3, 6),
        OffsetRange(A1, 6, 10),
        OffsetRange(A2, 0, 1),
    ]
    # Empty ranges are dropped.
    assert split_ranges([OffsetRange(A0, 5, 5), OffsetRange(A1, 0, 4)], 2) == [
        OffsetRange(A1, 0, 2),
        OffsetRange(A1, 2, 4),
    ]


@given(st.lists(st.integers(0, 1000), min_size=1, max_size=6), st.integers(1, 40))
def test_split_ranges_covers_every_offset_once(sizes, min_partitions):
    ranges = [OffsetRange(TopicPartition("t", i), 10, 10 + size) for i, size in enumerate(sizes)]
    split = split_ranges(ranges, min_partitions)
    covered = sorted((r.topic_partition, o) for r in split for o in range(r.from_offset, r.until_offset))
    expected = sorted((r.topic_partition, o) for r in ranges for o in range(r.from_offset, r.until_offset))
    assert covered == expected
    assert all(r.size > 0 for r in split)


# --- starting offsets -----------------------------------------------------------------------


class Lookup:
    def __init__(self, earliest, latest, by_time=None):
        self._earliest, self._latest, self._by_time = earliest, latest, by_time or {}

    def earliest(self, partitions):
        return {tp: self._earliest[tp] for tp in partitions}

    def latest(self, partitions):
        return {tp: self._latest[tp] for tp in partitions}

    def for_timestamps(self, timestamps):
        return {tp: self._by_time.get((tp, ts)) for tp, ts in timestamps.items()}


LOOKUP = Lookup({A0: 2, A1: 0}, {A0: 9, A1: 4}, {(A0, 100): 5})


def test_resolve_earliest_latest_and_markers():
    assert resolve_offsets(OffsetSpec("earliest"), {A0, A1}, LOOKUP) == {A0: 2, A1: 0}
    assert resolve_offsets(OffsetSpec("latest"), {A0, A1}, LOOKUP) == {A0: 9, A1: 4}
    spec = OffsetSpec("offsets", offsets={A0: -2, A1: -1})
    assert resolve_offsets(spec, {A0, A1}, LOOKUP) == {A0: 2, A1: 4}
    spec = OffsetSpec("offsets", offsets={A0: 7, A1: 3})
    assert resolve_offsets(spec, {A0, A1}, LOOKUP) == {A0: 7, A1: 3}


def test_specific_offsets_must_name_every_partition():
    spec = OffsetSpec("offsets", offsets={A0: 3})
    with pytest.raises(ValueError, match="you must specify all TopicPartitions"):
        resolve_offsets(spec, {A0, A1}, LOOKUP)


def test_resolve_by_timestamp_and_its_strategy():
    spec = OffsetSpec("timestamps", offsets={A0: 100}, strategy="error", option="startingOffsetsByTimestamp")
    assert resolve_offsets(spec, {A0}, LOOKUP) == {A0: 5}
    spec = OffsetSpec("timestamp", timestamp=100, strategy="error", option="startingTimestamp")
    with pytest.raises(ValueError, match="No offset matched from request of topic-partition a-1 and timestamp 100"):
        resolve_offsets(spec, {A0, A1}, LOOKUP)
    spec = OffsetSpec("timestamp", timestamp=100, strategy="latest")
    assert resolve_offsets(spec, {A0, A1}, LOOKUP) == {A0: 5, A1: 4}


# --- reading past deleted offsets -----------------------------------------------------------


def test_resume_after_retention_deleted_the_start():
    with pytest.raises(KafkaDataLossError) as failure:
        resume_after_out_of_range(A0, 10, 20, 15, 30, fail_on_data_loss=True)
    message = str(failure.value)
    assert "topic 'a', partition 0" in message and "offsets 10 to 14" in message

    resume, warning = resume_after_out_of_range(A0, 10, 20, 15, 30, fail_on_data_loss=False)
    assert resume == 15
    assert warning is not None and "offsets 10 to 14" in warning


def test_resume_when_the_whole_range_is_gone():
    assert resume_after_out_of_range(A0, 10, 20, 25, 30, fail_on_data_loss=False)[0] == 20


def test_resume_when_the_log_was_truncated_below_the_offset():
    with pytest.raises(KafkaDataLossError, match="now ends at offset 4"):
        resume_after_out_of_range(A0, 10, 20, 0, 4, fail_on_data_loss=True)
    assert resume_after_out_of_range(A0, 10, 20, 0, 4, fail_on_data_loss=False)[0] == 20


def test_resume_when_the_offset_is_back_in_range_retries_it():
    assert resume_after_out_of_range(A0, 10, 20, 5, 30, fail_on_data_loss=True) == (10, None)
