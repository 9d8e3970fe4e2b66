"""The KIP-848 consumer-group state machine: ConsumerGroupHeartbeat, sans-IO.

Theory of operation
-------------------
Kafka's ``GroupMetadataManager.consumerGroupHeartbeat`` in three steps, each heartbeat:

1. **Member.** Find or create the group and the member (epoch 0 joins; a static member with
   ``instance_id`` may take over its released predecessor's place and assignment; any other
   epoch must match the member's — or be its previous epoch while it owns a subset of its
   assignment, in case our last answer was lost — else FENCED_MEMBER_EPOCH). A changed
   subscription, a new member, or a change in the subscribed topics' partitions bumps the
   **group epoch**.
2. **Target.** When the group epoch passes the assignment epoch, the group's assignor
   (``uniform`` or ``range``, the one most members ask for, else the first of
   ``group.consumer.assignors``) computes the new target for every member.
3. **Reconcile** the member towards its target, revoke before assign
   (:mod:`~trikafka.coordinator.consumer.consumer_reconciliation`).

Leaving (epoch -1), a session that ends (``group.consumer.session.timeout.ms`` without a
heartbeat) and a revocation not done within the member's rebalance timeout all *fence* the
member: it is removed and the group epoch bumps, so the others rebalance. A static member
leaving with epoch -2 keeps its place and partitions until its session ends.

Members speaking the classic protocol share the same steps (:meth:`advance`) through their
own handler (:mod:`~trikafka.coordinator.consumer.consumer_group_classic`); converting a group with
members from or to a classic group is :mod:`~trikafka.coordinator.group_migration`'s, called
through the ``upgrade`` and ``downgrade`` hooks (a non-empty classic group met by a joining
heartbeat; the last consumer-protocol member fenced while classic ones remain).

Every change is persisted as Kafka's records (:mod:`consumer_group_records`), one batch per
call. Errors are ``KafkaProtocolError`` raised before anything changes.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable, Mapping

import attrs

from trikafka.coordinator.consumer import consumer_group_membership as membership
from trikafka.coordinator.consumer import consumer_group_records as rec
from trikafka.coordinator.consumer import consumer_regex
from trikafka.coordinator.consumer.consumer_assignors import assign
from trikafka.coordinator.consumer.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    member_topics,
    topic_pattern,
)
from trikafka.coordinator.consumer.consumer_group_protocol import (
    JOIN,
    REBALANCE,
    REGEX,
    SESSION,
    SYNC,
    ConsumerGroupHeartbeat,
    ConsumerTimerKey,
    HeartbeatResult,
)
from trikafka.coordinator.consumer.consumer_reconciliation import reconcile
from trikafka.coordinator.group_metadata_manager import GroupMetadataManager
from trikafka.coordinator.group_protocol import CancelTimer, Effect, Reply, ScheduleTimer
from trikafka.coordinator.offsets import OffsetStore
from trikafka.coordinator.settings import GroupSettings
from trikafka.errors import ErrorCode, KafkaProtocolError

__all__ = ["ConsumerGroupMachine", "new_member_id"]

log = logging.getLogger("trikafka.coordinator")

TopicCounts = Callable[[], Mapping[str, int]]
#: (group, leaving member id, now) → the effects of converting the group to a classic group,
#: or None when it stays a consumer group (see :mod:`~trikafka.coordinator.group_migration`)
Downgrade = Callable[[ConsumerGroup, str, float], "tuple[Effect, ...] | None"]
#: (non-empty classic group id, now, effects to add to) → the consumer group it became, or None
Upgrade = Callable[[str, float, list[Effect]], "ConsumerGroup | None"]


def _error(message: str, code: ErrorCode) -> KafkaProtocolError:
    return KafkaProtocolError(message, code)


def new_member_id() -> str:
    """What Kafka generates for a v0 member without an id (and clients do from v1)."""
    return str(uuid.uuid4())


def _validate(hb: ConsumerGroupHeartbeat, assignors: tuple[str, ...]) -> None:
    """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid."""
    bad = ErrorCode.invalid_request
    if not hb.group_id:
        raise _error("GroupId can't be empty.", bad)
    if hb.instance_id == "":
        raise _error("InstanceId can't be empty.", bad)
    if hb.rack_id == "":
        raise _error("RackId can't be empty.", bad)
    if not hb.member_id:
        raise _error("MemberId can't be empty.", bad)
    if hb.member_epoch == 0:
        if hb.rebalance_timeout_ms == -1:
            raise _error("RebalanceTimeoutMs must be provided in first request.", bad)
        if hb.owned:
            raise _error("TopicPartitions must be empty when (re-)joining.", bad)
        if hb.subscribed_topic_names is None and hb.subscribed_topic_regex is None:
            raise _error("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.", bad)
    elif hb.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH and hb.instance_id is None:
        raise _error("InstanceId can't be null.", bad)
    elif hb.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise _error("MemberEpoch is invalid.", bad)
    if hb.subscribed_topic_regex:
        try:
            topic_pattern(hb.subscribed_topic_regex)
        except re.error as exc:
            raise _error(
                f"SubscribedTopicRegex `{hb.subscribed_topic_regex}` is not a valid regular expression: {exc}.",
                ErrorCode.invalid_regular_expression,
            ) from None
    if hb.server_assignor is not None and hb.server_assignor not in assignors:
        raise _error(
            f"ServerAssignor {hb.server_assignor} is not supported. Supported assignors: {', '.join(assignors)}.",
            ErrorCode.unsupported_assignor,
        )


class ConsumerGroupMachine:
    def __init__(self, settings: GroupSettings, store: OffsetStore | None, topics: TopicCounts,
                 classic: GroupMetadataManager) -> None:
        self.settings = settings
        self.store = store
        self.topics = topics
        self.classic = classic
        self.groups: dict[str, ConsumerGroup] = {}
        #: Online migration (Kafka 4's group.consumer.migration.policy); the shell wires these.
        self.upgrade: Upgrade = lambda group_id, now_ms, effects: None
        self.downgrade: Downgrade = lambda group, member_id, now_ms: None
        #: A group's GROUP-config overrides (``consumer.session.timeout.ms``,
        #: ``consumer.heartbeat.interval.ms``); the shell wires the share coordinator's store.
        self.group_overrides: Callable[[str], Mapping[str, str]] = lambda group_id: {}

    def session_timeout_ms(self, group_id: str) -> int:
        """The group's ``consumer.session.timeout.ms``, else ``group.consumer.session.timeout.ms``."""
        value = self.group_overrides(group_id).get("consumer.session.timeout.ms")
        return int(value) if value is not None else self.settings.group_consumer_session_timeout_ms

    def heartbeat_interval_ms(self, group_id: str) -> int:
        """The group's ``consumer.heartbeat.interval.ms``, else the broker's."""
        value = self.group_overrides(group_id).get("consumer.heartbeat.interval.ms")
        return int(value) if value is not None else self.settings.group_consumer_heartbeat_interval_ms

    # --- loading and persistence --------------------------------------------------------

    def load(self, now_ms: float) -> Reply[None]:
        """Replay the groups; every member's session (and revocation deadline) starts anew."""
        if self.store is not None:
            self.groups = rec.replay(self.store.replay())
            consumer_regex.resolve_all(self.groups.values(), self.topics(), now_ms)
        effects: list[Effect] = [self.session(g.group_id, m, now_ms) for g in self.groups.values() for m in g.members]
        effects += [  # a revocation in progress gets its whole rebalance timeout again
            ScheduleTimer(ConsumerTimerKey(REBALANCE, g.group_id, m.member_id), now_ms + max(m.rebalance_timeout_ms, 0))
            for g in self.groups.values() for m in g.members.values() if m.state is MemberState.UNREVOKED_PARTITIONS
        ]
        if self.groups:
            log.info("loaded %d consumer group(s)", len(self.groups))
        return Reply(None, tuple(effects))

    def write(self, group_id: str, records: list[rec.Record]) -> None:
        if self.store is not None and records:
            self.store.write(group_id, records)

    def session(self, group_id: str, member_id: str, now_ms: float) -> ScheduleTimer:
        """The member's session starts again: the group's timeout, or a classic member's own."""
        member = self.groups[group_id].members.get(member_id) if group_id in self.groups else None
        timeout = self.session_timeout_ms(group_id)
        if member is not None and member.uses_classic_protocol:
            timeout = member.classic_session_timeout_ms
        return ScheduleTimer(ConsumerTimerKey(SESSION, group_id, member_id), now_ms + timeout)

    cancel_timers = staticmethod(membership.cancel_timers)

    # --- the heartbeat ----------------------------------------------------------------

    def heartbeat(self, hb: ConsumerGroupHeartbeat, now_ms: float) -> Reply[HeartbeatResult]:
        try:
            _validate(hb, self.settings.group_consumer_assignors)
            if hb.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(hb, now_ms)
            return self._heartbeat(hb, now_ms)
        except KafkaProtocolError as exc:
            return Reply(HeartbeatResult(error_code=exc.error_code, error_message=str(exc)))

    def _group_for(
        self, hb: ConsumerGroupHeartbeat, now_ms: float, effects: list[Effect]
    ) -> tuple[ConsumerGroup, bool]:
        group = self.groups.get(hb.group_id)
        if group is not None:
            return group, False
        classic = self.classic.get(hb.group_id)
        if classic is not None and classic.members:
            upgraded = self.upgrade(hb.group_id, now_ms, effects) if hb.member_epoch == 0 else None
            if upgraded is None:
                raise _error(f"Group {hb.group_id} is not a consumer group.", ErrorCode.group_id_not_found)
            return upgraded, False
        if hb.member_epoch != 0:
            raise _error(f"Consumer group {hb.group_id} not found.", ErrorCode.group_id_not_found)
        return ConsumerGroup(hb.group_id), True

    def _heartbeat(self, hb: ConsumerGroupHeartbeat, now_ms: float) -> Reply[HeartbeatResult]:
        records: list[rec.Record] = []
        effects: list[Effect] = []
        group, created = self._group_for(hb, now_ms, effects)
        if hb.member_id not in group.members and len(group.members) >= self.settings.group_consumer_max_size:
            if not (hb.instance_id is not None and group.static_member(hb.instance_id) is not None):
                raise _error(f"The consumer group has reached its maximum capacity of "
                             f"{self.settings.group_consumer_max_size} members.", ErrorCode.group_max_size_reached)
        member = membership.member_for(group, hb, records, effects)
        if created:
            self.groups[group.group_id] = group
        before = member
        updated = attrs.evolve(
            member,
            instance_id=hb.instance_id if hb.instance_id is not None else member.instance_id,
            rack_id=hb.rack_id if hb.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=hb.rebalance_timeout_ms
            if hb.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms,
            server_assignor=hb.server_assignor if hb.server_assignor is not None else member.server_assignor,
            subscribed_topic_names=(
                tuple(sorted(set(hb.subscribed_topic_names)))
                if hb.subscribed_topic_names is not None
                else member.subscribed_topic_names
            ),
            subscribed_topic_regex=(hb.subscribed_topic_regex or None)
            if hb.subscribed_topic_regex is not None
            else member.subscribed_topic_regex,
            client_id=hb.client_id,
            client_host=hb.client_host,
            classic_protocols=None,  # whoever heartbeats speaks the consumer protocol now
            classic_session_timeout_ms=-1,
        )
        reconciled = self.advance(group, member, updated, hb.owned, now_ms, records, effects)
        self.write(group.group_id, records)
        effects.append(self.session(group.group_id, reconciled.member_id, now_ms))
        full = hb.member_epoch == 0 or (
            hb.rebalance_timeout_ms != -1
            and (hb.subscribed_topic_names is not None or hb.subscribed_topic_regex is not None)
            and hb.owned is not None
        )
        changed = reconciled.assigned != before.assigned
        return Reply(
            HeartbeatResult(
                member_id=reconciled.member_id,
                member_epoch=reconciled.member_epoch,
                heartbeat_interval_ms=self.heartbeat_interval_ms(group.group_id),
                assignment=reconciled.assigned if full or changed else None,
            ),
            tuple(effects),
        )

    def advance(self, group: ConsumerGroup, member: ConsumerGroupMember, updated: ConsumerGroupMember,
                owned: Mapping[str, frozenset[int]] | None, now_ms: float, records: list[rec.Record],
                effects: list[Effect]) -> ConsumerGroupMember:
        """Kafka's steps 1-3 for a member whose request made it ``updated``: persist it, bump
        the group epoch on a new member, subscription or partition count, recompute the target
        if behind, and reconcile the member (``owned``: what it says it owns). A consumer-protocol
        member that must revoke gets its rebalance timeout (a classic one gets join/sync
        timeouts from its own handler instead)."""
        new_member = updated.member_id not in group.members
        counts = self.topics()
        bump = new_member or updated.subscribed_topic_names != member.subscribed_topic_names
        bump = consumer_regex.on_heartbeat(group, member, updated, counts, now_ms,
                                           self.settings.group_consumer_regex_refresh_interval_ms, effects) or bump
        if new_member or updated != member:
            records.append(rec.member_metadata(group.group_id, updated))
        group.put(updated)
        # The subscribed topics' partition counts: a new topic or partition bumps the epoch too.
        metadata = {t: counts[t] for t in sorted(group.subscribed_topics(counts))}
        if bump or metadata != group.subscription_metadata:
            group.group_epoch += 1
            group.subscription_metadata = metadata
            records.append(rec.group_metadata(group))
        if group.group_epoch > group.assignment_epoch:
            records += self._update_target(group)
        target = group.target.get(updated.member_id, {})
        reconciled = reconcile(updated, group.assignment_epoch, target,
                               lambda t, p: group.partition_epoch(t, p, updated.member_id),
                               owned, member_topics(updated, counts, group.resolved_regexes))
        if reconciled != updated or new_member:
            records.append(rec.current_assignment(group.group_id, reconciled))
        if (reconciled != updated or new_member) and not reconciled.uses_classic_protocol:
            key = ConsumerTimerKey(REBALANCE, group.group_id, reconciled.member_id)
            if reconciled.state is MemberState.UNREVOKED_PARTITIONS:
                if updated.state is not MemberState.UNREVOKED_PARTITIONS:
                    effects.append(ScheduleTimer(key, now_ms + max(reconciled.rebalance_timeout_ms, 0)))
            else:
                effects.append(CancelTimer(key))
        group.put(reconciled)
        return reconciled

    def _update_target(self, group: ConsumerGroup) -> list[rec.Record]:
        """Run the group's assignor for its epoch; records for the members whose target changed."""
        counts = group.subscription_metadata
        subscriptions = {m.member_id: frozenset(member_topics(m, counts, group.resolved_regexes))
                         for m in group.members.values()}
        name = group.preferred_assignor(self.settings.group_consumer_assignors[0])
        new = assign(name, subscriptions, counts, group.target)
        records = [
            rec.target_member(group.group_id, mid, a) for mid, a in new.items() if group.target.get(mid, {}) != a
        ]
        group.target = dict(new)
        group.assignment_epoch = group.group_epoch
        records.append(rec.target_metadata(group))
        return records

    # --- leaving and fencing ----------------------------------------------------------

    def _leave(self, hb: ConsumerGroupHeartbeat, now_ms: float) -> Reply[HeartbeatResult]:
        group = self.groups.get(hb.group_id)
        if group is None:
            raise _error(f"Consumer group {hb.group_id} not found.", ErrorCode.group_id_not_found)
        if hb.instance_id is None:
            member = group.members.get(hb.member_id)
            if member is None:
                raise _error(
                    f"Member {hb.member_id} is not a member of group {group.group_id}.", ErrorCode.unknown_member_id
                )
        else:
            member = group.static_member(hb.instance_id)
            if member is None:
                raise _error(f"Instance id {hb.instance_id} is unknown.", ErrorCode.unknown_member_id)
            if member.member_id != hb.member_id:
                raise _error(f"Static member {hb.member_id} with instance id {hb.instance_id} was fenced by member "
                             f"{member.member_id}.", ErrorCode.fenced_instance_id)
            if hb.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # A temporary leave: place and partitions kept until the session ends.
                left = attrs.evolve(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation={})
                group.put(left)
                self.write(group.group_id, [rec.current_assignment(group.group_id, left)])
                return Reply(HeartbeatResult(member_id=member.member_id, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH))
        effects = self.fence(group, member.member_id, "left the group", now_ms)
        return Reply(HeartbeatResult(member_id=member.member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH), effects)

    def fence(self, group: ConsumerGroup, member_id: str, why: str, now_ms: float) -> tuple[Effect, ...]:
        """Remove a member; the group epoch bumps so the others rebalance — unless the last
        consumer-protocol member leaves classic ones behind and the policy allows a downgrade:
        then the group becomes a classic group (Kafka's consumerGroupFenceMember)."""
        downgraded = self.downgrade(group, member_id, now_ms)
        if downgraded is not None:
            log.info("consumer group %s: member %s %s", group.group_id, member_id, why)
            return downgraded
        return self.remove_members(group, [member_id], why)

    def remove_members(self, group: ConsumerGroup, member_ids: list[str], why: str) -> tuple[Effect, ...]:
        """Remove members; the group epoch bumps once so the others rebalance."""
        records: list[rec.Record] = []
        effects: list[Effect] = []
        for member_id in member_ids:
            group.remove(member_id)
            records += rec.member_tombstones(group.group_id, member_id)
            effects += self.cancel_timers(group.group_id, member_id)
        for regex in (
            group.resolved_regexes.keys() - group.subscribed_regexes().keys() if group.resolved_regexes else ()
        ):
            del group.resolved_regexes[regex]  # its last subscriber left (Kafka's tombstone)
        group.group_epoch += 1
        counts = self.topics()
        group.subscription_metadata = {t: counts[t] for t in sorted(group.subscribed_topics(counts))}
        self.write(group.group_id, [*records, rec.group_metadata(group)])
        log.info("consumer group %s: member(s) %s %s; group epoch %d", group.group_id, ", ".join(member_ids), why,
                 group.group_epoch)
        return tuple(effects)

    def on_timer(self, key: ConsumerTimerKey, now_ms: float) -> Reply[None]:
        group = self.groups.get(key.group_id)
        if key.kind == REGEX:  # the background resolution's result (Kafka's handleRegularExpressionsResult)
            if group is not None and consumer_regex.fold_in(group, self.topics(), now_ms):
                self.write(group.group_id, [rec.group_metadata(group)])
            return Reply(None)
        member = group.members.get(key.member_id) if group is not None else None
        if group is None or member is None:
            return Reply(None)
        if key.kind == SESSION:
            return Reply(None, self.fence(group, key.member_id, "missed its session timeout", now_ms))
        if key.kind == JOIN:
            return Reply(
                None, self.fence(group, key.member_id, "(classic) did not rejoin within its rebalance timeout", now_ms)
            )
        if key.kind == SYNC:
            return Reply(
                None, self.fence(group, key.member_id, "(classic) did not sync within its rebalance timeout", now_ms)
            )
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            return Reply(
                None,
                self.fence(group, key.member_id, "did not revoke its partitions within its rebalance timeout", now_ms),
            )
        return Reply(None)
