"""Rebalances and member sessions: the timer half of the membership state machine.

Theory of operation
-------------------
Everything the classic group protocol does on its own, without a request, lives here, as
pure code: methods take ``now_ms`` and append effects to an outbox
(:class:`~trikafka.coordinator.group_protocol.ScheduleTimer`, ``CancelTimer``,
``CompleteJoin``, ``CompleteSync``) that the membership machine hands to its caller.

* **Delayed join** — one timer per rebalance (``DELAYED_JOIN``). A group that was Empty
  waits ``group.initial.rebalance.delay.ms``, and again for as long as new members keep
  arriving, up to the rebalance timeout (Kafka's InitialDelayedJoin); otherwise the join
  completes as soon as every known member has rejoined (checked when a call that changed
  the membership ends, :meth:`Rebalancer.settle`, and done by an ``ALL_JOINED`` timer due
  at once — after the call, as Kafka's purgatory completes a DelayedJoin), or at the
  rebalance timeout, when
  members that did not rejoin are removed.
* **Heartbeat expiry** — one timer per member (``HEARTBEAT``), rescheduled whenever the
  coordinator hears from the member. A member waiting for its JoinGroup or its SyncGroup
  answer is kept alive, as in Kafka. Expiry removes the member and rebalances the rest.
* **Pending members** — a MEMBER_ID_REQUIRED id must come back within its session
  (``PENDING_MEMBER``).

Every state change goes through :meth:`GroupMetadata.transition`, which checks Kafka's
``validPreviousStates`` table and raises naming the group, the states and the event.
"""

from __future__ import annotations

import itertools
import logging

from trikafka.coordinator.classic.group_metadata import DelayedJoin, GroupMetadata, MemberMetadata
from trikafka.coordinator.classic.group_state import GroupState
from trikafka.coordinator.group_metadata_manager import GroupMetadataManager
from trikafka.coordinator.group_protocol import (
    CancelTimer,
    CompleteJoin,
    CompleteSync,
    Effect,
    JoinGroupMember,
    JoinGroupResult,
    Parked,
    ScheduleTimer,
    SyncGroupResult,
    TimerKey,
    TimerKind,
)
from trikafka.coordinator.settings import GroupSettings
from trikafka.errors import ErrorCode

__all__ = ["Rebalancer"]

log = logging.getLogger("trikafka.coordinator")

EMPTY, PREPARING, COMPLETING, STABLE = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
)


def heartbeat_key(group: GroupMetadata, member_id: str) -> TimerKey:
    return TimerKey(TimerKind.HEARTBEAT, group.group_id, member_id)


