"""Several brokers in one process, and the controls a test uses to make them misbehave.

``async with open_cluster(brokers=3) as cluster`` runs N :class:`~trikafka.cluster.node.ClusterNode`
s, each with its own listener (TCP on 127.0.0.1, free ports by default, or the in-memory
transport), over one :class:`~trikafka.cluster.state.ClusterState`. The :class:`Cluster`
is the ClusterView every node's request path asks (server/replica/cluster_view.py) and the
ReplicaPlacement of the one ReplicaManager they share.

::

    Cluster.run
    ├── GroupCoordinator, TransactionCoordinator   one each, owned per id by a broker
    └── ClusterNode[1..N]                           each stoppable and restartable alone

The controls (``move_leader``, ``shrink_isr``, ``stop_broker`` …) are in
:mod:`trikafka.cluster.controls`; clients learn of each the way Kafka's do — an error, then
Metadata.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import trio

from trikafka.clock import Clock, now_ms
from trikafka.cluster.controls import ClusterControls
from trikafka.cluster.node import ClusterNode
from trikafka.cluster.replication import ClusterLogManager, catch_up
from trikafka.cluster.state import ClusterState
from trikafka.config import BrokerConfig, ListenerSpec
from trikafka.config.racks import rack_of
from trikafka.errors import ConfigError
from trikafka.log.log import EndOffset, Log
from trikafka.network.memory import MemoryListener
from trikafka.registry.extra import require_registry_extra
from trikafka.server.api_table import log_kafka_profile
from trikafka.server.awaitable import AwaitableState
from trikafka.server.metadata_cache import BrokerEndpoint
from trikafka.server.replica.cluster_view import PartitionLeadership
from trikafka.server.replica.replica_manager import ReplicaManager
from trikafka.server.wiring import BrokerCore, load_meta_properties, new_log_manager

__all__ = ["Cluster", "open_cluster"]

log = logging.getLogger("trikafka.cluster")

TRANSPORTS = ("tcp", "memory")


def _shift(specs: Iterable[ListenerSpec], offset: int) -> str:
    """Broker ``1 + offset``'s listeners: the same names and hosts, ports shifted (0 stays 0)."""
    return ",".join(str(ListenerSpec(s.name, s.host, s.port + offset if s.port else 0)) for s in specs)


