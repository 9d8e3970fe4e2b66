"""The leader's assignors: Kafka's answers for range, balance and stickiness for cooperative-sticky."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trikafka.client.assignors import CooperativeStickyAssignor, RangeAssignor, assignor_for
from trikafka.client.consumer_protocol import Subscription, TopicPartition


def tps(topic, *parts):
    return tuple(TopicPartition(topic, p) for p in parts)


def test_range_matches_kafkas_documented_example():
    # Kafka's RangeAssignor javadoc: C0, C1; t0, t1 with 3 partitions each.
    subs = {"C0": Subscription(("t0", "t1")), "C1": Subscription(("t0", "t1"))}
    result = RangeAssignor().assign({"t0": 3, "t1": 3}, subs)
    assert result["C0"].partitions == tps("t0", 0, 1) + tps("t1", 0, 1)
    assert result["C1"].partitions == tps("t0", 2) + tps("t1", 2)


def test_range_puts_static_members_first_by_instance_id():
    subs = {
        "a-dynamic": Subscription(("t",)),
        "z-static": Subscription(("t",), group_instance_id="i1"),
        "b-static": Subscription(("t",), group_instance_id="i2"),
    }
    result = RangeAssignor().assign({"t": 3}, subs)
    assert [result[m].partitions for m in ("z-static", "b-static", "a-dynamic")] == [
        tps("t", 0),
        tps("t", 1),
        tps("t", 2),
    ]


def test_range_only_among_subscribers():
    subs = {"a": Subscription(("t", "u")), "b": Subscription(("t",))}
    result = RangeAssignor().assign({"t": 2, "u": 2}, subs)
    assert result["a"].partitions == tps("t", 0) + tps("u", 0, 1)
    assert result["b"].partitions == tps("t", 1)


def test_assignor_names_and_refusal():
    assert assignor_for("range").name == "range"
    assert assignor_for("org.apache.kafka.clients.consumer.CooperativeStickyAssignor").name == "cooperative-sticky"
    with pytest.raises(ValueError, match="allowed"):
        assignor_for("roundrobin-ish")


def test_cooperative_fresh_group_is_round_robin_balanced():
    subs = {m: Subscription(("t",)) for m in "abc"}
    result = CooperativeStickyAssignor().assign({"t": 7}, subs)
    assert result["a"].partitions == tps("t", 0, 3, 6)
    assert result["b"].partitions == tps("t", 1, 4)
    assert result["c"].partitions == tps("t", 2, 5)


def test_cooperative_moves_nothing_in_the_first_round():
    assignor = CooperativeStickyAssignor()
    owned = {"a": tps("t", 0, 1, 2), "b": tps("t", 3, 4, 5)}
    subs = {m: Subscription(("t",), owned_partitions=p, generation_id=3) for m, p in owned.items()}
    subs["c"] = Subscription(("t",))
    first = assignor.assign({"t": 6}, subs)
    # a and b each lose one partition; c gets nothing until they revoke it.
    assert len(first["a"].partitions) == 2 and len(first["b"].partitions) == 2
    assert first["c"].partitions == ()
    second_subs = {m: Subscription(("t",), owned_partitions=first[m].partitions, generation_id=4) for m in "abc"}
    second = assignor.assign({"t": 6}, second_subs)
    assert second["a"].partitions == first["a"].partitions
    assert second["b"].partitions == first["b"].partitions
    assert len(second["c"].partitions) == 2


def test_cooperative_older_generation_claim_loses():
    subs = {
        "a": Subscription(("t",), owned_partitions=tps("t", 0), generation_id=5),
        "b": Subscription(("t",), owned_partitions=tps("t", 0), generation_id=4),
    }
    result = CooperativeStickyAssignor().assign({"t": 2}, subs)
    assert TopicPartition("t", 0) in result["a"].partitions


def test_cooperative_generation_from_user_data_for_v0_members():
    assignor = CooperativeStickyAssignor()
    member = Subscription(("t",), user_data=assignor.subscription_user_data(9), owned_partitions=tps("t", 0))
    other = Subscription(("t",), owned_partitions=tps("t", 0), generation_id=8)
    assert TopicPartition("t", 0) in assignor.assign({"t": 2}, {"a": member, "b": other})["a"].partitions


members = st.lists(st.sampled_from("abcdefg"), min_size=1, max_size=5, unique=True)


@settings(max_examples=60, deadline=None)
@given(members, st.dictionaries(st.sampled_from("xyz"), st.integers(1, 7), min_size=1), st.data())
def test_cooperative_two_rounds_are_complete_balanced_and_never_double_assign(names, topics, data):
    assignor = CooperativeStickyAssignor()
    subscribed = {m: tuple(sorted(data.draw(st.sets(st.sampled_from(sorted(topics)), min_size=1)))) for m in names}
    owned = {m: () for m in names}
    for generation in range(1, 4):
        subs = {m: Subscription(subscribed[m], owned_partitions=owned[m], generation_id=generation) for m in names}
        result = assignor.assign(topics, subs)
        seen = [tp for a in result.values() for tp in a.partitions]
        assert len(seen) == len(set(seen)), "a partition assigned twice"
        for member, assignment in result.items():
            assert all(tp.topic in subscribed[member] for tp in assignment.partitions)
        owned = {m: result[m].partitions for m in names}
    # After the follow-up rounds everything subscribed is owned by somebody.
    wanted = {
        TopicPartition(t, p) for t, n in topics.items() for p in range(n) if any(t in s for s in subscribed.values())
    }
    assert {tp for parts in owned.values() for tp in parts} == wanted
    if len(set(subscribed.values())) == 1:
        sizes = [len(p) for p in owned.values()]
        assert max(sizes) - min(sizes) <= 1
