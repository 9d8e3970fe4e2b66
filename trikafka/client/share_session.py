"""The share consumer's two protocols (KIP-932), sans application API: membership through
ShareGroupHeartbeat, and per-broker share sessions with their acknowledgements.

Membership runs in a task of the consumer's nursery: it joins (epoch 0, a member id the client
makes, as Kafka's clients do), keeps the member epoch the coordinator gives, heartbeats every
interval the coordinator names (or at once when the subscription changes) and keeps the
assignment (topic ids translated to names through the client's metadata). FENCED_MEMBER_EPOCH
or UNKNOWN_MEMBER_ID join again at epoch 0; NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE find
the coordinator again. Every wait is on trio's clock.

Share sessions are one per broker: :class:`NodeSession` holds its epoch (0: none yet), the
partitions it fetches, and what the last ShareFetch should add or forget. Acknowledgements wait
in :class:`PendingAcks` until the next ShareFetch to that partition's leader, a commit or the
close, and go out as contiguous runs of one type.
"""

from __future__ import annotations

import base64
import logging
import uuid
from typing import Any

import attrs
import trio

from trikafka.client.client import CoordinatorType, KafkaClient
from trikafka.client.cluster import TopicPartition
from trikafka.client.errors import KafkaError
from trikafka.errors import ErrorCode
from trikafka.protocol.registry import ApiKey

__all__ = ["ACK_TYPES", "NodeSession", "PendingAcks", "ShareMembership"]

log = logging.getLogger(__name__)

ACK_TYPES = {"accept": 1, "release": 2, "reject": 3, "renew": 4}
_REJOIN = (ErrorCode.fenced_member_epoch, ErrorCode.unknown_member_id)
_COORDINATOR_MOVED = (ErrorCode.not_coordinator, ErrorCode.coordinator_not_available,
                      ErrorCode.coordinator_load_in_progress)


@attrs.define
class NodeSession:
    epoch: int = 0
    partitions: set[TopicPartition] = attrs.Factory(set)

    def next_epoch(self) -> None:
        self.epoch = 1 if self.epoch >= 2**31 - 1 else self.epoch + 1


class PendingAcks:
    """Acknowledgements not sent yet: partition → offset → acknowledge type."""

    def __init__(self) -> None:
        self.by_partition: dict[TopicPartition, dict[int, int]] = {}

    def add(self, tp: TopicPartition, offset: int, kind: int) -> None:
        self.by_partition.setdefault(tp, {})[offset] = kind

    def take(self, tp: TopicPartition) -> list[dict[str, Any]]:
        """The partition's acknowledgements as batches, removed from the pending ones."""
        offsets = self.by_partition.pop(tp, {})
        batches: list[dict[str, Any]] = []
        for offset in sorted(offsets):
            kind = offsets[offset]
            if batches and batches[-1]["last_offset"] == offset - 1 and batches[-1]["acknowledge_types"] == [kind]:
                batches[-1]["last_offset"] = offset
            else:
                batches.append({"first_offset": offset, "last_offset": offset, "acknowledge_types": [kind]})
        return batches


class ShareMembership:
    """The member's side of ShareGroupHeartbeat (see the module docstring)."""

    def __init__(self, client: KafkaClient, group_id: str) -> None:
        self.client = client
        self.group_id = group_id
        self.member_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        self.member_epoch = 0
        self.subscription: tuple[str, ...] = ()
        self._sent_subscription: tuple[str, ...] | None = None
        self.assignment: set[TopicPartition] = set()
        self._pending_ids: list[Any] = []  # assigned topic ids metadata did not know yet
        self.assignment_changed = trio.Event()
        self._wakeup = trio.Event()
        self.error: KafkaError | None = None
        self.left = False

    def subscribe(self, topics: tuple[str, ...]) -> None:
        self.subscription = tuple(sorted(set(topics)))
        self.client.cluster.add_interest(self.subscription)
        self.client.request_metadata_update()
        self._wakeup.set()

    async def run(self) -> None:
        interval = 0.0
        while not self.left:
            if not self.subscription:
                await self._wakeup.wait()
                self._wakeup = trio.Event()
                continue
            try:
                interval = await self._heartbeat()
            except KafkaError as exc:
                log.info("share group %s: heartbeat failed: %s", self.group_id, exc)
                interval = self.client.config["retry.backoff.ms"] / 1000
            with trio.move_on_after(interval):
                await self._wakeup.wait()
            self._wakeup = trio.Event()

    async def _heartbeat(self) -> float:
        coordinator = await self.client.find_coordinator(self.group_id, CoordinatorType.GROUP)
        send_topics = self.member_epoch == 0 or self._sent_subscription != self.subscription
        response = await self.client.send(
            coordinator, ApiKey.SHARE_GROUP_HEARTBEAT, group_id=self.group_id, member_id=self.member_id,
            member_epoch=self.member_epoch, rack_id=None,
            subscribed_topic_names=list(self.subscription) if send_topics else None,
        )
        code = ErrorCode(response.error_code)
        if code in _COORDINATOR_MOVED:
            self.client.coordinator_dead(self.group_id, CoordinatorType.GROUP)
            return 0.0
        if code in _REJOIN:
            self.member_epoch = 0
            self._set_assignment(set())
            return 0.0
        if code != ErrorCode.none:
            self.error = KafkaError(code, f"ShareGroupHeartbeat of {self.group_id}: {response.error_message}",
                                    retriable=False)
            self.assignment_changed.set()
            raise self.error
        if send_topics:
            self._sent_subscription = self.subscription
        self.member_epoch = response.member_epoch
        if response.assignment is not None:
            self._pending_ids = list(response.assignment.topic_partitions)
        if self._pending_ids:
            if any(e.topic_id not in self._topic_names() for e in self._pending_ids):
                await self.client.refresh_metadata()  # a topic assigned before metadata knew it
            self._resolve_assignment()
        result: float = response.heartbeat_interval.total_seconds()
        return result

    def _topic_names(self) -> dict[Any, str]:
        return {t.topic_id: name for name, t in self.client.cluster.topics.items() if t.topic_id is not None}

    def _resolve_assignment(self) -> None:
        by_id = self._topic_names()
        assigned = {TopicPartition(by_id[e.topic_id], p) for e in self._pending_ids if e.topic_id in by_id
                    for p in e.partitions}
        if all(e.topic_id in by_id for e in self._pending_ids):
            self._pending_ids = []
        self._set_assignment(assigned)

    def _set_assignment(self, assigned: set[TopicPartition]) -> None:
        if assigned != self.assignment:
            self.assignment = assigned
            self.assignment_changed.set()
            self.assignment_changed = trio.Event()

    async def leave(self) -> None:
        """A leave heartbeat (epoch -1); errors are the caller's to log."""
        self.left = True
        self._wakeup.set()
        if self.member_epoch == 0 and not self.assignment:
            return
        coordinator = await self.client.find_coordinator(self.group_id, CoordinatorType.GROUP)
        await self.client.send(coordinator, ApiKey.SHARE_GROUP_HEARTBEAT, group_id=self.group_id,
                               member_id=self.member_id, member_epoch=-1, rack_id=None, subscribed_topic_names=None)