class Cluster(ClusterControls, AwaitableState):
    """See the module docstring. The ``wait_for_*`` methods (AwaitableState) read the
    cluster's shared state and wake on a response from any of its brokers."""

    def __init__(
        self, config: BrokerConfig, brokers: int = 3, *, transport: str = "tcp", racks: Sequence[str] | None = None
    ) -> None:
        if not isinstance(brokers, int) or brokers < 1:
            raise ValueError(f"brokers={brokers!r}: a positive number of brokers is required")
        if racks is not None:
            config = config.with_overrides(broker_rack=_racks_value(racks, brokers))
        if transport not in TRANSPORTS:
            raise ValueError(f"transport={transport!r}: allowed values are {', '.join(TRANSPORTS)}")
        if config.schema_registry_port >= 0:  # before anything is made: no data dir left behind
            require_registry_extra(config.schema_registry_port)
        self.config = config
        self.transport = transport
        self.cluster_id = load_meta_properties(config)
        #: Epoch milliseconds following trio's clock (shared with every broker in the run).
        self.now_ms: Clock = now_ms
        first = config.node_id
        self.state = ClusterState(
            range(first, first + brokers),
            default_replication_factor=config.default_replication_factor,
            offsets_partitions=config.offsets_topic_num_partitions,
            internal_replication_factor=config.offsets_topic_replication_factor,
            racks={first + i: rack_of(config.broker_rack, i) for i in range(brokers)},
        )
        # ClusterView.changes: the end of the cluster's metadata log, as KRaft's is an offset;
        # an EndOffset so that a long poll watches it as it watches its partitions' ends.
        self.changes = EndOffset(self.state.version)
        self.state.on_change = self._note_change
        self.node_configs = {node_id: self._node_config(node_id) for node_id in self.state.node_ids}
        self._log_managers: dict[int, Any] = {
            node_id: new_log_manager(c, self.now_ms) for node_id, c in self.node_configs.items()
        }
        #: In-memory replicas of stopped brokers: their "disk", kept for their return.
        self._parked: dict[int, Any] = {}
        self.logs = ClusterLogManager(self.state, self._log_managers.get, config.log_dirs)
        self.replica_manager = ReplicaManager(config, self.logs)
        self.replica_manager.placement = self
        self._reconcile_replicas()
        #: The coordinators and stores every node serves, built as a Broker's are
        #: (server/wiring.py): one for the process, as a Kafka cluster's survive any broker.
        self.core = BrokerCore(config, self.replica_manager, self.now_ms)
        self.state_changes = self.core.state_changes  # every node's answers, the timers
        self.group_coordinator = self.core.groups
        self.transaction_coordinator = self.core.transactions
        self.scram_credentials = self.core.scram_credentials
        self.acls = self.core.acls
        self.nodes: dict[int, ClusterNode] = {}
        self._addresses: dict[int, dict[str, tuple[str, int]]] = {}
        self._memory_listeners: dict[int, Any] = {}
        self._nursery: trio.Nursery | None = None

    def _reconcile_replicas(self) -> None:
        """After a restart of the process (file logs), before anyone is served: the replica
        that has the most becomes the leader and the others copy from it, so a replica that
        was out of the ISR when the process stopped is not taken for an in-sync one."""
        for topic, partition in self.logs.logs:
            lead = self.state.leadership(topic, partition)
            replicas = [(self.logs.replica_log(r, topic, partition), r) for r in lead.replicas]
            found = [(log_, r) for log_, r in replicas if log_ is not None]
            if not found:
                continue
            best, best_id = max(found, key=lambda item: item[0].log_end_offset)  # first on ties
            if best.log_end_offset != self.logs.leader_log(topic, partition).log_end_offset:
                self.state.move_leader(topic, partition, best_id)
            for replica, _ in found:
                if replica is not best:
                    catch_up(replica, best)

    def _node_config(self, node_id: int) -> BrokerConfig:
        offset = node_id - self.config.node_id
        changes: dict[str, Any] = {"node_id": node_id, "broker_rack": rack_of(self.config.broker_rack, offset)}
        if self.transport == "memory":
            changes["listeners"] = ",".join(
                f"{s.name}://broker-{node_id}:9092" for s in self.config.listeners
            )
        else:
            changes["listeners"] = _shift(self.config.listeners, offset)
        if self.config.advertised_listeners:
            changes["advertised_listeners"] = _shift(self.config.advertised_listeners, offset)
        if self.config.log_dirs:
            changes["log_dirs"] = ",".join(f"{d}/broker-{node_id}" for d in self.config.log_dirs)
        return self.config.with_overrides(**changes)

    # --- ClusterView and ReplicaPlacement -------------------------------------------------

    @property
    def version(self) -> int:
        return self.state.version

    def _note_change(self, version: int) -> None:
        self.changes.value = version

    def leadership(self, topic: str, partition: int) -> PartitionLeadership:
        return self.state.leadership(topic, partition)

    def coordinator(self, key_type: int, key: str) -> int:
        return self.state.coordinator(key_type, key)

    def endpoint(self, node_id: int, listener_name: str) -> BrokerEndpoint | None:
        node = self.nodes.get(node_id)
        if node is None or node_id not in self.state.alive:
            return None
        return node.metadata_cache.own_endpoint(listener_name)

    def alive_endpoints(self, listener_name: str) -> list[BrokerEndpoint]:
        found = (self.endpoint(node_id, listener_name) for node_id in sorted(self.state.alive))
        return [e for e in found if e is not None]

    def live_brokers(self) -> int:
        return self.state.live_brokers()

    def broker_ids(self) -> tuple[int, ...]:
        return self.state.node_ids

    def replication_factor(self, topic: str) -> int:
        return len(self.state.leadership(topic, 0).replicas)

    def assign(
        self,
        topic: str,
        partitions: range,
        replication_factor: int,
        is_internal: bool,
        assignment: Sequence[Sequence[int]] | None = None,
    ) -> None:
        if is_internal:
            return  # placed when the state was built
        self.state.assign(topic, partitions, replication_factor, assignment)

    # --- lifecycle --------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[Cluster] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await self.core.run_coordinators(nursery)
            if not self.config.log_dirs:  # memory: the replicas outlive broker restarts
                for node_id, manager in self._log_managers.items():
                    await nursery.start(manager.run, name=f"log-manager-{node_id}")
            for node_id in self.state.node_ids:
                await self._start_node(node_id)
            log.info(
                "cluster %s started: %s",
                self.cluster_id,
                "; ".join(f"broker {i} at {self.nodes[i].bootstrap_servers}" for i in self.state.node_ids),
            )
            log_kafka_profile(self.config, log)
            task_status.started(self)
            await trio.sleep_forever()

    async def _start_node(self, node_id: int) -> None:
        config = self.node_configs[node_id]
        if node_id in self._addresses and self.transport == "tcp":  # rebind the ports it had
            config = config.with_overrides(
                listeners=",".join(
                    str(ListenerSpec(s.name, s.host, self._addresses[node_id][s.name][1])) for s in config.listeners
                )
            )
        trio_listeners = None
        if self.transport == "memory":
            trio_listeners = {s.name: MemoryListener(s.host, s.port) for s in config.listeners}
            self._memory_listeners[node_id] = trio_listeners
        node = ClusterNode(
            config,
            self,
            log_manager=self._log_managers[node_id],
            owns_log_manager=bool(self.config.log_dirs),
            trio_listeners=trio_listeners,
        )
        assert self._nursery is not None
        await self._nursery.start(node.run, name=f"broker-{node_id}")
        self.nodes[node_id] = node
        self._addresses[node_id] = {name: (e.host, e.port) for name, e in node.endpoints.items()}
        self.state.endpoints_changed()

    def start_soon(self, fn: Callable[..., Awaitable[object]], *args: object, name: str | None = None) -> None:
        """Run ``fn(*args)`` as a background task of the running cluster (cancelled when it
        closes; broker restarts do not touch it): what the test kit's scenarios run in."""
        if self._nursery is None:
            raise RuntimeError("the cluster is not running")
        self._nursery.start_soon(fn, *args, name=name)

    async def aclose(self) -> None:
        for node in self.nodes.values():
            node.stop()
        for node in self.nodes.values():
            await node.stopped.wait()
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()

    # --- what tests read ------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        """Every broker's first listener, ``host:port,host:port,...`` (stopped ones included:
        they come back on the same port)."""
        return ",".join(
            "{}:{}".format(*next(iter(self._addresses[i].values()))) for i in self.state.node_ids
        )

    def broker(self, node_id: int) -> ClusterNode:
        return self.nodes[node_id]

    def leader(self, topic: str, partition: int) -> int:
        """The partition's leader's node id (-1: offline)."""
        return self.state.leadership(topic, partition).leader

    def replica_log(self, node_id: int, topic: str, partition: int) -> Log | None:
        """Broker ``node_id``'s own replica of a partition (None while it is stopped)."""
        return self.logs.replica_log(node_id, topic, partition)

    async def connect(self, node_id: int | None = None, client_host: str = "127.0.0.1") -> trio.abc.Stream:
        """A stream to one broker (the first live one by default), in memory or over TCP;
        wrap it in ``trikafka.client.open_connection`` for the project's client."""
        node_id = min(self.state.alive) if node_id is None else node_id
        if self.transport == "memory":
            return await next(iter(self._memory_listeners[node_id].values())).connect(client_host)
        host, port = next(iter(self._addresses[node_id].values()))
        return await trio.open_tcp_stream(host, port)


