"""A KIP-848 consumer group and its members — plain values, no timers, no trio.

Theory of operation
-------------------
In the consumer protocol the coordinator, not a leader member, decides who consumes what.
Three epochs order everything (Kafka's ``ConsumerGroup``):

* the **group epoch** goes up whenever the group's membership or subscriptions change;
* the **assignment epoch** is the group epoch the *target assignment* was computed for
  (a server-side assignor runs when the group epoch passes it);
* each member's **member epoch** is the target epoch it has reconciled to. A member moves to
  a new epoch only once the partitions it must give up are revoked, and it receives a
  partition only once no other member holds it (revoke before assign; see
  :mod:`~trikafka.coordinator.consumer.consumer_reconciliation`).

Members are frozen values replaced as a whole (``attrs.evolve``), so "did the heartbeat
change this member?" is an equality test and every change is one record to persist.
Assignments are by topic *name* here; the API layer translates Kafka's topic ids.
"""

from __future__ import annotations

import enum
import functools
import math
import re
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet

import attrs

__all__ = [
    "Assignment",
    "ConsumerGroup",
    "ConsumerGroupMember",
    "ConsumerGroupState",
    "INTERNAL_TOPICS",
    "LEAVE_GROUP_MEMBER_EPOCH",
    "LEAVE_GROUP_STATIC_MEMBER_EPOCH",
    "MemberState",
    "ResolvedRegex",
    "freeze",
    "member_topics",
    "topic_pattern",
]

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

#: topic name → partitions (always frozen; a topic with no partitions is absent)
Assignment = Mapping[str, frozenset[int]]


def freeze(assignment: Mapping[str, Iterable[int]]) -> dict[str, frozenset[int]]:
    """A normalized assignment: frozensets, no empty topics."""
    return {t: frozenset(ps) for t, ps in sorted(assignment.items()) if ps}


@functools.lru_cache(maxsize=256)
def topic_pattern(regex: str) -> re.Pattern[str]:
    """A subscription regex, compiled once (Kafka: RE2/J, matched against the whole name;
    Python's ``re`` agrees on the syntax consumers send). Raises ``re.error``."""
    return re.compile(regex)


#: Kafka's internal topics: named explicitly they may be subscribed to, a regex never matches them.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


@attrs.frozen
class ResolvedRegex:
    """What a subscribed regex matched, among which topics, and when (Kafka's
    ResolvedRegularExpression; the topic names stand for its metadata version)."""

    topics: frozenset[str]
    topic_names: frozenset[str]
    resolved_ms: float


def member_topics(member: ConsumerGroupMember, topic_names: Iterable[str],
                  resolved: Mapping[str, ResolvedRegex] | None = None) -> set[str]:
    """The existing topics a member subscribes to: its names, plus what its regex resolved to
    (nothing while unresolved: :mod:`~trikafka.coordinator.consumer.consumer_regex`)."""
    names = topic_names if isinstance(topic_names, AbstractSet | Mapping) else set(topic_names)
    topics = {name for name in member.subscribed_topic_names if name in names}  # O(its names)
    regex = member.subscribed_topic_regex
    if regex and resolved is not None and regex in resolved:
        topics |= {name for name in resolved[regex].topics if name in names}
    return topics


class MemberState(enum.Enum):
    """Where a member is in reconciling to the target (Kafka's ``MemberState``)."""

    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"  # waiting for the member to revoke
    UNRELEASED_PARTITIONS = "unreleased_partitions"  # waiting for other members to release


