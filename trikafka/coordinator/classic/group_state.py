"""The classic group protocol's states, and the only transitions between them.

Rules (Kafka's ``GroupMetadata`` ``validPreviousStates``):

* **Empty** — no members; offsets may still be committed and fetched. Entered from
  PreparingRebalance when the last member leaves or a rebalance ends with nobody.
* **PreparingRebalance** — members are rejoining; completes when all known members have
  sent JoinGroup or the rebalance timeout passes. Entered from Empty, Stable or
  CompletingRebalance.
* **CompletingRebalance** — a generation is formed; waiting for the leader's assignment in
  SyncGroup. Entered only from PreparingRebalance.
* **Stable** — every member has its assignment and heartbeats. Entered only from
  CompletingRebalance.
* **Dead** — the group is gone (deleted or expired). Entered from any state but itself.

The strings are Kafka's exactly: DescribeGroups and ListGroups report them.
"""

from __future__ import annotations

import enum

__all__ = ["GroupState", "IllegalStateTransition", "VALID_PREVIOUS_STATES", "check_transition"]


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.EMPTY, GroupState.STABLE, GroupState.COMPLETING_REBALANCE}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(
        {
            GroupState.EMPTY,
            GroupState.PREPARING_REBALANCE,
            GroupState.COMPLETING_REBALANCE,
            GroupState.STABLE,
        }
    ),
}


class IllegalStateTransition(RuntimeError):
    """A bug: the coordinator tried a transition the protocol does not have."""

    def __init__(self, group_id: str, current: GroupState, target: GroupState, event: str) -> None:
        super().__init__(
            f"group {group_id!r} cannot go from {current.value} to {target.value} on {event!r}; "
            f"{target.value} may only follow "
            + ", ".join(sorted(s.value for s in VALID_PREVIOUS_STATES[target]))
        )


def check_transition(group_id: str, current: GroupState, target: GroupState, event: str) -> None:
    """Raise :class:`IllegalStateTransition` (naming group, states and event) unless the
    protocol allows ``current`` → ``target``."""
    if current not in VALID_PREVIOUS_STATES[target]:
        raise IllegalStateTransition(group_id, current, target, event)
