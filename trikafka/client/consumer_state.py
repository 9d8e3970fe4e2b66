"""What a consumer is subscribed to, what it is assigned, and where it reads: pure state.

Kafka's ``SubscriptionState``. A consumer is in one of three subscription modes, never two at
once: topics (``subscribe(["a", "b"])``), a pattern (``subscribe(re.compile("a.*"))``, matched
against the cluster's topic names on every metadata refresh), or a manual assignment
(``assign([...])``, no group membership). Mixing them is the application's error
(Kafka's IllegalStateException: "Subscription to topics, partitions and pattern are mutually
exclusive").

Each assigned partition has a *position* — the offset of the next record the application
will see — or none yet: then it is initialised from the committed offset, or failing that by
``auto.offset.reset`` (earliest, latest, or none = an error naming the partition). A paused
partition keeps its position and buffered records but is not fetched nor returned.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable

import attrs

from trikafka.client.consumer_protocol import TopicPartition

__all__ = ["OffsetResetStrategy", "PartitionState", "SubscriptionMode", "SubscriptionState"]


class SubscriptionMode(enum.Enum):
    NONE = "NONE"
    AUTO_TOPICS = "AUTO_TOPICS"
    AUTO_PATTERN = "AUTO_PATTERN"
    USER_ASSIGNED = "USER_ASSIGNED"


class OffsetResetStrategy(enum.Enum):
    EARLIEST = "earliest"
    LATEST = "latest"
    NONE = "none"


@attrs.define
class PartitionState:
    position: int | None = None  # next offset the application sees
    paused: bool = False
    reset: OffsetResetStrategy | None = None  # a pending seek_to_beginning/end
    high_watermark: int = -1
    last_stable_offset: int = -1


_EXCLUSIVE = "subscription to topics, partitions and pattern are mutually exclusive"


class SubscriptionState:
    def __init__(self, default_reset: OffsetResetStrategy = OffsetResetStrategy.LATEST) -> None:
        self.mode = SubscriptionMode.NONE
        self.topics: frozenset[str] = frozenset()
        self.pattern: re.Pattern[str] | None = None
        self.assignment: dict[TopicPartition, PartitionState] = {}
        self.default_reset = default_reset

    # --- subscription --------------------------------------------------------------------

    def _set_mode(self, mode: SubscriptionMode) -> None:
        if self.mode not in (SubscriptionMode.NONE, mode):
            raise ValueError(_EXCLUSIVE)
        self.mode = mode

    def subscribe(self, topics: Iterable[str]) -> bool:
        """Subscribe to exactly these topics; True when that changed the subscription."""
        names = frozenset(topics)
        for name in names:
            if not isinstance(name, str) or not name:
                raise ValueError(f"topic names must be non-empty strings, got {name!r}")
        self._set_mode(SubscriptionMode.AUTO_TOPICS)
        changed = names != self.topics
        self.topics = names
        return changed

    def subscribe_pattern(self, pattern: str | re.Pattern[str]) -> None:
        self._set_mode(SubscriptionMode.AUTO_PATTERN)
        self.pattern = re.compile(pattern) if isinstance(pattern, str) else pattern

    def match_pattern(self, cluster_topics: Iterable[str]) -> bool:
        """Re-evaluate the pattern on fresh metadata; True when the matched set changed.
        Internal topics (``__consumer_offsets``, ``__transaction_state``) never match."""
        assert self.pattern is not None
        matched = frozenset(
            t for t in cluster_topics if not t.startswith("__") and self.pattern.fullmatch(t)
        )
        changed = matched != self.topics
        self.topics = matched
        return changed

    def unsubscribe(self) -> None:
        self.mode = SubscriptionMode.NONE
        self.topics = frozenset()
        self.pattern = None
        self.assignment.clear()

    @property
    def has_auto_assignment(self) -> bool:
        return self.mode in (SubscriptionMode.AUTO_TOPICS, SubscriptionMode.AUTO_PATTERN)

    # --- assignment ------------------------------------------------------------------------

    def assign_from_user(self, partitions: Iterable[TopicPartition]) -> None:
        self._set_mode(SubscriptionMode.USER_ASSIGNED)
        self._replace(set(partitions))
        self.topics = frozenset(tp.topic for tp in self.assignment)

    def assign_from_group(self, partitions: Iterable[TopicPartition]) -> None:
        """The group's answer; partitions kept keep their position (cooperative rebalance)."""
        if not self.has_auto_assignment:
            raise ValueError("group assignment without a subscription")
        self._replace(set(partitions))

    def _replace(self, partitions: set[TopicPartition]) -> None:
        self.assignment = {
            tp: self.assignment.get(tp) or PartitionState() for tp in sorted(partitions)
        }

    def revoke(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self.assignment.pop(tp, None)

    def assigned(self) -> set[TopicPartition]:
        return set(self.assignment)

    def _state(self, tp: TopicPartition) -> PartitionState:
        try:
            return self.assignment[tp]
        except KeyError:
            raise ValueError(f"partition {tp} is not assigned to this consumer") from None

    # --- positions -------------------------------------------------------------------------

    def seek(self, tp: TopicPartition, offset: int) -> None:
        if offset < 0:
            raise ValueError(f"seek offset must be >= 0, got {offset} for {tp}")
        state = self._state(tp)
        state.position = offset
        state.reset = None

    def request_reset(self, tp: TopicPartition, strategy: OffsetResetStrategy) -> None:
        state = self._state(tp)
        state.position = None
        state.reset = strategy

    def position(self, tp: TopicPartition) -> int | None:
        return self._state(tp).position

    def missing_positions(self) -> list[TopicPartition]:
        return [tp for tp, s in self.assignment.items() if s.position is None]

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self._state(tp).paused = True

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self._state(tp).paused = False

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, s in self.assignment.items() if s.paused}

    def is_fetchable(self, tp: TopicPartition) -> bool:
        state = self.assignment.get(tp)
        return state is not None and not state.paused and state.position is not None

    def fetchable(self) -> list[TopicPartition]:
        return [tp for tp in self.assignment if self.is_fetchable(tp)]

    def consumed_offsets(self) -> dict[TopicPartition, int]:
        """What ``commit()`` with no arguments commits: every assigned partition's position."""
        return {tp: s.position for tp, s in self.assignment.items() if s.position is not None}
