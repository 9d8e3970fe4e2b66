"""The Trio admin client: ``async with open_admin(bootstrap, **config) as admin``.

Topics and partitions (CreateTopics, DeleteTopics, CreatePartitions — to the controller),
configs (DescribeConfigs, IncrementalAlterConfigs), groups (ListGroups on every broker,
DescribeGroups, DeleteGroups and — in :mod:`~trikafka.client.admin_state` — a group's committed
offsets, at each group's coordinator), ListOffsets and DeleteRecords (at each partition's
leader), partition sizes (DescribeLogDirs, every broker). Each call retries retriable errors
with ``retry.backoff.ms`` until ``default.api.timeout.ms``; a per-item error (one topic of several) is raised as a typed
:class:`KafkaError` naming the item, after every item of the request was handled — as Java's
``all().get()`` does. Results are frozen values (:mod:`trikafka.client.admin_types`).
"""

from __future__ import annotations

import collections
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import trio

from trikafka.client.admin_share import ShareGroupAdmin
from trikafka.client.admin_state import GroupOffsetsAndLogDirs
from trikafka.client.admin_types import (
    AlterConfigOp,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    CreatedTopic,
    GroupDescription,
    GroupListing,
    ListedOffset,
    MemberDescription,
    NewTopic,
    OpType,
)
from trikafka.client.calls import call_any_node, call_coordinator
from trikafka.client.client import CoordinatorType, KafkaClient, open_client
from trikafka.client.cluster import TopicPartition
from trikafka.client.config import ClientConfig
from trikafka.client.deadlines import bounded_call
from trikafka.client.errors import KafkaError, UnsupportedVersionError, error_for
from trikafka.client.transport import Connector
from trikafka.errors import ErrorCode
from trikafka.protocol.registry import ApiKey

__all__ = ["Admin", "open_admin"]


def _retriable(codes: Iterable[Any]) -> list[Any]:
    """The retriable per-item codes: those make the whole call retry; the rest are raised
    per item by :func:`_raise_first` after the answer is read."""
    return [code for code in codes if ErrorCode(code).retriable]


def _raise_first(errors: list[tuple[str, Any, str | None]]) -> None:
    for item, code, message in errors:
        if code != ErrorCode.none:
            raise error_for(code, f"{item}: {message}" if message else item)


