"""How a broker is put together: the one place that builds its parts from a BrokerConfig.

A standalone :class:`~trikafka.broker.Broker` and each node of an in-process cluster
(:mod:`trikafka.cluster`) are the same broker wired in two settings, so they are built here,
once — a feature that adds a store, a coordinator or an API family adds it here and both get
it. Two halves, split by lifetime:

* :class:`BrokerCore` — what the broker *serves*: the replica manager it is given, the group,
  transaction and share coordinators (:class:`Coordinators`: at start with a data directory,
  else on first use), the SCRAM users, the ACLs, the client quotas and the schema registry (on
  first use). A Broker has one; a cluster has one for all its nodes (its state outlives any
  broker stopping, as Kafka's outlives a broker in its internal topics and cluster metadata).
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

Below this module no part takes the whole broker config: the request path's parts get
small frozen settings records (:func:`socket_server_settings`, ``ConnectionSettings``), the
connection quotas and each listener's security built here, over the core's one set of SCRAM
users.

``RequestPath.aclose()`` is the one graceful stop: delayed operations answer now, the socket
server stops accepting, connections stop reading and in-flight responses get
``shutdown.grace.ms``; then the nursery is cancelled (what is still queued then belongs to
connections already closed: nobody could read its answer, so it is not applied). Cancelling
``RequestPath.run`` instead stops at once.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
import trio

from trikafka.clock import Clock
from trikafka.config import BrokerConfig
from trikafka.config.share import GroupConfigRules
from trikafka.coordinator.settings import GroupSettings, ShareSettings, TransactionSettings
from trikafka.errors import KafkaProtocolError
from trikafka.log.manager import LoadProgress, LogManager
from trikafka.metrics import BrokerMetrics
from trikafka.network.endpoints import BoundEndpoint
from trikafka.network.processor import ProcessorSettings
from trikafka.network.quotas import ConnectionQuotas
from trikafka.network.request_channel import RequestChannel
from trikafka.network.socket_server import SocketServer, SocketServerSettings
from trikafka.protocol.registry import ApiRegistry
from trikafka.security.acl_store import AclStore
from trikafka.security.files import write_text_atomically
from trikafka.security.listener import ListenerSecurity, listener_security
from trikafka.security.quota_store import ClientQuotas
from trikafka.security.sasl.credentials import ScramCredentials
from trikafka.server.api_table import API_FAMILIES, listed_min, supported_apis
from trikafka.server.awaitable import StateChanges
from trikafka.server.client_metrics import ClientMetricsManager
from trikafka.server.dynamic_broker_config import DynamicBrokerConfigs, applied, live_config
from trikafka.server.features import Features
from trikafka.server.kafka_apis import ApiContext, KafkaApis
from trikafka.server.metadata_cache import MetadataCache, new_cluster_id
from trikafka.server.purgatory import Purgatory
from trikafka.server.replica.cluster_view import ClusterView
from trikafka.server.replica.replica_manager import ReplicaManager
from trikafka.server.request_handler import RequestHandlerPool
from trikafka.server.throttling import RequestThrottler

if TYPE_CHECKING:
    from trikafka.coordinator.group_coordinator import GroupCoordinator
    from trikafka.coordinator.offsets import OffsetStore
    from trikafka.coordinator.ports import OffsetsPartitionLog
    from trikafka.coordinator.share.coordinator import ShareCoordinator
    from trikafka.coordinator.share.state_store import ShareStateLog
    from trikafka.coordinator.transactions.transaction_coordinator import TransactionCoordinator
    from trikafka.log.cleaner import LogCleaner
    from trikafka.registry.service import SchemaRegistry
    from trikafka.registry.validation import RecordValidator
    from trikafka.server.share_dlq import DeadLetterWriter

__all__ = [
    "API_FAMILIES",
    "BrokerCore",
    "Coordinators",
    "RequestPath",
    "connection_quotas",
    "follow_cleaner_configs",
    "group_settings",
    "load_meta_properties",
    "new_log_manager",
    "share_settings",
    "socket_server_settings",
    "transaction_settings",
]

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
    # written durably (temporary file, fsync, rename) before anything is served
    write_text_atomically(
        path, f"#\n#written by trikafka\ncluster.id={cluster_id}\nnode.id={config.node_id}\nversion=1\n"
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


def socket_server_settings(config: BrokerConfig) -> SocketServerSettings:
    """What the socket server and its processors read of ``config``."""
    return SocketServerSettings(
        listeners=config.listeners,
        num_network_threads=config.num_network_threads,
        processor=ProcessorSettings(
            max_request_size=config.socket_request_max_bytes,
            connections_max_idle_ms=config.connections_max_idle_ms,
            send_buffer_bytes=config.socket_send_buffer_bytes,
            receive_buffer_bytes=config.socket_receive_buffer_bytes,
            shutdown_grace_ms=config.shutdown_grace_ms,
        ),
    )


def connection_quotas(config: BrokerConfig) -> ConnectionQuotas:
    """max.connections, max.connections.per.ip(.overrides), max.connection.creation.rate."""
    return ConnectionQuotas(
        config.max_connections,
        config.max_connections_per_ip,
        config.max_connections_per_ip_overrides,
        config.max_connection_creation_rate,
        config.quota_window_num,
        config.quota_window_size_seconds,
    )


S = TypeVar("S")


def _settings(record: type[S], config: BrokerConfig, **parts: Any) -> S:
    """``record`` filled from ``config``: each field from the config attribute of its name
    (the settings records name their fields so), ``parts`` for the fields that are not keys."""
    fields = attrs.fields(record)  # type: ignore[arg-type]  # S is one of the attrs records above
    names = [field.name for field in fields if field.name not in parts]
    return record(**{name: getattr(config, name) for name in names}, **parts)


def group_settings(config: BrokerConfig) -> GroupSettings:
    """The group coordinator's settings (classic and consumer groups, offsets)."""
    return _settings(GroupSettings, config)


