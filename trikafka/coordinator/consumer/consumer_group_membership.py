"""Which member a KIP-848 heartbeat speaks for, and whether its epoch lets it speak.

Kafka's ``getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember`` and ``throwIfMemberEpochIsInvalid``,
for :class:`~trikafka.coordinator.consumer.consumer_group_machine.ConsumerGroupMachine`: epoch 0
joins (a static member may take over its released predecessor's place, assignment and target);
any other epoch must be the member's, or its previous one while it owns a subset of its
assignment. Errors are ``KafkaProtocolError`` raised before anything changes.
"""

from __future__ import annotations

import attrs

from trikafka.coordinator.consumer import consumer_group_records as rec
from trikafka.coordinator.consumer.consumer_group import (
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerGroupMember,
)
from trikafka.coordinator.consumer.consumer_group_protocol import (
    JOIN,
    REBALANCE,
    SESSION,
    SYNC,
    ConsumerGroupHeartbeat,
    ConsumerTimerKey,
)
from trikafka.coordinator.group_protocol import CancelTimer, Effect
from trikafka.errors import ErrorCode, KafkaProtocolError

__all__ = ["cancel_timers", "check_epoch", "member_for"]


def _error(message: str, code: ErrorCode) -> KafkaProtocolError:
    return KafkaProtocolError(message, code)


def cancel_timers(group_id: str, member_id: str) -> tuple[Effect, ...]:
    """Cancel every timer of a member (session, revocation, classic join and sync)."""
    return tuple(CancelTimer(ConsumerTimerKey(k, group_id, member_id))
                 for k in (SESSION, REBALANCE, JOIN, SYNC))


def member_for(group: ConsumerGroup, hb: ConsumerGroupHeartbeat, records: list[rec.Record],
               effects: list[Effect]) -> ConsumerGroupMember:
    """Kafka's getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember."""
    if hb.instance_id is not None:
        existing = group.static_member(hb.instance_id)
        if hb.member_epoch == 0:
            if existing is None:
                return group.members.get(hb.member_id) or ConsumerGroupMember(hb.member_id)
            # A consumer-protocol instance may take over from a classic one at once (Kafka 4).
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH and not existing.uses_classic_protocol:
                raise _error(f"Static member {hb.member_id} with instance id {hb.instance_id} cannot join the "
                             f"group because the instance id is owned by member {existing.member_id}.",
                             ErrorCode.unreleased_instance_id)
            # The released static member's place, assignment and target go to the new id.
            replacement = attrs.evolve(existing, member_id=hb.member_id, member_epoch=0, previous_member_epoch=0)
            target = group.target.get(existing.member_id, {})
            group.remove(existing.member_id)
            group.put(replacement)
            group.target[hb.member_id] = target
            records += rec.member_tombstones(group.group_id, existing.member_id)
            records += [rec.member_metadata(group.group_id, replacement),
                        rec.target_member(group.group_id, hb.member_id, target),
                        rec.current_assignment(group.group_id, replacement)]
            effects += cancel_timers(group.group_id, existing.member_id)
            return replacement
        if existing is None:
            raise _error(f"Instance id {hb.instance_id} is unknown.", ErrorCode.unknown_member_id)
        if existing.member_id != hb.member_id:
            raise _error(f"Static member {hb.member_id} with instance id {hb.instance_id} was fenced by member "
                         f"{existing.member_id}.", ErrorCode.fenced_instance_id)
    member = group.members.get(hb.member_id)
    if hb.member_epoch == 0:
        return member or ConsumerGroupMember(hb.member_id)
    if member is None:
        raise _error(f"Member {hb.member_id} is not a member of group {group.group_id}.", ErrorCode.unknown_member_id)
    check_epoch(member, hb)
    return member


def check_epoch(member: ConsumerGroupMember, hb: ConsumerGroupHeartbeat) -> None:
    received, known = hb.member_epoch, member.member_epoch
    if received > known:
        raise _error(f"The consumer group member has a greater member epoch ({received}) than the one known by "
                     f"the group coordinator ({known}). The member must abandon all its partitions and rejoin.",
                     ErrorCode.fenced_member_epoch)
    if received < known:
        owned = hb.owned or {}
        subset = all(ps <= member.assigned.get(t, frozenset()) for t, ps in owned.items())
        if received != member.previous_member_epoch or not subset:
            raise _error(f"The consumer group member has a smaller member epoch ({received}) than the one known "
                         f"by the group coordinator ({known}). The member must abandon all its partitions and "
                         "rejoin.", ErrorCode.fenced_member_epoch)
