"""Share-group membership (KIP-932): ShareGroupHeartbeat as a pure machine.

Theory of operation
-------------------
A share group has members, each with an id (the client makes it, a UUID) and an epoch. There
is no reconciliation as in KIP-848: a partition may be assigned to many members at once, so a
member takes its new assignment the moment the coordinator computes it. The group epoch grows
with every change of membership or subscriptions; a new target assignment (Kafka's simple
assignor, ``assignor.py``) is computed when the group epoch is ahead of the assignment epoch
and at least ``share.assignment.interval.ms`` has passed since the last one (Kafka 4.3's
``canComputeNextTargetAssignment``; 0 computes at once). Only partitions whose share state is
initialized are assigned (the shell initializes those of subscribed topics first, as Kafka's
coordinator does with InitializeShareGroupState): a partition that becomes initialized later
changes the assignable set, and the group is assigned anew. Each member's epoch is the
assignment epoch it was last given, and a heartbeat whose epoch is not the member's is fenced
(FENCED_MEMBER_EPOCH), as in Kafka's share groups.

Epoch 0 joins (SubscribedTopicNames required), -1 leaves. A member whose heartbeats stop for
``share.session.timeout.ms`` is removed: the shell (``coordinator.py``) keeps one deadline per
member on trio's clock and calls :meth:`ShareGroup.expire`.

States, as Kafka's ShareGroup: ``Empty`` (no members), ``Stable`` (members), ``Dead``
(deleted).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import attrs

from trikafka.coordinator.share.assignor import assign_simple
from trikafka.errors import ErrorCode, KafkaProtocolError

__all__ = ["Assignment", "HeartbeatResult", "ShareGroup", "ShareMember"]

Assignment = dict[str, frozenset[int]]

JOIN_EPOCH = 0
LEAVE_EPOCH = -1


@attrs.define
class ShareMember:
    member_id: str
    member_epoch: int = 0
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed: tuple[str, ...] = ()
    assignment: Assignment = attrs.Factory(dict)


@attrs.frozen
class HeartbeatResult:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Assignment | None  # None: unchanged since this member's last heartbeat


@attrs.define
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = attrs.Factory(dict)
    target: dict[str, Assignment] = attrs.Factory(dict)
    last_assignment_at: float = -math.inf  # trio time of the last target assignment

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed}

    def heartbeat(
        self,
        member_id: str,
        member_epoch: int,
        *,
        rack_id: str | None,
        subscribed: tuple[str, ...] | None,
        client_id: str,
        client_host: str,
        topics: Mapping[str, int | Sequence[int]],
        now: float,
        max_size: int,
        heartbeat_interval_ms: int,
        assignment_interval_ms: int,
    ) -> HeartbeatResult:
        """One ShareGroupHeartbeat; raises KafkaProtocolError with Kafka's error code."""
        if not member_id:
            raise KafkaProtocolError("MemberId can't be empty.", ErrorCode.invalid_request)
        if member_epoch == LEAVE_EPOCH:
            member = self.members.get(member_id)
            if member is None:
                raise KafkaProtocolError(f"Member {member_id} is not a member of group {self.group_id}.",
                                         ErrorCode.unknown_member_id)
            self.remove(member_id)
            return HeartbeatResult(member_id, LEAVE_EPOCH, 0, None)
        if member_epoch < LEAVE_EPOCH:
            raise KafkaProtocolError(f"MemberEpoch {member_epoch} is invalid.", ErrorCode.invalid_request)
        member = self.members.get(member_id)
        if member_epoch == JOIN_EPOCH:
            if not subscribed:
                raise KafkaProtocolError("SubscribedTopicNames must be set in first request.",
                                         ErrorCode.invalid_request)
            if member is None:
                if len(self.members) >= max_size:
                    raise KafkaProtocolError(f"The share group has reached its maximum capacity of {max_size} members.",
                                             ErrorCode.group_max_size_reached)
                member = self.members[member_id] = ShareMember(member_id)
                self.group_epoch += 1
            member.assignment = {}  # a (re)join is sent its whole assignment
        elif member is None:
            raise KafkaProtocolError(f"Member {member_id} is not a member of group {self.group_id}.",
                                     ErrorCode.unknown_member_id)
        elif member_epoch != member.member_epoch:
            raise KafkaProtocolError(f"The share group member has a smaller or larger member epoch ({member_epoch})"
                                     f" than the one known by the group coordinator ({member.member_epoch}).",
                                     ErrorCode.fenced_member_epoch)
        member.rack_id, member.client_id, member.client_host = rack_id, client_id, client_host
        if subscribed is not None and tuple(sorted(subscribed)) != member.subscribed:
            member.subscribed = tuple(sorted(subscribed))
            self.group_epoch += 1
        self._maybe_assign(topics, now, assignment_interval_ms)
        target = self.target.get(member_id, {})
        changed = None
        if member_epoch == JOIN_EPOCH or target != member.assignment:
            member.assignment = dict(target)
            changed = dict(target)
        member.member_epoch = max(self.assignment_epoch, 1) if member_id in self.target else max(member.member_epoch, 1)
        return HeartbeatResult(member_id, member.member_epoch, heartbeat_interval_ms, changed)

    def remove(self, member_id: str) -> bool:
        if self.members.pop(member_id, None) is None:
            return False
        self.target.pop(member_id, None)
        self.group_epoch += 1
        return True

    def _partitions(self, topics: Mapping[str, int | Sequence[int]]) -> dict[str, tuple[int, ...]]:
        """Subscribed topic → the partitions that may be assigned (a count means all of them)."""
        found = {}
        for t in self.subscribed_topics():
            parts = topics.get(t)
            if parts is not None:
                ids = tuple(range(parts)) if isinstance(parts, int) else tuple(sorted(parts))
                if ids:
                    found[t] = ids
        return found

    def _assigned_partitions(self) -> dict[str, tuple[int, ...]]:
        seen: dict[str, set[int]] = {}
        for assignment in self.target.values():
            for t, parts in assignment.items():
                seen.setdefault(t, set()).update(parts)
        return {t: tuple(sorted(p)) for t, p in seen.items() if p}

    def _maybe_assign(self, topics: Mapping[str, int | Sequence[int]], now: float, interval_ms: int) -> None:
        if self._partitions(topics) != self._assigned_partitions() and self.assignment_epoch == self.group_epoch:
            self.group_epoch += 1
        if self.group_epoch <= self.assignment_epoch:
            return
        if now < self.last_assignment_at + interval_ms / 1000 and self.target:
            return
        subscriptions = {m.member_id: m.subscribed for m in self.members.values()}
        self.target = assign_simple(subscriptions, self._partitions(topics))
        self.assignment_epoch = self.group_epoch
        self.last_assignment_at = now
