"""Partition assignors run by the group leader: ``range`` and ``cooperative-sticky``.

The leader of a classic consumer group receives every member's subscription in JoinGroup and
decides who consumes what; the other members only apply what SyncGroup hands them. The names
are Kafka's (``partition.assignment.strategy``), so Java, librdkafka and trikafka members
agree on an assignor in a mixed group; the broker picks the first one every member lists.

``range`` (Kafka's RangeAssignor, eager): per topic, the members subscribed to it sorted —
static members by ``group.instance.id`` first, then dynamic ones by member id — each get a
contiguous run of ``n // m`` partitions, the first ``n % m`` members one more. Same answer as
the Java and librdkafka range assignors for the same inputs (racks are not used).

``cooperative-sticky`` (KIP-429, Kafka's CooperativeStickyAssignor): balanced like round robin,
but a member keeps the partitions it owned as long as balance allows, and — the cooperative
part — a partition that moves from one member to another is *not* given to its new owner in the
same rebalance: the old owner revokes it, which makes it rejoin, and the partition is assigned
in the follow-up rebalance. So nobody ever stops consuming partitions that stay put. When every
member subscribes to the same topics we follow Kafka's constrained algorithm (keep owned
partitions up to the quota, fill the members below quota round-robin); otherwise a greedy
general pass (keep owned, give each free partition to the least-loaded eligible member, then
move partitions from the most to the least loaded while that narrows the gap) — balanced and
sticky, though not always the partition-for-partition answer of Kafka's general assignor.

Ownership claims are checked as Kafka does: the generation a member reports (ConsumerProtocol
v2+, else the 4-byte user data this assignor writes) decides a conflict — a claim from an older
generation loses; two claims from the same generation both lose. Pure functions; no trio.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from trikafka.client.consumer_protocol import Assignment, Subscription, TopicPartition

__all__ = [
    "ASSIGNORS",
    "CooperativeStickyAssignor",
    "PartitionAssignor",
    "RangeAssignor",
    "assignor_for",
]

logger = logging.getLogger(__name__)
_GENERATION = struct.Struct(">i")


class PartitionAssignor:
    """What the leader needs from an assignor; the member only needs ``name`` and the user data."""

    name: ClassVar[str]
    rebalance_protocol: ClassVar[str]  # "EAGER" or "COOPERATIVE"

    def subscription_user_data(self, generation_id: int) -> bytes | None:
        return None

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        raise NotImplementedError


def _member_order(member_id: str, subscription: Subscription) -> tuple[Any, ...]:
    # Kafka's MemberInfo order: static members (by instance id) before dynamic (by member id).
    if subscription.group_instance_id is not None:
        return (0, subscription.group_instance_id, member_id)
    return (1, member_id, "")


class RangeAssignor(PartitionAssignor):
    name = "range"
    rebalance_protocol = "EAGER"

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        assigned: dict[str, list[TopicPartition]] = {member: [] for member in subscriptions}
        ordered = sorted(subscriptions, key=lambda m: _member_order(m, subscriptions[m]))
        for topic in sorted({t for s in subscriptions.values() for t in s.topics}):
            count = partitions_per_topic.get(topic)
            if not count:
                continue
            members = [m for m in ordered if topic in subscriptions[m].topics]
            per_member, extra = divmod(count, len(members))
            for index, member in enumerate(members):
                start = per_member * index + min(index, extra)
                length = per_member + (1 if index < extra else 0)
                assigned[member].extend(TopicPartition(topic, p) for p in range(start, start + length))
        return {member: Assignment(tuple(parts)) for member, parts in assigned.items()}


class CooperativeStickyAssignor(PartitionAssignor):
    name = "cooperative-sticky"
    rebalance_protocol = "COOPERATIVE"

    def subscription_user_data(self, generation_id: int) -> bytes | None:
        # Kafka's CooperativeStickyAssignor user data v0: the member's generation (for members
        # that speak ConsumerProtocol v0/v1, which has no generation field).
        return _GENERATION.pack(generation_id)

    @staticmethod
    def _generation(subscription: Subscription) -> int:
        if subscription.generation_id >= 0:
            return subscription.generation_id
        data = subscription.user_data
        if data is not None and len(data) >= 4:
            result: int = _GENERATION.unpack_from(data)[0]
            return result
        return -1

    def _valid_owned(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        """Each member's claims that still stand: the partition exists, the member still
        subscribes to its topic, and no member of a newer generation claims it too."""
        best: dict[TopicPartition, tuple[int, str | None]] = {}
        for member, subscription in subscriptions.items():
            generation = self._generation(subscription)
            for tp in subscription.owned_partitions:
                if tp.partition >= partitions_per_topic.get(tp.topic, 0):
                    continue
                if tp.topic not in subscription.topics:
                    continue
                previous = best.get(tp)
                if previous is None or generation > previous[0]:
                    best[tp] = (generation, member)
                elif generation == previous[0]:
                    logger.warning(
                        "members %s and %s of generation %d both claim %s; neither keeps it",
                        previous[1], member, generation, tp,
                    )
                    best[tp] = (generation, None)
        owned: dict[str, list[TopicPartition]] = {member: [] for member in subscriptions}
        for tp, (_, owner) in best.items():
            if owner is not None:
                owned[owner].append(tp)
        for parts in owned.values():
            parts.sort()
        return owned

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        if not subscriptions:
            return {}
        owned = self._valid_owned(partitions_per_topic, subscriptions)
        topic_sets = {frozenset(s.topics) for s in subscriptions.values()}
        if len(topic_sets) == 1:
            assigned = _constrained_assign(partitions_per_topic, next(iter(topic_sets)), owned)
        else:
            assigned = _general_assign(partitions_per_topic, subscriptions, owned)
        # The cooperative step: a partition that changes hands goes to nobody this round; its
        # previous owner sees it missing, revokes it and rejoins.
        previous_owner = {tp: member for member, parts in owned.items() for tp in parts}
        result = {}
        for member, parts in assigned.items():
            kept = [tp for tp in parts if previous_owner.get(tp, member) == member]
            result[member] = Assignment(tuple(sorted(kept)))
        return result


def _all_partitions(partitions_per_topic: Mapping[str, int], topics: Iterable[str]) -> list[TopicPartition]:
    return [
        TopicPartition(topic, p)
        for topic in sorted(topics)
        for p in range(partitions_per_topic.get(topic, 0))
    ]


def _constrained_assign(
    partitions_per_topic: Mapping[str, int],
    topics: frozenset[str],
    owned: dict[str, list[TopicPartition]],
) -> dict[str, list[TopicPartition]]:
    """Kafka's constrainedAssign: every member subscribes to the same topics."""
    members = sorted(owned)
    partitions = _all_partitions(partitions_per_topic, topics)
    min_quota, over = divmod(len(partitions), len(members))
    max_quota = min_quota + (1 if over else 0)
    members_at_max = 0
    assigned: dict[str, list[TopicPartition]] = {m: [] for m in members}
    # Step 1: members keep what they owned, up to their quota; the rest is released.
    for member in sorted(members, key=lambda m: -len(owned[m])):
        claims = owned[member]
        if len(claims) <= min_quota:
            assigned[member] = list(claims)
        elif members_at_max < over:
            assigned[member] = claims[:max_quota]
            members_at_max += 1
        else:
            assigned[member] = claims[:min_quota]
    taken = {tp for parts in assigned.values() for tp in parts}
    free = [tp for tp in partitions if tp not in taken]
    # Step 2: fill members below min quota round-robin, then hand out the remainder one each
    # to members still at min quota while fewer than ``over`` members hold max quota.
    unfilled = [m for m in members if len(assigned[m]) < min_quota]
    position = 0
    while free and unfilled:
        position %= len(unfilled)
        member = unfilled[position]
        assigned[member].append(free.pop(0))
        if len(assigned[member]) >= min_quota:
            del unfilled[position]  # the next member moves into this slot
        else:
            position += 1
    for member in members:
        if not free:
            break
        if len(assigned[member]) == min_quota and members_at_max < over:
            assigned[member].append(free.pop(0))
            members_at_max += 1
    if free:  # cannot happen with consistent quotas; never drop a partition silently
        raise AssertionError(f"cooperative-sticky left {free} unassigned")
    return assigned


