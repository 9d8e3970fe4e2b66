"""The group coordinator: the classic consumer-group protocol's thin Trio shell.

Theory of operation
-------------------
Kafka splits its group coordinator in two, and so does trikafka, with one more cut to keep
trio out of the protocol:

* :class:`~trikafka.coordinator.classic.group_membership.GroupMembership` — the pure membership state
  machine (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, the member checks of OffsetCommit,
  and the rebalance and session timers as *requests*: it takes ``now_ms`` and returns
  answers plus effects);
* :class:`~trikafka.coordinator.group_metadata_manager.GroupMetadataManager` — groups and
  committed offsets, ``__consumer_offsets``, expiry and replay;
* :class:`GroupCoordinator` (this module) — runs in the broker's nursery, reads the clock,
  and carries out the effects: a :class:`~trikafka.coordinator.timers.TimerQueue` turns
  timer requests into deadlines on trio's clock (so MockClock tests drive them) and hands due
  keys back to the machine; parked JoinGroup/SyncGroup calls are :class:`Waiter` s, set when
  the machine completes their ticket. A periodic task expires offsets every
  ``offsets.retention.check.interval.ms``.

KIP-848 consumer groups are a second machine beside the classic one,
:class:`~trikafka.coordinator.consumer.consumer_group_machine.ConsumerGroupMachine`, sharing the
offsets: a group id is either a classic group or a consumer group. Its committed offsets
always live in the classic manager's :class:`GroupMetadata` (a memberless holder while the
group is a consumer group), so converting a group from one type to the other keeps its
offsets. An empty group converts when a member of the other protocol arrives; a group with
members converts online as ``group.consumer.migration.policy`` allows
(:mod:`~trikafka.coordinator.group_migration`). JoinGroup, SyncGroup, Heartbeat and LeaveGroup
for a consumer group go to its classic members' handler
(:mod:`~trikafka.coordinator.consumer.consumer_group_classic`), as in Kafka 4.

Every API call is a synchronous method that answers at once or returns a Waiter that the
API layer parks in the purgatory, so request handlers never wait on other clients. Trio
runs one task at a time and no method awaits, so nothing interleaves: no locks.

Deadlines: the machine's are in the broker's wall-clock milliseconds (the same clock its
timestamps use); a deadline becomes trio time as ``trio.current_time() + (deadline − now)``,
with ``now`` the very value the machine was given, so a session of 1 s ends exactly 1 s of
trio time later.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Mapping
from typing import Any, TypeVar

import trio

from trikafka.clock import Clock
from trikafka.coordinator.classic.group_membership import (
    GroupMembership,
    check_transactional_member,
)
from trikafka.coordinator.classic.group_metadata import GroupMetadata, OffsetAndMetadata
from trikafka.coordinator.consumer import consumer_group_offsets
from trikafka.coordinator.consumer import consumer_group_records as consumer_records
from trikafka.coordinator.consumer.consumer_group import ConsumerGroup
from trikafka.coordinator.consumer.consumer_group_classic import ClassicMembers
from trikafka.coordinator.consumer.consumer_group_machine import ConsumerGroupMachine
from trikafka.coordinator.consumer.consumer_group_protocol import (
    ConsumerGroupHeartbeat,
    ConsumerTimerKey,
    HeartbeatResult,
)
from trikafka.coordinator.group_metadata_manager import (
    GroupMetadataManager,
    OffsetCommit,
    TopicPartition,
)
from trikafka.coordinator.group_migration import GroupMigration
from trikafka.coordinator.group_protocol import (
    CancelTimer,
    CompleteJoin,
    CompleteSync,
    JoinGroupRequest,
    JoinGroupResult,
    Parked,
    Reply,
    ScheduleTimer,
    SyncGroupRequest,
    SyncGroupResult,
    TimerKey,
)
from trikafka.coordinator.offsets import OffsetStore
from trikafka.coordinator.settings import GroupSettings
from trikafka.coordinator.timers import TimerQueue, Waiter
from trikafka.errors import ErrorCode, KafkaProtocolError

__all__ = ["GroupCoordinator"]

log = logging.getLogger("trikafka.coordinator")


R = TypeVar("R")


def _waiter(parked: dict[int, Waiter[R]], value: R | Parked) -> Waiter[R]:
    """A Waiter registered under the ticket, or one already done with the answer."""
    if isinstance(value, Parked):
        waiter: Waiter[R] = Waiter()
        parked[value.ticket] = waiter
        return waiter
    return Waiter.done_with(value)


class GroupCoordinator:
    def __init__(
        self,
        settings: GroupSettings,
        store: OffsetStore | None,
        now_ms: Clock,
        *,
        on_state_change: Callable[[], None] = lambda: None,
        topic_partitions: Callable[[], Mapping[str, int]] = dict,
    ) -> None:
        self.settings = settings
        self.now_ms = now_ms
        #: Called after a timer changed groups with no request to answer (a session expired,
        #: a delayed join completed), so awaitable broker state sees it at once.
        self.on_state_change = on_state_change
        self.manager = GroupMetadataManager(settings, store)
        self.membership = GroupMembership(settings, self.manager)
        #: KIP-848 groups; ``topic_partitions()``: every topic's partition count.
        self.consumer = ConsumerGroupMachine(settings, store, topic_partitions, self.manager)
        self.classic_members = ClassicMembers(self.consumer)
        self.migration = GroupMigration(settings, self.membership, self.consumer, self.classic_members)
        self.manager.in_use = lambda group_id: bool(getattr(self.consumer.groups.get(group_id), "members", None))
        self._timers: TimerQueue[Hashable] = TimerQueue()
        #: timer key type → the machine's on_timer(key, now_ms) -> Reply (see register_timers)
        self._timer_owners: dict[type, Callable[[Any, float], Reply[Any]]] = {
            TimerKey: self.membership.on_timer, ConsumerTimerKey: self.consumer.on_timer,
        }
        self._joins: dict[int, Waiter[JoinGroupResult]] = {}
        self._syncs: dict[int, Waiter[SyncGroupResult]] = {}

    @property
    def loading(self) -> bool:
        return self.manager.loading

    @property
    def groups(self) -> dict[str, GroupMetadata]:
        return self.manager.groups

    # --- lifecycle -----------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            now = self.now_ms()
            self._apply(self.membership.load(now), now)
            self._apply(self.consumer.load(now), now)
            nursery.start_soon(self._timers.run, self._fire, name="group-coordinator-timers")
            nursery.start_soon(self._expire_offsets_periodically, name="group-metadata-manager")
            task_status.started()

    def register_timers(self, key_type: type, on_timer: Callable[[Any, float], Reply[Any]]) -> None:
        """Let another group machine (share groups, KIP-932) use this coordinator's deadlines:
        its ``ScheduleTimer``/``CancelTimer`` effects, carried out by :meth:`apply`, put keys of
        ``key_type`` in the one timer queue, and each is handed back to ``on_timer(key, now_ms)``
        the instant its deadline passes (Kafka's heartbeat purgatory)."""
        self._timer_owners[key_type] = on_timer

    def _fire(self, key: Hashable) -> None:
        now = self.now_ms()
        try:
            self._apply(self._timer_owners[type(key)](key, now), now)
        except (OSError, KafkaProtocolError) as exc:
            # A write to __consumer_offsets refused (a full disk: KAFKA_STORAGE_ERROR): one
            # line; the timer task, and with it the broker, must not die of it.
            log.error("group coordinator: timer %s failed: %s", key, exc)
        self.on_state_change()

    def apply(self, reply: Reply[object], now_ms: float) -> None:
        """Carry out a machine's effects (``now_ms``: what it was given)."""
        self._apply(reply, now_ms)

    def _apply(self, reply: Reply[object], now_ms: float) -> None:
        """Carry out the machine's effects (``now_ms``: what it was given)."""
        for effect in reply.effects:
            if isinstance(effect, ScheduleTimer):
                self._timers.schedule(effect.key, trio.current_time() + (effect.deadline_ms - now_ms) / 1000)
            elif isinstance(effect, CancelTimer):
                self._timers.cancel(effect.key)
            elif isinstance(effect, CompleteJoin):
                self._joins.pop(effect.ticket).set(effect.result)
            elif isinstance(effect, CompleteSync):
                self._syncs.pop(effect.ticket).set(effect.result)

    async def _expire_offsets_periodically(self) -> None:
        while True:
            await trio.sleep(self.settings.offsets_retention_check_interval_ms / 1000)
            try:
                self.expire_offsets()
            except (OSError, KafkaProtocolError) as exc:  # as in _fire: say so, try next time
                log.error("group coordinator: offset expiry failed: %s", exc)

    # --- the membership protocol ---------------------------------------------------------

    def join_group(self, request: JoinGroupRequest) -> Waiter[JoinGroupResult]:
        now = self.now_ms()
        consumer_group = self.consumer.groups.get(request.group_id)
        if consumer_group is not None and not self.manager.loading:
            if consumer_group.members:  # a classic member of a consumer group (Kafka 4)
                joined = self.classic_members.join(consumer_group, request, now)
                self._apply(joined, now)
                return Waiter.done_with(joined.value)
            self._drop_consumer_group(consumer_group)  # an empty consumer group becomes classic
        reply = self.membership.join_group(request, now)
        waiter = _waiter(self._joins, reply.value)
        self._apply(reply, now)
        return waiter

    def sync_group(self, request: SyncGroupRequest) -> Waiter[SyncGroupResult]:
        now = self.now_ms()
        consumer_group = self.consumer.groups.get(request.group_id)
        if consumer_group is not None and not self.manager.loading:
            synced = self.classic_members.sync(consumer_group, request, now)
            self._apply(synced, now)
            return Waiter.done_with(synced.value)
        reply = self.membership.sync_group(request, now)
        waiter = _waiter(self._syncs, reply.value)
        self._apply(reply, now)
        return waiter

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None) -> ErrorCode:
        now = self.now_ms()
        consumer_group = self.consumer.groups.get(group_id)
        if consumer_group is not None and not self.manager.loading:
            beat = self.classic_members.heartbeat(consumer_group, generation_id, member_id, instance_id, now)
            self._apply(beat, now)
            return beat.value
        reply = self.membership.heartbeat(group_id, generation_id, member_id, instance_id, now)
        self._apply(reply, now)
        return reply.value

    def leave_group(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]:
        now = self.now_ms()
        consumer_group = self.consumer.groups.get(group_id)
        if consumer_group is not None and not self.manager.loading:
            left = self.classic_members.leave(consumer_group, members, now)
            self._apply(left, now)
            return left.value
        reply = self.membership.leave_group(group_id, members, now)
        self._apply(reply, now)
        return reply.value

    # --- offsets -------------------------------------------------------------------------

    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        instance_id: str | None,
        offsets: dict[TopicPartition, OffsetCommit],
        api_version: int = 9,
    ) -> dict[TopicPartition, ErrorCode]:
        now = self.now_ms()
        consumer_group = self.consumer.groups.get(group_id)
        if consumer_group is not None and not self.manager.loading:
            code = consumer_group_offsets.check_commit(consumer_group, member_id, generation_id, api_version)
            if code is not None:
                return dict.fromkeys(offsets, code)
            holder = self.manager.get(group_id) or self.manager.create(group_id, now)
            return self.manager.store_offsets(holder, offsets, now)
        reply = self.membership.commit_offsets(group_id, generation_id, member_id, instance_id, offsets, now)
        self._apply(reply, now)
        return reply.value

    def commit_transactional_offsets(self, group_id: str, offsets: dict[TopicPartition, OffsetCommit]) -> None:
        self.manager.store_transactional_offsets(group_id, offsets, self.now_ms())

    def check_transactional_member(
        self, group_id: str, generation_id: int, member_id: str, instance_id: str | None
    ) -> ErrorCode | None:
        consumer_group = self.consumer.groups.get(group_id)
        if consumer_group is not None:
            return consumer_group_offsets.check_transactional_commit(consumer_group, member_id, generation_id)
        return check_transactional_member(self.manager, group_id, generation_id, member_id, instance_id)

    def check_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode | None:
        """OffsetFetch v9+'s member check (consumer groups only, as in Kafka)."""
        consumer_group = self.consumer.groups.get(group_id)
        if consumer_group is None:
            return None
        return consumer_group_offsets.check_fetch(consumer_group, member_id, member_epoch)

    def fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None
    ) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None]]:
        return self.manager.fetch_offsets(group_id, partitions)

    def delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        consumer_group = self.consumer.groups.get(group_id)
        if consumer_group is None or not consumer_group.members:
            if consumer_group is not None and self.manager.get(group_id) is None:
                return ErrorCode.none, dict.fromkeys(partitions, ErrorCode.none)
            return self.manager.delete_offsets(group_id, partitions, self.now_ms())
        subscribed = consumer_group.subscription_metadata
        result = {tp: ErrorCode.group_subscribed_to_topic for tp in partitions if tp[0] in subscribed}
        free = [tp for tp in partitions if tp[0] not in subscribed]
        if free and self.manager.get(group_id) is not None:
            result.update(self.manager.delete_offsets(group_id, free, self.now_ms())[1])
        return ErrorCode.none, {tp: result.get(tp, ErrorCode.none) for tp in partitions}

    def expire_offsets(self) -> int:
        """Remove offsets past offsets.retention.minutes; returns how many."""
        return self.manager.expire_offsets(self.now_ms())

    # --- groups --------------------------------------------------------------------------

    def describe(self, group_id: str) -> GroupMetadata | None:
        return self.manager.describe(group_id)

    def list_groups(self, states: set[str] | None = None) -> list[GroupMetadata]:
        return self.manager.list_groups(states)

    def delete_group(self, group_id: str) -> ErrorCode:
        consumer_group = self.consumer.groups.get(group_id)
        if consumer_group is not None:
            if consumer_group.members:
                return ErrorCode.non_empty_group
            self._drop_consumer_group(consumer_group)
            if self.manager.get(group_id) is None:
                return ErrorCode.none
        return self.manager.delete_group(group_id, self.now_ms())

    # --- consumer groups (KIP-848) -------------------------------------------------------

    def consumer_group_heartbeat(self, heartbeat: ConsumerGroupHeartbeat) -> HeartbeatResult:
        now = self.now_ms()
        if self.manager.loading:
            return HeartbeatResult(ErrorCode.coordinator_load_in_progress, "the coordinator is loading")
        reply = self.consumer.heartbeat(heartbeat, now)
        self._apply(reply, now)
        return reply.value

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        return self.consumer.groups.get(group_id)

    def _drop_consumer_group(self, group: ConsumerGroup) -> None:
        """An empty consumer group goes (its offsets stay with the classic holder)."""
        del self.consumer.groups[group.group_id]
        if self.manager.store is not None:
            self.manager.store.write(group.group_id, consumer_records.group_tombstones(group))
