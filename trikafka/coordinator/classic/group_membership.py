"""The classic group protocol's membership, as a pure state machine.

Theory of operation
-------------------
Kafka's GroupCoordinator without its purgatories: :class:`GroupMembership` answers JoinGroup,
SyncGroup, Heartbeat, LeaveGroup and the member checks of OffsetCommit. It imports no trio
and reads no clock: every method takes ``now_ms`` and returns a
:class:`~trikafka.coordinator.group_protocol.Reply` — the answer (or :class:`Parked` with a
ticket, when the answer must wait for other members) and the effects its caller carries out
(timers to set or cancel, parked requests to answer). Timers come back through
:meth:`on_timer`. So the same machine runs inside the Trio shell
(:class:`~trikafka.coordinator.group_coordinator.GroupCoordinator`) and, with a dictionary
for a clock, inside the stateful test.

The states (Empty, PreparingRebalance, CompletingRebalance, Stable, Dead) and their legal
transitions are ``group_state``'s table; the timer half (delayed join, sessions, pending
members) is :class:`~trikafka.coordinator.classic.rebalance.Rebalancer`; groups and offsets are the
:class:`~trikafka.coordinator.group_metadata_manager.GroupMetadataManager`'s.

Static members (``group.instance.id``) that rejoin with a new member id while the group is
Stable, with the same protocols, take over the old member's place and assignment without a
rebalance; the old member id is fenced (FENCED_INSTANCE_ID).
"""

from __future__ import annotations

import logging
import uuid
from typing import TypeVar

import attrs

from trikafka.coordinator.classic.group_metadata import GroupMetadata, MemberMetadata
from trikafka.coordinator.classic.group_state import GroupState
from trikafka.coordinator.classic.rebalance import Rebalancer
from trikafka.coordinator.group_metadata_manager import (
    GroupMetadataManager,
    OffsetCommit,
    TopicPartition,
)
from trikafka.coordinator.group_protocol import (
    UNKNOWN_MEMBER_ID,
    JoinGroupRequest,
    JoinGroupResult,
    Parked,
    Reply,
    SyncGroupRequest,
    SyncGroupResult,
    TimerKey,
)
from trikafka.coordinator.settings import GroupSettings
from trikafka.errors import ErrorCode

__all__ = ["GroupMembership", "check_member", "check_transactional_member"]

log = logging.getLogger("trikafka.coordinator")

T = TypeVar("T")
EMPTY, PREPARING, COMPLETING, STABLE = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
)