def _general_assign(
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, Subscription],
    owned: dict[str, list[TopicPartition]],
) -> dict[str, list[TopicPartition]]:
    """Members subscribe to different topics: keep owned, place free partitions on the
    least-loaded eligible member, then move from the most to the least loaded while it helps."""
    assigned = {member: list(parts) for member, parts in owned.items()}
    taken = {tp for parts in assigned.values() for tp in parts}
    all_topics = {t for s in subscriptions.values() for t in s.topics}
    eligible = {
        topic: sorted(m for m, s in subscriptions.items() if topic in s.topics) for topic in all_topics
    }
    for tp in _all_partitions(partitions_per_topic, all_topics):
        if tp in taken:
            continue
        member = min(eligible[tp.topic], key=lambda m: (len(assigned[m]), m))
        assigned[member].append(tp)
    moved = True
    while moved:
        moved = False
        for member in sorted(assigned, key=lambda m: (-len(assigned[m]), m)):
            for tp in sorted(assigned[member], reverse=True):
                target = min(eligible[tp.topic], key=lambda m: (len(assigned[m]), m))
                if len(assigned[target]) + 1 < len(assigned[member]):
                    assigned[member].remove(tp)
                    assigned[target].append(tp)
                    moved = True
                    break
            if moved:
                break
    return assigned


ASSIGNORS: dict[str, type[PartitionAssignor]] = {
    RangeAssignor.name: RangeAssignor,
    CooperativeStickyAssignor.name: CooperativeStickyAssignor,
}


def assignor_for(name: str) -> PartitionAssignor:
    """The assignor named in ``partition.assignment.strategy``, Kafka's short names or Java's
    class names; anything else is refused naming what is allowed."""
    short = {
        "org.apache.kafka.clients.consumer.RangeAssignor": "range",
        "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
    }.get(name, name)
    try:
        return ASSIGNORS[short]()
    except KeyError:
        raise ValueError(
            f"partition.assignment.strategy {name!r} is not supported; allowed: {sorted(ASSIGNORS)}"
        ) from None
