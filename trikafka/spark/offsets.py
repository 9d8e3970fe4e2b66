"""Offset planning for the Spark source: pure functions over offsets, no I/O, no Spark.

Spark's streaming engine asks a source three questions per micro-batch, on the driver:
where do we start (``initialOffset``, only for a new query), how far may this batch go
(``latestOffset``), and which tasks read that span (``partitions``). The answers travel as
JSON in Spark's checkpoint, in the format of Spark's own Kafka source — ``{"topic": {"0": 42,
"1": 17}}``: per topic, per partition, the next offset to read — so a checkpoint written by
``format("kafka")`` reads the same here and the other way round.

Spark decides whether a trigger has new data by comparing offsets *as JSON text*, so
:func:`offsets_to_json` always writes topics and partitions in sorted order: the same
offsets give the same text.

The rules follow Spark's ``KafkaMicroBatchStream`` / ``KafkaOffsetReader``:

- ``maxOffsetsPerTrigger`` is spread over partitions in proportion to their lag, a partition
  with any lag gets at least one offset, none goes past its latest offset (:func:`rate_limit`);
- ``minOffsetsPerTrigger`` holds a trigger back while fewer offsets than that are new,
  unless ``maxTriggerDelay`` has passed since the last batch that ran (:func:`delay_batch`);
- partitions discovered since the last batch start at their earliest offset, and a new
  partition whose earliest offset is not 0 has already lost data;
- a partition present at the start of a batch and gone at its end, or whose offset went
  backwards, has lost data (:func:`plan_ranges`);
- ``minPartitions`` splits the larger ranges so that there are about that many tasks
  (:func:`split_ranges`);
- a read that finds its offsets deleted (retention, DeleteRecords) resumes at the earliest
  offset when ``failOnDataLoss`` is false and fails otherwise (:func:`resume_after_out_of_range`).

Data loss is either raised (:class:`KafkaDataLossError`, naming topic, partition and offsets)
or returned as warning lines for the caller to log: this module never logs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, NamedTuple, Protocol

import attrs

__all__ = [
    "EARLIEST",
    "LATEST",
    "KafkaDataLossError",
    "OffsetLookup",
    "OffsetRange",
    "OffsetSpec",
    "Offsets",
    "TopicPartition",
    "offsets_from_json",
    "offsets_to_json",
    "delay_batch",
    "plan_ranges",
    "rate_limit",
    "resolve_offsets",
    "resume_after_out_of_range",
    "split_ranges",
]

#: Spark's markers inside a JSON offset spec: ``-2`` earliest, ``-1`` latest.
EARLIEST = -2
LATEST = -1

_FAIL_HINT = (
    "Some data may have been lost because they are not available in Kafka any more; either the "
    "data was aged out by Kafka or the topic may have been deleted before all the data in the "
    "topic was processed. If you don't want your streaming query to fail on such cases, set the "
    "source option 'failOnDataLoss' to 'false'."
)
_WARN_HINT = (
    "There may have been some data loss because some data may have been aged out in Kafka or "
    "the topic has been deleted and is therefore unavailable for processing. If you want your "
    "streaming query to fail on such cases, set the source option 'failOnDataLoss' to 'true'."
)


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:  # Kafka's TopicPartition.toString
        return f"{self.topic}-{self.partition}"


Offsets = dict[TopicPartition, int]


class KafkaDataLossError(RuntimeError):
    """Offsets the query needs are gone from Kafka and ``failOnDataLoss`` is true."""

    def __init__(self, message: str) -> None:
        super().__init__(f"KAFKA_DATA_LOSS: {message} {_FAIL_HINT}")
        self.detail = message


def _data_loss(message: str, fail_on_data_loss: bool, warnings: list[str]) -> None:
    if fail_on_data_loss:
        raise KafkaDataLossError(message)
    warnings.append(f"{message} {_WARN_HINT}")


@attrs.frozen
class OffsetRange:
    """``[from_offset, until_offset)`` of one topic-partition: what one Spark task reads."""

    topic_partition: TopicPartition
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset


# --- JSON, Spark's checkpoint format ---------------------------------------------------------


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """``{topic: {"partition": offset}}``, topics and partitions sorted (see the module doc)."""
    result: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        result.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return result


def offsets_from_json(value: str | Mapping[str, Any], *, what: str = "offsets") -> Offsets:
    """Parse Spark's ``{"topic": {"0": 23}}`` (a JSON string or the decoded dict).

    Raises :class:`ValueError` naming ``what`` (the option) and the offending entry.
    """
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"{what}: expected 'earliest', 'latest' or JSON like "
                f'{{"topicA":{{"0":23,"1":-1}}}}, got {value!r} ({exc.msg})'
            ) from None
    if not isinstance(value, Mapping):
        raise ValueError(f"{what}: expected a JSON object of topics, got {value!r}")
    offsets: Offsets = {}
    for topic, partitions in value.items():
        if not isinstance(partitions, Mapping):
            raise ValueError(
                f"{what}: topic {topic!r} must map partitions to offsets, got {partitions!r}"
            )
        for partition, offset in partitions.items():
            try:
                number = int(partition)
            except (TypeError, ValueError):
                raise ValueError(
                    f"{what}: partition {partition!r} of topic {topic!r} is not a number"
                ) from None
            if isinstance(offset, bool) or not isinstance(offset, int):
                raise ValueError(
                    f"{what}: offset of {topic}-{partition} must be an integer, got {offset!r}"
                )
            offsets[TopicPartition(str(topic), number)] = offset
    return offsets


# --- starting and ending offsets ---------------------------------------------------------------


@attrs.frozen
class OffsetSpec:
    """What ``startingOffsets``/``endingOffsets`` (or their by-timestamp forms) ask for.

    ``kind`` is ``earliest`` or ``latest``; ``offsets`` (per partition, with Spark's ``-2``
    earliest and ``-1`` latest markers); ``timestamp`` (one timestamp for every partition,
    ``startingTimestamp``); or ``timestamps`` (per partition, ``startingOffsetsByTimestamp``).
    For timestamps, ``strategy`` says what a partition with no record at or after the
    timestamp gets: ``error`` or ``latest``.
    """

    kind: Literal["earliest", "latest", "offsets", "timestamp", "timestamps"]
    offsets: Mapping[TopicPartition, int] = attrs.field(factory=dict)
    timestamp: int | None = None
    strategy: Literal["error", "latest"] = "error"
    option: str = "startingOffsets"


class OffsetLookup(Protocol):
    """The three look-ups resolving an :class:`OffsetSpec` needs (a Kafka admin client)."""

    def earliest(self, partitions: Iterable[TopicPartition]) -> Offsets: ...

    def latest(self, partitions: Iterable[TopicPartition]) -> Offsets: ...

    def for_timestamps(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        """The earliest offset whose timestamp is at or after the given one; ``None`` if none."""
        ...


def resolve_offsets(
    spec: OffsetSpec, partitions: Iterable[TopicPartition], lookup: OffsetLookup
) -> Offsets:
    """Concrete offsets for ``partitions`` (the subscription's current partitions).

    Per-partition specs must name exactly those partitions, as Spark requires.
    """
    partitions = sorted(partitions)
    if spec.kind == "earliest":
        return dict(lookup.earliest(partitions))
    if spec.kind == "latest":
        return dict(lookup.latest(partitions))
    if spec.kind == "timestamp":
        assert spec.timestamp is not None
        return _by_timestamp(spec, {tp: spec.timestamp for tp in partitions}, lookup)
    given = dict(spec.offsets)
    if set(given) != set(partitions):
        raise ValueError(
            f"If {spec.option} contains specific offsets, you must specify all "
            "TopicPartitions. Use -1 for latest, -2 for earliest. "
            f"Specified: {_names(sorted(given))} Assigned: {_names(partitions)}"
        )
    if spec.kind == "timestamps":
        return _by_timestamp(spec, given, lookup)
    earliest = lookup.earliest([tp for tp, o in given.items() if o == EARLIEST])
    latest = lookup.latest([tp for tp, o in given.items() if o == LATEST])
    resolved: Offsets = {}
    for tp, offset in sorted(given.items()):
        resolved[tp] = earliest[tp] if offset == EARLIEST else latest[tp] if offset == LATEST else offset
    return resolved


def _by_timestamp(
    spec: OffsetSpec, timestamps: Mapping[TopicPartition, int], lookup: OffsetLookup
) -> Offsets:
    found = lookup.for_timestamps(timestamps)
    unmatched = sorted(tp for tp in timestamps if found.get(tp) is None)
    if unmatched and spec.strategy == "error":
        first = unmatched[0]
        raise ValueError(
            f"No offset matched from request of topic-partition {first} and timestamp "
            f"{timestamps[first]} ({spec.option}). Set the option "
            "'startingOffsetsByTimestampStrategy' to 'latest' to start such partitions at "
            "their latest offset instead."
        )
    resolved: Offsets = lookup.latest(unmatched) if unmatched else {}
    for tp in timestamps:
        offset = found.get(tp)
        if offset is not None:
            resolved[tp] = offset
    return dict(sorted(resolved.items()))


# --- latestOffset -----------------------------------------------------------------------------


def rate_limit(
    limit: int,
    start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    earliest_of_new: Callable[[Iterable[TopicPartition]], Mapping[TopicPartition, int]],
) -> Offsets:
    """The end offsets of a batch of at most ``limit`` records (Spark's ``rateLimit``).

    ``latest`` holds every current partition; a partition absent from ``start`` is new and
    counted from its earliest offset, which ``earliest_of_new`` looks up only when needed.
    Each partition with lag gets ``limit * lag / total_lag`` offsets, rounded down, but at
    least one, so a small partition is never starved by a large one.
    """
    new = [tp for tp in latest if tp not in start]
    from_new = dict(earliest_of_new(new)) if new else {}
    begins = {tp: start[tp] if tp in start else from_new.get(tp) for tp in latest}
    sizes: dict[TopicPartition, int] = {}
    for tp, end in latest.items():
        begin = begins[tp]
        if begin is not None and end - begin > 0:
            sizes[tp] = end - begin
    total = sum(sizes.values())
    if total < 1:
        return dict(latest)
    result: Offsets = {}
    for tp, end in latest.items():
        if tp not in sizes:
            result[tp] = end
            continue
        begin = begins[tp]
        assert begin is not None
        share = limit * (sizes[tp] / total)  # in doubles, in Spark's order
        take = math.ceil(share) if share < 1 else math.floor(share)
        result[tp] = min(end, begin + take)
    return result


def delay_batch(
    min_offsets: int,
    start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    *,
    now_ms: float,
    last_trigger_ms: float | None,
    max_delay_ms: int,
) -> bool:
    """Whether to skip this trigger for ``minOffsetsPerTrigger`` (Spark's ``delayBatch``).

    A batch runs once ``max_delay_ms`` has passed since the last batch that ran (the first
    trigger of a query always runs), or when at least ``min_offsets`` offsets are new (a
    partition absent from ``start`` counts from 0). The caller records ``now_ms`` as the
    last trigger whenever this returns ``False``.
    """
    if last_trigger_ms is None or now_ms - last_trigger_ms >= max_delay_ms:
        return False
    new = sum(offset - start.get(tp, 0) for tp, offset in latest.items())
    return new < min_offsets


# --- partitions -------------------------------------------------------------------------------


def plan_ranges(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    earliest_of_new: Mapping[TopicPartition, int],
    *,
    fail_on_data_loss: bool,
) -> tuple[list[OffsetRange], list[str]]:
    """The offset ranges of a micro-batch from ``start`` to ``end``, and data-loss warnings.

    ``earliest_of_new`` holds the earliest offsets of the partitions in ``end`` but not in
    ``start`` (discovered since the last batch); a new partition missing from it was deleted
    before it could be read. Empty ranges are dropped. With ``fail_on_data_loss`` the first
    loss raises :class:`KafkaDataLossError`; otherwise each becomes a warning line.
    """
    warnings: list[str] = []
    new = [tp for tp in end if tp not in start]
    missing = sorted(tp for tp in new if tp not in earliest_of_new)
    if missing:
        _data_loss(
            f"Cannot find earliest offsets of {_names(missing)}. Some data may have been missed.",
            fail_on_data_loss,
            warnings,
        )
    for tp in sorted(new):
        if earliest_of_new.get(tp, 0) != 0:
            _data_loss(
                f"Added partition {tp} starts from {earliest_of_new[tp]} instead of 0. "
                "Some data may have been missed.",
                fail_on_data_loss,
                warnings,
            )
    gone = sorted(tp for tp in start if tp not in end)
    if gone:
        _data_loss(
            f"{_names(gone)} are gone. Some data may have been missed.",
            fail_on_data_loss,
            warnings,
        )
    ranges: list[OffsetRange] = []
    for tp in sorted(end):
        begin = start.get(tp, earliest_of_new.get(tp))
        if begin is None:
            continue
        until = end[tp]
        if until < begin:
            _data_loss(
                f"Partition {tp}'s offset was changed from {begin} to {until}, "
                "some data may have been missed.",
                fail_on_data_loss,
                warnings,
            )
            continue
        if until > begin:
            ranges.append(OffsetRange(tp, begin, until))
    return ranges, warnings


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Split the larger ranges so there are about ``min_partitions`` tasks.

    Spark's ``KafkaOffsetRangeCalculator``: ranges too small to deserve two parts stay whole
    and their size is left out of the proportions, so the split ranges share what remains.
    """
    ranges = [r for r in ranges if r.size > 0]
    if min_partitions is None or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)

    def parts(size: int, of_total: int, min_parts: int) -> int:
        return max(_round_half_up(size / of_total * min_parts), 1)

    unsplit = [r for r in ranges if parts(r.size, total, min_partitions) == 1]
    split_total = total - sum(r.size for r in unsplit)
    split_min = max(min_partitions - len(unsplit), 1)
    result: list[OffsetRange] = []
    for r in ranges:
        count = 1 if r in unsplit else parts(r.size, split_total, split_min)
        remaining = r.size
        begin = r.from_offset
        for part in range(count):
            this = remaining // (count - part)
            remaining -= this
            until = min(begin + this, r.until_offset)
            if until > begin:
                result.append(OffsetRange(r.topic_partition, begin, until))
            begin = until
    return result


def _round_half_up(value: float) -> int:
    """Java's ``Math.round``, which Spark uses (Python's ``round`` rounds half to even)."""
    return math.floor(value + 0.5)


# --- read -------------------------------------------------------------------------------------


def resume_after_out_of_range(
    tp: TopicPartition,
    offset: int,
    until: int,
    earliest: int,
    latest: int,
    *,
    fail_on_data_loss: bool,
) -> tuple[int, str | None]:
    """Where to resume reading ``[offset, until)`` of ``tp`` after Kafka said the offset is
    out of range, given the partition's current ``earliest`` and ``latest`` offsets.

    Returns ``(next_offset, warning)``; ``next_offset >= until`` means nothing is left to
    read. Raises :class:`KafkaDataLossError` when ``fail_on_data_loss``.
    """
    warnings: list[str] = []
    if offset < earliest:
        resume = min(earliest, until)
        _data_loss(
            f"Cannot fetch offset {offset} of {tp} (topic {tp.topic!r}, partition "
            f"{tp.partition}): the earliest available offset is {earliest}, so offsets "
            f"{offset} to {resume - 1} of the requested range [{offset}, {until}) are gone.",
            fail_on_data_loss,
            warnings,
        )
        return resume, warnings[0] if warnings else None
    if offset >= latest:
        _data_loss(
            f"Cannot fetch offset {offset} of {tp} (topic {tp.topic!r}, partition "
            f"{tp.partition}): the partition now ends at offset {latest} (was it deleted and "
            f"re-created?), so offsets {offset} to {until - 1} are gone.",
            fail_on_data_loss,
            warnings,
        )
        return until, warnings[0] if warnings else None
    # In range again (the log moved between the fetch and our look-up): retry from here.
    return offset, None


def _names(tps: Iterable[TopicPartition]) -> str:
    return "[" + ", ".join(str(tp) for tp in tps) + "]"