class ConsumerGroupState(enum.Enum):
    """The strings ListGroups and ConsumerGroupDescribe report (Kafka's ConsumerGroupState)."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@attrs.frozen
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = -1
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = attrs.field(factory=dict, converter=freeze)
    pending_revocation: Assignment = attrs.field(factory=dict, converter=freeze)
    #: A member speaking the *classic* protocol inside this consumer group (Kafka's
    #: ClassicMemberMetadata): its JoinGroup protocols, (name, subscription bytes) in its
    #: order of preference, and its session timeout. None for a consumer-protocol member.
    classic_protocols: tuple[tuple[str, bytes], ...] | None = None
    classic_session_timeout_ms: int = -1

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic_protocols is not None

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.member_epoch == epoch and self.state is MemberState.STABLE


@attrs.define(eq=False)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerGroupMember] = attrs.Factory(dict)
    static_members: dict[str, str] = attrs.Factory(dict)  # instance id → member id
    #: member id → its partitions in the target assignment
    target: dict[str, Assignment] = attrs.Factory(dict)
    #: the subscribed topics' partition counts the target was computed from
    subscription_metadata: dict[str, int] = attrs.Factory(dict)
    #: classic members told to rejoin whose join timeout runs (soft state, as Kafka's timer)
    join_timeouts: set[str] = attrs.Factory(set)
    #: subscribed regex → its last resolution; a resolution is under way (soft state)
    resolved_regexes: dict[str, ResolvedRegex] = attrs.Factory(dict)
    regex_refresh_pending: bool = False
    #: (the members' subscribed names together, their regexes), kept until a member's
    #: subscription changes: a heartbeat asks for the group's topics, and walking every member
    #: each time made a round of heartbeats O(members²).
    _subscriptions: tuple[frozenset[str], frozenset[str]] | None = attrs.field(default=None, init=False, repr=False)
    #: (topic, partition) → the members holding it (assigned, or pending its revocation), kept
    #: by put/remove: reconciling a member asks who holds each partition of its target, and
    #: walking every member for that made a round of heartbeats O(members²) (Kafka's
    #: partition epochs map).
    _holders: dict[tuple[str, int], set[str]] = attrs.field(factory=dict, init=False, repr=False)

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def put(self, member: ConsumerGroupMember) -> None:
        before = self.members.get(member.member_id)
        if before is None or (before.subscribed_topic_names, before.subscribed_topic_regex) != (
                member.subscribed_topic_names, member.subscribed_topic_regex):
            self._subscriptions = None
        if before is not None:
            self._hold(before, False)
        self.members[member.member_id] = member
        self._hold(member, True)
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def _hold(self, member: ConsumerGroupMember, holds: bool) -> None:
        holders = self._holders
        for held in (member.assigned, member.pending_revocation):
            for topic, partitions in held.items():
                for partition in partitions:
                    key = (topic, partition)
                    if holds:
                        holders.setdefault(key, set()).add(member.member_id)
                    else:
                        ids = holders.get(key)
                        if ids is not None:
                            ids.discard(member.member_id)
                            if not ids:
                                del holders[key]

    def remove(self, member_id: str) -> ConsumerGroupMember | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._hold(member, False)
        self._subscriptions = None
        self.target.pop(member_id, None)
        self.join_timeouts.discard(member_id)
        if member is not None and member.instance_id is not None:
            if self.static_members.get(member.instance_id) == member_id:
                del self.static_members[member.instance_id]
        return member

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id)
        return self.members.get(member_id) if member_id is not None else None

    def partition_epoch(self, topic: str, partition: int, besides: str) -> int:
        """The epoch of the member (other than ``besides``) holding the partition, -1 if
        it is free: a partition is held until its owner acknowledged its revocation."""
        for member_id in self._holders.get((topic, partition), ()):
            if member_id != besides:
                return self.members[member_id].member_epoch
        return -1

    def waiting_on_unreleased(self, member: ConsumerGroupMember) -> bool:
        """Whether some partition of the member's target still has another owner (Kafka's
        waitingOnUnreleasedPartition): a classic member need not rejoin for it yet."""
        for topic, partitions in self.target.get(member.member_id, {}).items():
            for partition in partitions - member.assigned.get(topic, frozenset()):
                if self.partition_epoch(topic, partition, member.member_id) != -1:
                    return True
        return False

    def subscribed_topics(self, topic_names: Iterable[str]) -> set[str]:
        """Every topic some member subscribes to, by name or by regex, among ``topic_names``."""
        names = topic_names if isinstance(topic_names, AbstractSet | Mapping) else set(topic_names)
        if self._subscriptions is None:
            self._subscriptions = (
                frozenset(n for m in self.members.values() for n in m.subscribed_topic_names),
                frozenset(m.subscribed_topic_regex for m in self.members.values() if m.subscribed_topic_regex),
            )
        subscribed, regexes = self._subscriptions
        topics = {name for name in subscribed if name in names}
        for regex in regexes:  # what each regex resolved to; nothing while unresolved
            resolution = self.resolved_regexes.get(regex)
            if resolution is not None:
                topics |= {name for name in resolution.topics if name in names}
        return topics

    def subscribed_regexes(self) -> dict[str, int]:
        """Each regex some member subscribes with → how many do."""
        counts: dict[str, int] = {}
        for member in self.members.values():
            if member.subscribed_topic_regex:
                counts[member.subscribed_topic_regex] = counts.get(member.subscribed_topic_regex, 0) + 1
        return counts

    def last_regex_refresh_ms(self) -> float:
        """When the regexes were last resolved (together); -inf when none is."""
        return max((r.resolved_ms for r in self.resolved_regexes.values()), default=-math.inf)

    def all_classic_except(self, member_id: str) -> bool:
        """Whether every member but ``member_id`` uses the classic protocol and ``member_id``
        does not (Kafka's allMembersUseClassicProtocolExcept: the condition of a downgrade)."""
        leaving = self.members.get(member_id)
        return (leaving is not None and not leaving.uses_classic_protocol
                and all(m.uses_classic_protocol for m in self.members.values() if m.member_id != member_id))

    def supports_classic(self, protocol_type: str, names: set[str]) -> bool:
        """Kafka's supportsClassicProtocols: type ``consumer``, and a protocol every classic
        member also names (any non-empty set while there is none)."""
        if protocol_type != "consumer" or not names:
            return False
        for member in self.members.values():
            if member.classic_protocols is not None:
                names = names & {name for name, _ in member.classic_protocols}
        return bool(names)

    def preferred_assignor(self, default: str) -> str:
        """The server assignor most members ask for (Kafka's rule), else the default."""
        votes: dict[str, int] = {}
        for member in self.members.values():
            if member.server_assignor:
                votes[member.server_assignor] = votes.get(member.server_assignor, 0) + 1
        if not votes:
            return default
        return max(sorted(votes), key=lambda name: votes[name])
