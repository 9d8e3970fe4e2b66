"""One broker of an in-process cluster: its own listener, request path and replicas.

A node is one *run* of a broker: a SocketServer, a request channel, a handler pool, a
purgatory and KafkaApis of its own (so stopping it drops exactly its connections and
in-flight requests), plus — with file logs — the LogManager holding its replicas: closed
when it stops, reopened from its files (recovery included) when it starts, after which it
catches up from the leaders. In-memory replicas play the part of a disk that survives the
broker process: the cluster keeps their LogManager, and a stopped broker's replicas just
receive nothing until it returns. What it shares with the other nodes it is handed: the cluster's ReplicaManager
(topics, producer state), the group and transaction coordinators, and the cluster view.

::

    ClusterNode.run
    ├── LogManager          this broker's replicas
    ├── Purgatory
    ├── RequestHandlerPool  ◄── requests ── its own channel
    └── SocketServer        its own listener(s)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import trio

from trikafka.broker import API_FAMILIES
from trikafka.cluster.gates import gate_coordinator_apis
from trikafka.config import BrokerConfig
from trikafka.log.manager import LogManager
from trikafka.metrics import BrokerMetrics
from trikafka.network.endpoints import BoundEndpoint
from trikafka.network.request_channel import RequestChannel
from trikafka.network.socket_server import SocketServer
from trikafka.protocol.registry import ApiRegistry
from trikafka.server.apis.consumer_groups import supported_apis
from trikafka.server.kafka_apis import ApiContext, KafkaApis
from trikafka.server.metadata_cache import BrokerEndpoint, MetadataCache
from trikafka.server.purgatory import Purgatory
from trikafka.server.request_handler import RequestHandlerPool

__all__ = ["ClusterMetadataCache", "ClusterNode"]

log = logging.getLogger("trikafka.cluster")


class ClusterMetadataCache(MetadataCache):
    """Every live broker of the cluster, not just this one; the controller is the lowest id."""

    def __init__(self, config: BrokerConfig, cluster_id: str, cluster: Any) -> None:
        super().__init__(config, cluster_id)
        self._cluster = cluster

    def own_endpoint(self, listener_name: str) -> BrokerEndpoint | None:
        found = super().alive_brokers(listener_name)
        return found[0] if found else None

    def alive_brokers(self, listener_name: str) -> list[BrokerEndpoint]:
        return self._cluster.alive_endpoints(listener_name)

    @property  # type: ignore[override]
    def controller_id(self) -> int:
        return min(self._cluster.state.alive, default=-1)

    @controller_id.setter
    def controller_id(self, value: int) -> None:
        pass  # the base class sets its own id; a cluster's controller is derived


class ClusterNode:
    def __init__(
        self,
        config: BrokerConfig,
        cluster: Any,
        *,
        log_manager: LogManager,
        owns_log_manager: bool = True,
        trio_listeners: Mapping[str, trio.abc.Listener] | None = None,
    ) -> None:
        self.config = config
        self.node_id = config.node_id
        self.metrics = BrokerMetrics()
        self.registry = ApiRegistry(supported_apis(self.config))
        self.request_channel = RequestChannel(config.queued_max_requests, config.queued_max_request_bytes)
        self.metadata_cache = ClusterMetadataCache(config, cluster.cluster_id, cluster)
        self.purgatory = Purgatory()
        self.log_manager = log_manager
        self._owns_log_manager = owns_log_manager
        self.context = ApiContext(
            config=config,
            registry=self.registry,
            metadata_cache=self.metadata_cache,
            purgatory=self.purgatory,
            channel=self.request_channel,
            metrics=self.metrics,
            replicas=cluster.replica_manager,
            groups=cluster.group_coordinator,
            transactions=cluster.transaction_coordinator,
            cluster_view=cluster,
            now_ms=cluster.now_ms,
            state_changes=cluster.state_changes,
            scram_credentials=cluster.scram_credentials,
            acls=cluster.acls,
        )
        self.apis = KafkaApis(self.context, [family(self.context) for family in API_FAMILIES])
        gate_coordinator_apis(self.apis.handlers, cluster, self.node_id)
        self.handler_pool = RequestHandlerPool(config.num_io_threads, self.request_channel, self.apis)
        self.socket_server = SocketServer(config, self.registry, self.request_channel, self.metrics, trio_listeners)
        self.endpoints: dict[str, BoundEndpoint] = {}
        self._stop_requested = trio.Event()
        self._grace = config.shutdown_grace_ms / 1000
        self.stopped = trio.Event()

    async def run(self, *, task_status: trio.TaskStatus[ClusterNode] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with trio.open_nursery() as nursery:
                if self._owns_log_manager:
                    await nursery.start(self.log_manager.run, name=f"log-manager-{self.node_id}")
                await nursery.start(self.purgatory.run, name=f"purgatory-{self.node_id}")
                await nursery.start(self.handler_pool.run, name=f"request-handler-pool-{self.node_id}")
                self.endpoints = await nursery.start(self.socket_server.run, name=f"socket-server-{self.node_id}")
                self.metadata_cache.set_bound_endpoints(self.endpoints)
                task_status.started(self)
                await self._stop_requested.wait()
                self.socket_server.begin_shutdown(self._grace)
                await self.socket_server.stopped.wait()
                await self.request_channel.close()
                nursery.cancel_scope.cancel()
        finally:
            self.stopped.set()

    def stop(self, grace_seconds: float | None = None) -> None:
        """Begin stopping; ``grace_seconds=0`` drops the connections at once."""
        if grace_seconds is not None:
            self._grace = grace_seconds
        self._stop_requested.set()

    @staticmethod
    def new_log_manager(config: BrokerConfig, clock: Any) -> LogManager:
        return LogManager(
            config.log_dirs,
            clock=clock,
            retention_check_interval_ms=config.log_retention_check_interval_ms,
            flush_scheduler_interval_ms=config.log_flush_scheduler_interval_ms,
            flush_offset_checkpoint_interval_ms=config.log_flush_offset_checkpoint_interval_ms,
        )

    def bootstrap_server(self, listener: str | None = None) -> str:
        endpoint = self.endpoints[listener] if listener else next(iter(self.endpoints.values()))
        return f"{endpoint.host}:{endpoint.port}"