class Admin(GroupOffsetsAndLogDirs, ShareGroupAdmin):
    def __init__(self, client: KafkaClient, config: ClientConfig) -> None:
        self.client = client
        self.config = config
        self.timeout_ms = config["request.timeout.ms"]

    def _deadline(self) -> float:
        return trio.current_time() + self.config["default.api.timeout.ms"] / 1000

    async def _controller(self, api_key: int, errors_of: Any, what: str, **fields: Any) -> Any:
        """Send to the controller (any broker when unknown, or when Metadata names a
        controller that is not among its brokers, as librdkafka's mock cluster does) with
        the retry rules."""
        if not self.client.cluster.brokers:
            await self.client.refresh_metadata()
        controller = self.client.cluster.controller_id
        return await call_any_node(
            self.client, api_key, errors_of, what=what, deadline=self._deadline(),
            node_id=controller if controller in self.client.cluster.brokers else None, **fields,
        )

    # --- topics ---------------------------------------------------------------------------

    @bounded_call("default.api.timeout.ms")
    async def create_topics(self, topics: Iterable[NewTopic | str], *, validate_only: bool = False) -> dict[str, CreatedTopic]:
        new = [NewTopic(t) if isinstance(t, str) else t for t in topics]
        answer = await self._controller(
            ApiKey.CREATE_TOPICS, lambda r: _retriable(t.error_code for t in r.topics), "CreateTopics",
            topics=[
                {"name": t.name, "num_partitions": t.num_partitions, "replication_factor": t.replication_factor,
                 "assignments": [], "configs": [{"name": k, "value": v} for k, v in t.configs.items()]}
                for t in new
            ],
            timeout=self.timeout_ms, validate_only=validate_only,
        )
        _raise_first([(f"topic {t.name!r}", t.error_code, t.error_message) for t in answer.topics])
        return {
            t.name: CreatedTopic(t.name, getattr(t, "topic_id", None), int(getattr(t, "num_partitions", -1)), int(getattr(t, "replication_factor", -1)))
            for t in answer.topics
        }

    @bounded_call("default.api.timeout.ms")
    async def delete_topics(self, names: Iterable[str]) -> None:
        names = list(names)
        answer = await self._controller(ApiKey.DELETE_TOPICS, lambda r: _retriable(t.error_code for t in r.responses), f"DeleteTopics of {', '.join(map(repr, names))}", topic_names=names, topics=[{"name": n} for n in names], timeout=self.timeout_ms)
        _raise_first([(f"topic {r.name!r}", r.error_code, getattr(r, "error_message", None)) for r in answer.responses])
        for name in names:
            self.client.cluster.forget(name)

    @bounded_call("default.api.timeout.ms")
    async def create_partitions(self, counts: Mapping[str, int], *, validate_only: bool = False) -> None:
        """Grow each topic to the given *total* partition count."""
        answer = await self._controller(
            ApiKey.CREATE_PARTITIONS, lambda r: _retriable(t.error_code for t in r.results), "CreatePartitions",
            topics=[{"name": name, "count": count, "assignments": None} for name, count in counts.items()],
            timeout=self.timeout_ms, validate_only=validate_only,
        )
        _raise_first([(f"topic {r.name!r}", r.error_code, r.error_message) for r in answer.results])
        self.client.request_metadata_update()

    @bounded_call("default.api.timeout.ms")
    async def list_topics(self, *, internal: bool = False) -> dict[str, int]:
        """Topic name → partition count, from a fresh all-topics Metadata."""
        self.client.cluster.all_topics = True
        await self.client.refresh_metadata()
        return {
            name: len(info.partitions)
            for name, info in self.client.cluster.topics.items()
            if info.error_code == ErrorCode.none and (internal or not info.is_internal)
        }

    # --- configs --------------------------------------------------------------------------

    @bounded_call("default.api.timeout.ms")
    async def describe_configs(self, resources: Iterable[ConfigResource], keys: Iterable[str] | None = None) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        resources = list(resources)
        answer = await self._controller(
            ApiKey.DESCRIBE_CONFIGS, lambda r: [], "DescribeConfigs",
            resources=[{"resource_type": int(r.type), "resource_name": r.name, "configuration_keys": None if keys is None else list(keys)} for r in resources],
            include_synonyms=False, include_documentation=False,
        )
        _raise_first([(f"{r.resource_name!r}", r.error_code, r.error_message) for r in answer.results])
        out: dict[ConfigResource, dict[str, ConfigEntry]] = {}
        for result in answer.results:
            resource = ConfigResource(ConfigResourceType(result.resource_type), result.resource_name)
            out[resource] = {
                c.name: ConfigEntry(c.name, c.value, int(getattr(c, "config_source", -1)), bool(c.read_only), bool(c.is_sensitive))
                for c in result.configs
            }
        return out

    @bounded_call("default.api.timeout.ms")
    async def incremental_alter_configs(self, changes: Mapping[ConfigResource, Iterable[AlterConfigOp] | Mapping[str, str | None]], *, validate_only: bool = False) -> None:
        """Per resource, ops — or a mapping key → value (None deletes the override)."""
        resources = []
        for resource, ops in changes.items():
            if isinstance(ops, Mapping):
                ops = [AlterConfigOp(k, v, OpType.DELETE if v is None else OpType.SET) for k, v in ops.items()]
            resources.append({
                "resource_type": int(resource.type), "resource_name": resource.name,
                "configs": [{"name": op.name, "config_operation": int(op.op), "value": op.value} for op in ops],
            })
        answer = await self._controller(ApiKey.INCREMENTAL_ALTER_CONFIGS, lambda r: [], "IncrementalAlterConfigs", resources=resources, validate_only=validate_only)
        _raise_first([(f"{r.resource_name!r}", r.error_code, r.error_message) for r in answer.responses])

    # --- groups ---------------------------------------------------------------------------

    @bounded_call("default.api.timeout.ms")
    async def list_groups(self) -> list[GroupListing]:
        """Groups of every broker (each broker lists the groups it coordinates)."""
        await self.client.refresh_metadata()
        listings = []
        for node_id in sorted(self.client.cluster.brokers):
            answer = await call_any_node(
                self.client, ApiKey.LIST_GROUPS, lambda r: [r.error_code], what="ListGroups",
                deadline=self._deadline(), node_id=node_id, states_filter=[], types_filter=[],
            )
            listings += [
                GroupListing(g.group_id, g.protocol_type, getattr(g, "group_state", ""), (getattr(g, "group_type", "") or "classic").lower())
                for g in answer.groups
            ]
        return sorted(listings, key=lambda g: g.group_id)

    @bounded_call("default.api.timeout.ms")
    async def describe_groups(self, group_ids: Iterable[str]) -> dict[str, GroupDescription]:
        out = {}
        for group_id in group_ids:
            answer = await call_coordinator(
                self.client, group_id, CoordinatorType.GROUP, ApiKey.DESCRIBE_GROUPS,
                lambda r: [g.error_code for g in r.groups], what=f"DescribeGroups({group_id!r})",
                deadline=self._deadline(), groups=[group_id], include_authorized_operations=False,
            )
            group = answer.groups[0]
            out[group_id] = GroupDescription(
                group.group_id, group.group_state, group.protocol_type, group.protocol_data,
                tuple(
                    MemberDescription(m.member_id, getattr(m, "group_instance_id", None), m.client_id, m.client_host, bytes(m.member_assignment))
                    for m in group.members
                ),
            )
        return out

    @bounded_call("default.api.timeout.ms")
    async def describe_consumer_groups(self, group_ids: Iterable[str]) -> dict[str, GroupDescription]:
        """Every group, whichever protocol it speaks, as Kafka's ``describeConsumerGroups``
        (kafka-consumer-groups --describe): ConsumerGroupDescribe (API 69) first, and
        DescribeGroups for a group the coordinator does not know as a KIP-848 consumer group
        (GROUP_ID_NOT_FOUND: a classic group, or none) or when the broker has no API 69."""
        out: dict[str, GroupDescription] = {}
        classic = []
        for group_id in group_ids:
            try:
                answer = await call_coordinator(
                    self.client, group_id, CoordinatorType.GROUP, ApiKey.CONSUMER_GROUP_DESCRIBE,
                    lambda r: _retriable(g.error_code for g in r.groups), what=f"ConsumerGroupDescribe({group_id!r})",
                    deadline=self._deadline(), group_ids=[group_id], include_authorized_operations=False,
                )
            except UnsupportedVersionError:
                classic.append(group_id)
                continue
            group = answer.groups[0]
            if group.error_code == ErrorCode.group_id_not_found:
                classic.append(group_id)
                continue
            _raise_first([(f"group {group_id!r}", group.error_code, group.error_message)])
            out[group_id] = GroupDescription(
                group.group_id, group.group_state, "consumer", group.assignor_name,
                tuple(
                    MemberDescription(
                        m.member_id, m.instance_id, m.client_id, m.client_host, b"",
                        assigned=tuple(sorted(
                            TopicPartition(t.topic_name, int(p)) for t in m.assignment.topic_partitions for p in t.partitions
                        )),
                        member_epoch=int(m.member_epoch),
                    )
                    for m in group.members
                ),
                type="consumer",
            )
        out.update(await self.describe_groups(classic))
        return out

    @bounded_call("default.api.timeout.ms")
    async def delete_groups(self, group_ids: Iterable[str]) -> None:
        errors = []
        for group_id in group_ids:
            try:
                await call_coordinator(
                    self.client, group_id, CoordinatorType.GROUP, ApiKey.DELETE_GROUPS,
                    lambda r: [g.error_code for g in r.results], what=f"DeleteGroups({group_id!r})",
                    deadline=self._deadline(), groups_names=[group_id],
                )
            except KafkaError as exc:
                errors.append(exc)
        if errors:
            raise errors[0]

    # --- offsets and records --------------------------------------------------------------

    async def _by_leader(self, tps: Iterable[TopicPartition]) -> dict[int, list[TopicPartition]]:
        grouped: dict[int, list[TopicPartition]] = collections.defaultdict(list)
        for tp in tps:
            await self.client.wait_for_topic(tp.topic, self.config["default.api.timeout.ms"] / 1000)
            leader = self.client.cluster.leader_for(tp)
            if leader is None:
                raise error_for(ErrorCode.unknown_topic_or_partition, f"{tp.topic}-{tp.partition}")
            grouped[leader].append(tp)
        return grouped

    @bounded_call("default.api.timeout.ms")
    async def list_offsets(self, specs: Mapping[TopicPartition, int], *, read_committed: bool = False) -> dict[TopicPartition, ListedOffset]:
        """``specs``: partition → OffsetSpec (LATEST, EARLIEST, MAX_TIMESTAMP) or a timestamp."""
        out = {}
        for leader, tps in (await self._by_leader(specs)).items():
            by_topic = collections.defaultdict(list)
            for tp in tps:
                by_topic[tp.topic].append({"partition_index": tp.partition, "current_leader_epoch": -1, "timestamp": int(specs[tp])})
            answer = await call_any_node(
                self.client, ApiKey.LIST_OFFSETS, lambda r: _retriable(p.error_code for t in r.topics for p in t.partitions), what="ListOffsets", deadline=self._deadline(),
                node_id=leader, replica_id=-1, isolation_level=int(read_committed),
                topics=[{"name": t, "partitions": p} for t, p in by_topic.items()],
            )
            _raise_first([(f"{t.name}-{p.partition_index}", p.error_code, None) for t in answer.topics for p in t.partitions])
            for topic in answer.topics:
                for p in topic.partitions:
                    out[TopicPartition(topic.name, int(p.partition_index))] = ListedOffset(int(p.offset), int(p.timestamp), int(getattr(p, "leader_epoch", -1)))
        return out

    @bounded_call("default.api.timeout.ms")
    async def delete_records(self, before: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Delete records below each offset (-1: the high watermark); returns the new low watermarks."""
        out = {}
        for leader, tps in (await self._by_leader(before)).items():
            by_topic = collections.defaultdict(list)
            for tp in tps:
                by_topic[tp.topic].append({"partition_index": tp.partition, "offset": int(before[tp])})
            answer = await call_any_node(
                self.client, ApiKey.DELETE_RECORDS, lambda r: _retriable(p.error_code for t in r.topics for p in t.partitions), what="DeleteRecords", deadline=self._deadline(),
                node_id=leader, timeout=self.timeout_ms, topics=[{"name": t, "partitions": p} for t, p in by_topic.items()],
            )
            _raise_first([(f"{t.name}-{p.partition_index}", p.error_code, None) for t in answer.topics for p in t.partitions])
            for topic in answer.topics:
                for p in topic.partitions:
                    out[TopicPartition(topic.name, int(p.partition_index))] = int(p.low_watermark)
        return out


@asynccontextmanager
async def open_admin(bootstrap: Any = None, *, connector: Connector | None = None, **config: Any) -> AsyncIterator[Admin]:
    """A running admin client; ``bootstrap`` as for :func:`~trikafka.client.open_producer`."""
    if isinstance(bootstrap, str | list | tuple):
        config["bootstrap.servers"] = bootstrap
    settings = ClientConfig.for_role("admin", config)
    if bootstrap is None:
        bootstrap = settings["bootstrap.servers"]
        if bootstrap is None:
            raise KafkaError(ErrorCode.invalid_config, "open_admin needs bootstrap servers", retriable=False)
    async with open_client(bootstrap, settings, connector) as client:
        yield Admin(client, settings)
