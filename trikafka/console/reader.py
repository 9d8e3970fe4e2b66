"""The console's reads, made through the Kafka protocol with the project's Trio client.

Why the protocol and not the broker's objects: the same reads then work for one broker, for
``--brokers N`` (metadata, leaders and group coordinators are the cluster's, found the way
every client finds them) and against any Kafka. The price is a few loopback round trips per
page, well under the time a browser takes to paint it. Only request rates come from the
broker's own counters (``app.py``): the protocol has no API for them.

Each page opens one admin client (:func:`trikafka.client.open_admin`) and reads with it:

* overview, topics — Metadata (all topics), ListOffsets (earliest and latest) at each
  partition's leader, DescribeLogDirs at every broker for sizes, DescribeConfigs;
* records — ListOffsets by timestamp when asked for a time, then Fetch at the leader from
  the offset, one round per ``FETCH_MAX_BYTES`` until the count is met or the high watermark
  reached; batches are decoded (and inflated) by the protocol layer;
* groups — ListGroups at every broker, DescribeGroups and OffsetFetch at the coordinator,
  lag against the latest offsets.
"""

from __future__ import annotations

import collections
import itertools
from typing import Any

from trikafka.client import (
    Admin,
    ConfigResource,
    CoordinatorType,
    KafkaError,
    OffsetSpec,
    TopicPartition,
)
from trikafka.console.render import decode_assignment, show_bytes
from trikafka.console.share_reads import ShareGroupReads
from trikafka.console.values import (
    BrokerRow,
    ConfigRow,
    GroupDetail,
    GroupOffsetRow,
    GroupRow,
    MemberRow,
    Overview,
    PartitionRow,
    RecordRow,
    RecordsPage,
    ShareGroupDetail,
    TopicDetail,
    TopicRow,
)
from trikafka.errors import ErrorCode
from trikafka.protocol.batch_records import decode_records
from trikafka.protocol.records import BATCH_HEADER_SIZE, parse_batch_header
from trikafka.protocol.registry import ApiKey

__all__ = ["FETCH_MAX_BYTES", "ClusterReader", "NotFound"]

#: Bytes asked per Fetch round of the record browser.
FETCH_MAX_BYTES = 1024 * 1024


class NotFound(LookupError):
    """A topic, partition or group the cluster does not have (the page answers 404)."""


