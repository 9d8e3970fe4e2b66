"""Groups and their committed offsets: the cache, ``__consumer_offsets``, expiry, replay.

Theory of operation
-------------------
Kafka's GroupMetadataManager, sans-IO: it holds every :class:`GroupMetadata` by id and is the
only code that writes ``__consumer_offsets`` (through the
:class:`~trikafka.coordinator.offsets.OffsetStore`). It knows nothing of members' timers or
of waiting requests — membership is :mod:`~trikafka.coordinator.classic.group_membership`'s — and
nothing of trio: every method that needs the time takes ``now_ms``.

* **Commits** (:meth:`store_offsets`) are checked against the group by the membership
  machine first; here they are kept, one record per partition, in one batch per call.
* **Replay** (:meth:`load`): offsets and each group's last generation come back from the
  log, last record per key winning, a null value deleting. A group with members is Stable
  again (its members must heartbeat within their sessions); one without is Empty.
* **Expiry** (:meth:`expire_offsets`, run periodically by the shell): offsets of a consumer
  group that has been Empty for ``offsets.retention.minutes`` go; a standalone consumer's
  offsets (no protocol type) go one by one, by commit time. An Empty group left without
  offsets is dropped, as are the groups OffsetDelete and DeleteGroups empty.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from trikafka.coordinator.classic.group_metadata import (
    GroupMetadata,
    MemberMetadata,
    OffsetAndMetadata,
)
from trikafka.coordinator.classic.group_state import GroupState
from trikafka.coordinator.offsets import OffsetStore, group_key, offset_key
from trikafka.coordinator.settings import GroupSettings
from trikafka.errors import ErrorCode

__all__ = ["GroupMetadataManager", "OffsetCommit", "TopicPartition"]

log = logging.getLogger("trikafka.coordinator")

TopicPartition = tuple[str, int]
#: what a client commits for one partition: (offset, leader epoch, metadata)
OffsetCommit = tuple[int, int, str | None]


class GroupMetadataManager:
    def __init__(self, settings: GroupSettings, store: OffsetStore | None) -> None:
        self.settings = settings
        self.store = store
        self.groups: dict[str, GroupMetadata] = {}
        self.loading = True
        #: Whether a group id is a consumer group with members (KIP-848): its offsets, held
        #: here, do not expire (the shell sets this).
        self.in_use: Callable[[str], bool] = lambda group_id: False

    # --- the cache -----------------------------------------------------------------------

    def get(self, group_id: str) -> GroupMetadata | None:
        """The live group (Dead groups are already gone from the cache)."""
        return self.groups.get(group_id)

    def create(self, group_id: str, now_ms: float) -> GroupMetadata:
        group = self.groups[group_id] = GroupMetadata(group_id, state_since_ms=now_ms)
        return group

    def describe(self, group_id: str) -> GroupMetadata | None:
        return self.groups.get(group_id)

    def list_groups(self, states: set[str] | None = None) -> list[GroupMetadata]:
        return [g for g in self.groups.values() if not states or g.state.value.lower() in states]

    # --- replay --------------------------------------------------------------------------

    def load(self, now_ms: float) -> None:
        """Replay ``__consumer_offsets``; see the module docstring."""
        if self.store is not None:
            offsets = 0
            for key, value in self.store.replay():
                if key[0] == "offset":
                    offsets += self._load_offset(key[1], (key[2], key[3]), value)
                elif key[0] == "group":
                    self._load_group(key[1], value)
            for group in self.groups.values():
                group.state_since_ms = now_ms
            if self.groups:
                log.info("loaded %d group(s) and %d committed offset(s)", len(self.groups), offsets)
        self.loading = False

    def _load_offset(self, group_id: str, tp: TopicPartition, value: dict | None) -> int:
        group = self.groups.setdefault(group_id, GroupMetadata(group_id))
        if value is None:
            group.offsets.pop(tp, None)
            return 0
        group.offsets[tp] = OffsetAndMetadata(
            value["offset"], value["leader_epoch"], value["metadata"], value["timestamp"]
        )
        return 1

    def _load_group(self, group_id: str, value: dict | None) -> None:
        if value is None:
            self.groups.pop(group_id, None)
            return
        group = self.groups.setdefault(group_id, GroupMetadata(group_id))
        group.generation_id = value["generation"]
        group.protocol_type = value["protocol_type"]
        group.protocol_name = value["protocol"]
        group.leader_id = value["leader"]
        group.members = {}
        group.static_members = {}
        for data in value["members"]:
            member = MemberMetadata.from_json(data)
            group.members[member.member_id] = member
            if member.group_instance_id is not None:
                group.static_members[member.group_instance_id] = member.member_id
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        group.subscribed = group.subscribed_topics() if group.members else set()

    # --- writes --------------------------------------------------------------------------

    def store_group(self, group: GroupMetadata) -> None:
        """The group's generation and members (a tombstone once Dead)."""
        if self.store is None:
            return
        if group.state is GroupState.DEAD:
            self.store.write(group.group_id, [(group_key(group.group_id), None)])
            return
        value = {
            "generation": group.generation_id,
            "protocol_type": group.protocol_type,
            "protocol": group.protocol_name,
            "leader": group.leader_id,
            "members": [m.to_json() for m in group.members.values()],
        }
        self.store.write(group.group_id, [(group_key(group.group_id), value)])

    def store_offsets(
        self,
        group: GroupMetadata,
        offsets: dict[TopicPartition, OffsetCommit],
        now_ms: float,
        *,
        check_metadata: bool = True,
    ) -> dict[TopicPartition, ErrorCode]:
        """Keep and persist commits (the member checks are the caller's)."""
        result: dict[TopicPartition, ErrorCode] = {}
        records = []
        limit = self.settings.offset_metadata_max_bytes
        for tp, (offset, leader_epoch, metadata) in offsets.items():
            if check_metadata and metadata is not None and len(metadata.encode()) > limit:
                result[tp] = ErrorCode.offset_metadata_too_large
                continue
            group.offsets[tp] = OffsetAndMetadata(offset, leader_epoch, metadata, now_ms)
            value = {"offset": offset, "leader_epoch": leader_epoch, "metadata": metadata, "timestamp": now_ms}
            records.append((offset_key(group.group_id, *tp), value))
            result[tp] = ErrorCode.none
        if self.store is not None:
            self.store.write(group.group_id, records)
        return result

    def store_transactional_offsets(
        self, group_id: str, offsets: dict[TopicPartition, OffsetCommit], now_ms: float
    ) -> None:
        """A committed transaction's offsets (TxnOffsetCommit, then EndTxn commit): stored like
        any commit; the member checks were made when they were sent."""
        group = self.groups.get(group_id) or self.create(group_id, now_ms)
        self.store_offsets(group, offsets, now_ms, check_metadata=False)

    def fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None
    ) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None]]:
        if self.loading:
            return ErrorCode.coordinator_load_in_progress, {}
        group = self.groups.get(group_id)
        stored = group.offsets if group is not None else {}
        if partitions is None:
            return ErrorCode.none, dict(sorted(stored.items()))
        return ErrorCode.none, {tp: stored.get(tp) for tp in partitions}

    def delete_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition], now_ms: float
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.group_id_not_found, {}
        # Kafka: an Empty group's offsets all go; a consumer group keeps those of topics its
        # last generation subscribed to (all of them while that is unknown); any other
        # group with members refuses.
        subscribed: set[str] | None = set()
        if not group.is_(GroupState.EMPTY):
            if group.protocol_type != "consumer":
                return ErrorCode.non_empty_group, {}
            subscribed = group.subscribed
        result = {}
        records = []
        for tp in partitions:
            if subscribed is None or tp[0] in subscribed:
                result[tp] = ErrorCode.group_subscribed_to_topic
                continue
            if group.offsets.pop(tp, None) is not None:
                records.append((offset_key(group_id, *tp), None))
            result[tp] = ErrorCode.none
        if self.store is not None:
            self.store.write(group_id, records)
        if group.is_(GroupState.EMPTY) and not group.offsets and not group.members:
            self.drop(group, now_ms)  # nothing left to keep, as Kafka
        return ErrorCode.none, result

    def delete_group(self, group_id: str, now_ms: float) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.group_id_not_found
        if not group.is_(GroupState.EMPTY):
            return ErrorCode.non_empty_group
        self.drop(group, now_ms)
        return ErrorCode.none

    def drop(self, group: GroupMetadata, now_ms: float) -> None:
        """Dead: out of the cache, its offsets and metadata tombstoned."""
        records = [(offset_key(group.group_id, *tp), None) for tp in group.offsets]
        group.offsets.clear()
        group.transition(GroupState.DEAD, now_ms, "drop")
        del self.groups[group.group_id]
        if self.store is not None:
            self.store.write(group.group_id, [*records, (group_key(group.group_id), None)])

    def expire_offsets(self, now_ms: float) -> int:
        """Remove offsets past offsets.retention.minutes; returns how many."""
        retention = self.settings.offsets_retention_minutes * 60_000
        removed = 0
        for group in list(self.groups.values()):
            if not group.is_(GroupState.EMPTY) or self.in_use(group.group_id):
                continue
            if group.protocol_type is not None:
                expired = list(group.offsets) if now_ms - group.state_since_ms >= retention else []
            else:
                expired = [
                    tp for tp, o in group.offsets.items() if now_ms - o.commit_timestamp_ms >= retention
                ]
            if expired and self.store is not None:
                self.store.write(group.group_id, [(offset_key(group.group_id, *tp), None) for tp in expired])
            for tp in expired:
                del group.offsets[tp]
            removed += len(expired)
            if not group.offsets and not group.members:
                self.drop(group, now_ms)
        if removed:
            log.info("expired %d committed offset(s)", removed)
        return removed
