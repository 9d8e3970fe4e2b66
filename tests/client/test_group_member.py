"""The pure group member: the Java consumer's answers to each coordinator error."""

from __future__ import annotations

import pytest

from trikafka.client.assignors import CooperativeStickyAssignor, RangeAssignor
from trikafka.client.consumer_protocol import (
    Assignment,
    Subscription,
    TopicPartition,
    encode_assignment,
    encode_subscription,
)
from trikafka.client.group_member import Action, GroupMember, MemberState
from trikafka.errors import ErrorCode

T0, T1, T2 = (TopicPartition("t", p) for p in range(3))


def joined(member: GroupMember, owned=(T0, T1), generation=1) -> GroupMember:
    member.prepare_join(["t"])
    step = member.on_join_group_response(
        ErrorCode.none, member_id="m1", generation_id=generation, protocol_name=member._order[0], leader="m1",
        members=[("m1", None, member.join_group_fields()["protocols"][0][1])],
    )
    assert step.action is Action.SYNC and member.is_leader
    step = member.on_sync_group_response(ErrorCode.none, encode_assignment(Assignment(tuple(owned))))
    assert step.action is Action.STABLE and member.state is MemberState.STABLE
    return member


def test_member_id_required_then_join():
    member = GroupMember("g", [RangeAssignor()])
    member.prepare_join(["t"])
    assert member.join_group_fields()["member_id"] == ""
    step = member.on_join_group_response(ErrorCode.member_id_required, member_id="m-minted")
    assert step.action is Action.REJOIN
    assert member.join_group_fields()["member_id"] == "m-minted"


def test_leader_assigns_with_the_chosen_protocol():
    member = GroupMember("g", [RangeAssignor()])
    member.prepare_join(["t"])
    other = encode_subscription(Subscription(("t",)))
    member.on_join_group_response(
        ErrorCode.none, member_id="a", generation_id=1, protocol_name="range", leader="a",
        members=[("a", None, member.join_group_fields()["protocols"][0][1]), ("b", None, other)],
    )
    assignments = member.assign({"t": 3})
    assert set(assignments) == {"a", "b"}


def test_follower_sends_no_assignments():
    member = GroupMember("g", [RangeAssignor()])
    member.prepare_join(["t"])
    step = member.on_join_group_response(
        ErrorCode.none, member_id="b", generation_id=1, protocol_name="range", leader="a"
    )
    assert step.action is Action.SYNC and not member.is_leader
    assert member.sync_group_fields()["assignments"] == []


def test_eager_revokes_everything_before_joining():
    member = joined(GroupMember("g", [RangeAssignor()]))
    step = member.prepare_join(["t"])
    assert step.revoked == (T0, T1) and member.owned == ()


def test_cooperative_keeps_partitions_and_revokes_only_what_moved():
    member = joined(GroupMember("g", [CooperativeStickyAssignor()]))
    assert member.prepare_join(["t"]).revoked == ()
    fields = member.join_group_fields()
    from trikafka.client.consumer_protocol import decode_subscription

    assert decode_subscription(fields["protocols"][0][1]).owned_partitions == (T0, T1)
    member.on_join_group_response(
        ErrorCode.none, member_id="m1", generation_id=2, protocol_name="cooperative-sticky", leader="x"
    )
    step = member.on_sync_group_response(ErrorCode.none, encode_assignment(Assignment((T1, T2))))
    assert step.revoked == (T0,) and step.assigned == (T2,)
    assert member.needs_rejoin_after_sync(step)


@pytest.mark.parametrize(
    ("error", "member_id_kept"), [(ErrorCode.unknown_member_id, False), (ErrorCode.illegal_generation, True)]
)
def test_heartbeat_fencing_loses_partitions(error, member_id_kept):
    member = joined(GroupMember("g", [RangeAssignor()]))
    step = member.on_heartbeat_response(error)
    assert step.action is Action.REJOIN and step.lost == (T0, T1)
    assert member.generation_id == -1
    assert (member.member_id == "m1") is member_id_kept


def test_rebalance_in_progress_rejoins_keeping_identity():
    member = joined(GroupMember("g", [RangeAssignor()]))
    assert member.on_heartbeat_response(ErrorCode.rebalance_in_progress).action is Action.REJOIN
    assert member.member_id == "m1" and member.generation_id == 1


def test_fenced_instance_is_fatal():
    member = GroupMember("g", [RangeAssignor()], group_instance_id="i-1")
    member.prepare_join(["t"])
    step = member.on_join_group_response(ErrorCode.fenced_instance_id)
    assert step.action is Action.FATAL and step.error.error_code == ErrorCode.fenced_instance_id


@pytest.mark.parametrize("error", [ErrorCode.not_coordinator, ErrorCode.coordinator_not_available])
def test_coordinator_moved(error):
    member = GroupMember("g", [RangeAssignor()])
    member.prepare_join(["t"])
    assert member.on_join_group_response(error).action is Action.FIND_COORDINATOR


def test_load_in_progress_backs_off():
    member = GroupMember("g", [RangeAssignor()])
    member.prepare_join(["t"])
    assert member.on_join_group_response(ErrorCode.coordinator_load_in_progress).action is Action.BACKOFF_REJOIN


def test_static_members_never_send_leave_group():
    static = joined(GroupMember("g", [RangeAssignor()], group_instance_id="i-1"))
    assert static.leave_group_fields() is None
    dynamic = joined(GroupMember("g", [RangeAssignor()]))
    assert dynamic.leave_group_fields() == {"group_id": "g", "member_id": "m1"}


def test_illegal_transition_names_state_and_event():
    member = GroupMember("g", [RangeAssignor()])
    with pytest.raises(RuntimeError, match="sync_response illegal in state UNJOINED"):
        member.on_sync_group_response(ErrorCode.none)
