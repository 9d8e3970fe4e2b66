"""How a broker is put together: the one place that builds its parts from a BrokerConfig.

A standalone :class:`~trikafka.broker.Broker` and each node of an in-process cluster
(:mod:`trikafka.cluster`) are the same broker wired in two settings, so they are built here,
once — a feature that adds a store, a coordinator or an API family adds it here and both get
it. Two halves, split by lifetime:

* :class:`BrokerCore` — what the broker *serves*: the replica manager it is given, the group
  and transaction coordinators, the SCRAM users, the ACLs and the client quotas. A Broker has
  one; a cluster has one for all its nodes (its state outlives any broker stopping, as
  Kafka's outlives a broker in its internal topics and cluster metadata).
* :class:`RequestPath` — one *run* of a broker's request path: the registry, the socket
  server, the request channel, the handler pool, the purgatory and the KafkaApis over every
  family of :data:`API_FAMILIES` (``server/api_table.py``: each imported and built when one
  of its APIs is first asked for). A cluster node builds a new one each time it starts, with
  what differs for it: the metadata cache that sees the whole cluster, the cluster view, the
  NOT_COORDINATOR gate around the coordinator APIs.

The core's timers are started by its owner (``Broker.run``, ``Cluster.run``). The request
path has one lifecycle of its own, the same for a Broker and a cluster node::

    RequestPath.run                 (its nursery; ready once every listener is bound)
    ├── Purgatory                   one task per delayed operation
    ├── RequestHandlerPool          num.io.threads handler tasks ◄── the shared request channel
    └── SocketServer                Acceptors ─newConnections─▶ Processors ─▶ connections

``RequestPath.stop(grace)`` is the one stop sequence: delayed operations answer now, the
socket server stops accepting and reading and gives in-flight responses ``grace`` seconds,
the request channel closes, and the nursery is cancelled (what is still queued then belongs
to connections already closed: nobody could read its answer, so it is not applied).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import trio

from trikafka.clock import Clock
from trikafka.config import BrokerConfig
from trikafka.coordinator.group_coordinator import GroupCoordinator
from trikafka.coordinator.offsets import OFFSETS_TOPIC, OffsetStore
from trikafka.coordinator.ports import OffsetsPartitionLog
from trikafka.coordinator.share.coordinator import ShareCoordinator
from trikafka.coordinator.share.state_store import SHARE_STATE_TOPIC, ShareStateLog
from trikafka.coordinator.transactions.transaction_coordinator import TransactionCoordinator
from trikafka.coordinator.transactions.transaction_state import TransactionLog
from trikafka.log.manager import LoadProgress, LogManager
from trikafka.metrics import BrokerMetrics
from trikafka.network.endpoints import BoundEndpoint
from trikafka.network.request_channel import RequestChannel
from trikafka.network.socket_server import SocketServer
from trikafka.protocol.registry import ApiRegistry
from trikafka.registry import SCHEMAS_TOPIC, SchemaRegistry
from trikafka.registry.validation import record_validator
from trikafka.security.acl_store import AclStore
from trikafka.security.quota_store import ClientQuotas
from trikafka.security.sasl.credentials import ScramCredentials
from trikafka.server.api_table import API_FAMILIES, supported_apis
from trikafka.server.awaitable import StateChanges
from trikafka.server.features import Features
from trikafka.server.kafka_apis import ApiContext, KafkaApis
from trikafka.server.metadata_cache import MetadataCache, new_cluster_id
from trikafka.server.purgatory import Purgatory
from trikafka.server.replica.cluster_view import ClusterView
from trikafka.server.replica.replica_manager import ReplicaManager
from trikafka.server.request_handler import RequestHandlerPool
from trikafka.server.share_dlq import DeadLetterWriter
from trikafka.server.throttling import RequestThrottler

__all__ = ["API_FAMILIES", "BrokerCore", "RequestPath", "load_meta_properties", "new_log_manager"]

def load_meta_properties(config: BrokerConfig) -> str:
    """The cluster id: from config, else from ``meta.properties`` in the first log dir
    (written there on first start, as Kafka's storage format does), else a new one."""
    if not config.log_dirs:
        return config.cluster_id or new_cluster_id()
    path = Path(config.log_dirs[0]) / "meta.properties"
    if path.exists():
        values = dict(
            line.split("=", 1)
            for line in path.read_text().splitlines()
            if "=" in line and not line.startswith("#")
        )
        stored = values.get("cluster.id")
        if stored:
            if config.cluster_id and config.cluster_id != stored:
                raise ValueError(
                    f"cluster.id {config.cluster_id!r} does not match {stored!r} in {path}"
                )
            return stored
    cluster_id = config.cluster_id or new_cluster_id()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "#\n#written by trikafka\n"
        f"cluster.id={cluster_id}\nnode.id={config.node_id}\nversion=1\n"
    )
    return cluster_id