def transaction_settings(config: BrokerConfig) -> TransactionSettings:
    """The transaction coordinator's settings."""
    return _settings(TransactionSettings, config)


def share_settings(config: BrokerConfig) -> ShareSettings:
    """The share coordinator's settings, with the GROUP config rules under ``config``."""
    return _settings(ShareSettings, config, group_configs=GroupConfigRules.of(config))


@attrs.frozen
class Coordinators:
    """A core's group, transaction and share coordinators, built together by
    :meth:`BrokerCore.coordinators`. Importing and building them costs a fresh broker ~40 ms
    of start-up, and a broker without a data directory has nothing for them to recover, so such
    a broker builds them on first use: the first request of a family that uses them (groups,
    offsets, share groups, transactions, InitProducerId; ``LazyFamily.coordinators``), the first
    transactional Produce, or anything reading ``core.groups`` and the like. A broker with a data
    directory builds them at start, so committed offsets and transaction state are loaded (and
    open transactions aborted) before its listeners are bound, as always."""

    groups: GroupCoordinator
    transactions: TransactionCoordinator
    #: Share groups (KIP-932): membership, share partitions, share sessions.
    shares: ShareCoordinator
    dead_letters: DeadLetterWriter


class BrokerCore:
    """The coordinators and stores over a replica manager (see the module docstring).

    ``state_changes`` is bumped after every response and every timer-driven coordinator
    change; the ``wait_for_*`` methods of Broker and Cluster re-check at each bump."""

    def __init__(self, config: BrokerConfig, replicas: ReplicaManager, clock: Clock) -> None:
        self.config = config
        self.replicas = replicas
        self.now_ms = clock
        self.state_changes = StateChanges()
        #: The group, transaction and share coordinators (:class:`Coordinators`): built at
        #: start with a data directory, else on first use (``groups`` etc. below).
        self._coordinators: Coordinators | None = None
        self._built = trio.Event()  # set when they are built
        self._started = trio.Event()  # set once their ``run`` reported started (recovered)
        replicas.transaction_verifier = self._verify_produce
        #: Feature levels (KIP-584), one set for every node of a cluster.
        self.features = Features(config)
        #: Dynamic broker configs (AlterConfigs on BROKER), kept in the data directory; the
        #: topic defaults among them are applied to the replicas before anything is served.
        self.dynamic_configs = DynamicBrokerConfigs.in_data_dir(config.log_dirs)
        replicas.alter_broker_config(applied(self.dynamic_configs.effective(config.node_id)))
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
        #: Client telemetry (KIP-714): subscriptions (kept with the quotas), client instances.
        self.client_metrics = ClientMetricsManager.in_data_dir(
            config.log_dirs, clock, config.telemetry_max_bytes, config.client_telemetry_enable
        )
        self._schemas: SchemaRegistry | None = None
        self._record_validator: RecordValidator | None = None
        replicas.record_validator = self._validate_records

    def coordinators(self) -> Coordinators:
        """The coordinators, imported and built now if they were not yet; their timers start
        (``run_coordinators``) at the next checkpoint of the broker's nursery."""
        if self._coordinators is None:
            self._coordinators = self._build_coordinators()
            self._built.set()
        return self._coordinators

    def _build_coordinators(self) -> Coordinators:
        # Imported here: they cost a fresh broker ~40 ms (see Coordinators).
        from trikafka.coordinator.group_coordinator import GroupCoordinator
        from trikafka.coordinator.share.coordinator import ShareCoordinator
        from trikafka.coordinator.transactions.transaction_coordinator import TransactionCoordinator
        from trikafka.coordinator.transactions.transaction_state import TransactionLog
        from trikafka.server.share_dlq import DeadLetterWriter
        from trikafka.server.share_reader import initial_offset

        config, replicas, clock, bump = self.config, self.replicas, self.now_ms, self.state_changes.bump
        groups = GroupCoordinator(
            group_settings(config), self._offset_store(), clock, on_state_change=bump,
            topic_partitions=lambda: {t.name: t.partitions for t in replicas.topics},
        )
        transactions = TransactionCoordinator(
            transaction_settings(config),
            TransactionLog.for_log_dirs(config.log_dirs),
            producer_ids=replicas.producer_ids,
            markers=replicas,  # markers go to each partition's leader (replicated in a cluster)
            groups=groups,
            now_ms=clock,
            on_state_change=bump,
        )
        dead_letters = DeadLetterWriter(replicas, clock)

        def share_start(group_id: str, topic: str, partition: int) -> int | None:
            """Where a new share partition starts: share.auto.offset.reset over its log, read
            when a member first subscribes (Kafka's InitializeShareGroupState), so records
            produced between the heartbeat that assigns it and the first ShareFetch are not
            skipped by ``latest``; None while the partition has no log here (not assigned yet)."""
            try:
                partition_log = replicas.get_log(topic, partition)
            except KafkaProtocolError:
                return None
            reset = shares.configs(group_id)["share.auto.offset.reset"]
            return initial_offset(partition_log, reset, clock())

        shares = ShareCoordinator(
            share_settings(config), lambda: {t.name: t.partitions for t in replicas.topics},
            store=self._share_state_store(), on_state_change=bump, on_archived=dead_letters.archived,
            initial_offset=share_start,
        )
        dead_letters.shares = shares
        #: GROUP configs of every kind of group are kept by the share coordinator.
        groups.consumer.group_overrides = lambda group_id: shares.group_configs.get(group_id, {})
        return Coordinators(groups, transactions, shares, dead_letters)

    @property
    def groups(self) -> GroupCoordinator:
        return self.coordinators().groups

    @property
    def transactions(self) -> TransactionCoordinator:
        return self.coordinators().transactions

    @property
    def shares(self) -> ShareCoordinator:
        return self.coordinators().shares

    @property
    def dead_letters(self) -> DeadLetterWriter:
        return self.coordinators().dead_letters

    async def coordinators_started(self) -> None:
        """Build the coordinators if need be and wait until they have recovered their state
        and started their timers (the API families that use them wait on this once)."""
        self.coordinators()
        await self._started.wait()

    def _offset_store(self) -> OffsetStore:
        """``__consumer_offsets``: an internal, compacted topic, created — as in Kafka — the
        first time a group needs it, so a fresh broker lists no topics."""
        from trikafka.coordinator.offsets import OFFSETS_TOPIC, OffsetStore

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
        from trikafka.coordinator.share.state_store import SHARE_STATE_TOPIC, ShareStateLog


        def log() -> OffsetsPartitionLog:
            if replicas.topics.get(SHARE_STATE_TOPIC) is None:
                replicas.create_topic(SHARE_STATE_TOPIC, 1, configs={"cleanup.policy": "compact"}, is_internal=True)
            return replicas.get_log(SHARE_STATE_TOPIC, 0)

        return ShareStateLog(log, self.now_ms, exists=lambda: SHARE_STATE_TOPIC in replicas.topics)

    def _verify_produce(self, *args: Any, **kwargs: Any) -> None:
        """The replica manager's ``transaction_verifier`` (a transactional or control batch)."""
        self.transactions.verify_produce(*args, **kwargs)

    @property
    def schemas(self) -> SchemaRegistry:
        """The schema registry over ``_schemas`` (served over HTTP with schema.registry.port),
        imported and built on first use: a broker that never validates records nor serves the
        registry does not pay for it at start."""
        if self._schemas is None:
            from trikafka.registry.service import SchemaRegistry

            self._schemas = SchemaRegistry(self._schemas_log, self.now_ms)
        return self._schemas

    def _validate_records(
        self, topic: str, configs: Mapping[str, Any], data: bytes | bytearray, headers: Any
    ) -> None:
        """The replica manager's ``record_validator``: the registry's (registry/validation.py),
        built on the first batch of a topic that asks for schema validation."""
        validate = self._record_validator
        if validate is None:
            if not any(configs.get(f"confluent.{f}.schema.validation") is True for f in ("key", "value")):
                return
            from trikafka.registry.validation import record_validator

            validate = self._record_validator = record_validator(self.schemas)
        validate(topic, configs, data, headers)

    def _schemas_log(self, create: bool) -> Any:
        """Partition 0 of ``_schemas``, created (compacted, one partition, as Confluent's
        registry creates it) when ``create``; None while it does not exist."""
        from trikafka.registry.store import SCHEMAS_TOPIC

        replicas = self.replicas
        if replicas.topics.get(SCHEMAS_TOPIC) is None:
            if not create:
                return None
            replicas.create_topic(SCHEMAS_TOPIC, 1, configs={"cleanup.policy": "compact"})
        return replicas.get_log(SCHEMAS_TOPIC, 0)

    async def run_coordinators(self, nursery: trio.Nursery, suffix: str = "") -> None:
        """Start the coordinators' timers (recovery, session and transaction timeouts): now
        with a data directory (there is state to recover before the listeners are bound) or
        when something built them already; else once their first use builds them."""
        if self.config.log_dirs or self._coordinators is not None:
            await self._start_coordinators(nursery, suffix)
        else:
            nursery.start_soon(self._start_when_built, nursery, suffix, name=f"coordinators-on-first-use{suffix}")

    async def _start_when_built(self, nursery: trio.Nursery, suffix: str) -> None:
        await self._built.wait()
        await self._start_coordinators(nursery, suffix)

    async def _start_coordinators(self, nursery: trio.Nursery, suffix: str) -> None:
        c = self.coordinators()
        await nursery.start(c.groups.run, name=f"group-coordinator{suffix}")
        await nursery.start(c.transactions.run, name=f"transaction-coordinator{suffix}")
        await nursery.start(c.shares.run, name=f"share-coordinator{suffix}")
        await nursery.start(c.dead_letters.run, name=f"share-dead-letters{suffix}")
        self._started.set()