class Rebalancer:
    def __init__(self, settings: GroupSettings, groups: GroupMetadataManager) -> None:
        self.settings = settings
        self.groups = groups
        self.outbox: list[Effect] = []
        self._tickets = itertools.count(1)
        self._changed: set[str] = set()  # groups whose membership changed in this call

    # --- waiting requests ----------------------------------------------------------------

    def park_join(self, member: MemberMetadata) -> Parked:
        member.awaiting_join = next(self._tickets)
        return Parked(member.awaiting_join)

    def park_sync(self, member: MemberMetadata) -> Parked:
        member.awaiting_sync = next(self._tickets)
        return Parked(member.awaiting_sync)

    def answer_join(self, member: MemberMetadata, result: JoinGroupResult) -> None:
        if member.awaiting_join is not None:
            self.outbox.append(CompleteJoin(member.awaiting_join, result))
            member.awaiting_join = None

    def answer_sync(self, member: MemberMetadata, result: SyncGroupResult) -> None:
        if member.awaiting_sync is not None:
            self.outbox.append(CompleteSync(member.awaiting_sync, result))
            member.awaiting_sync = None

    def answer_both(self, member: MemberMetadata, code: ErrorCode) -> None:
        """Whatever the member waits for ends with this error."""
        self.answer_join(member, JoinGroupResult(code, member_id=member.member_id))
        self.answer_sync(member, SyncGroupResult(code))

    @staticmethod
    def join_result(group: GroupMetadata, member: MemberMetadata) -> JoinGroupResult:
        leader = member.member_id == group.leader_id
        members = []
        if leader and group.protocol_name is not None:
            members = [
                JoinGroupMember(m.member_id, m.group_instance_id, m.metadata_for(group.protocol_name))
                for m in group.members.values()
            ]
        return JoinGroupResult(
            ErrorCode.none,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            member_id=member.member_id,
            members=members,
        )

    @staticmethod
    def sync_result(group: GroupMetadata, member: MemberMetadata) -> SyncGroupResult:
        return SyncGroupResult(ErrorCode.none, group.protocol_type, group.protocol_name, member.assignment)

    # --- sessions ------------------------------------------------------------------------

    def heard_from(self, group: GroupMetadata, member: MemberMetadata, now_ms: float) -> None:
        """The member's session starts again (Kafka's completeAndScheduleNextHeartbeatExpiration)."""
        deadline = now_ms + member.session_timeout_ms
        self.outbox.append(ScheduleTimer(heartbeat_key(group, member.member_id), deadline))

    def end_session(self, group: GroupMetadata, member_id: str) -> None:
        self.outbox.append(CancelTimer(heartbeat_key(group, member_id)))

    def add_pending(self, group: GroupMetadata, member_id: str, session_ms: int, now_ms: float) -> None:
        group.pending_members[member_id] = now_ms + session_ms
        key = TimerKey(TimerKind.PENDING_MEMBER, group.group_id, member_id)
        self.outbox.append(ScheduleTimer(key, now_ms + session_ms))

    def drop_pending(self, group: GroupMetadata, member_id: str) -> bool:
        if group.pending_members.pop(member_id, None) is None:
            return False
        self.outbox.append(CancelTimer(TimerKey(TimerKind.PENDING_MEMBER, group.group_id, member_id)))
        self.changed(group)
        return True

    def changed(self, group: GroupMetadata) -> None:
        """Membership changed: once this call ends, the rebalance may be complete."""
        self._changed.add(group.group_id)

    def remove_member(self, group: GroupMetadata, member: MemberMetadata, reason: str, now_ms: float) -> None:
        self.answer_both(member, ErrorCode.unknown_member_id)
        group.remove(member.member_id)
        self.end_session(group, member.member_id)
        if group.is_(STABLE, COMPLETING):
            self.prepare(group, f"{member.member_id} left ({reason})", now_ms)
        elif group.is_(PREPARING):
            self.changed(group)  # maybe everyone left has now rejoined

    # --- rebalancing ---------------------------------------------------------------------

    def maybe_prepare(self, group: GroupMetadata, reason: str, now_ms: float) -> None:
        if group.is_(EMPTY, STABLE, COMPLETING):
            self.prepare(group, reason, now_ms)
        else:
            self.changed(group)

    def prepare(self, group: GroupMetadata, reason: str, now_ms: float) -> None:
        if group.is_(COMPLETING):
            # Followers waiting for an assignment of a generation that will not be; as in
            # Kafka's propagateAssignment, their sessions start again when they are answered.
            for member in group.members.values():
                if member.awaiting_sync is not None:
                    self.answer_sync(member, SyncGroupResult(ErrorCode.rebalance_in_progress))
                    self.heard_from(group, member, now_ms)
        initial = group.is_(EMPTY)
        group.transition(PREPARING, now_ms, reason)
        log.info("group %s rebalancing (generation %d): %s", group.group_id, group.generation_id, reason)
        if group.delayed_join is not None:
            return
        timeout_ms = group.rebalance_timeout_ms  # fixed now, as Kafka's DelayedJoin is
        key = TimerKey(TimerKind.DELAYED_JOIN, group.group_id)
        if initial:
            delay = self.settings.group_initial_rebalance_delay_ms
            group.new_member_added = False
            group.delayed_join = DelayedJoin(initial=True, remaining_ms=max(timeout_ms - delay, 0))
            self.outbox.append(ScheduleTimer(key, now_ms + delay))
        else:
            group.delayed_join = DelayedJoin(initial=False)
            self.outbox.append(ScheduleTimer(key, now_ms + timeout_ms))
            self.changed(group)

    def settle(self, now_ms: float) -> None:
        """At the end of a call: a rebalance in which everyone has rejoined completes right
        after it (an ALL_JOINED timer due now), so that the call's own answer — and the rest of
        a batched LeaveGroup — sees the group as the call left it."""
        while self._changed:
            group = self.groups.get(self._changed.pop())
            if group is not None and self._all_joined(group):
                self.outbox.append(ScheduleTimer(TimerKey(TimerKind.ALL_JOINED, group.group_id), now_ms))

    @staticmethod
    def _all_joined(group: GroupMetadata) -> bool:
        delayed = group.delayed_join
        # The initial delay waits for more members whatever happens.
        return group.is_(PREPARING) and delayed is not None and not delayed.initial and group.all_joined

    def complete_join(self, group: GroupMetadata, now_ms: float) -> None:
        for member in [m for m in group.members.values() if m.awaiting_join is None]:
            log.info("removing %s from %s: it did not rejoin in time", member.member_id, group.group_id)
            group.remove(member.member_id)
            self.end_session(group, member.member_id)
        # Pending members (MEMBER_ID_REQUIRED) stay until their own session timeout.
        group.generation_id += 1
        if not group.members:
            group.protocol_name = None  # the protocol type stays, as in Kafka
            group.subscribed = set()
            group.transition(EMPTY, now_ms, "rebalance completed without members")
            self.groups.store_group(group)
            log.info("group %s is empty at generation %d", group.group_id, group.generation_id)
            return
        group.protocol_name = group.select_protocol()
        group.subscribed = group.subscribed_topics()  # what OffsetDelete checks until next time
        group.transition(COMPLETING, now_ms, "rebalance completed")
        for member in group.members.values():
            self.heard_from(group, member, now_ms)
            self.answer_join(member, self.join_result(group, member))
        log.info(
            "group %s formed generation %d with %d member(s), protocol %s",
            group.group_id, group.generation_id, len(group.members), group.protocol_name,
        )  # fmt: skip

    # --- timers --------------------------------------------------------------------------

    def on_timer(self, key: TimerKey, now_ms: float) -> None:
        """A deadline this machine asked for has passed (the caller guarantees it is the
        key's current one)."""
        group = self.groups.get(key.group_id)
        if group is None:
            return
        if key.kind is TimerKind.HEARTBEAT:
            self._expire_member(group, key.member_id, now_ms)
        elif key.kind is TimerKind.PENDING_MEMBER:
            if group.pending_members.pop(key.member_id, None) is not None:
                self.changed(group)
        elif key.kind is TimerKind.ALL_JOINED:
            if self._all_joined(group):
                group.delayed_join = None
                self.outbox.append(CancelTimer(TimerKey(TimerKind.DELAYED_JOIN, group.group_id)))
                self.complete_join(group, now_ms)
        else:
            self._delayed_join_due(group, now_ms)

    def _expire_member(self, group: GroupMetadata, member_id: str, now_ms: float) -> None:
        member = group.members.get(member_id)
        if member is None:
            return
        if member.awaiting_join is not None or member.awaiting_sync is not None:
            # Waiting for its JoinGroup or SyncGroup answer: kept alive, as in Kafka (the
            # rebalance timeout governs a join; the leader's SyncGroup ends a sync).
            self.heard_from(group, member, now_ms)
            return
        log.info("member %s of %s expired (session timeout)", member_id, group.group_id)
        self.remove_member(group, member, "session timeout", now_ms)

    def _delayed_join_due(self, group: GroupMetadata, now_ms: float) -> None:
        delayed = group.delayed_join
        if delayed is None:
            return
        if delayed.initial and group.new_member_added and delayed.remaining_ms > 0:
            group.new_member_added = False
            configured = self.settings.group_initial_rebalance_delay_ms
            delay = min(configured, delayed.remaining_ms)
            group.delayed_join = DelayedJoin(True, max(delayed.remaining_ms - configured, 0))
            key = TimerKey(TimerKind.DELAYED_JOIN, group.group_id)
            self.outbox.append(ScheduleTimer(key, now_ms + delay))
            return
        group.delayed_join = None
        if group.is_(PREPARING):
            self.complete_join(group, now_ms)
