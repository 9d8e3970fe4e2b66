"""Share groups (KIP-932) on the console's group pages, read as kafka-share-groups.sh reads them.

ShareGroupDescribe gives the state, the assignor and each member's partitions (a partition may
be assigned to many members); DescribeShareGroupOffsets gives each share partition's start
offset and lag; ListOffsets the partition's end. The in-flight records of a share partition
are not in Kafka's protocol: ``/metrics`` serves their count
(``kafka_server_sharepartitionmetrics_inflightmessagecount``).
"""

from __future__ import annotations

import itertools
from typing import Any

from trikafka.client import CoordinatorType, TopicPartition
from trikafka.console.values import GroupRow, MemberRow, ShareGroupDetail, ShareOffsetRow

__all__ = ["ShareGroupReads"]


class ShareGroupReads:
    def __init__(self, reader: Any) -> None:
        self.reader = reader
        self.admin = reader.admin

    async def row(self, listing: Any) -> GroupRow:
        group = (await self.admin.describe_share_groups([listing.group_id]))[listing.group_id]
        offsets = await self.admin.list_share_group_offsets(listing.group_id)
        lags = [o.lag for o in offsets.values() if o.lag >= 0]
        return GroupRow(listing.group_id, group.state, listing.protocol_type or "share", len(group.members),
                        sum(lags) if lags else None, type="share")

    async def detail(self, group_id: str) -> ShareGroupDetail:
        group = (await self.admin.describe_share_groups([group_id]))[group_id]
        offsets = await self.admin.list_share_group_offsets(group_id)
        _, ends = await self.reader.offsets(list(offsets)) if offsets else ({}, {})
        owners: dict[TopicPartition, list[str]] = {}
        members = []
        for m in group.members:
            for tp in m.partitions:
                owners.setdefault(tp, []).append(m.client_id)
            assignment = tuple(
                (topic, tuple(sorted(tp.partition for tp in tps)))
                for topic, tps in itertools.groupby(sorted(m.partitions), key=lambda tp: tp.topic)
            )
            members.append(MemberRow(m.member_id, None, m.client_id, m.client_host, assignment))
        rows = tuple(
            ShareOffsetRow(tp.topic, tp.partition, o.start_offset, ends.get(tp, -1), o.lag,
                           tuple(sorted(owners.get(tp, []))))
            for tp, o in sorted(offsets.items())
        )
        return ShareGroupDetail(
            group_id=group_id,
            state=group.state,
            assignor=group.assignor,
            group_epoch=group.group_epoch,
            coordinator=await self.reader.client.find_coordinator(group_id, CoordinatorType.GROUP),
            members=tuple(sorted(members, key=lambda m: (m.client_id, m.member_id))),
            offsets=rows,
        )
