"""The Trio admin client: ``async with open_admin(bootstrap, **config) as admin``.

Topics and partitions (CreateTopics, DeleteTopics, CreatePartitions — to the controller),
configs (DescribeConfigs, IncrementalAlterConfigs), groups (ListGroups on every broker,
DescribeGroups, DeleteGroups — in :mod:`~trikafka.client.admin_groups` — and a group's committed
offsets — in :mod:`~trikafka.client.admin_state` — at each group's coordinator), ListOffsets and
DeleteRecords (at each partition's leader), partition sizes (DescribeLogDirs, every broker).
Each call retries retriable errors with ``retry.backoff.ms`` until ``default.api.timeout.ms``;
a per-item error (one topic of several) is raised as a typed :class:`KafkaError` naming the
item, after every item of the request was handled — as Java's ``all().get()`` does. Results are
frozen values (:mod:`trikafka.client.admin_types`).
"""

from __future__ import annotations

import collections
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import trio

from trikafka.client import admin_groups
from trikafka.client.admin_groups import raise_first as _raise_first
from trikafka.client.admin_groups import retriable as _retriable
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
    NewTopic,
    OpType,
)
from trikafka.client.calls import call_any_node
from trikafka.client.client import KafkaClient, open_client
from trikafka.client.cluster import TopicPartition
from trikafka.client.config import ClientConfig
from trikafka.client.deadlines import bounded_call
from trikafka.client.errors import KafkaError, error_for
from trikafka.client.transport import Bootstrap, Connector
from trikafka.errors import ErrorCode
from trikafka.protocol.registry import ApiKey

__all__ = ["Admin", "open_admin"]