def new_log_manager(config: BrokerConfig, clock: Clock, progress: LoadProgress | None = None) -> LogManager:
    """The LogManager of ``config``'s log dirs, with its retention and flush schedules."""
    return LogManager(
        config.log_dirs,
        clock=clock,
        retention_check_interval_ms=config.log_retention_check_interval_ms,
        flush_scheduler_interval_ms=config.log_flush_scheduler_interval_ms,
        flush_offset_checkpoint_interval_ms=config.log_flush_offset_checkpoint_interval_ms,
        progress=progress,
    )


class BrokerCore:
    """The coordinators and stores over a replica manager (see the module docstring).

    ``state_changes`` is bumped after every response and every timer-driven coordinator
    change; the ``wait_for_*`` methods of Broker and Cluster re-check at each bump."""

    def __init__(self, config: BrokerConfig, replicas: ReplicaManager, clock: Clock) -> None:
        self.config = config
        self.replicas = replicas
        self.now_ms = clock
        self.state_changes = StateChanges()
        self.groups = GroupCoordinator(
            config, self._offset_store(), clock, on_state_change=self.state_changes.bump,
            topic_partitions=lambda: {t.name: t.partitions for t in replicas.topics},
        )
        self.transactions = TransactionCoordinator(
            config,
            TransactionLog.for_log_dirs(config.log_dirs),
            producer_ids=replicas.producer_ids,
            markers=replicas,  # markers go to each partition's leader (replicated in a cluster)
            groups=self.groups,
            now_ms=clock,
            on_state_change=self.state_changes.bump,
        )
        replicas.transaction_verifier = self.transactions.verify_produce
        #: Share groups (KIP-932): membership, share partitions, share sessions.
        self.dead_letters = DeadLetterWriter(replicas, clock)
        self.shares = ShareCoordinator(
            config, lambda: {t.name: t.partitions for t in replicas.topics},
            store=self._share_state_store(), on_state_change=self.state_changes.bump,
            on_archived=self.dead_letters.archived,
        )
        self.dead_letters.shares = self.shares
        #: Feature levels (KIP-584), one set for every node of a cluster.
        self.features = Features(config)
        #: GROUP configs of every kind of group are kept by the share coordinator.
        self.groups.consumer.group_overrides = lambda group_id: self.shares.group_configs.get(group_id, {})
        #: SCRAM users: AlterUserScramCredentials writes them, every SASL listener reads them.
        self.scram_credentials = ScramCredentials.from_config(
            config.security, [s.name for s in config.listeners], config.log_dirs
        )
        #: The ACLs (None without ``authorizer.class.name``: everything allowed).
        self.acls = AclStore.from_config(config.security, config.log_dirs)
        #: Client quotas: set by AlterClientQuotas, enforced on every answer (KIP-219).
        self.client_quotas = ClientQuotas.in_data_dir(
            config.log_dirs, config.quota_window_num, config.quota_window_size_seconds
        )
        #: The schema registry over ``_schemas`` (served over HTTP with schema.registry.port).
        self.schemas = SchemaRegistry(self._schemas_log, clock)
        replicas.record_validator = record_validator(self.schemas)

    def _schemas_log(self, create: bool) -> Any:
        """Partition 0 of ``_schemas``, created (compacted, one partition, as Confluent's
        registry creates it) when ``create``; None while it does not exist."""
        replicas = self.replicas
        if replicas.topics.get(SCHEMAS_TOPIC) is None:
            if not create:
                return None
            replicas.create_topic(SCHEMAS_TOPIC, 1, configs={"cleanup.policy": "compact"})
        return replicas.get_log(SCHEMAS_TOPIC, 0)

    def _offset_store(self) -> OffsetStore:
        """``__consumer_offsets``: an internal, compacted topic, created — as in Kafka — the
        first time a group needs it, so a fresh broker lists no topics."""
        replicas, config = self.replicas, self.config
        existing = replicas.topics.get(OFFSETS_TOPIC)
        partitions = existing.partitions if existing else config.offsets_topic_num_partitions

        def log_for(partition: int) -> OffsetsPartitionLog:
            if replicas.topics.get(OFFSETS_TOPIC) is None:
                replicas.create_topic(
                    OFFSETS_TOPIC,
                    partitions,
                    configs={"cleanup.policy": "compact", "segment.bytes": str(config.offsets_topic_segment_bytes)},
                    is_internal=True,
                )
            return replicas.get_log(OFFSETS_TOPIC, partition)

        return OffsetStore(partitions, log_for, self.now_ms, exists=lambda: OFFSETS_TOPIC in replicas.topics)

    def _share_state_store(self) -> ShareStateLog | None:
        """``__share_group_state`` (coordinator/share/state_store.py) with a data directory;
        in memory the share state lives as long as the broker."""
        replicas = self.replicas
        if not self.config.log_dirs:
            return None

        def log() -> OffsetsPartitionLog:
            if replicas.topics.get(SHARE_STATE_TOPIC) is None:
                replicas.create_topic(SHARE_STATE_TOPIC, 1, configs={"cleanup.policy": "compact"}, is_internal=True)
            return replicas.get_log(SHARE_STATE_TOPIC, 0)

        return ShareStateLog(log, self.now_ms, exists=lambda: SHARE_STATE_TOPIC in replicas.topics)

    async def run_coordinators(self, nursery: trio.Nursery, suffix: str = "") -> None:
        """Start the coordinators' timers (recovery, session and transaction timeouts)."""
        await nursery.start(self.groups.run, name=f"group-coordinator{suffix}")
        await nursery.start(self.transactions.run, name=f"transaction-coordinator{suffix}")
        await nursery.start(self.shares.run, name=f"share-coordinator{suffix}")
        await nursery.start(self.dead_letters.run, name=f"share-dead-letters{suffix}")


