"""Admin calls for share groups (KIP-932), as ``kafka-share-groups.sh`` makes them: describe a
share group's members (ShareGroupDescribe), its share-partition start offsets and lag
(DescribeShareGroupOffsets), and move or forget them (AlterShareGroupOffsets,
DeleteShareGroupOffsets — the group must have no members). A base of
:class:`~trikafka.client.admin.Admin`; it uses the admin's ``client`` and ``_deadline()``.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping

import attrs

from trikafka.client.calls import call_coordinator
from trikafka.client.client import CoordinatorType, KafkaClient
from trikafka.client.cluster import TopicPartition
from trikafka.client.errors import error_for
from trikafka.errors import ErrorCode
from trikafka.protocol.registry import ApiKey

__all__ = ["ShareGroupAdmin", "ShareGroupDescription", "ShareMemberDescription", "SharePartitionOffset"]


@attrs.frozen
class ShareMemberDescription:
    member_id: str
    client_id: str
    client_host: str
    member_epoch: int
    partitions: tuple[TopicPartition, ...]


@attrs.frozen
class ShareGroupDescription:
    group_id: str
    state: str  # Empty, Stable; Dead when there is no such group
    group_epoch: int
    assignor: str
    members: tuple[ShareMemberDescription, ...]


@attrs.frozen
class SharePartitionOffset:
    start_offset: int  # the share-partition start offset; -1: the group never read it
    lag: int  # records not yet done between the start offset and the end; -1: unknown


class ShareGroupAdmin:
    client: KafkaClient

    def _deadline(self) -> float:
        raise NotImplementedError

    async def describe_share_groups(self, group_ids: Iterable[str]) -> dict[str, ShareGroupDescription]:
        out = {}
        for group_id in group_ids:
            answer = await call_coordinator(
                self.client, group_id, CoordinatorType.GROUP, ApiKey.SHARE_GROUP_DESCRIBE,
                lambda r: [g.error_code for g in r.groups if g.error_code != ErrorCode.group_id_not_found],
                what=f"ShareGroupDescribe({group_id!r})", deadline=self._deadline(),
                group_ids=[group_id], include_authorized_operations=False,
            )
            g = answer.groups[0]
            if g.error_code == ErrorCode.group_id_not_found:
                out[group_id] = ShareGroupDescription(group_id, "Dead", -1, "", ())
                continue
            out[group_id] = ShareGroupDescription(group_id, g.group_state, g.group_epoch, g.assignor_name, tuple(
                ShareMemberDescription(m.member_id, m.client_id, m.client_host, m.member_epoch, tuple(
                    TopicPartition(t.topic_name, p) for t in m.assignment.topic_partitions for p in t.partitions))
                for m in g.members))
        return out

    async def list_share_group_offsets(self, group_id: str) -> dict[TopicPartition, SharePartitionOffset]:
        """Every share partition of the group: its start offset and lag."""
        answer = await call_coordinator(
            self.client, group_id, CoordinatorType.GROUP, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
            lambda r: [g.error_code for g in r.groups], what=f"DescribeShareGroupOffsets({group_id!r})",
            deadline=self._deadline(), groups=[{"group_id": group_id, "topics": None}],
        )
        return {
            TopicPartition(t.topic_name, int(p.partition_index)): SharePartitionOffset(
                int(p.start_offset), int(getattr(p, "lag", -1))
            )
            for g in answer.groups
            for t in g.topics
            for p in t.partitions
        }

    async def alter_share_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Set the start offsets of a share group without members."""
        by_topic = collections.defaultdict(list)
        for tp, offset in sorted(offsets.items()):
            by_topic[tp.topic].append({"partition_index": tp.partition, "start_offset": int(offset)})
        answer = await call_coordinator(
            self.client, group_id, CoordinatorType.GROUP, ApiKey.ALTER_SHARE_GROUP_OFFSETS, lambda r: [r.error_code],
            what=f"AlterShareGroupOffsets({group_id!r})", deadline=self._deadline(), group_id=group_id,
            topics=[{"topic_name": t, "partitions": p} for t, p in by_topic.items()],
        )
        for t in answer.responses:
            for p in t.partitions:
                if p.error_code != ErrorCode.none:
                    raise error_for(p.error_code, f"share group {group_id!r} {t.topic_name}-{p.partition_index}")