class Admin(GroupOffsetsAndLogDirs, ShareGroupAdmin):
    def __init__(self, client: KafkaClient, config: ClientConfig) -> None:
        self.client = client
        self.config = config
        self.timeout_ms = config["request.timeout.ms"]

    @property
    def connected(self) -> bool:
        """True while a connection to some broker of the cluster is open; False while none
        could be reached (the client then logs one WARNING naming the bootstrap servers and
        why, once no broker was reached for ``default.api.timeout.ms``)."""
        return self.client.connected

    def _deadline(self) -> float:
        result: float = trio.current_time() + self.config["default.api.timeout.ms"] / 1000
        return result

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
    async def create_topics(
        self, topics: Iterable[NewTopic | str], *, validate_only: bool = False
    ) -> dict[str, CreatedTopic]:
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
            t.name: CreatedTopic(
                t.name,
                getattr(t, "topic_id", None),
                int(getattr(t, "num_partitions", -1)),
                int(getattr(t, "replication_factor", -1)),
            )
            for t in answer.topics
        }

    @bounded_call("default.api.timeout.ms")
    async def delete_topics(self, names: Iterable[str]) -> None:
        names = list(names)
        answer = await self._controller(
            ApiKey.DELETE_TOPICS,
            lambda r: _retriable(t.error_code for t in r.responses),
            f"DeleteTopics of {', '.join(map(repr, names))}",
            topic_names=names,
            topics=[{"name": n} for n in names],
            timeout=self.timeout_ms,
        )
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
    async def describe_configs(
        self, resources: Iterable[ConfigResource], keys: Iterable[str] | None = None
    ) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        resources = list(resources)
        answer = await self._controller(
            ApiKey.DESCRIBE_CONFIGS,
            lambda r: [],
            "DescribeConfigs",
            resources=[
                {
                    "resource_type": int(r.type),
                    "resource_name": r.name,
                    "configuration_keys": None if keys is None else list(keys),
                }
                for r in resources
            ],
            include_synonyms=False,
            include_documentation=False,
        )
        _raise_first([(f"{r.resource_name!r}", r.error_code, r.error_message) for r in answer.results])
        out: dict[ConfigResource, dict[str, ConfigEntry]] = {}
        for result in answer.results:
            resource = ConfigResource(ConfigResourceType(result.resource_type), result.resource_name)
            out[resource] = {
                c.name: ConfigEntry(
                    c.name, c.value, int(getattr(c, "config_source", -1)), bool(c.read_only), bool(c.is_sensitive)
                )
                for c in result.configs
            }
        return out

    @bounded_call("default.api.timeout.ms")
    async def incremental_alter_configs(
        self,
        changes: Mapping[ConfigResource, Iterable[AlterConfigOp] | Mapping[str, str | None]],
        *,
        validate_only: bool = False,
    ) -> None:
        """Per resource, ops — or a mapping key → value (None deletes the override)."""
        resources = []
        for resource, ops in changes.items():
            if isinstance(ops, Mapping):
                ops = [AlterConfigOp(k, v, OpType.DELETE if v is None else OpType.SET) for k, v in ops.items()]
            resources.append({
                "resource_type": int(resource.type), "resource_name": resource.name,
                "configs": [{"name": op.name, "config_operation": int(op.op), "value": op.value} for op in ops],
            })
        answer = await self._controller(
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            lambda r: [],
            "IncrementalAlterConfigs",
            resources=resources,
            validate_only=validate_only,
        )
        _raise_first([(f"{r.resource_name!r}", r.error_code, r.error_message) for r in answer.responses])

    @bounded_call("default.api.timeout.ms")
    async def list_config_resources(
        self, types: Iterable[ConfigResourceType] = (ConfigResourceType.CLIENT_METRICS,)
    ) -> list[ConfigResource]:
        """The config resources of ``types`` the cluster holds (ListConfigResources, KIP-1142;
        the default lists client-metrics subscriptions, as ListClientMetricsResources did)."""
        kinds = [int(t) for t in types]
        answer = await self._controller(
            ApiKey.LIST_CONFIG_RESOURCES, lambda r: [r.error_code], "ListConfigResources", resource_types=kinds
        )
        return [
            ConfigResource(ConfigResourceType(getattr(r, "resource_type", ConfigResourceType.CLIENT_METRICS)),
                           r.resource_name)
            for r in answer.config_resources
        ]

    # --- groups ---------------------------------------------------------------------------

    @bounded_call("default.api.timeout.ms")
    async def list_groups(self) -> list[GroupListing]:
        """Groups of every broker (each broker lists the groups it coordinates)."""
        return await admin_groups.list_groups(self.client, self._deadline)

    @bounded_call("default.api.timeout.ms")
    async def describe_groups(self, group_ids: Iterable[str]) -> dict[str, GroupDescription]:
        return await admin_groups.describe_groups(self.client, self._deadline, group_ids)

    @bounded_call("default.api.timeout.ms")
    async def describe_consumer_groups(self, group_ids: Iterable[str]) -> dict[str, GroupDescription]:
        """Every group, whichever protocol it speaks, as Kafka's ``describeConsumerGroups``
        (kafka-consumer-groups --describe): ConsumerGroupDescribe (API 69) first, and
        DescribeGroups for a group the coordinator does not know as a KIP-848 consumer group
        (GROUP_ID_NOT_FOUND: a classic group, or none) or when the broker has no API 69."""
        out, classic = await admin_groups.describe_consumer_groups(self.client, self._deadline, group_ids)
        out.update(await self.describe_groups(classic))
        return out

    @bounded_call("default.api.timeout.ms")
    async def delete_groups(self, group_ids: Iterable[str]) -> None:
        await admin_groups.delete_groups(self.client, self._deadline, group_ids)

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
    async def list_offsets(
        self, specs: Mapping[TopicPartition, int], *, read_committed: bool = False
    ) -> dict[TopicPartition, ListedOffset]:
        """``specs``: partition → OffsetSpec (LATEST, EARLIEST, MAX_TIMESTAMP) or a timestamp."""
        out = {}
        for leader, tps in (await self._by_leader(specs)).items():
            by_topic = collections.defaultdict(list)
            for tp in tps:
                by_topic[tp.topic].append(
                    {"partition_index": tp.partition, "current_leader_epoch": -1, "timestamp": int(specs[tp])}
                )
            answer = await call_any_node(
                self.client,
                ApiKey.LIST_OFFSETS,
                lambda r: _retriable(p.error_code for t in r.topics for p in t.partitions),
                what="ListOffsets",
                deadline=self._deadline(),
                node_id=leader,
                replica_id=-1,
                isolation_level=int(read_committed),
                topics=[{"name": t, "partitions": p} for t, p in by_topic.items()],
            )
            _raise_first(
                [(f"{t.name}-{p.partition_index}", p.error_code, None) for t in answer.topics for p in t.partitions]
            )
            for topic in answer.topics:
                for p in topic.partitions:
                    out[TopicPartition(topic.name, int(p.partition_index))] = ListedOffset(
                        int(p.offset), int(p.timestamp), int(getattr(p, "leader_epoch", -1))
                    )
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
                self.client,
                ApiKey.DELETE_RECORDS,
                lambda r: _retriable(p.error_code for t in r.topics for p in t.partitions),
                what="DeleteRecords",
                deadline=self._deadline(),
                node_id=leader,
                timeout=self.timeout_ms,
                topics=[{"name": t, "partitions": p} for t, p in by_topic.items()],
            )
            _raise_first(
                [(f"{t.name}-{p.partition_index}", p.error_code, None) for t in answer.topics for p in t.partitions]
            )
            for topic in answer.topics:
                for p in topic.partitions:
                    out[TopicPartition(topic.name, int(p.partition_index))] = int(p.low_watermark)
        return out


@asynccontextmanager
async def open_admin(
    bootstrap: Bootstrap | None = None, *, connector: Connector | None = None, **config: object
) -> AsyncIterator[Admin]:
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