def _limit_connections(socket_server: SocketServer, config: BrokerConfig, overrides: dict[str, str]) -> None:
    live = live_config(config, overrides)
    socket_server.quotas.reconfigure(
        live.max_connections, live.max_connections_per_ip, live.max_connections_per_ip_overrides,
        live.max_connection_creation_rate,
    )


def follow_cleaner_configs(core: BrokerCore, config: BrokerConfig, cleaner: LogCleaner) -> None:
    """``cleaner`` (broker ``config.node_id``'s) follows its dynamic ``log.cleaner.backoff.ms``
    and ``log.cleaner.dedupe.buffer.size``, the kept ones from the start."""

    def apply(overrides: dict[str, str]) -> None:
        live = live_config(config, overrides)
        cleaner.reconfigure(
            backoff_ms=live.log_cleaner_backoff_ms, dedupe_buffer_size=live.log_cleaner_dedupe_buffer_size
        )

    core.dynamic_configs.subscribe(config.node_id, apply)


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
        trio_listeners: Mapping[str, trio.abc.Listener[Any]] | None = None,
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
        self.registry = ApiRegistry(supported_apis(config), listed_min(config))
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
            coordinators=core,
            features=core.features,
            dynamic_configs=core.dynamic_configs,
            cluster_view=cluster_view,
            now_ms=core.now_ms,
            state_changes=core.state_changes,
            scram_credentials=core.scram_credentials,
            acls=core.acls,
            client_quotas=core.client_quotas,
            client_metrics=core.client_metrics,
            throttler=RequestThrottler(
                core.client_quotas.new_managers() if own_quota_rates else core.client_quotas
            ),
        )
        self.apis = KafkaApis(self.context, API_FAMILIES)  # each family built on first use
        if gate is not None:
            self.apis.build_all()  # the gate wraps the families' own handlers
            gate(self.apis.handlers)
        self.handler_pool = RequestHandlerPool(config.num_io_threads, self.request_channel, self.apis)
        # TLS contexts and SASL settings now, when the broker is built: a bad keystore is a
        # ConfigError before anything is bound. SASL/SCRAM reads the core's one set of users.
        security: dict[str, ListenerSecurity] = {
            spec.name: listener_security(config.security, spec.name, core.scram_credentials)
            for spec in config.listeners
        }
        self.socket_server = SocketServer(
            socket_server_settings(config), self.registry, self.request_channel, self.metrics,
            connection_quotas(config), security, trio_listeners,
            disconnect_listeners=(core.client_metrics.connection_closed,),
        )
        # the connection limits follow this broker's dynamic max.connections and friends
        limit = functools.partial(_limit_connections, self.socket_server, config)
        core.dynamic_configs.subscribe(config.node_id, limit)

    async def run(self, *, task_status: trio.TaskStatus[dict[str, BoundEndpoint]] = trio.TASK_STATUS_IGNORED) -> None:
        """Start the purgatory, the handler pool and the socket server, in that order (each
        ready before the next starts); report the bound endpoints; run until :meth:`aclose`
        (or until cancelled: cancelling skips the grace)."""
        suffix = self.task_suffix
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await nursery.start(self.purgatory.run, name=f"purgatory{suffix}")
            await nursery.start(self.handler_pool.run, name=f"request-handler-pool{suffix}")
            self.endpoints = await nursery.start(self.socket_server.run, name=f"socket-server{suffix}")
            task_status.started(self.endpoints)

    async def aclose(self) -> None:
        """The graceful stop (module docstring): delayed operations answer now, the socket
        server stops accepting, connections stop reading and write what is in flight within
        shutdown.grace.ms; then the handlers and the purgatory are cancelled. Returns once
        every connection is closed and ``run``'s tasks are told to end."""
        self.purgatory.complete_all()  # long polls and joins answer now, not after the grace
        await self.socket_server.aclose()  # every connection answered or closed
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()  # handlers (what is queued has no one to answer)