class GroupMembership:
    def __init__(self, settings: GroupSettings, groups: GroupMetadataManager) -> None:
        self.settings = settings
        self.groups = groups
        self.rebalancer = Rebalancer(settings, groups)

    def _reply(self, value: T, now_ms: float) -> Reply[T]:
        self.rebalancer.settle(now_ms)
        outbox = self.rebalancer.outbox
        effects = tuple(outbox)
        outbox.clear()
        return Reply(value, effects)

    def drain(self, now_ms: float) -> Reply[None]:
        """The effects of changes made from outside a call (a group converted to or from a
        KIP-848 consumer group, :mod:`~trikafka.coordinator.group_migration`)."""
        return self._reply(None, now_ms)

    def load(self, now_ms: float) -> Reply[None]:
        """Replay the groups; every member of a loaded generation must heartbeat again."""
        self.groups.load(now_ms)
        for group in self.groups.groups.values():
            for member in group.members.values():
                self.rebalancer.heard_from(group, member, now_ms)
        return self._reply(None, now_ms)

    def on_timer(self, key: TimerKey, now_ms: float) -> Reply[None]:
        self.rebalancer.on_timer(key, now_ms)
        return self._reply(None, now_ms)

    # --- JoinGroup -----------------------------------------------------------------------

    def join_group(self, request: JoinGroupRequest, now_ms: float) -> Reply[JoinGroupResult | Parked]:
        return self._reply(self._join(request, now_ms), now_ms)

    def _join(self, request: JoinGroupRequest, now_ms: float) -> JoinGroupResult | Parked:
        def error(code: ErrorCode) -> JoinGroupResult:
            return JoinGroupResult(code, member_id=request.member_id)

        if self.groups.loading:
            return error(ErrorCode.coordinator_load_in_progress)
        if not request.group_id:
            return error(ErrorCode.invalid_group_id)
        settings = self.settings
        low, high = settings.group_min_session_timeout_ms, settings.group_max_session_timeout_ms
        if not low <= request.session_timeout_ms <= high:
            return error(ErrorCode.invalid_session_timeout)
        group = self.groups.get(request.group_id)
        if group is None:
            if request.member_id != UNKNOWN_MEMBER_ID:
                return error(ErrorCode.unknown_member_id)
            group = self.groups.create(request.group_id, now_ms)
        if not group.supports(request.protocol_type, (name for name, _ in request.protocols)):
            return error(ErrorCode.inconsistent_group_protocol)
        if request.member_id == UNKNOWN_MEMBER_ID:
            return self._join_unknown(group, request, now_ms)
        return self._join_known(group, request, now_ms)

    def _full(self, group: GroupMetadata) -> bool:
        return len(group.members) + len(group.pending_members) >= self.settings.group_max_size

    def _join_unknown(self, group: GroupMetadata, request: JoinGroupRequest, now_ms: float) -> JoinGroupResult | Parked:
        instance_id = request.group_instance_id
        new_id = f"{instance_id or request.client_id}-{uuid.uuid4()}"
        if instance_id is not None and instance_id in group.static_members:
            return self._rejoin_static(group, request, new_id, now_ms)
        if self._full(group):
            return JoinGroupResult(ErrorCode.group_max_size_reached)
        if request.require_known_member_id and instance_id is None:
            self.rebalancer.add_pending(group, new_id, request.session_timeout_ms, now_ms)
            return JoinGroupResult(ErrorCode.member_id_required, member_id=new_id)
        return self._add_and_rebalance(group, request, new_id, now_ms)

    def _add_and_rebalance(
        self, group: GroupMetadata, request: JoinGroupRequest, member_id: str, now_ms: float
    ) -> Parked:
        member = MemberMetadata(
            member_id,
            request.group_instance_id,
            request.client_id,
            request.client_host,
            request.session_timeout_ms,
            request.rebalance_timeout_ms,
            request.protocol_type,
            list(request.protocols),
        )
        parked = self.rebalancer.park_join(member)
        group.add(member)
        group.new_member_added = True
        self.rebalancer.heard_from(group, member, now_ms)
        self.rebalancer.maybe_prepare(group, f"{member_id} joined", now_ms)
        return parked

    def _join_known(self, group: GroupMetadata, request: JoinGroupRequest, now_ms: float) -> JoinGroupResult | Parked:
        member_id = request.member_id
        if member_id in group.pending_members:
            self.rebalancer.drop_pending(group, member_id)
            if self._full(group):
                return JoinGroupResult(ErrorCode.group_max_size_reached, member_id=member_id)
            return self._add_and_rebalance(group, request, member_id, now_ms)
        error = check_member(group, member_id, request.group_instance_id)
        if error is not None:
            return JoinGroupResult(error, member_id=member_id)
        member = group.members[member_id]
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        self.rebalancer.heard_from(group, member, now_ms)
        rebalancer = self.rebalancer
        if group.is_(PREPARING):
            member.protocols = list(request.protocols)
            rebalancer.answer_join(member, JoinGroupResult(ErrorCode.rebalance_in_progress, member_id=member_id))
            parked = rebalancer.park_join(member)
            rebalancer.changed(group)
            return parked
        if group.is_(COMPLETING) and member.matches(request.protocols):
            return rebalancer.join_result(group, member)
        if group.is_(STABLE) and member_id != group.leader_id and member.matches(request.protocols):
            return rebalancer.join_result(group, member)
        if group.is_(COMPLETING, STABLE):
            member.protocols = list(request.protocols)
            parked = rebalancer.park_join(member)
            why = "changed protocols" if group.is_(COMPLETING) else "rejoined"
            rebalancer.prepare(group, f"{member_id} {why}", now_ms)
            return parked
        return JoinGroupResult(ErrorCode.unknown_member_id, member_id=member_id)  # Empty

    def _rejoin_static(
        self, group: GroupMetadata, request: JoinGroupRequest, new_id: str, now_ms: float
    ) -> JoinGroupResult | Parked:
        instance_id = request.group_instance_id
        assert instance_id is not None
        old_id = group.static_members[instance_id]
        self.rebalancer.answer_both(group.members[old_id], ErrorCode.fenced_instance_id)
        self.rebalancer.end_session(group, old_id)
        member = group.replace_static_member(instance_id, old_id, new_id)
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        self.rebalancer.heard_from(group, member, now_ms)
        log.info("static member %s of %s rejoined as %s", instance_id, group.group_id, new_id)
        if group.is_(STABLE) and member.matches(request.protocols):
            # Same place, same assignment, same generation: no rebalance (KIP-345).
            self.groups.store_group(group)
            result = self.rebalancer.join_result(group, member)
            if member.member_id == group.leader_id:
                result = attrs.evolve(result, skip_assignment=True)
            return result
        member.protocols = list(request.protocols)
        parked = self.rebalancer.park_join(member)
        self.rebalancer.maybe_prepare(group, f"static member {instance_id} rejoined", now_ms)
        return parked

    # --- SyncGroup, Heartbeat, LeaveGroup ------------------------------------------------

    def sync_group(self, request: SyncGroupRequest, now_ms: float) -> Reply[SyncGroupResult | Parked]:
        group_id, generation_id, member_id = request.group_id, request.generation_id, request.member_id
        instance_id, protocol_type, protocol_name = (
            request.group_instance_id, request.protocol_type, request.protocol_name
        )
        group = self.groups.get(group_id)
        if self.groups.loading:
            code: ErrorCode | None = ErrorCode.coordinator_load_in_progress
        elif group is None:
            code = ErrorCode.unknown_member_id
        else:
            code = check_member(group, member_id, instance_id)
        if code is None and group is not None:
            if generation_id != group.generation_id:
                code = ErrorCode.illegal_generation
            elif (protocol_type is not None and protocol_type != group.protocol_type) or (
                protocol_name is not None and protocol_name != group.protocol_name
            ):
                code = ErrorCode.inconsistent_group_protocol
            elif group.is_(EMPTY):
                code = ErrorCode.unknown_member_id
            elif group.is_(PREPARING):
                code = ErrorCode.rebalance_in_progress
        if code is not None or group is None:
            return self._reply(SyncGroupResult(code or ErrorCode.unknown_member_id), now_ms)
        member = group.members[member_id]
        if group.is_(STABLE):
            self.rebalancer.heard_from(group, member, now_ms)
            return self._reply(self.rebalancer.sync_result(group, member), now_ms)
        parked = self.rebalancer.park_sync(member)
        if member_id == group.leader_id:
            given = dict(request.assignments)
            for m in group.members.values():
                m.assignment = given.get(m.member_id, b"")
            group.transition(STABLE, now_ms, f"the leader {member_id} sent the assignment")
            self.groups.store_group(group)
            for m in group.members.values():
                if m.awaiting_sync is not None:
                    self.rebalancer.answer_sync(m, self.rebalancer.sync_result(group, m))
                    self.rebalancer.heard_from(group, m, now_ms)
            log.info("group %s is stable at generation %d", group_id, group.generation_id)
        return self._reply(parked, now_ms)

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, instance_id: str | None, now_ms: float
    ) -> Reply[ErrorCode]:
        return self._reply(self._heartbeat(group_id, generation_id, member_id, instance_id, now_ms), now_ms)

    def _heartbeat(
        self, group_id: str, generation_id: int, member_id: str, instance_id: str | None, now_ms: float
    ) -> ErrorCode:
        if self.groups.loading:
            return ErrorCode.coordinator_load_in_progress
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        error = check_member(group, member_id, instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        if group.is_(EMPTY):
            return ErrorCode.unknown_member_id
        self.rebalancer.heard_from(group, group.members[member_id], now_ms)
        if group.is_(PREPARING):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave_group(
        self, group_id: str, members: list[tuple[str, str | None]], now_ms: float
    ) -> Reply[tuple[ErrorCode, list[ErrorCode]]]:
        if self.groups.loading:
            return self._reply((ErrorCode.coordinator_load_in_progress, []), now_ms)
        group = self.groups.get(group_id)
        if group is None:
            return self._reply((ErrorCode.none, [ErrorCode.unknown_member_id for _ in members]), now_ms)
        codes = [self._leave(group, member_id, instance_id, now_ms) for member_id, instance_id in members]
        return self._reply((ErrorCode.none, codes), now_ms)

    def _leave(self, group: GroupMetadata, member_id: str, instance_id: str | None, now_ms: float) -> ErrorCode:
        if member_id == UNKNOWN_MEMBER_ID and instance_id is not None:
            member_id = group.static_members.get(instance_id, "")
            if not member_id:
                return ErrorCode.unknown_member_id
        if self.rebalancer.drop_pending(group, member_id):
            return ErrorCode.none
        error = check_member(group, member_id, instance_id)
        if error is not None:
            return error
        log.info("member %s left %s", member_id, group.group_id)
        self.rebalancer.remove_member(group, group.members[member_id], "LeaveGroup", now_ms)
        return ErrorCode.none

    # --- OffsetCommit's member checks ----------------------------------------------------

    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        instance_id: str | None,
        offsets: dict[TopicPartition, OffsetCommit],
        now_ms: float,
    ) -> Reply[dict[TopicPartition, ErrorCode]]:
        code, group = self._commit_check(group_id, generation_id, member_id, instance_id, now_ms)
        if code is not None or group is None:
            return self._reply(dict.fromkeys(offsets, code or ErrorCode.unknown_member_id), now_ms)
        return self._reply(self.groups.store_offsets(group, offsets, now_ms), now_ms)

    def _commit_check(
        self, group_id: str, generation_id: int, member_id: str, instance_id: str | None, now_ms: float
    ) -> tuple[ErrorCode | None, GroupMetadata | None]:
        if self.groups.loading:
            return ErrorCode.coordinator_load_in_progress, None
        if not group_id:
            return ErrorCode.invalid_group_id, None
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return ErrorCode.illegal_generation, None
            return None, self.groups.create(group_id, now_ms)
        if generation_id < 0 and group.is_(EMPTY):
            return None, group  # a standalone consumer's commit
        error = check_member(group, member_id, instance_id)
        if error is not None:
            return error, None
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation, None
        if group.is_(COMPLETING):
            return ErrorCode.rebalance_in_progress, None
        self.rebalancer.heard_from(group, group.members[member_id], now_ms)
        return None, group


def check_member(group: GroupMetadata, member_id: str, instance_id: str | None) -> ErrorCode | None:
    """FENCED_INSTANCE_ID for a static member's old id, UNKNOWN_MEMBER_ID for a stranger."""
    if instance_id is not None:
        known = group.static_members.get(instance_id)
        if known is not None and known != member_id:
            return ErrorCode.fenced_instance_id
    if member_id not in group.members:
        return ErrorCode.unknown_member_id
    return None


def check_transactional_member(
    groups: GroupMetadataManager, group_id: str, generation_id: int, member_id: str, instance_id: str | None
) -> ErrorCode | None:
    """TxnOffsetCommit v3+ (KIP-447) names the member and generation: check them as an
    OffsetCommit would; a generation of -1 (a producer outside any group) skips this."""
    if generation_id < 0:
        return None
    group = groups.get(group_id)
    if group is None:
        return ErrorCode.illegal_generation
    error = check_member(group, member_id, instance_id)
    if error is not None:
        return error
    if generation_id != group.generation_id:
        return ErrorCode.illegal_generation
    return None
