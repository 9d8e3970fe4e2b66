"""One broker of an in-process cluster: its own listener, request path and replicas.

A node is one *run* of a broker: a SocketServer, a request channel, a handler pool, a
purgatory and KafkaApis of its own (so stopping it drops exactly its connections and
in-flight requests), plus — with file logs — the LogManager holding its replicas: closed
when it stops, reopened from its files (recovery included) when it starts, after which it
catches up from the leaders. In-memory replicas play the part of a disk that survives the
broker process: the cluster keeps their LogManager, and a stopped broker's replicas just
receive nothing until it returns. What it shares with the other nodes it is handed: the
cluster's :class:`~trikafka.server.wiring.BrokerCore` (the ReplicaManager with topics and
producer state, the group and transaction coordinators, SCRAM users, ACLs, the client-quota
settings) and the cluster view. What Kafka does per broker it does for itself: it measures
client-quota rates over its own traffic, cleans its own replicas of compacted topics, and
answers its delayed requests when it stops. Its request path is built by the same code as a Broker's
(:class:`~trikafka.server.wiring.RequestPath`).

::

    ClusterNode.run
    ├── LogManager          this broker's replicas
    ├── LogCleaner          compacts them (each broker cleans its own replicas, as Kafka's)
    └── RequestPath         node.path, the same lifecycle as a Broker's (server/wiring.py)
        ├── Purgatory
        ├── RequestHandlerPool  ◄── requests ── its own channel
        └── SocketServer        its own listener(s)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import trio

from trikafka.cluster.gates import gate_coordinator_apis
from trikafka.config import BrokerConfig
from trikafka.log.cleaner import LogCleaner
from trikafka.log.manager import LogManager
from trikafka.network.endpoints import BoundEndpoint, endpoint_address
from trikafka.server.metadata_cache import BrokerEndpoint, MetadataCache
from trikafka.server.wiring import RequestPath, follow_cleaner_configs

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

    @property
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
        self.metadata_cache = ClusterMetadataCache(config, cluster.cluster_id, cluster)
        self.log_manager = log_manager
        self._owns_log_manager = owns_log_manager
        #: The same request path a Broker has (server/wiring.py), over the cluster's core,
        #: seeing the cluster, its coordinator APIs gated to the coordinator.
        self.path = RequestPath(
            config, cluster.core, self.metadata_cache,
            trio_listeners=trio_listeners,
            cluster_view=cluster,
            gate=lambda handlers: gate_coordinator_apis(handlers, cluster, self.node_id),
            own_quota_rates=True,
            task_suffix=f"-{self.node_id}",
        )
        #: Compacts this broker's own replicas, leader or follower: Kafka runs one cleaner
        #: per broker over its log dirs, never one for the cluster.
        self.log_cleaner = LogCleaner(
            log_manager,
            backoff_ms=config.log_cleaner_backoff_ms,
            clock=cluster.now_ms,
            dedupe_buffer_size=config.log_cleaner_dedupe_buffer_size,
        )
        follow_cleaner_configs(cluster.core, config, self.log_cleaner)
        self.endpoints: dict[str, BoundEndpoint] = {}
        self._stop_requested = trio.Event()
        #: Around ``run``: cancelling it stops this broker at once, without the grace of
        #: :meth:`stop` (its connections drop; what was in flight is not answered).
        self.cancel_scope = trio.CancelScope()
        self.stopped = trio.Event()

    async def run(self, *, task_status: trio.TaskStatus[ClusterNode] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            with self.cancel_scope:
                async with trio.open_nursery() as nursery:
                    if self._owns_log_manager:
                        await nursery.start(self.log_manager.run, name=f"log-manager-{self.node_id}")
                    if self.config.log_cleaner_enable:
                        await nursery.start(self.log_cleaner.run, name=f"log-cleaner-{self.node_id}")
                    self.endpoints = await nursery.start(self.path.run, name=f"request-path-{self.node_id}")
                    self.metadata_cache.set_bound_endpoints(self.endpoints)
                    task_status.started(self)
                    await self._stop_requested.wait()
                    await self.path.aclose()
                    nursery.cancel_scope.cancel()
        finally:
            self.stopped.set()

    def stop(self) -> None:
        """Begin a graceful stop, as ``Broker.stop`` (``RequestPath.aclose``: in-flight
        answers get shutdown.grace.ms); ``run`` returns when it is done. To stop at once,
        cancel :attr:`cancel_scope`."""
        self._stop_requested.set()

    @property
    def rack(self) -> str | None:
        """This broker's rack (its entry of the cluster's ``broker.rack``), as Metadata shows it."""
        return self.config.broker_rack

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` of this broker's first listener."""
        return self.address(next(iter(self.endpoints)))

    def address(self, listener_name: str) -> str:
        """``host:port`` of the named listener (``[host]:port`` for an IPv6 host)."""
        return endpoint_address(self.endpoints[listener_name])
