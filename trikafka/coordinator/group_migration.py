"""Online migration between classic and KIP-848 consumer groups (Kafka 4's rules).

Theory of operation
-------------------
A group id is either a classic group or a consumer group. An *empty* group changes type when a
member of the other protocol arrives (offsets kept, see the coordinator). A group *with
members* changes type only as ``group.consumer.migration.policy`` allows (``bidirectional``
by default; ``upgrade``, ``downgrade`` or ``disabled``):

* **Upgrade** — a ConsumerGroupHeartbeat joining (epoch 0) a non-empty classic group whose
  members all speak the embedded ``consumer`` protocol converts it (Kafka's
  ``convertToConsumerGroup``): each classic member becomes a consumer-group member that keeps
  using the classic protocol, at member epoch = the classic generation, Stable, with its last
  SyncGroup assignment as both its current and its target assignment; group and assignment
  epoch = the generation. Parked JoinGroup/SyncGroup calls end with REBALANCE_IN_PROGRESS and
  the classic timers go. The new member then bumps the group epoch and the server-side
  assignor computes the first real target, reconciled revoke-before-assign for both kinds of
  member (:mod:`~trikafka.coordinator.consumer.consumer_group_classic`).
* **Downgrade** — when the last consumer-protocol member of a group that still has classic
  members leaves or is fenced (Kafka's ``convertToClassicGroup``): the group becomes a classic
  group of the remaining members at generation = the group epoch, protocol chosen as a classic
  group chooses, each member's target assignment serialized as its SyncGroup assignment, Stable
  — and a rebalance is prepared at once, so every member rejoins through JoinGroup. Also when a
  classic static member replaces the last consumer-protocol one (same ``group.instance.id``):
  then without a rebalance, the newcomer keeping its predecessor's assignment.

Refused (too large, not the consumer protocol, bytes that do not parse, or the policy) the
upgrade answers what it answered before: GROUP_ID_NOT_FOUND; a refused downgrade just removes
the member. One log line says why.
"""

from __future__ import annotations

import logging

from trikafka.coordinator.classic.consumer_protocol_bytes import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    protocol_version,
)
from trikafka.coordinator.classic.group_membership import GroupMembership
from trikafka.coordinator.classic.group_metadata import GroupMetadata, MemberMetadata
from trikafka.coordinator.classic.group_state import GroupState
from trikafka.coordinator.consumer import consumer_group_records as rec
from trikafka.coordinator.consumer.consumer_group import ConsumerGroup, ConsumerGroupMember
from trikafka.coordinator.consumer.consumer_group_classic import ClassicMembers
from trikafka.coordinator.consumer.consumer_group_machine import ConsumerGroupMachine
from trikafka.coordinator.group_protocol import CancelTimer, Effect, TimerKey, TimerKind
from trikafka.coordinator.settings import GroupSettings
from trikafka.errors import ErrorCode, KafkaProtocolError

__all__ = ["GroupMigration"]

log = logging.getLogger("trikafka.coordinator")


