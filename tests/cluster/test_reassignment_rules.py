"""The election and reassignment rules alone (cluster/reassignments.py): pure state, no I/O."""

from __future__ import annotations

from trikafka.cluster import reassignments
from trikafka.cluster.state import ClusterState
from trikafka.server.replica.cluster_view import (
    ELECTION_NOT_NEEDED,
    PREFERRED,
    UNCLEAN,
    OngoingReassignment,
    Outcome,
)


def state_with(replicas: tuple[int, ...]) -> tuple[ClusterState, object]:
    state = ClusterState([1, 2, 3, 4], offsets_partitions=1)
    state.assign("t", range(1), assignment=[replicas])
    return state, state.get("t", 0)


def test_reassignment_lists_target_then_leaving_and_completes_once_the_new_replicas_are_in_sync():
    state, part = state_with((1, 2))
    assert reassignments.begin_reassignment(state, part, (3, 2)) == Outcome()
    assert (part.replicas, part.adding, part.removing) == ((3, 2, 1), (3,), (1,))
    assert reassignments.ongoing(state) == {("t", 0): OngoingReassignment((3, 2, 1), (3,), (1,))}
    assert reassignments.complete_if_ready(state, part) is None  # 3 is not in the ISR yet
    state.expand_isr("t", 0, [3])
    epoch = part.leader_epoch
    assert reassignments.complete_if_ready(state, part) == (1,)
    assert (part.replicas, part.isr, part.leader, part.leader_epoch) == ((3, 2), (3, 2), 3, epoch + 1)
    assert reassignments.ongoing(state) == {}


def test_a_new_target_starts_from_the_current_list_and_cancel_reverts():
    state, part = state_with((1, 2))
    reassignments.begin_reassignment(state, part, (1, 3))
    reassignments.begin_reassignment(state, part, (1, 4))  # 3, being added, now leaves again
    assert (part.replicas, part.adding, part.removing) == ((1, 4, 2, 3), (4,), (2, 3))
    outcome, left = reassignments.cancel_reassignment(state, "t", 0, part)
    assert outcome == Outcome() and left == (4,)
    assert (part.replicas, part.isr, part.adding, part.removing) == ((1, 2, 3), (1, 2), (), ())
    assert reassignments.cancel_reassignment(state, "t", 0, part)[0].error_code == 85


def test_invalid_targets_are_kafkas_messages():
    state, part = state_with((1, 2))
    assert reassignments.begin_reassignment(state, part, (1, 1)).error_message == (
        "The manual partition assignment includes the broker 1 more than once.")
    assert reassignments.begin_reassignment(state, part, (5,)).error_message == (
        "The manual partition assignment includes broker 5, but no such broker is registered.")
    assert part.replicas == (1, 2)


def test_elections():
    state, part = state_with((1, 2, 3))
    assert reassignments.elect(state, part, PREFERRED) == ELECTION_NOT_NEEDED
    state.move_leader("t", 0, 2)
    assert reassignments.elect(state, part, UNCLEAN) == ELECTION_NOT_NEEDED  # it has a leader
    state.shrink_isr("t", 0, [2])
    assert reassignments.elect(state, part, PREFERRED).error_code == 80  # 1 is out of sync
    state.stop_broker(2)
    assert part.leader == -1
    assert reassignments.elect(state, part, UNCLEAN) == Outcome()
    assert (part.leader, part.isr) == (1, (1,))  # the first live replica, alone in the ISR
    state.stop_broker(1)
    state.stop_broker(3)
    assert reassignments.elect(state, part, UNCLEAN).error_code == 83