class RequestPath:
    """One run of a broker's request path over a :class:`BrokerCore`.

    ``gate`` may wrap handlers once they are collected (a cluster node's NOT_COORDINATOR
    gate); ``cluster_view`` is None for a broker alone. ``own_quota_rates`` gives this run
    its own client-quota rates over the core's shared quota settings (a cluster node: Kafka
    measures each client's rates per broker); a Broker alone uses the store's own."""

    def __init__(
        self,
        config: BrokerConfig,
        core: BrokerCore,
        metadata_cache: MetadataCache,
        *,
        trio_listeners: Mapping[str, trio.abc.Listener] | None = None,
        cluster_view: ClusterView | None = None,
        gate: Callable[[dict[int, Any]], None] | None = None,
        own_quota_rates: bool = False,
        task_suffix: str = "",
    ) -> None:
        #: Appended to the names of its tasks (a cluster node's ``-<node id>``).
        self.task_suffix = task_suffix
        #: The listeners bound, by listener name, once ``run`` reported started.
        self.endpoints: dict[str, BoundEndpoint] = {}
        self._nursery: trio.Nursery | None = None
        self.metrics = BrokerMetrics()
        self.registry = ApiRegistry(supported_apis(config))
        self.request_channel = RequestChannel(config.queued_max_requests, config.queued_max_request_bytes)
        self.purgatory = Purgatory()
        self.context = ApiContext(
            config=config,
            registry=self.registry,
            metadata_cache=metadata_cache,
            purgatory=self.purgatory,
            channel=self.request_channel,
            metrics=self.metrics,
            replicas=core.replicas,
            groups=core.groups,
            transactions=core.transactions,
            shares=core.shares,
            features=core.features,
            cluster_view=cluster_view,
            now_ms=core.now_ms,
            state_changes=core.state_changes,
            scram_credentials=core.scram_credentials,
            acls=core.acls,
            client_quotas=core.client_quotas,
            throttler=RequestThrottler(
                core.client_quotas.new_managers() if own_quota_rates else core.client_quotas
            ),
        )
        self.apis = KafkaApis(self.context, API_FAMILIES)  # each family built on first use
        if gate is not None:
            self.apis.build_all()  # the gate wraps the families' own handlers
            gate(self.apis.handlers)
        self.handler_pool = RequestHandlerPool(config.num_io_threads, self.request_channel, self.apis)
        self.socket_server = SocketServer(
            config, self.registry, self.request_channel, self.metrics, trio_listeners,
            scram_credentials=core.scram_credentials,
        )

    async def run(self, *, task_status: trio.TaskStatus[dict[str, BoundEndpoint]] = trio.TASK_STATUS_IGNORED) -> None:
        """Start the purgatory, the handler pool and the socket server, in that order (each
        ready before the next starts); report the bound endpoints; run until :meth:`stop`
        (or until cancelled: cancelling skips the grace)."""
        suffix = self.task_suffix
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await nursery.start(self.purgatory.run, name=f"purgatory{suffix}")
            await nursery.start(self.handler_pool.run, name=f"request-handler-pool{suffix}")
            self.endpoints = await nursery.start(self.socket_server.run, name=f"socket-server{suffix}")
            task_status.started(self.endpoints)

    async def stop(self, grace: float) -> None:
        """The one stop sequence (module docstring); returns once ``run``'s tasks are told to
        end. ``grace`` bounds, in seconds, how long in-flight responses may take."""
        self.purgatory.complete_all()  # long polls and joins answer now, not after the grace
        self.socket_server.begin_shutdown(grace)
        await self.socket_server.stopped.wait()  # every connection answered or closed
        await self.request_channel.close()
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()  # handlers (what is queued has no one to answer)
