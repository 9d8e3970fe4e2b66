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


def uniform(subscriptions: Subscriptions, topics: Mapping[str, int], previous: Mapping[str, Assignment]) -> dict[str, dict[str, frozenset[int]]]:
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
        for partition in range(topics[topic] if candidates else 0):
            if (topic, partition) not in owner:
                chosen = min(candidates, key=lambda m: (len(owned[m]), m))
                owner[(topic, partition)] = chosen
                owned[chosen].append((topic, partition))
    # Balance: each move lowers the sum of squared loads, so this ends.
    moved = True
    while moved:
        moved = False
        for heavy in sorted(members, key=lambda m: (-len(owned[m]), m)):
            load = len(owned[heavy])
            for tp in reversed(owned[heavy]):
                lighter = [m for m in eligible[tp[0]] if len(owned[m]) < load - 1]
                if lighter:
                    chosen = min(lighter, key=lambda m: (len(owned[m]), m))
                    owned[heavy].remove(tp)
                    owned[chosen].append(tp)
                    owner[tp] = chosen
                    moved = True
                    break
            if moved:
                break
    return _group(owner, members)


def range_(subscriptions: Subscriptions, topics: Mapping[str, int], previous: Mapping[str, Assignment]) -> dict[str, dict[str, frozenset[int]]]:
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
