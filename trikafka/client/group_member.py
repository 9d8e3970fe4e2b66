"""A consumer's membership of a classic group, as a pure state machine (no trio, no sockets).

Theory of operation. A member is in one of four states (Kafka's ``MemberState`` of the classic
``AbstractCoordinator``)::

    UNJOINED ──join──▶ PREPARING_REBALANCE ──JoinGroup ok──▶ COMPLETING_REBALANCE
        ▲                     ▲                                       │ SyncGroup ok
        └──── leave / fatal ──┴─────── rejoin needed ◀─── STABLE ◀────┘

The Trio shell asks this object what to send (``join_group_fields()``, ``sync_group_fields()``,
``heartbeat_fields()``, ``leave_group_fields()``) and feeds it each answer's error code and
fields; every ``on_*`` method returns a :class:`Step` saying what happens next and which
partitions the application must be told about. Error handling is the Java consumer's:

- MEMBER_ID_REQUIRED (JoinGroup v4+): take the member id the coordinator minted, rejoin at once.
- UNKNOWN_MEMBER_ID: forget member id and generation, rejoin; owned partitions are *lost*.
- ILLEGAL_GENERATION: forget the generation (keep the member id), rejoin; partitions lost.
- REBALANCE_IN_PROGRESS: the group is rebalancing; rejoin keeping member id and generation
  (eager: revoke everything first; cooperative: keep consuming what we own).
- COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR: find the coordinator again, then rejoin.
- COORDINATOR_LOAD_IN_PROGRESS, and transient errors: retry after ``retry.backoff.ms``.
- FENCED_INSTANCE_ID (static members): another process took our ``group.instance.id``; fatal.
- INCONSISTENT_GROUP_PROTOCOL, INVALID_SESSION_TIMEOUT, GROUP_AUTHORIZATION_FAILED,
  INVALID_GROUP_ID, GROUP_MAX_SIZE_REACHED, UNSUPPORTED_VERSION: fatal.

Eager vs cooperative (KIP-429): an eager member revokes all its partitions before it joins; a
cooperative member keeps them, and after SyncGroup revokes only those no longer assigned —
and if it revoked any it rejoins at once so the partitions can go to their new owner.

Static membership (KIP-345): with ``group.instance.id`` the member sends it in every request;
it never sends LeaveGroup on close (the coordinator keeps its partitions for session.timeout.ms).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from trikafka.client.assignors import PartitionAssignor
from trikafka.client.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    Assignment,
    ConsumerProtocolError,
    Subscription,
    TopicPartition,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from trikafka.errors import ErrorCode

__all__ = ["Action", "GroupMember", "GroupMemberError", "MemberState", "Step", "UNKNOWN_MEMBER_ID"]

UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1


class MemberState(enum.Enum):
    UNJOINED = "UNJOINED"
    PREPARING_REBALANCE = "PREPARING_REBALANCE"
    COMPLETING_REBALANCE = "COMPLETING_REBALANCE"
    STABLE = "STABLE"


class Action(enum.Enum):
    """What the shell does next."""

    NONE = "none"  # carry on (heartbeat ok)
    SYNC = "sync"  # send SyncGroup now
    STABLE = "stable"  # joined: apply the assignment
    REJOIN = "rejoin"  # send JoinGroup again now
    BACKOFF_REJOIN = "backoff_rejoin"  # send JoinGroup after retry.backoff.ms
    FIND_COORDINATOR = "find_coordinator"  # coordinator moved or died: look it up, then rejoin
    FATAL = "fatal"  # raise ``Step.error`` to the application


class GroupMemberError(Exception):
    """A fatal group error: the consumer cannot continue in this group."""

    def __init__(self, message: str, error_code: ErrorCode) -> None:
        super().__init__(message)
        self.error_code = error_code


@attrs.frozen
class Step:
    action: Action
    revoked: tuple[TopicPartition, ...] = ()
    assigned: tuple[TopicPartition, ...] = ()
    lost: tuple[TopicPartition, ...] = ()
    error: GroupMemberError | None = None


_FATAL = {
    ErrorCode.fenced_instance_id,
    ErrorCode.inconsistent_group_protocol,
    ErrorCode.invalid_session_timeout,
    ErrorCode.group_authorization_failed,
    ErrorCode.invalid_group_id,
    ErrorCode.group_max_size_reached,
    ErrorCode.unsupported_version,
    ErrorCode.invalid_request,
}
_COORDINATOR_GONE = {ErrorCode.coordinator_not_available, ErrorCode.not_coordinator}
# (state, event) → allowed: the table the shell must respect; anything else is our own bug.
_LEGAL = {
    "join": set(MemberState),  # a join may restart at any point (a poll cancelled mid-sync)
    "join_response": {MemberState.PREPARING_REBALANCE},
    "sync_response": {MemberState.COMPLETING_REBALANCE},
}


class GroupMember:
    """One consumer's view of its group: identity, generation, owned partitions."""

    def __init__(
        self,
        group_id: str,
        assignors: Sequence[PartitionAssignor],
        *,
        group_instance_id: str | None = None,
        rack_id: str | None = None,
    ) -> None:
        if not assignors:
            raise ValueError("partition.assignment.strategy lists no assignor")
        self.group_id = group_id
        self.group_instance_id = group_instance_id
        self.rack_id = rack_id
        self.assignors = {a.name: a for a in assignors}
        self._order = [a.name for a in assignors]
        self.state = MemberState.UNJOINED
        self.member_id = UNKNOWN_MEMBER_ID
        self.generation_id = NO_GENERATION
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Subscription] = {}  # the leader's view after JoinGroup
        self.owned: tuple[TopicPartition, ...] = ()
        self.topics: tuple[str, ...] = ()

    # --- identity ------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.leader_id is not None and self.leader_id == self.member_id

    @property
    def cooperative(self) -> bool:
        """Cooperative only when every assignor we offer is (Kafka's rule for the protocol)."""
        return all(a.rebalance_protocol == "COOPERATIVE" for a in self.assignors.values())

    def _check(self, event: str) -> None:
        if self.state not in _LEGAL[event]:
            raise RuntimeError(f"group member {self.member_id!r}: {event} illegal in state {self.state.name}")

    def _reset(self, *, member_id: bool) -> tuple[TopicPartition, ...]:
        lost = self.owned
        self.owned = ()
        self.generation_id = NO_GENERATION
        if member_id:
            self.member_id = UNKNOWN_MEMBER_ID
        self.state = MemberState.UNJOINED
        return lost

    # --- JoinGroup ---------------------------------------------------------------------------

    def prepare_join(self, topics: Sequence[str]) -> Step:
        """Start (or restart) a join with the current subscription. Eager members give up
        everything first; the shell runs ``on_partitions_revoked`` before sending JoinGroup."""
        self._check("join")
        self.topics = tuple(sorted(set(topics)))
        revoked: tuple[TopicPartition, ...] = ()
        if not self.cooperative and self.owned:
            revoked, self.owned = self.owned, ()
        self.state = MemberState.PREPARING_REBALANCE
        return Step(Action.REJOIN, revoked=revoked)

    def join_group_fields(self) -> dict[Any, Any]:
        """JoinGroup's body fields (minus timeouts): one protocol per assignor, in order."""
        protocols = []
        for name in self._order:
            subscription = Subscription(
                topics=self.topics,
                user_data=self.assignors[name].subscription_user_data(self.generation_id),
                owned_partitions=tuple(sorted(self.owned)),
                generation_id=self.generation_id,
                rack_id=self.rack_id,
            )
            protocols.append((name, encode_subscription(subscription)))
        return {
            "group_id": self.group_id,
            "member_id": self.member_id,
            "group_instance_id": self.group_instance_id,
            "protocol_type": CONSUMER_PROTOCOL_TYPE,
            "protocols": protocols,
        }

    def on_join_group_response(
        self,
        error_code: ErrorCode,
        *,
        member_id: str = "",
        generation_id: int = NO_GENERATION,
        protocol_name: str | None = None,
        leader: str = "",
        members: Sequence[tuple[str, str | None, bytes]] = (),
    ) -> Step:
        self._check("join_response")
        if error_code == ErrorCode.none:
            self.member_id = member_id
            self.generation_id = generation_id
            self.protocol_name = protocol_name
            self.leader_id = leader
            self.members = {}
            if self.is_leader:
                try:
                    self.members = {
                        mid: decode_subscription(meta, instance) for mid, instance, meta in members
                    }
                except ConsumerProtocolError as exc:
                    return self._fatal(
                        f"a member's subscription is unreadable: {exc}", ErrorCode.inconsistent_group_protocol
                    )
            self.state = MemberState.COMPLETING_REBALANCE
            return Step(Action.SYNC)
        if error_code == ErrorCode.member_id_required:
            self.member_id = member_id
            return Step(Action.REJOIN)
        if error_code == ErrorCode.unknown_member_id:
            self.member_id = UNKNOWN_MEMBER_ID
            return Step(Action.REJOIN)
        if error_code == ErrorCode.illegal_generation:
            self.generation_id = NO_GENERATION
            return Step(Action.REJOIN)
        if error_code == ErrorCode.rebalance_in_progress:
            return Step(Action.REJOIN)
        return self._common_error(error_code, "JoinGroup")

    # --- SyncGroup ---------------------------------------------------------------------------

    def assign(self, partitions_per_topic: Mapping[str, int]) -> dict[str, bytes]:
        """The leader's SyncGroup assignments (member id → ConsumerProtocol bytes)."""
        assignor = self.assignors[self.protocol_name or self._order[0]]
        result = assignor.assign(partitions_per_topic, self.members)
        return {member: encode_assignment(result.get(member, Assignment(()))) for member in self.members}

    def subscribed_topics_of_group(self) -> set[str]:
        """Every topic some member subscribes to: the leader needs metadata for all of them."""
        return {t for s in self.members.values() for t in s.topics} | set(self.topics)

    def sync_group_fields(self, assignments: Mapping[str, bytes] | None = None) -> dict[Any, Any]:
        return {
            "group_id": self.group_id,
            "generation_id": self.generation_id,
            "member_id": self.member_id,
            "group_instance_id": self.group_instance_id,
            "protocol_type": CONSUMER_PROTOCOL_TYPE,
            "protocol_name": self.protocol_name,
            "assignments": list((assignments or {}).items()),
        }

    def on_sync_group_response(self, error_code: ErrorCode, assignment: bytes = b"") -> Step:
        self._check("sync_response")
        if error_code == ErrorCode.none:
            try:
                new = set(decode_assignment(assignment).partitions)
            except ConsumerProtocolError as exc:
                return self._fatal(
                    f"the leader's assignment is unreadable: {exc}", ErrorCode.inconsistent_group_protocol
                )
            old = set(self.owned)
            self.owned = tuple(sorted(new))
            self.state = MemberState.STABLE
            revoked = tuple(sorted(old - new))
            step = Step(Action.STABLE, revoked=revoked, assigned=tuple(sorted(new - old)))
            return step
        if error_code == ErrorCode.rebalance_in_progress:
            self.state = MemberState.PREPARING_REBALANCE
            return Step(Action.REJOIN)
        if error_code in (ErrorCode.unknown_member_id, ErrorCode.illegal_generation):
            lost = self._reset(member_id=error_code == ErrorCode.unknown_member_id)
            self.state = MemberState.PREPARING_REBALANCE
            return Step(Action.REJOIN, lost=lost)
        self.state = MemberState.PREPARING_REBALANCE
        return self._common_error(error_code, "SyncGroup")

    def needs_rejoin_after_sync(self, step: Step) -> bool:
        """Cooperative members rejoin right after revoking (so the partitions can move)."""
        return self.cooperative and bool(step.revoked)

    # --- Heartbeat ---------------------------------------------------------------------------

    def heartbeat_fields(self) -> dict[Any, Any]:
        return {
            "group_id": self.group_id,
            "generation_id": self.generation_id,
            "member_id": self.member_id,
            "group_instance_id": self.group_instance_id,
        }

    def on_heartbeat_response(self, error_code: ErrorCode) -> Step:
        """Also used for OffsetCommit's group errors: the same rules apply."""
        if error_code == ErrorCode.none:
            return Step(Action.NONE)
        if error_code == ErrorCode.rebalance_in_progress:
            return Step(Action.REJOIN)  # the shell calls prepare_join (eager revokes there)
        if error_code in (ErrorCode.unknown_member_id, ErrorCode.illegal_generation):
            lost = self._reset(member_id=error_code == ErrorCode.unknown_member_id)
            return Step(Action.REJOIN, lost=lost)
        return self._common_error(error_code, "Heartbeat")

    def session_lost(self) -> Step:
        """No heartbeat succeeded within session.timeout.ms, or max.poll.interval.ms passed:
        the coordinator has (or will have) dropped us; what we own is lost."""
        lost = self._reset(member_id=self.group_instance_id is None)
        return Step(Action.REJOIN, lost=lost)

    # --- LeaveGroup ----------------------------------------------------------------------------

    def leave_group_fields(self) -> dict[Any, Any] | None:
        """LeaveGroup's fields, or None when we should not send it: never joined, or static
        (a static member's partitions wait for it through a restart)."""
        if self.group_instance_id is not None or self.member_id == UNKNOWN_MEMBER_ID:
            return None
        return {"group_id": self.group_id, "member_id": self.member_id}

    def left(self) -> tuple[TopicPartition, ...]:
        """We left (or gave up): the member is UNJOINED again; returns what it owned."""
        return self._reset(member_id=self.group_instance_id is None)

    # --- errors ------------------------------------------------------------------------------

    def _fatal(self, message: str, error_code: ErrorCode) -> Step:
        self._reset(member_id=False)
        error = GroupMemberError(f"group {self.group_id!r}: {message} ({error_code.name})", error_code)
        return Step(Action.FATAL, error=error)

    def _common_error(self, error_code: ErrorCode, api: str) -> Step:
        if error_code in _FATAL:
            return self._fatal(f"{api} failed", error_code)
        if error_code in _COORDINATOR_GONE:
            return Step(Action.FIND_COORDINATOR)
        return Step(Action.BACKOFF_REJOIN)