class ClusterReader:
    def __init__(self, admin: Admin) -> None:
        self.admin = admin
        self.client = admin.client

    # --- cluster and topics -----------------------------------------------------------------

    async def metadata(self) -> Any:
        await self.admin.list_topics(internal=True)
        return self.client.cluster

    async def overview(self, *, version: str, listeners: tuple[str, ...]) -> Overview:
        cluster = await self.metadata()
        topics = [t for t in cluster.topics.values() if t.error_code == ErrorCode.none]
        groups = await self.admin.list_groups()
        return Overview(
            cluster_id=cluster.cluster_id,
            controller_id=cluster.controller_id,
            version=version,
            brokers=tuple(
                BrokerRow(b.node_id, b.host, b.port, b.rack, b.node_id == cluster.controller_id)
                for b in sorted(cluster.brokers.values(), key=lambda b: b.node_id)
            ),
            listeners=listeners,
            topic_count=sum(not t.is_internal for t in topics),
            internal_topic_count=sum(t.is_internal for t in topics),
            partition_count=sum(len(t.partitions) for t in topics),
            group_count=len(groups),
        )

    async def offsets(self, tps: list[TopicPartition]) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        if not tps:
            return {}, {}
        earliest = await self.admin.list_offsets(dict.fromkeys(tps, OffsetSpec.EARLIEST))
        latest = await self.admin.list_offsets(dict.fromkeys(tps, OffsetSpec.LATEST))
        return {tp: o.offset for tp, o in earliest.items()}, {tp: o.offset for tp, o in latest.items()}

    async def _sizes(self, topics: list[str] | None) -> dict[TopicPartition, int]:
        """Partition sizes from DescribeLogDirs at each broker, the leader's replica counted;
        empty when the brokers do not serve it (then sizes show as unknown)."""
        cluster = self.client.cluster
        found: dict[int, dict[TopicPartition, int]] = {}
        for node_id in sorted(cluster.brokers):
            try:
                answer = await self.client.send(
                    node_id, ApiKey.DESCRIBE_LOG_DIRS,
                    topics=None if topics is None else [
                        {"topic": t, "partitions": sorted(cluster.topics[t].partitions)} for t in topics
                    ],
                )
            except KafkaError:
                continue
            sizes = found.setdefault(node_id, {})
            for result in answer.results:
                for topic in result.topics:
                    for p in topic.partitions:
                        tp = TopicPartition(topic.name, int(p.partition_index))
                        sizes[tp] = sizes.get(tp, 0) + int(p.partition_size)
        out = {}
        for name, info in cluster.topics.items():
            for index, partition in info.partitions.items():
                tp = TopicPartition(name, index)
                size = found.get(partition.leader, {}).get(tp)
                if size is not None:
                    out[tp] = size
        return out

    async def topics(self) -> tuple[TopicRow, ...]:
        cluster = await self.metadata()
        infos = sorted(
            (t for t in cluster.topics.values() if t.error_code == ErrorCode.none),
            key=lambda t: (t.is_internal, t.name),
        )
        tps = [TopicPartition(t.name, p) for t in infos for p in t.partitions]
        starts, ends = await self.offsets(tps)
        sizes = await self._sizes(None)
        rows = []
        for info in infos:
            mine = [TopicPartition(info.name, p) for p in info.partitions]
            rows.append(TopicRow(
                name=info.name,
                internal=info.is_internal,
                partitions=len(info.partitions),
                replication_factor=max((len(p.replicas) for p in info.partitions.values()), default=0),
                records=sum(max(ends.get(tp, 0) - starts.get(tp, 0), 0) for tp in mine),
                size_bytes=sum(sizes[tp] for tp in mine) if all(tp in sizes for tp in mine) else -1,
            ))
        return tuple(rows)

    async def topic(self, name: str) -> TopicDetail:
        cluster = await self.metadata()
        info = cluster.topics.get(name)
        if info is None or info.error_code != ErrorCode.none:
            raise NotFound(f"topic {name!r} does not exist")
        tps = [TopicPartition(name, p) for p in sorted(info.partitions)]
        starts, ends = await self.offsets(tps)
        sizes = await self._sizes([name])
        configs = await self.admin.describe_configs([ConfigResource.topic(name)])
        entries = next(iter(configs.values()), {})
        return TopicDetail(
            name=name,
            internal=info.is_internal,
            partitions=tuple(
                PartitionRow(
                    tp.partition, info.partitions[tp.partition].leader,
                    tuple(info.partitions[tp.partition].replicas), tuple(info.partitions[tp.partition].isr),
                    starts.get(tp, -1), ends.get(tp, -1), sizes.get(tp, -1),
                )
                for tp in tps
            ),
            configs=tuple(
                ConfigRow(e.name, None if e.sensitive else e.value, e.is_default, e.sensitive)
                for e in sorted(entries.values(), key=lambda e: e.name)
            ),
        )

    # --- records ----------------------------------------------------------------------------

    async def records(
        self, topic: str, partition: int, *, offset: int | None = None, timestamp: int | None = None, count: int = 20,
    ) -> RecordsPage:
        """``count`` records of one partition from ``offset`` (default: the log start) or from
        the first record at or after ``timestamp`` (epoch ms)."""
        cluster = await self.metadata()
        info = cluster.topics.get(topic)
        if info is None or info.error_code != ErrorCode.none:
            raise NotFound(f"topic {topic!r} does not exist")
        if partition not in info.partitions:
            raise NotFound(f"topic {topic!r} has no partition {partition} (it has {len(info.partitions)})")
        tp = TopicPartition(topic, partition)
        starts, ends = await self.offsets([tp])
        start, end = starts[tp], ends[tp]
        if timestamp is not None:
            found = await self.admin.list_offsets({tp: timestamp})
            position = found[tp].offset  # -1: no record at or after it
        else:
            position = start if offset is None else max(offset, start)
        if position < 0:
            return RecordsPage(topic, partition, start, end, -1, (), end)
        rows, next_offset = await self._fetch(tp, position, end, count)
        return RecordsPage(topic, partition, start, end, position, tuple(rows), next_offset)

    async def _fetch(self, tp: TopicPartition, position: int, end: int, count: int) -> tuple[list[RecordRow], int]:
        leader = self.client.cluster.leader_for(tp)
        if leader is None:
            raise NotFound(f"{tp.topic}-{tp.partition} has no leader right now")
        rows: list[RecordRow] = []
        while len(rows) < count and position < end:
            answer = await self.client.send(
                leader, ApiKey.FETCH, replica_id=-1, max_wait=0, min_bytes=0, max_bytes=FETCH_MAX_BYTES,
                isolation_level=0, session_id=0, session_epoch=-1,
                topics=[{"topic": tp.topic, "partitions": [{
                    "partition": tp.partition, "current_leader_epoch": -1, "fetch_offset": position,
                    "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": FETCH_MAX_BYTES,
                }]}],
                forgotten_topics_data=[], rack_id="",
            )
            data = answer.responses[0].partitions[0]
            if data.error_code != ErrorCode.none:
                raise KafkaError(data.error_code, f"Fetch {tp.topic}-{tp.partition} at {position}")
            moved = position
            for batch_end, decoded in _whole_batches(bytes(data.records or b"")):
                for r in decoded:
                    if r.offset >= position and len(rows) < count:
                        rows.append(_row(tp.partition, r))
                        moved = r.offset + 1
                if len(rows) < count:
                    moved = max(moved, batch_end)
            if moved == position:
                break  # nothing whole came back (a batch larger than the fetch size)
            position = moved
        return rows, position


