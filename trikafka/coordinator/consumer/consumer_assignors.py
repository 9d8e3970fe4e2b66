"""The server-side assignors of consumer groups: ``uniform`` and ``range`` (KIP-848).

Theory of operation
-------------------
An assignor is a pure function from the members' subscriptions, the subscribed topics'
partition counts and the previous target assignment to the new target assignment; the
coordinator runs it when the group epoch passes the assignment epoch. Both are
deterministic (members are ordered by id), so a replayed group computes what it computed.

* ``uniform`` (Kafka's UniformAssignor, the default): every partition of a subscribed topic
  goes to exactly one member subscribed to it; members' partition counts differ by at most
  one wherever their subscriptions allow it; and it is **sticky** — a partition stays with
  its previous owner unless balance requires a move, so a rebalance revokes as little as
  possible. Previous targets are kept, free partitions go to the least-loaded eligible
  member, then partitions move from the most- to the least-loaded until no move helps.
* ``range`` (Kafka's RangeAssignor): per topic, the members subscribed to it (in id order)
  receive contiguous ranges, the first ``partitions % members`` one more. Members with the
  same subscription therefore get the same partition numbers of co-partitioned topics.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping

from trikafka.coordinator.consumer.consumer_group import Assignment

__all__ = ["ASSIGNORS", "assign"]

Subscriptions = Mapping[str, frozenset[str]]  # member id → subscribed (existing) topics
TopicPartition = tuple[str, int]


def _group(owner: Mapping[TopicPartition, str], members: list[str]) -> dict[str, dict[str, frozenset[int]]]:
    result: dict[str, dict[str, set[int]]] = {m: {} for m in members}
    for (topic, partition), member in owner.items():
        result[member].setdefault(topic, set()).add(partition)
    return {m: {t: frozenset(ps) for t, ps in sorted(a.items())} for m, a in result.items()}


def uniform(
    subscriptions: Subscriptions, topics: Mapping[str, int], previous: Mapping[str, Assignment]
) -> dict[str, dict[str, frozenset[int]]]:
    members = sorted(subscriptions)
    owner: dict[TopicPartition, str] = {}
    owned: dict[str, list[TopicPartition]] = {m: [] for m in members}
    for member in members:  # stickiness: keep what is still valid
        for topic, partitions in sorted(previous.get(member, {}).items()):
            if topic not in subscriptions[member] or topic not in topics:
                continue
            for partition in sorted(partitions):
                if partition < topics[topic] and (topic, partition) not in owner:
                    owner[(topic, partition)] = member
                    owned[member].append((topic, partition))
    eligible = {t: [m for m in members if t in subscriptions[m]] for t in sorted(topics)}
    for topic, candidates in eligible.items():
        # The least-loaded candidate (then the first by id) for each free partition, from a
        # heap: O(log members) a partition, where a scan of the candidates made a rebalance
        # O(partitions × members).
        heap = [(len(owned[m]), m) for m in candidates]
        heapq.heapify(heap)
        for partition in range(topics[topic] if candidates else 0):
            if (topic, partition) not in owner:
                load, chosen = heapq.heappop(heap)
                owner[(topic, partition)] = chosen
                owned[chosen].append((topic, partition))
                heapq.heappush(heap, (load + 1, chosen))
    # Balance: each move lowers the sum of squared loads, so this ends. A partition of a topic
    # can move off ``heavy`` when the topic's least-loaded candidate holds fewer than its load
    # less one; that least-loaded one (then the first by id) takes it.
    while True:
        least = {t: min(len(owned[m]) for m in c) for t, c in eligible.items() if c}
        move = _first_move(members, owned, least)
        if move is None:
            break
        heavy, tp = move
        chosen = min(eligible[tp[0]], key=lambda m: (len(owned[m]), m))
        owned[heavy].remove(tp)
        owned[chosen].append(tp)
        owner[tp] = chosen
    return _group(owner, members)


def _first_move(
    members: list[str], owned: Mapping[str, list[TopicPartition]], least: Mapping[str, int]
) -> tuple[str, TopicPartition] | None:
    """The first (heavy member, partition) that can move to a lighter member: members by
    load, heaviest first (then by id), each one's partitions last-assigned first."""
    floor = min(least.values(), default=0)
    for heavy in sorted(members, key=lambda m: (-len(owned[m]), m)):
        load = len(owned[heavy])
        if floor >= load - 1:
            return None  # no lighter member anywhere for this one or any lighter one
        for tp in reversed(owned[heavy]):
            if least[tp[0]] < load - 1:
                return heavy, tp
    return None


def range_(
    subscriptions: Subscriptions, topics: Mapping[str, int], previous: Mapping[str, Assignment]
) -> dict[str, dict[str, frozenset[int]]]:
    members = sorted(subscriptions)
    owner: dict[TopicPartition, str] = {}
    for topic in sorted(topics):
        subscribed = [m for m in members if topic in subscriptions[m]]
        if not subscribed:
            continue
        quota, extra = divmod(topics[topic], len(subscribed))
        start = 0
        for index, member in enumerate(subscribed):
            count = quota + (1 if index < extra else 0)
            for partition in range(start, start + count):
                owner[(topic, partition)] = member
            start += count
    return _group(owner, members)


Assignor = Callable[[Subscriptions, Mapping[str, int], Mapping[str, Assignment]], dict[str, dict[str, frozenset[int]]]]
#: Kafka's short names → the assignor.
ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_}


def assign(
    name: str, subscriptions: Subscriptions, topics: Mapping[str, int], previous: Mapping[str, Assignment]
) -> dict[str, dict[str, frozenset[int]]]:
    """The target assignment by assignor ``name`` (every member present, maybe empty)."""
    return ASSIGNORS[name](subscriptions, topics, previous)
