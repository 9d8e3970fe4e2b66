"""A group's members, generation and committed offsets — plain values, no timers, no trio.

``GroupMetadata`` holds what Kafka's class of that name holds; the membership state machine
(:mod:`~trikafka.coordinator.classic.group_membership`) decides when things change and this module
only keeps them consistent (transitions are checked against ``group_state``'s table).

Nothing here waits: a member parked in JoinGroup or SyncGroup holds an integer *ticket*
(``awaiting_join``/``awaiting_sync``); the Trio shell (:class:`GroupCoordinator`) maps tickets
to the events its request handlers wait on. A rebalance in progress is a
:class:`DelayedJoin` value; its timer belongs to the shell too.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Any

import attrs

from trikafka.coordinator.classic.group_state import GroupState, check_transition

__all__ = ["DelayedJoin", "GroupMetadata", "MemberMetadata", "OffsetAndMetadata", "consumer_topics"]

#: MemberMetadata fields written to ``__consumer_offsets`` (the tickets are not)
_PERSISTED = ("member_id", "group_instance_id", "client_id", "client_host", "session_timeout_ms",
              "rebalance_timeout_ms", "protocol_type", "protocols", "assignment")


def _protocols_set(member: MemberMetadata, _attribute: Any, protocols: list[tuple[str, bytes]]) -> Any:
    group = member._group
    if group is not None:
        group._count_protocols(member.protocols, -1)
        group._count_protocols(protocols, 1)
    return protocols


def _awaiting_join_set(member: MemberMetadata, _attribute: Any, ticket: int | None) -> int | None:
    group = member._group
    if group is not None and (member.awaiting_join is None) != (ticket is None):
        group._joined += 1 if ticket is not None else -1
    return ticket


@attrs.define(eq=False)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    #: (name, metadata), in the member's preference order
    protocols: list[tuple[str, bytes]] = attrs.field(on_setattr=_protocols_set)
    assignment: bytes = b""
    #: the ticket of a JoinGroup waiting for the rebalance to complete
    awaiting_join: int | None = attrs.field(default=None, on_setattr=_awaiting_join_set)
    #: the ticket of a SyncGroup waiting for the leader's assignment
    awaiting_sync: int | None = None
    #: the group whose counts this member is in (set by :class:`_Members`)
    _group: GroupMetadata | None = attrs.field(default=None, init=False, repr=False)

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(protocol)

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def to_json(self) -> dict[str, Any]:
        """The persisted fields; bytes as hex, (name, metadata) pairs as two-element lists."""
        return attrs.asdict(
            self,
            filter=lambda field, _: field.name in _PERSISTED,
            value_serializer=lambda _, __, value: value.hex() if isinstance(value, bytes) else value,
        )

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MemberMetadata:
        return cls(
            member_id=data["member_id"],
            group_instance_id=data["group_instance_id"],
            client_id=data["client_id"],
            client_host=data["client_host"],
            session_timeout_ms=data["session_timeout_ms"],
            rebalance_timeout_ms=data["rebalance_timeout_ms"],
            protocol_type=data["protocol_type"],
            protocols=[(name, bytes.fromhex(m)) for name, m in data["protocols"]],
            assignment=bytes.fromhex(data["assignment"]),
        )


@attrs.frozen
class DelayedJoin:
    """A rebalance's pending completion (Kafka's DelayedJoin / InitialDelayedJoin).

    ``initial``: the group was Empty, so the join waits ``group.initial.rebalance.delay.ms``
    and again while members keep arriving, ``remaining_ms`` more at most; otherwise it
    completes once every member rejoined or at the rebalance timeout.
    """

    initial: bool
    remaining_ms: int = 0


@attrs.frozen
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str | None
    commit_timestamp_ms: float


class _Members(dict):
    """A group's members by id. It keeps the group's counts as members come and go (and as a
    member's protocols and JoinGroup ticket change, through MemberMetadata's setters), so a
    JoinGroup asks "which protocols do all members support?" and "has everyone joined?" in
    constant time, not by walking every member: a rebalance of N members stays O(N)."""

    __slots__ = ("_owner",)

    def __init__(self, owner: GroupMetadata, members: dict[str, MemberMetadata] | None = None) -> None:
        super().__init__()
        self._owner = owner
        for member_id, member in (members or {}).items():
            self[member_id] = member

    def __setitem__(self, member_id: str, member: MemberMetadata) -> None:
        old = self.get(member_id)
        if old is not None:
            self._owner._count_member(old, -1)
        super().__setitem__(member_id, member)
        self._owner._count_member(member, 1)

    def __delitem__(self, member_id: str) -> None:
        member = self[member_id]
        super().__delitem__(member_id)
        self._owner._count_member(member, -1)

    def pop(self, member_id: str, *default: Any) -> Any:
        if member_id in self:
            member = super().pop(member_id)
            self._owner._count_member(member, -1)
            return member
        if default:
            return default[0]
        raise KeyError(member_id)

    def clear(self) -> None:
        for member in self.values():
            self._owner._count_member(member, -1)
        super().clear()

    def update(self, *args: Any, **kwargs: Any) -> None:
        for member_id, member in dict(*args, **kwargs).items():
            self[member_id] = member

    def setdefault(self, member_id: str, member: Any = None) -> Any:
        if member_id not in self:
            self[member_id] = member
        return self[member_id]

    def popitem(self) -> Any:
        member_id = next(reversed(self))
        return member_id, self.pop(member_id)


def _adopt_members(group: GroupMetadata, _attribute: Any, members: dict[str, MemberMetadata]) -> _Members:
    """``group.members = {...}``: the old members leave the counts, the new ones enter."""
    if isinstance(members, _Members) and members._owner is group:
        return members
    old = getattr(group, "members", None)
    if isinstance(old, _Members):
        for member in old.values():
            member._group = None
    group._protocol_counts = {}
    group._joined = 0
    return _Members(group, members)


@attrs.define(eq=False)
class GroupMetadata:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, MemberMetadata] = attrs.field(factory=dict, on_setattr=_adopt_members)
    pending_members: dict[str, float] = attrs.Factory(dict)  # member id → expiry (MEMBER_ID_REQUIRED)
    static_members: dict[str, str] = attrs.Factory(dict)  # group.instance.id → member id
    offsets: dict[tuple[str, int], OffsetAndMetadata] = attrs.Factory(dict)
    state_since_ms: float = 0.0  # when the current state began (offsets retention)
    new_member_added: bool = False  # InitialDelayedJoin extends while members keep arriving
    subscribed: set[str] | None = None  # the last generation's topics; None: not known yet
    delayed_join: DelayedJoin | None = None  # while PreparingRebalance: its timer's kind
    #: protocol name → how many members support it; members with a JoinGroup parked
    _protocol_counts: dict[str, int] = attrs.field(factory=dict, init=False, repr=False)
    _joined: int = attrs.field(default=0, init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        self.members = _adopt_members(self, None, self.members)

    def _count_member(self, member: MemberMetadata, sign: int) -> None:
        member._group = self if sign > 0 else None
        self._count_protocols(member.protocols, sign)
        if member.awaiting_join is not None:
            self._joined += sign

    def _count_protocols(self, protocols: list[tuple[str, bytes]], sign: int) -> None:
        counts = self._protocol_counts
        for name in {name for name, _ in protocols}:
            count = counts.get(name, 0) + sign
            if count:
                counts[name] = count
            else:
                del counts[name]

    def transition(self, target: GroupState, now_ms: float, event: str) -> None:
        check_transition(self.group_id, self.state, target, event)
        self.state = target
        self.state_since_ms = now_ms

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    def add(self, member: MemberMetadata) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None:
            if self.static_members.get(member.group_instance_id) == member_id:
                del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> MemberMetadata:
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        return member

    @property
    def all_joined(self) -> bool:
        return not self.pending_members and self._joined == len(self.members)

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def supports(self, protocol_type: str, protocols: Iterable[str]) -> bool:
        """Whether a member with these protocols may join (Kafka's supportsProtocols)."""
        names = set(protocols)
        if not self.members:
            return bool(protocol_type) and bool(names)
        if protocol_type != self.protocol_type:
            return False
        return bool(names & self.candidate_protocols())

    def candidate_protocols(self) -> set[str]:
        everyone = len(self.members)
        return {name for name, count in self._protocol_counts.items() if count == everyone} if everyone else set()

    def select_protocol(self) -> str:
        """Each member votes for its most preferred candidate; most votes wins."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = next(name for name, _ in member.protocols if name in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(sorted(votes), key=lambda name: votes[name])

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol), None if unknown."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            try:
                topics |= consumer_topics(member.metadata_for(self.protocol_name))
            except (KeyError, ValueError, struct.error):
                return None
        return topics


def consumer_topics(subscription: bytes) -> set[str]:
    """The topics of a ConsumerProtocolSubscription (version int16, then a string array)."""
    (_version, count) = struct.unpack_from(">hi", subscription, 0)
    position = 6
    topics = set()
    for _ in range(count):
        (size,) = struct.unpack_from(">h", subscription, position)
        position += 2
        topics.add(subscription[position : position + size].decode())
        position += size
    return topics
