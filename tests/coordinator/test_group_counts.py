"""GroupMetadata keeps "which protocols do all members support" and "has everyone joined" as
counts updated when members come, go, change protocols or park a JoinGroup (so a rebalance of
N members is O(N), not O(N²)). The counts must always equal what a walk over the members says,
whatever the order of changes — including ``group.members = {...}`` as a load does."""

from __future__ import annotations

import random

from trikafka.coordinator.classic.group_metadata import GroupMetadata, MemberMetadata

PROTOCOLS = ["range", "roundrobin", "sticky", "cooperative-sticky"]


def _walked(group: GroupMetadata) -> tuple[set[str], bool]:
    sets = [{name for name, _ in m.protocols} for m in group.members.values()]
    candidates = set.intersection(*sets) if sets else set()
    joined = not group.pending_members and all(m.awaiting_join is not None for m in group.members.values())
    return candidates, joined


def _member(rng: random.Random, member_id: str) -> MemberMetadata:
    names = rng.sample(PROTOCOLS, rng.randint(1, 3))
    return MemberMetadata(member_id, None, "c", "/127.0.0.1", 10_000, 60_000, "consumer",
                          [(n, b"") for n in names], awaiting_join=rng.choice([None, 1]))


def test_the_counts_equal_a_walk_over_the_members_after_any_change():
    rng = random.Random(36)
    group = GroupMetadata("g")
    ticket = 0
    for step in range(3_000):
        ids = list(group.members)
        op = rng.randrange(8)
        if op == 0 or not ids:
            group.add(_member(rng, f"m{step}"))
        elif op == 1:
            group.remove(rng.choice(ids))
        elif op == 2:
            group.members[rng.choice(ids)].protocols = [(n, b"") for n in rng.sample(PROTOCOLS, rng.randint(1, 4))]
        elif op == 3:
            ticket += 1
            group.members[rng.choice(ids)].awaiting_join = ticket
        elif op == 4:
            group.members[rng.choice(ids)].awaiting_join = None
        elif op == 5:
            old = rng.choice(ids)
            group.static_members["i"] = old
            group.replace_static_member("i", old, f"r{step}")
        elif op == 6 and rng.random() < 0.05:
            group.members = {m.member_id: m for m in (_member(rng, f"l{step}-{i}") for i in range(3))}
        elif op == 7 and rng.random() < 0.02:
            group.members.clear()
        candidates, joined = _walked(group)
        assert group.candidate_protocols() == candidates, step
        assert group.all_joined == joined, step


def test_a_consumer_groups_partition_holders_equal_a_walk_over_the_members():
    from trikafka.coordinator.consumer.consumer_group import ConsumerGroup, ConsumerGroupMember

    def walked(group: ConsumerGroup, topic: str, partition: int, besides: str) -> set[int]:
        return {m.member_epoch for m in group.members.values() if m.member_id != besides
                and (partition in m.assigned.get(topic, ()) or partition in m.pending_revocation.get(topic, ()))}

    def some(rng: random.Random) -> dict[str, set[int]]:
        return {t: set(rng.sample(range(6), rng.randint(0, 3))) for t in rng.sample(["a", "b"], rng.randint(0, 2))}

    rng = random.Random(848)
    group = ConsumerGroup("g")
    for step in range(2_000):
        member_id = f"m{rng.randrange(8)}"
        if rng.random() < 0.2:
            group.remove(member_id)
        else:
            group.put(ConsumerGroupMember(member_id, member_epoch=step, assigned=some(rng),
                                          pending_revocation=some(rng)))
        for topic in ("a", "b"):
            for partition in range(6):
                besides = f"m{rng.randrange(8)}"
                held = walked(group, topic, partition, besides)
                epoch = group.partition_epoch(topic, partition, besides)
                assert (epoch in held) if held else epoch == -1, step