def _whole_batches(data: bytes) -> list[tuple[int, list[Any]]]:
    """(next offset, records) per whole batch in a Fetch answer — the last one may be cut at
    the size limit; a control batch (a transaction marker) has no records to show."""
    out: list[tuple[int, list[Any]]] = []
    position = 0
    while position + BATCH_HEADER_SIZE <= len(data):
        header = parse_batch_header(data, position)
        if header.end > len(data) or header.size < BATCH_HEADER_SIZE:
            break
        out.append((header.next_offset, [] if header.is_control else decode_records(data, header)))
        position = header.end
    return out


def _framed(value: Any) -> bool:
    """Confluent's wire format: magic byte 0, a 4-byte schema id, then the payload."""
    return value is not None and len(value) >= 5 and value[0] == 0


def _row(partition: int, record: Any) -> RecordRow:
    return RecordRow(
        partition=partition,
        offset=record.offset,
        timestamp=record.timestamp,
        key=show_bytes(record.key),
        value=show_bytes(record.value),
        headers=tuple((name, show_bytes(value)) for name, value in record.headers),
        value_bytes=bytes(record.value) if _framed(record.value) else None,
    )


class GroupReads:
    """Consumer groups: listing, members and assignments, committed offsets and lag."""

    def __init__(self, reader: ClusterReader) -> None:
        self.reader = reader
        self.admin = reader.admin
        self.client = reader.client

    async def _committed(self, group_id: str) -> dict[TopicPartition, int]:
        node_id = await self.client.find_coordinator(group_id, CoordinatorType.GROUP)
        answer = await self.client.send(
            node_id, ApiKey.OFFSET_FETCH, group_id=group_id, topics=None, require_stable=False
        )
        if answer.error_code != ErrorCode.none:
            raise KafkaError(answer.error_code, f"OffsetFetch({group_id!r})")
        return {
            TopicPartition(t.name, int(p.partition_index)): int(p.committed_offset)
            for t in answer.topics
            for p in t.partitions
            if p.error_code == ErrorCode.none and p.committed_offset >= 0
        }

    async def _lags(self, committed: dict[TopicPartition, int]) -> dict[TopicPartition, tuple[int, int]]:
        """partition → (end offset, lag) for the partitions that still exist."""
        await self.reader.metadata()
        known = [
            tp for tp in committed if tp.partition in getattr(self.client.cluster.topic(tp.topic), "partitions", {})
        ]
        _, ends = await self.reader.offsets(known)
        return {tp: (ends[tp], max(ends[tp] - committed[tp], 0)) for tp in known if tp in ends}

    async def groups(self) -> tuple[GroupRow, ...]:
        listings = await self.admin.list_groups()
        described = await self.admin.describe_consumer_groups([g.group_id for g in listings if g.type != "share"])
        rows = []
        for listing in listings:
            if listing.type == "share":
                rows.append(await ShareGroupReads(self.reader).row(listing))
                continue
            group = described[listing.group_id]
            lags = await self._lags(await self._committed(listing.group_id))
            rows.append(GroupRow(
                listing.group_id, group.state, group.protocol_type or listing.protocol_type,
                len(group.members), sum(lag for _, lag in lags.values()) if lags else None,
                type=listing.type,
            ))
        return tuple(rows)

    async def group(self, group_id: str) -> GroupDetail | ShareGroupDetail:
        listings = {g.group_id: g for g in await self.admin.list_groups()}
        if group_id not in listings:
            raise NotFound(f"group {group_id!r} does not exist")
        if listings[group_id].type == "share":
            return await ShareGroupReads(self.reader).detail(group_id)
        group = (await self.admin.describe_consumer_groups([group_id]))[group_id]
        committed = await self._committed(group_id)
        lags = await self._lags(committed)
        members = []
        owner: dict[TopicPartition, str] = {}
        for m in group.members:
            if m.assigned is not None:  # a KIP-848 member: ConsumerGroupDescribe named its partitions
                assignment = tuple(
                    (topic, tuple(p.partition for p in tps))
                    for topic, tps in itertools.groupby(m.assigned, key=lambda tp: tp.topic)
                )
            else:
                assignment = decode_assignment(group.protocol_type, m.assignment) or ()
            for topic, partitions in assignment:
                owner.update({TopicPartition(topic, p): m.member_id for p in partitions})
            members.append(MemberRow(m.member_id, m.group_instance_id, m.client_id, m.client_host, assignment))
        by_topic = collections.defaultdict(list)
        for tp in sorted(committed):
            end, lag = lags.get(tp, (-1, 0))
            by_topic[tp.topic].append(GroupOffsetRow(tp.topic, tp.partition, committed[tp], end, lag, owner.get(tp)))
        return GroupDetail(
            group_id=group_id,
            state=group.state,
            protocol_type=group.protocol_type,
            protocol=group.protocol,
            coordinator=await self.client.find_coordinator(group_id, CoordinatorType.GROUP),
            members=tuple(sorted(members, key=lambda m: (m.client_id, m.member_id))),
            offsets=tuple(row for rows in by_topic.values() for row in rows),
            type=group.type,
        )
