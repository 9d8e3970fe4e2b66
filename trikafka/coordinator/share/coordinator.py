"""The share coordinator: share groups' membership and share partitions in one Trio shell.

Theory of operation
-------------------
Three pure parts do the deciding — :class:`~.group.ShareGroup` (heartbeats, the assignment),
:class:`~.partition.SharePartition` (record states, locks, delivery counts) and
:class:`~.sessions.ShareSessionCache` (share sessions) — and this shell gives them time and
storage. One :class:`~trikafka.coordinator.timers.TimerQueue` holds, on trio's clock, a
deadline per member (``share.session.timeout.ms`` after its last heartbeat: it is removed and
its records released) and per share partition (its earliest acquisition lock: expired locks
are released). So a ``MockClock`` test moves both.

Whatever makes records available again (a release, an expired lock, a member gone) bumps
:attr:`ShareCoordinator.released`, an ``EndOffset`` a long-polling ShareFetch watches beside
the partitions' high watermarks. Every change is offered to ``store`` (``state_store.py``),
which writes it to ``__share_group_state`` when the broker has a data directory.

Kafka splits this between the group coordinator (membership) and the partition leaders'
SharePartitionManager (records). Here one object per broker core does both; in a cluster the
API layer still answers NOT_LEADER_OR_FOLLOWER for partitions this node does not lead, so
the records of a share partition are only ever handed out where the partition is led.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import trio

from trikafka.coordinator.settings import ShareSettings
from trikafka.coordinator.share.group import HeartbeatResult, ShareGroup
from trikafka.coordinator.share.partition import SharePartition, SharePartitionLimits
from trikafka.coordinator.share.sessions import ShareSession, ShareSessionCache
from trikafka.coordinator.timers import TimerQueue
from trikafka.log.log import EndOffset

__all__ = ["ShareCoordinator", "ShareStateStore"]

log = logging.getLogger("trikafka.coordinator.share")

PartitionKey = tuple[str, str, int]  # (group, topic, partition)


class ShareStateStore(Protocol):
    """Where share state outlives the broker (``state_store.py``); a no-op without a data dir."""

    def load(self) -> tuple[dict[str, dict[str, str]], dict[PartitionKey, SharePartition], set[str]]: ...

    def write_partition(self, sp: SharePartition) -> None: ...

    def write_group(self, group_id: str, configs: Mapping[str, str] | None, exists: bool) -> None: ...

    def write_configs(self, group_id: str, configs: Mapping[str, str] | None) -> None: ...


class _NoStore:
    def load(self) -> tuple[dict[str, dict[str, str]], dict[PartitionKey, SharePartition], set[str]]:
        return {}, {}, set()

    def write_partition(self, sp: SharePartition) -> None:
        pass

    def write_group(self, group_id: str, configs: Mapping[str, str] | None, exists: bool) -> None:
        pass

    def write_configs(self, group_id: str, configs: Mapping[str, str] | None) -> None:
        pass


class ShareCoordinator:
    def __init__(
        self,
        settings: ShareSettings,
        topic_partitions: Callable[[], Mapping[str, int]],
        *,
        store: ShareStateStore | None = None,
        on_state_change: Callable[[], None] = lambda: None,
        on_archived: Callable[[SharePartition, list[tuple[int, int, str]]], None] | None = None,
        initial_offset: Callable[[str, str, int], int | None] | None = None,
    ) -> None:
        self.settings = settings
        self.topic_partitions = topic_partitions
        #: (group, topic, partition) → where a new share partition starts
        #: (``share.auto.offset.reset`` over its log), None while it cannot be read (no leader);
        #: None here: partitions are initialized at their first ShareFetch and all assignable.
        self.initial_offset = initial_offset
        self.store: ShareStateStore = store or _NoStore()
        self.on_state_change = on_state_change
        self.on_archived = on_archived
        self.groups: dict[str, ShareGroup] = {}
        self.group_configs: dict[str, dict[str, str]] = {}
        self.partitions: dict[PartitionKey, SharePartition] = {}
        self.sessions = ShareSessionCache(settings.group_share_max_share_sessions)
        self.released = EndOffset(0)  # bumped when records become available again
        #: Target assignments computed (Kafka's share-group-rebalance-count), ever.
        self.rebalances = 0
        self._timers: TimerQueue[tuple[Any, ...]] = TimerQueue()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Replay the stored state, then serve the timers until cancelled."""
        configs, partitions, groups = self.store.load()
        self.group_configs.update(configs)
        self.partitions.update(partitions)
        for group_id in groups:
            self.groups.setdefault(group_id, ShareGroup(group_id))
        task_status.started()
        await self._timers.run(self._fire)

    # --- configs --------------------------------------------------------------------------

    def configs(self, group_id: str) -> dict[str, Any]:
        return self.settings.group_configs.effective(self.group_configs.get(group_id, {}))

    def limits(self, group_id: str) -> SharePartitionLimits:
        c = self.configs(group_id)
        return SharePartitionLimits(c["share.record.lock.duration.ms"], c["share.delivery.count.limit"],
                                    c["share.partition.max.record.locks"])

    def alter_configs(self, group_id: str, overrides: Mapping[str, str | None], validate_only: bool = False) -> None:
        """A group's complete new set of overrides (ConfigError when one is wrong): a group of
        any kind, or none yet (Kafka keeps GROUP configs by group id)."""
        checked = self.settings.group_configs.validate(overrides)
        if validate_only:
            return
        if checked:
            self.group_configs[group_id] = checked
        else:
            self.group_configs.pop(group_id, None)
        self.store.write_configs(group_id, checked)

    # --- membership -----------------------------------------------------------------------

    def heartbeat(self, group_id: str, member_id: str, member_epoch: int, **fields: Any) -> HeartbeatResult:
        group = self.groups.get(group_id)
        created = group is None
        if group is None:
            group = ShareGroup(group_id)
        configs = self.configs(group_id)
        assignment_epoch = group.assignment_epoch
        topics: Mapping[str, Any] = self.topic_partitions()
        if self.initial_offset is not None and member_epoch >= 0:
            subscribed = fields.get("subscribed")
            wanted = group.subscribed_topics() | set(subscribed or ())
            topics = self._initialized(group_id, {t: n for t, n in topics.items() if t in wanted})
        result = group.heartbeat(
            member_id, member_epoch, topics=topics, now=trio.current_time(),
            max_size=self.settings.group_share_max_size,
            heartbeat_interval_ms=configs["share.heartbeat.interval.ms"],
            assignment_interval_ms=configs["share.assignment.interval.ms"], **fields,
        )
        self.rebalances += group.assignment_epoch != assignment_epoch
        if created:
            self.groups[group_id] = group
            self.store.write_group(group_id, None, True)
        if result.member_epoch < 0:
            # A leaving client closes its share sessions right after (librdkafka leaves first,
            # then sends its final ShareAcknowledge): its records stay with the session until
            # then, or until a lock duration has passed.
            self._timers.cancel(("member", group_id, member_id))
            lock_s = configs["share.record.lock.duration.ms"] / 1000
            self._timers.schedule(("left", group_id, member_id), trio.current_time() + lock_s)
        else:
            self._timers.cancel(("left", group_id, member_id))
            timeout = configs["share.session.timeout.ms"] / 1000
            self._timers.schedule(("member", group_id, member_id), trio.current_time() + timeout)
        self.on_state_change()
        return result

    def _initialized(self, group_id: str, counts: Mapping[str, int]) -> dict[str, tuple[int, ...]]:
        """Topic → the partitions of ``counts``' topics whose share state is initialized, each
        one initialized now if it was not (Kafka assigns only initialized share partitions)."""
        assert self.initial_offset is not None
        ready: dict[str, tuple[int, ...]] = {}
        for topic, count in counts.items():
            parts = []
            for partition in range(count):
                sp = self.partitions.get((group_id, topic, partition))
                if sp is None or not sp.initialized:
                    offset = self.initial_offset(group_id, topic, partition)
                    if offset is None:
                        continue  # no log to read yet (no leader): assigned once it has one
                    sp = self.share_partition(group_id, topic, partition)
                    if not sp.initialized:
                        sp.initialize(offset)
                        self.changed(sp)
                parts.append(partition)
            ready[topic] = tuple(parts)
        return ready

    def _member_gone(self, group_id: str, member_id: str) -> None:
        self._timers.cancel(("member", group_id, member_id))
        for session in self.sessions.of_member(group_id, member_id):
            self.sessions.close(group_id, member_id, session.node_id)
        self._release_member(group_id, member_id)

    def _release_member(self, group_id: str, member_id: str) -> None:
        limits = self.limits(group_id)
        released = 0
        for (g, _topic, _partition), sp in self.partitions.items():
            if g == group_id:
                count = sp.release_member(member_id, limits)
                if count:
                    released += count
                    self.changed(sp)
        if released:
            self.released.value += 1

    def delete_group(self, group_id: str) -> None:
        """DeleteGroups of an empty share group: its share partitions and configs go too."""
        self.groups.pop(group_id, None)
        self.group_configs.pop(group_id, None)
        for key in [k for k in self.partitions if k[0] == group_id]:
            self._timers.cancel(("locks", *key))
            sp = self.partitions.pop(key)
            sp.start_offset = -1  # written as a tombstone
            self.store.write_partition(sp)
        self.store.write_group(group_id, None, False)
        self.store.write_configs(group_id, None)
        self.on_state_change()

    # --- share partitions ----------------------------------------------------------------

    def forget_topic(self, group_id: str, topic: str) -> None:
        """DeleteShareGroupOffsets: the group's share partitions of ``topic`` are gone."""
        for key in [k for k in self.partitions if k[0] == group_id and k[1] == topic]:
            self._timers.cancel(("locks", *key))
            sp = self.partitions.pop(key)
            sp.start_offset = -1
            self.store.write_partition(sp)
        self.on_state_change()

    def share_partition(self, group_id: str, topic: str, partition: int, topic_id: str | None = None) -> SharePartition:
        """The group's share partition of ``topic`` (created empty); one of an earlier topic of
        that name (another ``topic_id``) is replaced by a fresh one."""
        key = (group_id, topic, partition)
        sp = self.partitions.get(key)
        if sp is not None and topic_id is not None and sp.topic_id not in (None, topic_id):
            self._timers.cancel(("locks", *key))
            sp = None
        if sp is None:
            sp = self.partitions[key] = SharePartition(group_id, topic, partition)
        if sp.topic_id is None:
            sp.topic_id = topic_id
        if group_id not in self.groups:
            self.groups[group_id] = ShareGroup(group_id)
        return sp

    def changed(self, sp: SharePartition) -> None:
        """``sp`` changed: its lock timer, the dead-letter queue, the store, the waiters."""
        key = ("locks", sp.group_id, sp.topic, sp.partition)
        deadline = sp.next_deadline()
        if deadline == float("inf"):
            self._timers.cancel(key)
        else:
            self._timers.schedule(key, deadline)
        if sp.archived_for_dlq:
            archived, sp.archived_for_dlq = sp.archived_for_dlq, []
            if self.on_archived is not None:
                try:
                    self.on_archived(sp, archived)
                except Exception:
                    log.exception("cannot write archived records of %s to the dead-letter queue", sp.group_id)
        self.store.write_partition(sp)
        self.on_state_change()

    def release_session(self, session: ShareSession) -> None:
        """A share session closed or replaced: what its member acquired through it goes back."""
        limits = self.limits(session.group_id)
        released = 0
        for topic, partition in session.partitions:
            sp = self.partitions.get((session.group_id, topic, partition))
            if sp is not None:
                count = sp.release_member(session.member_id, limits)
                if count:
                    released += count
                    self.changed(sp)
        if released:
            self.released.value += 1

    def _fire(self, key: tuple[Any, ...]) -> None:
        if key[0] == "left":
            _, group_id, member_id = key
            group = self.groups.get(group_id)
            if group is None or member_id not in group.members:
                self._member_gone(group_id, member_id)
            return
        if key[0] == "member":
            _, group_id, member_id = key
            group = self.groups.get(group_id)
            if group is not None and group.remove(member_id):
                log.info("share group %s: member %s removed, its session timed out", group_id, member_id)
                self._member_gone(group_id, member_id)
                self.on_state_change()
            return
        _, group_id, topic, partition = key
        sp = self.partitions.get((group_id, topic, partition))
        if sp is None:
            return
        if sp.expire_locks(trio.current_time(), self.limits(group_id)):
            self.released.value += 1
        self.changed(sp)