def _racks_value(racks: Sequence[str], brokers: int) -> str:
    """``racks=[...]``: one rack id per broker, as ``broker.rack``'s comma-separated list."""
    if isinstance(racks, str):
        racks = racks.split(",")
    racks = [str(rack).strip() for rack in racks]
    if len(racks) != brokers or not all(racks) or any("," in rack for rack in racks):
        raise ConfigError("racks", racks, f"{brokers} rack ids (one per broker, in node-id order), none empty "
                          "and none with a comma")
    return ",".join(racks)


@asynccontextmanager
async def open_cluster(
    brokers: int = 3,
    config: BrokerConfig | Mapping[str, object] | None = None,
    *,
    transport: str = "tcp",
    racks: Sequence[str] | None = None,
    kafka_defaults: bool = False,
    client_telemetry: bool | None = None,
    **overrides: object,
) -> AsyncIterator[Cluster]:
    """Run ``brokers`` brokers in this process for the duration of the block.

    ``config`` (a BrokerConfig or Kafka keys) and keyword overrides in either spelling are
    broker 1's; brokers 2..N take the following node ids and ports (free ports when the port
    is 0, the default). ``transport="memory"`` puts every broker on the in-memory transport
    (``cluster.client(node_id)`` reaches it), for tests under trio's MockClock. ``racks`` gives
    each broker its rack (``broker.rack``), in node-id order: replicas are then placed rack-aware.
    Keys not given take the dev defaults, as ``open_broker``'s (``kafka_defaults=True``: Kafka's
    own); ``client_telemetry=True`` is ``client.telemetry.enable=true``.
    """
    if client_telemetry is not None:
        overrides["client.telemetry.enable"] = client_telemetry
    config = BrokerConfig.coerce(config, kafka_defaults=kafka_defaults, **overrides)
    cluster = Cluster(config, brokers, transport=transport, racks=racks)
    async with trio.open_nursery() as nursery:
        await nursery.start(cluster.run)
        try:
            yield cluster
        finally:
            await cluster.aclose()
