"""Reconciling one member towards the target assignment: revoke before assign (KIP-848).

Theory of operation
-------------------
Kafka's ``CurrentAssignmentBuilder`` as a pure function. Given a member, the target epoch
and the member's partitions in it, who holds each partition now, and what the member says
it owns in this heartbeat, :func:`reconcile` returns the member's next state:

* partitions the member has and the target keeps stay **assigned**;
* partitions the member has and the target takes away go **pending revocation**; while the
  member still reports owning any of them (or did not report at all), it stays at its epoch
  in ``UNREVOKED_PARTITIONS`` and receives nothing new;
* once revoked, it moves to the target epoch and receives the target's partitions that no
  other member holds (assigned or pending revocation); partitions still held elsewhere make it
  ``UNRELEASED_PARTITIONS`` and it picks them up on a later heartbeat, once released.

So a partition never has two owners: the new owner gets it only after the previous owner
acknowledged its revocation in a heartbeat (or was fenced).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet

import attrs

from trikafka.coordinator.consumer.consumer_group import (
    Assignment,
    ConsumerGroupMember,
    MemberState,
)

__all__ = ["reconcile"]

#: (topic, partition) → epoch of the other member holding it, -1 if free
PartitionEpoch = Callable[[str, int], int]


def _owns_any(owned: Assignment | None, revoking: Mapping[str, AbstractSet[int]]) -> bool:
    if owned is None:  # not reported in this heartbeat: assume still owned
        return True
    return any(owned.get(t, frozenset()) & ps for t, ps in revoking.items())


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Assignment,
    partition_epoch: PartitionEpoch,
    owned: Assignment | None,
    subscribed: set[str],
) -> ConsumerGroupMember:
    """The member's next state (the same object when nothing can move)."""
    if member.state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
    elif member.state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return member
    return _next(member, target_epoch, target, partition_epoch, owned, subscribed)


def _next(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Assignment,
    partition_epoch: PartitionEpoch,
    owned: Assignment | None,
    subscribed: set[str],
) -> ConsumerGroupMember:
    unreleased = False
    assigned: dict[str, set[int]] = {}
    revoking: dict[str, set[int]] = {}
    to_assign: dict[str, set[int]] = {}
    for topic in sorted(set(target) | set(member.assigned)):
        wanted = target.get(topic, frozenset()) if topic in subscribed else frozenset()
        current = member.assigned.get(topic, frozenset())
        keep = current & wanted
        assigned[topic] = set(keep)
        revoking[topic] = set(current - keep)
        pending_here = member.pending_revocation.get(topic, frozenset())
        free = set()
        for partition in sorted(wanted - keep):
            if partition_epoch(topic, partition) != -1 and partition not in pending_here:
                unreleased = True
            else:
                free.add(partition)
        to_assign[topic] = free
    if any(revoking.values()) and _owns_any(owned, revoking):
        return attrs.evolve(
            member,
            state=MemberState.UNREVOKED_PARTITIONS,
            previous_member_epoch=member.member_epoch,
            assigned=assigned,
            pending_revocation=revoking,
        )
    if any(to_assign.values()):
        for topic, partitions in to_assign.items():
            assigned.setdefault(topic, set()).update(partitions)
    return attrs.evolve(
        member,
        state=MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE,
        previous_member_epoch=member.member_epoch,
        member_epoch=target_epoch,
        assigned=assigned,
        pending_revocation={},
    )
