"""Classic-protocol members of a KIP-848 consumer group: JoinGroup, SyncGroup, Heartbeat and
LeaveGroup served against the consumer group, sans-IO.

Theory of operation
-------------------
Kafka 4 lets members of both protocols share one consumer group (after an upgrade, or when a
classic consumer joins a consumer group that has members). The coordinator, not a leader,
assigns; a classic member only has the classic requests to learn its share, so Kafka's
``classicGroup*ToConsumerGroup`` map them onto the consumer group's machinery:

* **JoinGroup** is the classic member's heartbeat with a full request: its subscription and
  owned partitions come from the embedded consumer protocol metadata; the member is created
  or updated, the group epoch bumps as for any member, the server-side assignor computes the
  target, and the member is reconciled revoke-before-assign (a partition it still reports
  owning is not given away, nor does it get one someone else still owns). The answer is
  immediate: generation = its member epoch, no leader, no member list; then it must
  SyncGroup within its rebalance timeout.
* **SyncGroup** answers the member's current assignment, encoded in the protocol version it
  joined with; REBALANCE_IN_PROGRESS if the group moved past it meanwhile (unless it is
  still revoking: then it gets what it keeps, revokes the rest, and rejoins).
* **Heartbeat** checks the generation (= member epoch) and says REBALANCE_IN_PROGRESS when the
  member must rejoin: the group epoch is ahead of it, it has partitions to revoke, or partitions
  it waits for have been released. Told to rejoin, it must within its rebalance timeout.
* **LeaveGroup** removes classic members (UNKNOWN_MEMBER_ID for a consumer-protocol one);
  the group epoch bumps once.

The session of a classic member is its own JoinGroup session timeout. Errors are
KafkaProtocolError inside, answered as codes.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from trikafka.coordinator.classic.consumer_protocol_bytes import (
    decode_subscription,
    encode_assignment,
    protocol_version,
)
from trikafka.coordinator.consumer import consumer_group_records as rec
from trikafka.coordinator.consumer.consumer_group import (
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
)
from trikafka.coordinator.consumer.consumer_group_machine import ConsumerGroupMachine, new_member_id
from trikafka.coordinator.consumer.consumer_group_protocol import JOIN, SYNC, ConsumerTimerKey
from trikafka.coordinator.group_protocol import (
    UNKNOWN_MEMBER_ID,
    CancelTimer,
    Effect,
    JoinGroupRequest,
    JoinGroupResult,
    Reply,
    ScheduleTimer,
    SyncGroupRequest,
    SyncGroupResult,
)
from trikafka.errors import ErrorCode, KafkaProtocolError

__all__ = ["ClassicMembers"]


class ClassicMembers:
    def __init__(self, machine: ConsumerGroupMachine) -> None:
        self.machine = machine
        self.settings = machine.settings
        #: (group, now) → the effects of downgrading it once a classic static member replaced a
        #: consumer-protocol one, or None (wired by :mod:`~trikafka.coordinator.group_migration`)
        self.downgrade_replaced: Callable[[ConsumerGroup, float], tuple[Effect, ...] | None] = lambda g, now: None

    def _member(self, group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember:
        """Kafka's validateConsumerGroupMember + throwIfMemberDoesNotUseClassicProtocol."""
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise KafkaProtocolError(f"Member {member_id} is not a member of group {group.group_id}.",
                                         ErrorCode.unknown_member_id)
        else:
            member = group.static_member(instance_id)
            if member is None:
                raise KafkaProtocolError(f"Member with instance id {instance_id} is not a member of group "
                                         f"{group.group_id}.", ErrorCode.unknown_member_id)
            if member.member_id != member_id:
                raise KafkaProtocolError(f"Static member {member_id} with instance id {instance_id} was fenced by "
                                         f"member {member.member_id}.", ErrorCode.fenced_instance_id)
        if not member.uses_classic_protocol:
            raise KafkaProtocolError(f"Member {member.member_id} does not use the classic protocol.",
                                     ErrorCode.unknown_member_id)
        return member

    def _join_timeout(self, group: ConsumerGroup, member: ConsumerGroupMember, now_ms: float) -> list[Effect]:
        """Told to rejoin, the member has its rebalance timeout to do so (scheduled if absent)."""
        if member.member_id in group.join_timeouts:
            return []
        group.join_timeouts.add(member.member_id)
        key = ConsumerTimerKey(JOIN, group.group_id, member.member_id)
        return [ScheduleTimer(key, now_ms + max(member.rebalance_timeout_ms, 0))]

    # --- JoinGroup ---------------------------------------------------------------------

    def join(self, group: ConsumerGroup, request: JoinGroupRequest, now_ms: float) -> Reply[JoinGroupResult]:
        try:
            return self._join(group, request, now_ms)
        except KafkaProtocolError as exc:
            return Reply(JoinGroupResult(exc.error_code, member_id=request.member_id))

    def _member_for(self, group: ConsumerGroup, request: JoinGroupRequest, member_id: str, unknown: bool,
                    records: list[rec.Record], effects: list[Effect]) -> ConsumerGroupMember:
        instance_id = request.group_instance_id
        if instance_id is None:
            return group.members.get(member_id) or ConsumerGroupMember(member_id)
        if not unknown:
            return self._member(group, member_id, instance_id)
        existing = group.static_member(instance_id)
        if existing is None:
            return ConsumerGroupMember(member_id)
        # A new instance of the static member takes its place and partitions under a new id.
        replacement = attrs.evolve(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
        target = group.target.get(existing.member_id, {})
        group.remove(existing.member_id)
        group.put(replacement)
        group.target[member_id] = target
        records += rec.member_tombstones(group.group_id, existing.member_id)
        records += [
            rec.member_metadata(group.group_id, replacement),
            rec.target_member(group.group_id, member_id, target),
            rec.current_assignment(group.group_id, replacement),
        ]
        effects += self.machine.cancel_timers(group.group_id, existing.member_id)
        return replacement

    def _join(self, group: ConsumerGroup, request: JoinGroupRequest, now_ms: float) -> Reply[JoinGroupResult]:
        settings = self.settings
        low, high = settings.group_min_session_timeout_ms, settings.group_max_session_timeout_ms
        if not low <= request.session_timeout_ms <= high:
            return Reply(JoinGroupResult(ErrorCode.invalid_session_timeout, member_id=request.member_id))
        unknown = request.member_id == UNKNOWN_MEMBER_ID
        member_id = new_member_id() if unknown else request.member_id
        if member_id not in group.members and len(group.members) >= settings.group_consumer_max_size:
            raise KafkaProtocolError(f"The consumer group has reached its maximum capacity of "
                                     f"{settings.group_consumer_max_size} members.", ErrorCode.group_max_size_reached)
        if not group.supports_classic(request.protocol_type, {name for name, _ in request.protocols}):
            raise KafkaProtocolError(f"Member {member_id}'s protocols are not supported.",
                                     ErrorCode.inconsistent_group_protocol)
        if unknown and request.require_known_member_id and request.group_instance_id is None:
            return Reply(JoinGroupResult(ErrorCode.member_id_required, member_id=member_id))
        try:
            subscription = decode_subscription(request.protocols[0][1])
        except ValueError as exc:
            raise KafkaProtocolError(f"Malformed embedded consumer protocol: {exc}.",
                                     ErrorCode.inconsistent_group_protocol) from None
        records: list[rec.Record] = []
        effects: list[Effect] = []
        replaced = group.static_member(request.group_instance_id) if request.group_instance_id and unknown else None
        member = self._member_for(group, request, member_id, unknown, records, effects)
        updated = attrs.evolve(
            member,
            instance_id=request.group_instance_id or member.instance_id,
            rack_id=subscription.rack_id or member.rack_id,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            subscribed_topic_names=tuple(sorted(set(subscription.topics))),
            client_id=request.client_id,
            client_host=request.client_host,
            classic_protocols=tuple(request.protocols),
            classic_session_timeout_ms=request.session_timeout_ms,
        )
        counts = self.machine.topics()
        owned = {t: ps for t, ps in subscription.owned.items() if t in counts}
        reconciled = self.machine.advance(group, member, updated, owned, now_ms, records, effects)
        self.machine.write(group.group_id, records)
        result = JoinGroupResult(ErrorCode.none, generation_id=reconciled.member_epoch, protocol_type="consumer",
                                 protocol_name=request.protocols[0][0], leader="", member_id=member_id)
        if replaced is not None and not replaced.uses_classic_protocol:
            downgraded = self.downgrade_replaced(group, now_ms)
            if downgraded is not None:
                return Reply(result, (*effects, *downgraded))
        group.join_timeouts.discard(member_id)
        effects += [
            CancelTimer(ConsumerTimerKey(JOIN, group.group_id, member_id)),
            self.machine.session(group.group_id, member_id, now_ms),
            ScheduleTimer(ConsumerTimerKey(SYNC, group.group_id, member_id),
                          now_ms + max(request.rebalance_timeout_ms, 0)),
        ]
        return Reply(result, tuple(effects))

    # --- SyncGroup, Heartbeat, LeaveGroup ------------------------------------------------

    def sync(self, group: ConsumerGroup, request: SyncGroupRequest, now_ms: float) -> Reply[SyncGroupResult]:
        generation_id, member_id, instance_id = request.generation_id, request.member_id, request.group_instance_id
        protocol_type, protocol_name = request.protocol_type, request.protocol_name
        effects: list[Effect] = []
        try:
            member = self._member(group, member_id, instance_id)
            assert member.classic_protocols is not None
            if generation_id != member.member_epoch:
                raise KafkaProtocolError("generation", ErrorCode.illegal_generation)
            if (protocol_type is not None and protocol_type != "consumer") or (
                    protocol_name is not None and protocol_name != member.classic_protocols[0][0]):
                raise KafkaProtocolError("protocol", ErrorCode.inconsistent_group_protocol)
            if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
                effects += self._join_timeout(group, member, now_ms)
                raise KafkaProtocolError("rejoin", ErrorCode.rebalance_in_progress)
        except KafkaProtocolError as exc:
            return Reply(SyncGroupResult(exc.error_code), tuple(effects))
        assignment = encode_assignment(member.assigned, protocol_version(member.classic_protocols[0][1]))
        effects += [CancelTimer(ConsumerTimerKey(SYNC, group.group_id, member.member_id)),
                    self.machine.session(group.group_id, member.member_id, now_ms)]
        return Reply(SyncGroupResult(ErrorCode.none, protocol_type, protocol_name, assignment), tuple(effects))

    def heartbeat(self, group: ConsumerGroup, generation_id: int, member_id: str, instance_id: str | None,
                  now_ms: float) -> Reply[ErrorCode]:
        try:
            member = self._member(group, member_id, instance_id)
        except KafkaProtocolError as exc:
            return Reply(exc.error_code)
        if generation_id != member.member_epoch:
            return Reply(ErrorCode.illegal_generation)
        effects: list[Effect] = [self.machine.session(group.group_id, member.member_id, now_ms)]
        if (member.member_epoch < group.group_epoch or member.state is MemberState.UNREVOKED_PARTITIONS
                or (member.state is MemberState.UNRELEASED_PARTITIONS and not group.waiting_on_unreleased(member))):
            effects += self._join_timeout(group, member, now_ms)
            return Reply(ErrorCode.rebalance_in_progress, tuple(effects))
        return Reply(ErrorCode.none, tuple(effects))

    def leave(self, group: ConsumerGroup, members: list[tuple[str, str | None]],
              now_ms: float) -> Reply[tuple[ErrorCode, list[ErrorCode]]]:
        codes: list[ErrorCode] = []
        leaving: list[str] = []
        for member_id, instance_id in members:
            try:
                if instance_id is not None and member_id == UNKNOWN_MEMBER_ID:  # an admin's removal by instance id
                    static = group.static_member(instance_id)
                    member_id = static.member_id if static is not None else member_id
                member = self._member(group, member_id, instance_id)
                if member.member_id in leaving:
                    raise KafkaProtocolError("left already", ErrorCode.unknown_member_id)
                leaving.append(member.member_id)
                codes.append(ErrorCode.none)
            except KafkaProtocolError as exc:
                codes.append(exc.error_code)
        effects = self.machine.remove_members(group, leaving, "left the group (LeaveGroup)") if leaving else ()
        return Reply((ErrorCode.none, codes), effects)
