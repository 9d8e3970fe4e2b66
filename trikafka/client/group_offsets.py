"""A group's committed offsets: OffsetCommit and OffsetFetch through the group coordinator.

Split from the membership (:mod:`trikafka.client.group_session`) because offsets are a
different conversation with the same coordinator: they are read before a member has joined
(initial positions), written by a consumer without membership (``assign()`` + ``group.id``),
and their errors only *inform* the membership (a commit answered ILLEGAL_GENERATION means a
rebalance started) rather than drive it. Both share a :class:`CoordinatorLink`: where the
group's coordinator is, and forgetting it when it stops answering.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import trio

from trikafka.client.client import CoordinatorType, KafkaClient
from trikafka.client.consumer_protocol import TopicPartition
from trikafka.client.errors import KafkaError, error_for
from trikafka.client.group_member import GroupMember, MemberState
from trikafka.errors import ErrorCode
from trikafka.protocol.registry import ApiKey

__all__ = ["CommitFailedError", "CoordinatorLink", "GroupOffsets"]

logger = logging.getLogger(__name__)

#: Commit answers that mean "the group moved on without you" (Kafka's CommitFailedException).
_REBALANCED = (
    ErrorCode.unknown_member_id,
    ErrorCode.illegal_generation,
    ErrorCode.rebalance_in_progress,
    ErrorCode.fenced_instance_id,
)


class CommitFailedError(KafkaError):
    """The commit cannot succeed: the group rebalanced and these partitions may belong to
    another member now (Kafka's CommitFailedException). Do not process the records."""


class CoordinatorLink:
    """Requests to one group's coordinator; a retriable failure forgets where it is, so the
    next request looks it up again (FindCoordinator), as Java's ``markCoordinatorUnknown``."""

    def __init__(self, client: KafkaClient, group_id: str) -> None:
        self.client = client
        self.group_id = group_id

    async def coordinator(self) -> int:
        return await self.client.find_coordinator(self.group_id, CoordinatorType.GROUP)

    def dead(self) -> None:
        self.client.coordinator_dead(self.group_id, CoordinatorType.GROUP)

    async def send(self, api_key: int, **fields: Any) -> Any:
        try:
            node = await self.coordinator()
            return await self.client.send(node, api_key, **fields)
        except KafkaError as exc:
            if self.client.closed:
                # The client's nursery is being cancelled and this task has not seen its
                # Cancelled yet: let it, rather than surface "the client is closed".
                await trio.lowlevel.checkpoint()
            if exc.retriable:
                self.dead()
            raise


class GroupOffsets:
    """Commit and read a group's offsets with the member's current generation.

    ``on_group_error(code)`` is told when a commit answer says the membership is stale, so
    the heartbeat's bookkeeping (rejoin, fenced) sees it too.
    """

    def __init__(self, link: CoordinatorLink, member: GroupMember, on_group_error: Callable[[ErrorCode], None]) -> None:
        self.link = link
        self.member = member
        self._on_group_error = on_group_error

    async def commit(self, offsets: Mapping[TopicPartition, int], *, attempts: int = 5) -> None:
        """OffsetCommit with this member's generation; retried on retriable errors."""
        if not offsets:
            return
        group_id = self.link.group_id
        by_topic: dict[str, list[dict[Any, Any]]] = {}
        for tp, offset in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append(
                {
                    "partition_index": tp.partition,
                    "committed_offset": offset,
                    "committed_leader_epoch": -1,
                    "committed_metadata": "",
                }
            )
        for attempt in range(attempts):
            # The current generation even mid-rebalance (a commit on revoke runs after the
            # join began): the coordinator, not this member, decides whether it still counts.
            generation = self.member.generation_id
            try:
                answer = await self.link.send(
                    ApiKey.OFFSET_COMMIT,
                    group_id=group_id,
                    generation_id_or_member_epoch=generation,
                    generation_id=generation,
                    member_id=self.member.member_id if generation >= 0 else "",
                    group_instance_id=self.member.group_instance_id,
                    retention_time_ms=-1,
                    topics=[{"name": t, "partitions": p} for t, p in by_topic.items()],
                )
            except KafkaError as exc:
                if not exc.retriable or attempt == attempts - 1:
                    raise
                await self.link.client.retry_sleep(attempt)
                continue
            codes = {ErrorCode(p.error_code) for t in answer.topics for p in t.partitions} - {ErrorCode.none}
            if not codes:
                return
            code = sorted(codes)[0]
            if code in _REBALANCED:
                if self.member.state is MemberState.STABLE:
                    self._on_group_error(code)
                raise CommitFailedError(code, f"group {group_id!r} rebalanced; offsets not committed")
            error = error_for(code, f"OffsetCommit to group {group_id!r}")
            if code in (ErrorCode.not_coordinator, ErrorCode.coordinator_not_available):
                self.link.dead()
            if not error.retriable or attempt == attempts - 1:
                raise error
            await self.link.client.retry_sleep(attempt)

    async def committed(
        self, partitions: Iterable[TopicPartition], *, require_stable: bool = True
    ) -> dict[TopicPartition, int | None]:
        """The group's committed offsets (None where nothing is committed)."""
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(set(partitions)):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        attempt = 0
        while True:
            try:
                answer = await self.link.send(
                    ApiKey.OFFSET_FETCH,
                    group_id=self.link.group_id,
                    topics=[{"name": t, "partition_indexes": p} for t, p in by_topic.items()],
                    require_stable=require_stable,
                )
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                await self.link.client.retry_sleep(attempt)
                attempt += 1
                continue
            codes = {ErrorCode(getattr(answer, "error_code", 0))} | {
                ErrorCode(p.error_code) for t in answer.topics for p in t.partitions
            }
            codes.discard(ErrorCode.none)
            if not codes:
                return {
                    TopicPartition(t.name, int(p.partition_index)): (
                        int(p.committed_offset) if p.committed_offset >= 0 else None
                    )
                    for t in answer.topics
                    for p in t.partitions
                }
            code = sorted(codes)[0]
            if code in (ErrorCode.not_coordinator, ErrorCode.coordinator_not_available):
                self.link.dead()
            error = error_for(code, f"OffsetFetch from group {self.link.group_id!r}")
            if not (error.retriable or code == ErrorCode.unstable_offset_commit):
                raise error
            await self.link.client.retry_sleep(attempt)
            attempt += 1