class GroupMigration:
    def __init__(self, settings: GroupSettings, membership: GroupMembership, consumer: ConsumerGroupMachine,
                 classic_members: ClassicMembers) -> None:
        self.settings = settings
        self.membership = membership
        self.consumer = consumer
        consumer.upgrade = self.upgrade
        consumer.downgrade = self.downgrade
        classic_members.downgrade_replaced = self.downgrade_replaced

    # --- classic → consumer ----------------------------------------------------------------

    def _can_upgrade(self, classic: GroupMetadata) -> bool:
        why = None
        if not self.settings.upgrade_enabled:
            why = "the online upgrade is disabled (group.consumer.migration.policy)"
        elif classic.protocol_type != "consumer":
            why = "the group does not use the consumer embedded protocol"
        elif len(classic.members) > self.settings.group_consumer_max_size:
            why = "the group size exceeds group.consumer.max.size"
        if why is not None:
            log.info("cannot upgrade classic group %s to a consumer group: %s", classic.group_id, why)
        return why is None

    def upgrade(self, group_id: str, now_ms: float, effects: list[Effect]) -> ConsumerGroup | None:
        """Convert a non-empty classic group, or None if that is not allowed. A group already
        at ``group.consumer.max.size`` stays classic: GROUP_MAX_SIZE_REACHED for the joiner."""
        classic = self.membership.groups.get(group_id)
        if classic is None or not classic.members or not self._can_upgrade(classic):
            return None
        if len(classic.members) >= self.settings.group_consumer_max_size:  # no room for the one joining
            raise KafkaProtocolError(
                f"The consumer group has reached its maximum capacity of "
                f"{self.settings.group_consumer_max_size} members.",
                ErrorCode.group_max_size_reached,
            )
        try:
            group = self._consumer_group_of(classic)
        except ValueError as exc:
            log.warning("cannot upgrade classic group %s: malformed embedded consumer protocol: %s", group_id, exc)
            return None
        rebalancer = self.membership.rebalancer
        for member_id in list(classic.pending_members):
            rebalancer.drop_pending(classic, member_id)
        for member in list(classic.members.values()):
            rebalancer.answer_both(member, ErrorCode.rebalance_in_progress)
            rebalancer.end_session(classic, member.member_id)
        rebalancer.outbox.append(CancelTimer(TimerKey(TimerKind.DELAYED_JOIN, group_id)))
        # The classic group ends; its id keeps only the offsets (as an Empty holder).
        classic.members.clear()
        classic.static_members.clear()
        classic.leader_id = classic.protocol_name = None
        classic.delayed_join = None
        classic.subscribed = set()
        classic.state, classic.state_since_ms = GroupState.EMPTY, now_ms
        self.membership.groups.store_group(classic)
        effects += self.membership.drain(now_ms).effects
        self.consumer.groups[group_id] = group
        records: list[rec.Record] = [rec.member_metadata(group_id, m) for m in group.members.values()]
        records.append(rec.group_metadata(group))
        records += [rec.target_member(group_id, mid, a) for mid, a in group.target.items()]
        records.append(rec.target_metadata(group))
        records += [rec.current_assignment(group_id, m) for m in group.members.values()]
        self.consumer.write(group_id, records)
        effects += [self.consumer.session(group_id, mid, now_ms) for mid in group.members]
        log.info("upgraded classic group %s (generation %d, %d member(s)) to a consumer group",
                 group_id, group.group_epoch, len(group.members))
        return group

    @staticmethod
    def _consumer_group_of(classic: GroupMetadata) -> ConsumerGroup:
        generation = classic.generation_id
        group = ConsumerGroup(classic.group_id, group_epoch=generation, assignment_epoch=generation)
        for m in classic.members.values():
            metadata = m.metadata_for(classic.protocol_name) if classic.protocol_name else m.protocols[0][1]
            subscription = decode_subscription(metadata)
            assigned = decode_assignment(m.assignment)
            member = ConsumerGroupMember(
                m.member_id,
                instance_id=m.group_instance_id,
                rack_id=subscription.rack_id,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=tuple(sorted(set(subscription.topics))),
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                member_epoch=generation,
                previous_member_epoch=generation,
                assigned=assigned,
                classic_protocols=tuple(m.protocols),
                classic_session_timeout_ms=m.session_timeout_ms,
            )
            group.put(member)
            group.target[m.member_id] = member.assigned
        return group

    # --- consumer → classic ----------------------------------------------------------------

    def _may_downgrade(self, group: ConsumerGroup, size: int) -> bool:
        why = None
        if not self.settings.downgrade_enabled:
            why = "the online downgrade is disabled (group.consumer.migration.policy)"
        elif size > self.settings.group_max_size:
            why = "its size is greater than group.max.size"
        if why is not None:
            log.info("cannot downgrade consumer group %s to a classic group: %s", group.group_id, why)
        return why is None

    def downgrade(self, group: ConsumerGroup, leaving: str, now_ms: float) -> tuple[Effect, ...] | None:
        """Convert the group when ``leaving`` is its last consumer-protocol member, else None."""
        if not group.all_classic_except(leaving) or len(group.members) <= 1:
            return None
        if not self._may_downgrade(group, len(group.members) - 1):
            return None
        return self._to_classic(group, leaving, now_ms, rebalance=True)

    def downgrade_replaced(self, group: ConsumerGroup, now_ms: float) -> tuple[Effect, ...] | None:
        """A classic static member just took the place of a consumer-protocol one (Kafka's
        validateOnlineDowngradeWithReplacedMemberId): if everyone is classic now, the group
        becomes classic *without* a rebalance — the newcomer has its predecessor's assignment."""
        if not all(m.uses_classic_protocol for m in group.members.values()):
            return None
        if not self._may_downgrade(group, len(group.members)):
            return None
        return self._to_classic(group, None, now_ms, rebalance=False)

    def _to_classic(self, group: ConsumerGroup, leaving: str | None, now_ms: float,
                    rebalance: bool) -> tuple[Effect, ...]:
        manager = self.membership.groups
        classic = manager.get(group.group_id) or manager.create(group.group_id, now_ms)
        effects: list[Effect] = []
        for member_id in group.members:
            effects += self.consumer.cancel_timers(group.group_id, member_id)
        del self.consumer.groups[group.group_id]
        self.consumer.write(group.group_id, rec.group_tombstones(group))
        classic.generation_id = group.group_epoch
        classic.protocol_type, classic.leader_id = "consumer", None
        classic.state, classic.state_since_ms = GroupState.STABLE, now_ms
        for m in group.members.values():
            if m.member_id == leaving or m.classic_protocols is None:
                continue
            classic.add(MemberMetadata(m.member_id, m.instance_id, m.client_id, m.client_host,
                                       m.classic_session_timeout_ms, m.rebalance_timeout_ms, "consumer",
                                       list(m.classic_protocols)))
        classic.protocol_name = classic.select_protocol()
        for member in classic.members.values():
            version = protocol_version(member.metadata_for(classic.protocol_name))
            member.assignment = encode_assignment(group.target.get(member.member_id, {}), version)
        classic.subscribed = classic.subscribed_topics()
        manager.store_group(classic)
        rebalancer = self.membership.rebalancer
        for member in classic.members.values():
            rebalancer.heard_from(classic, member, now_ms)
        if rebalance:
            rebalancer.prepare(classic, f"Downgrade group {group.group_id} from consumer to classic.", now_ms)
        log.info("downgraded consumer group %s (epoch %d, %d member(s)) to a classic group",
                 group.group_id, group.group_epoch, len(classic.members))
        return (*effects, *self.membership.drain(now_ms).effects)
