"""The broker: builds every part from a BrokerConfig and runs them in one nursery tree.

::

    Broker.run                          (root nursery; stops everything on exit)
    ├── LogManager              retention, time-based flush, checkpoints; flush and close on exit
    ├── Purgatory               one task per delayed operation (long-poll Fetch, JoinGroup, ...)
    ├── GroupCoordinator        session and rebalance deadlines, offset expiry
    ├── TransactionCoordinator  recovery, transaction timeouts, fencing aborts (markers)
    ├── RequestHandlerPool      num.io.threads handler tasks  ◄── requests ── shared channel
    ├── SocketServer            Acceptors and Processors (see network/socket_server.py)
    └── HttpServer              /metrics and mounted apps, when metrics.port is set (web/)

Parts start in dependency order with ``nursery.start`` so that "ready" means ready: when
``run`` reports started, every listener is bound and every handler is waiting.

Graceful stop (``stop()``, SIGINT/SIGTERM in the CLI, leaving ``open_broker``): acceptors
stop; processors stop reading, finish in-flight responses within ``shutdown.grace.ms`` and
close their connections; then the request channel closes and everything else — handlers,
purgatory, coordinators, the log manager — is cancelled. Requests still queued at that point
belong to connections that are already closed (their in-flight responses had the grace to
finish), so no answer could reach their clients: they are dropped unprocessed rather than
applied behind the client's back (a Produce nobody acknowledges would be retried and
duplicated). Cancelling ``run`` from outside skips the grace: stop is cancellation.

Wiring: every API family gets one typed :class:`~trikafka.server.kafka_apis.ApiContext`; the
one wall clock (:func:`trikafka.clock.now_ms`, epoch ms following trio's clock) is injected
into the log manager, the coordinators and the APIs.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

from trikafka.clock import Clock, now_ms
from trikafka.config import BrokerConfig
from trikafka.coordinator.group_coordinator import GroupCoordinator
from trikafka.coordinator.offsets import OFFSETS_TOPIC, OffsetStore
from trikafka.coordinator.ports import OffsetsPartitionLog
from trikafka.coordinator.transaction_coordinator import TransactionCoordinator
from trikafka.coordinator.transaction_state import TransactionLog
from trikafka.log.cleaner import LogCleaner
from trikafka.log.manager import LoadProgress, LogManager
from trikafka.metrics import BrokerMetrics
from trikafka.network.endpoints import BoundEndpoint
from trikafka.network.request_channel import RequestChannel
from trikafka.network.socket_server import SocketServer
from trikafka.protocol.registry import ApiRegistry
from trikafka.security.acl_store import AclStore
from trikafka.security.quota_store import ClientQuotas
from trikafka.security.sasl.credentials import ScramCredentials
from trikafka.server.apis.acls import AclApis
from trikafka.server.apis.configs import ClusterApis, ConfigApis
from trikafka.server.apis.consumer_groups import ConsumerGroupApis, supported_apis
from trikafka.server.apis.fetch import FetchApis
from trikafka.server.apis.group_offsets import GroupOffsetApis
from trikafka.server.apis.groups import GroupApis
from trikafka.server.apis.metadata import MetadataApis
from trikafka.server.apis.offsets import OffsetApis
from trikafka.server.apis.partition_state import PartitionStateApis
from trikafka.server.apis.produce import ProduceApis
from trikafka.server.apis.producers import ProducerApis
from trikafka.server.apis.quotas import ClientQuotaApis
from trikafka.server.apis.reassignments import ReassignmentApis
from trikafka.server.apis.sasl import SaslApis
from trikafka.server.apis.scram import ScramApis
from trikafka.server.apis.topics import TopicAdminApis
from trikafka.server.apis.transactions import TransactionApis
from trikafka.server.apis.versions import ApiVersionsApis
from trikafka.server.awaitable import AwaitableState, StateChanges
from trikafka.server.kafka_apis import ApiContext, KafkaApis
from trikafka.server.metadata_cache import MetadataCache, new_cluster_id
from trikafka.server.purgatory import Purgatory
from trikafka.server.replica_manager import ReplicaManager
from trikafka.server.request_handler import RequestHandlerPool
from trikafka.web import HttpServer, metrics_app

__all__ = ["API_FAMILIES", "Broker", "BrokerStatistics", "open_broker", "load_meta_properties"]

log = logging.getLogger("trikafka.broker")

#: Every API family a broker serves (an in-process cluster's brokers serve the same).
API_FAMILIES = (
    ApiVersionsApis,
    MetadataApis,
    TopicAdminApis,
    ProduceApis,
    ProducerApis,
    FetchApis,
    OffsetApis,
    ConfigApis,
    ClusterApis,
    GroupApis,
    ConsumerGroupApis,
    GroupOffsetApis,
    TransactionApis,
    PartitionStateApis,
    ReassignmentApis,
    SaslApis,
    ScramApis,
    AclApis,
    ClientQuotaApis,
)


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


@attrs.frozen
class BrokerStatistics:
    request_queue_size: int
    network_processor_avg_idle_percent: float
    request_handler_avg_idle_percent: float
    connections: Mapping[str, Any]
    requests: Mapping[str, Any]
    purgatory_size: int


class Broker(AwaitableState):
    def __init__(
        self,
        config: BrokerConfig | None = None,
        *,
        trio_listeners: Mapping[str, trio.abc.Listener] | None = None,
        clock: Clock = now_ms,
        load_progress: LoadProgress | None = None,
    ) -> None:
        """``load_progress`` hears how loading the log directories goes (see LogManager)."""
        self.config = config or BrokerConfig()
        #: Epoch milliseconds following trio's clock, for every timestamp the broker makes.
        self.now_ms: Clock = clock
        self.metrics = BrokerMetrics()
        self.registry = ApiRegistry(supported_apis(self.config))
        self.cluster_id = load_meta_properties(self.config)
        self.request_channel = RequestChannel(
            self.config.queued_max_requests, self.config.queued_max_request_bytes
        )
        self.metadata_cache = MetadataCache(self.config, self.cluster_id)
        self.purgatory = Purgatory()
        self.log_manager = LogManager(
            self.config.log_dirs,
            clock=self.now_ms,
            retention_check_interval_ms=self.config.log_retention_check_interval_ms,
            flush_scheduler_interval_ms=self.config.log_flush_scheduler_interval_ms,
            flush_offset_checkpoint_interval_ms=self.config.log_flush_offset_checkpoint_interval_ms,
            progress=load_progress,
        )
        self.log_cleaner = LogCleaner(
            self.log_manager,
            backoff_ms=self.config.log_cleaner_backoff_ms,
            clock=self.now_ms,
            dedupe_buffer_size=self.config.log_cleaner_dedupe_buffer_size,
        )
        self.replica_manager = ReplicaManager(self.config, self.log_manager)
        #: Bumped after every response and every timer-driven coordinator change; the
        #: ``wait_for_*`` methods re-check at each bump.
        state_changes = StateChanges()
        self.group_coordinator = GroupCoordinator(
            self.config, self._offset_store(), self.now_ms, on_state_change=state_changes.bump,
            topic_partitions=lambda: {t.name: t.partitions for t in self.replica_manager.topics},
        )
        self.transaction_coordinator = TransactionCoordinator(
            self.config,
            TransactionLog.for_log_dirs(self.config.log_dirs),
            producer_ids=self.replica_manager.producer_ids,
            markers=self.replica_manager,
            groups=self.group_coordinator,
            now_ms=self.now_ms,
            on_state_change=state_changes.bump,
        )
        self.replica_manager.transaction_verifier = self.transaction_coordinator.verify_produce
        self.context = ApiContext(
            config=self.config,
            registry=self.registry,
            metadata_cache=self.metadata_cache,
            purgatory=self.purgatory,
            channel=self.request_channel,
            metrics=self.metrics,
            replicas=self.replica_manager,
            groups=self.group_coordinator,
            transactions=self.transaction_coordinator,
            now_ms=self.now_ms,
            state_changes=state_changes,
            scram_credentials=ScramCredentials.from_config(
                self.config.security, [s.name for s in self.config.listeners], self.config.log_dirs
            ),
            acls=AclStore.from_config(self.config.security, self.config.log_dirs),
            client_quotas=ClientQuotas.in_data_dir(
                self.config.log_dirs, self.config.quota_window_num, self.config.quota_window_size_seconds
            ),
        )
        self.apis = KafkaApis(self.context, [family(self.context) for family in API_FAMILIES])
        self.faults = self.apis.faults  # injected faults and the request recorder (tests)
        self.handler_pool = RequestHandlerPool(
            self.config.num_io_threads, self.request_channel, self.apis
        )
        self.socket_server = SocketServer(
            self.config, self.registry, self.request_channel, self.metrics, trio_listeners,
            scram_credentials=self.context.scram_credentials,
        )
        #: ``/metrics`` and whatever else is mounted (``http_server.mount("/ui", app)``);
        #: it runs when ``metrics.port`` is not -1.
        self.http_server = HttpServer(self.config.metrics_host, max(self.config.metrics_port, 0))
        self._stop_requested = trio.Event()
        self.stopped = trio.Event()
        self.endpoints: dict[str, BoundEndpoint] = {}

    def _offset_store(self) -> OffsetStore:
        """``__consumer_offsets``: an internal, compacted topic, created — as in Kafka — the
        first time a group needs it, so a fresh broker lists no topics."""
        replicas = self.replica_manager
        existing = replicas.topics.get(OFFSETS_TOPIC)
        partitions = existing.partitions if existing else self.config.offsets_topic_num_partitions

        def log_for(partition: int) -> OffsetsPartitionLog:
            if replicas.topics.get(OFFSETS_TOPIC) is None:
                replicas.create_topic(
                    OFFSETS_TOPIC,
                    partitions,
                    configs={"cleanup.policy": "compact", "segment.bytes": str(self.config.offsets_topic_segment_bytes)},
                    is_internal=True,
                )
            return replicas.get_log(OFFSETS_TOPIC, partition)

        return OffsetStore(
            partitions, log_for, self.now_ms, exists=lambda: OFFSETS_TOPIC in replicas.topics
        )

    # --- lifecycle ---------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[Broker] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(self.log_manager.run, name="log-manager")
                if self.config.log_cleaner_enable:
                    await nursery.start(self.log_cleaner.run, name="log-cleaner")
                await nursery.start(self.purgatory.run, name="purgatory")
                await nursery.start(self.group_coordinator.run, name="group-coordinator")
                await nursery.start(self.transaction_coordinator.run, name="transaction-coordinator")
                await nursery.start(self.handler_pool.run, name="request-handler-pool")
                self.endpoints = await nursery.start(self.socket_server.run, name="socket-server")
                self.metadata_cache.set_bound_endpoints(self.endpoints)
                if self.config.metrics_port >= 0:
                    self.http_server.mount("/metrics", metrics_app(self))
                    await nursery.start(self.http_server.run, name="http-server")
                log.info(
                    "broker %d of cluster %s started: %s",
                    self.config.node_id,
                    self.cluster_id,
                    ", ".join(map(str, self.endpoints.values())),
                )
                task_status.started(self)
                await self._stop_requested.wait()
                await self._shutdown(nursery)
        finally:
            self.stopped.set()

    async def _shutdown(self, nursery: trio.Nursery) -> None:
        log.info("broker %d shutting down", self.config.node_id)
        self.http_server.stop()  # it finishes in-flight scrapes while connections drain
        self.purgatory.complete_all()  # long polls and joins answer now, not after the grace
        self.socket_server.begin_shutdown(self.config.shutdown_grace_ms / 1000)
        await self.socket_server.stopped.wait()  # every connection answered or closed
        await self.request_channel.close()
        nursery.cancel_scope.cancel()  # handlers (what is queued has no one to answer), the rest
        log.info("broker %d stopped", self.config.node_id)

    def stop(self) -> None:
        """Begin a graceful stop; ``run`` returns when it is done."""
        self._stop_requested.set()

    async def serve(self, *, task_status: trio.TaskStatus[Broker] = trio.TASK_STATUS_IGNORED) -> None:
        """Run until SIGINT or SIGTERM (graceful); a second signal stops at once."""
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:
                await nursery.start(self.run)
                task_status.started(self)

                async def watch_signals() -> None:
                    async for signum in signals:
                        if self._stop_requested.is_set():
                            log.warning("second %s: stopping now", signal.Signals(signum).name)
                            nursery.cancel_scope.cancel()
                            return
                        log.info("%s: stopping gracefully", signal.Signals(signum).name)
                        self.stop()

                nursery.start_soon(watch_signals)
                await self.stopped.wait()
                nursery.cancel_scope.cancel()

    # --- what users read ---------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound port of the first listener (handy with port 0)."""
        return next(iter(self.endpoints.values())).port

    def bootstrap_servers(self, listener: str | None = None) -> str:
        endpoint = self.endpoints[listener] if listener else next(iter(self.endpoints.values()))
        return f"{endpoint.host}:{endpoint.port}"

    def statistics(self) -> BrokerStatistics:
        processors = [p.statistics() for p in self.socket_server.all_processors()]
        idle = sum(p.idle_percent for p in processors) / len(processors) if processors else 1.0
        return BrokerStatistics(
            request_queue_size=self.request_channel.statistics().queue_size,
            network_processor_avg_idle_percent=idle,
            request_handler_avg_idle_percent=self.handler_pool.statistics().idle_percent,
            connections={
                name: attrs.asdict(m) for name, m in self.metrics.connections.items()
            },
            requests={name: m.snapshot() for name, m in self.metrics.requests.items()},
            purgatory_size=self.purgatory.statistics().delayed,
        )


@asynccontextmanager
async def open_broker(
    config: BrokerConfig | Mapping[str, Any] | None = None,
    *,
    trio_listeners: Mapping[str, trio.abc.Listener] | None = None,
    **overrides: Any,
) -> AsyncIterator[Broker]:
    """Run a broker for the duration of the block; every listener is bound on entry.

    ``config`` is a BrokerConfig or a mapping of Kafka keys; keyword overrides accept either
    spelling (``num_io_threads=2``). With no ``listeners`` given, the broker binds an
    ephemeral port on 127.0.0.1 — read it from ``broker.port``. ``trio_listeners`` maps a
    listener name to a ready ``trio.abc.Listener`` (the in-memory one, TLS) to use instead of
    binding a socket for it.
    """
    if config is None:
        config = BrokerConfig(listeners="PLAINTEXT://127.0.0.1:0")
    elif isinstance(config, Mapping):
        config = BrokerConfig.from_mapping(config)
    if overrides:
        config = config.with_overrides(**overrides)
    broker = Broker(config, trio_listeners=trio_listeners)
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.run)
        try:
            yield broker
        finally:
            broker.stop()
