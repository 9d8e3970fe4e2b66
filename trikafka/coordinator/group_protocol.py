"""The values the group state machine takes and gives: requests, answers and effects.

Theory of operation
-------------------
The membership state machine (:class:`~trikafka.coordinator.classic.group_membership.GroupMembership`)
never waits and never reads a clock. Every call takes ``now_ms`` and returns a :class:`Reply`:
the answer, plus the *effects* the caller must carry out —

* :class:`ScheduleTimer` / :class:`CancelTimer`: put a deadline (in the machine's
  milliseconds) on a :class:`TimerKey`, or take it away. A key has at most one deadline; a
  new one replaces the old. When it passes, the caller hands the key back through
  ``GroupMembership.on_timer``.
* :class:`CompleteJoin` / :class:`CompleteSync`: answer a JoinGroup or SyncGroup that was
  :class:`Parked` earlier under this ticket.

The Trio shell (:class:`~trikafka.coordinator.group_coordinator.GroupCoordinator`) turns
these into trio deadlines and events; the stateful test turns them into a dictionary and a
loop. Same machine, two drivers — the h11 way.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Generic, TypeVar

import attrs

from trikafka.errors import ErrorCode

if TYPE_CHECKING:  # the KIP-848 machine schedules its own kind of key
    from trikafka.coordinator.consumer.consumer_group_protocol import ConsumerTimerKey

__all__ = [
    "CancelTimer",
    "CompleteJoin",
    "CompleteSync",
    "Effect",
    "JoinGroupMember",
    "JoinGroupRequest",
    "JoinGroupResult",
    "NO_GENERATION",
    "Parked",
    "Reply",
    "ScheduleTimer",
    "SyncGroupResult",
    "TimerKey",
    "TimerKind",
    "UNKNOWN_MEMBER_ID",
]

UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1

T = TypeVar("T", covariant=True)  # a Reply is frozen: a Reply[JoinGroupResult] is a Reply[object]


@attrs.frozen
class JoinGroupRequest:
    """One JoinGroup, version differences already resolved by the API layer."""

    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # (name, metadata), in the member's preference order
    require_known_member_id: bool  # v4+: an unknown member gets MEMBER_ID_REQUIRED first


@attrs.frozen
class SyncGroupRequest:
    """One SyncGroup, version differences already resolved by the API layer."""

    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None  # v5+; None: not checked
    protocol_name: str | None  # v5+; None: not checked
    assignments: list[tuple[str, bytes]]  # (member id, assignment): the leader's, else empty


@attrs.frozen
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@attrs.frozen
class JoinGroupResult:
    """JoinGroupResponse's fields (an error leaves the defaults)."""

    error_code: ErrorCode
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = UNKNOWN_MEMBER_ID
    members: list[JoinGroupMember] = attrs.Factory(list)  # the leader's only
    skip_assignment: bool = False


@attrs.frozen
class SyncGroupResult:
    """SyncGroupResponse's fields."""

    error_code: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@attrs.frozen
class Parked:
    """The answer comes later, as a CompleteJoin/CompleteSync effect with this ticket."""

    ticket: int


class TimerKind(enum.Enum):
    HEARTBEAT = "heartbeat"  # a member's session (Kafka's DelayedHeartbeat)
    PENDING_MEMBER = "pending-member"  # a MEMBER_ID_REQUIRED id's session
    DELAYED_JOIN = "delayed-join"  # a rebalance's completion (Kafka's DelayedJoin)
    ALL_JOINED = "all-joined"  # every member rejoined: complete once the current call is over


@attrs.frozen
class TimerKey:
    kind: TimerKind
    group_id: str
    member_id: str = ""


@attrs.frozen
class ScheduleTimer:
    key: TimerKey | ConsumerTimerKey
    deadline_ms: float


@attrs.frozen
class CancelTimer:
    key: TimerKey | ConsumerTimerKey


@attrs.frozen
class CompleteJoin:
    ticket: int
    result: JoinGroupResult


@attrs.frozen
class CompleteSync:
    ticket: int
    result: SyncGroupResult


Effect = ScheduleTimer | CancelTimer | CompleteJoin | CompleteSync


@attrs.frozen
class Reply(Generic[T]):
    """What a call of the state machine answers, and what its caller must do next."""

    value: T
    effects: tuple[Effect, ...] = ()
