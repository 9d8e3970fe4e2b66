"""Admin calls that tools read a cluster's state with: a group's committed offsets and moving
them (kafka-consumer-groups' ``--describe`` and ``--reset-offsets``), partition sizes
(DescribeLogDirs). A base of :class:`~trikafka.client.admin.Admin`, kept apart so that class
stays one screenful per responsibility; it uses the admin's ``client`` and ``_deadline()``.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping
from typing import Any

from trikafka.client.calls import call_any_node, call_coordinator
from trikafka.client.client import CoordinatorType, KafkaClient
from trikafka.client.cluster import TopicPartition
from trikafka.client.deadlines import bounded_call
from trikafka.client.errors import error_for
from trikafka.errors import ErrorCode
from trikafka.protocol.registry import ApiKey

__all__ = ["GroupOffsetsAndLogDirs"]


def _raise_first(errors: list[tuple[str, Any]]) -> None:
    for item, code in errors:
        if code != ErrorCode.none:
            raise error_for(code, item)


class GroupOffsetsAndLogDirs:
    client: KafkaClient

    def _deadline(self) -> float:
        raise NotImplementedError

    @bounded_call("default.api.timeout.ms")
    async def list_group_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        """Every offset the group committed (OffsetFetch for all topics); no entry: none."""
        answer = await call_coordinator(
            self.client, group_id, CoordinatorType.GROUP, ApiKey.OFFSET_FETCH,
            lambda r: [r.error_code], what=f"OffsetFetch({group_id!r})",
            deadline=self._deadline(), group_id=group_id, topics=None, require_stable=False,
        )
        _raise_first([(f"{t.name}-{p.partition_index}", p.error_code) for t in answer.topics for p in t.partitions])
        return {
            TopicPartition(t.name, int(p.partition_index)): int(p.committed_offset)
            for t in answer.topics for p in t.partitions if p.committed_offset >= 0
        }

    @bounded_call("default.api.timeout.ms")
    async def alter_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit ``offsets`` for a group without members (generation -1): the coordinator
        refuses it while the group is active, as Kafka's alterConsumerGroupOffsets."""
        by_topic = collections.defaultdict(list)
        for tp, offset in sorted(offsets.items()):
            by_topic[tp.topic].append(
                {
                    "partition_index": tp.partition,
                    "committed_offset": int(offset),
                    "committed_leader_epoch": -1,
                    "committed_metadata": "",
                }
            )
        answer = await call_coordinator(
            self.client,
            group_id,
            CoordinatorType.GROUP,
            ApiKey.OFFSET_COMMIT,
            lambda r: [],
            what=f"OffsetCommit({group_id!r})",
            deadline=self._deadline(),
            group_id=group_id,
            generation_id_or_member_epoch=-1,
            generation_id=-1,
            member_id="",
            group_instance_id=None,
            retention_time_ms=-1,
            topics=[{"name": t, "partitions": p} for t, p in by_topic.items()],
        )
        _raise_first(
            [
                (f"group {group_id!r} {t.name}-{p.partition_index}", p.error_code)
                for t in answer.topics
                for p in t.partitions
            ]
        )

    @bounded_call("default.api.timeout.ms")
    async def describe_log_dirs(self) -> dict[int, dict[TopicPartition, int]]:
        """Broker id → partition → bytes on that broker (DescribeLogDirs, every broker)."""
        await self.client.refresh_metadata()
        out: dict[int, dict[TopicPartition, int]] = {}
        for node_id in sorted(self.client.cluster.brokers):
            answer = await call_any_node(
                self.client, ApiKey.DESCRIBE_LOG_DIRS, lambda r: [getattr(r, "error_code", 0)], what="DescribeLogDirs",
                deadline=self._deadline(), node_id=node_id, topics=None,
            )
            sizes = out[node_id] = {}
            for result in answer.results:
                for topic in result.topics:
                    for p in topic.partitions:
                        sizes[TopicPartition(topic.name, int(p.partition_index))] = int(p.partition_size)
        return out
