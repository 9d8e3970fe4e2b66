"""Clusters for synchronous tests: one broker here, several through ``trikafka.cluster``.

The contract this module expects of ``trikafka.cluster`` (imported lazily, so this module
works before and after it exists)::

    async with open_cluster(brokers=N, **config) as cluster:
        cluster.nodes                 # node id → running broker node, each with its own
                                      # request path (Faults.of(node): faults, recorder)
        cluster.wait_for_...          # AwaitableState over the cluster's shared state
                                      # (else each node's own is used)
        cluster.bootstrap_servers     # "host:port,host:port,..." (a str property)
        cluster.move_leader(...)      # any other control, sync or async, is passed through

(a ``brokers`` list of Broker objects works in place of ``nodes``; see ``targets.py``).

``config`` are Kafka keys over the test defaults (in memory, free ports on 127.0.0.1, no
initial rebalance delay). With ``brokers=1`` and no cluster module, the cluster is a single
broker.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from trikafka.broker import open_broker
from trikafka.testing.surface import BrokerControls, asyncio_hosted, thread_hosted
from trikafka.testing.targets import BrokerTarget, broker_targets, target_by_id
from trikafka.testing.thread import BrokerHandle, TrioThread, test_broker_config

if TYPE_CHECKING:
    from trikafka.testing.hosted_types import AsyncClusterControls, HostedControls
else:  # the methods are set by thread_hosted/asyncio_hosted; these bases are for type checkers
    HostedControls = AsyncClusterControls = object

__all__ = ["AsyncClusterHandle", "ClusterHandle", "ClusterUnavailableError", "start_cluster"]


class ClusterUnavailableError(RuntimeError):
    """Several brokers were asked for, and this trikafka has no ``trikafka.cluster``."""


@asynccontextmanager
async def _one_broker(config: dict[str, Any], kafka_defaults: bool) -> AsyncIterator[Any]:
    async with open_broker(test_broker_config(config, kafka_defaults=kafka_defaults)) as broker:
        yield broker


def _open_cluster(brokers: int, config: dict[str, Any], kafka_defaults: bool = False) -> Any:
    try:
        from trikafka.cluster import open_cluster
    except ImportError as exc:
        if brokers == 1:
            return _one_broker(config, kafka_defaults)
        raise ClusterUnavailableError(
            f"kafka_cluster(brokers={brokers}) needs trikafka.cluster.open_cluster, which this "
            f"installation of trikafka does not have ({exc}); brokers=1 works"
        ) from None
    from trikafka.testing.thread import TEST_DEFAULTS

    # As keyword arguments: ``racks=`` (kafka_cluster(racks=[...])) is open_cluster's own.
    return _serving_registry(open_cluster(brokers, kafka_defaults=kafka_defaults, **{**TEST_DEFAULTS, **config}))


@asynccontextmanager
async def _serving_registry(opener: Any) -> AsyncIterator[Any]:
    """The cluster, and with ``schema.registry.port`` one Schema Registry server per broker
    over the cluster's one registry (free ports when the port is 0, else port + i); their
    URLs in ``cluster.schema_registry_urls``."""
    import trio

    from trikafka.web import HttpServer, schema_registry_app
    from trikafka.web.security import http_security

    async with opener as cluster, trio.open_nursery() as nursery:
        config = cluster.config
        cluster.schema_registry_urls = []
        if config.schema_registry_port >= 0:
            secured = http_security(config, cluster.core.scram_credentials)
            acls = cluster.core.acls
            app = schema_registry_app(cluster.core.schemas, acls.authorizer if acls else None)
            for i, _ in enumerate(cluster.nodes):
                port = config.schema_registry_port + i if config.schema_registry_port else 0
                server = HttpServer(config.metrics_host, port, {"/": app}, **secured.server_options())
                await nursery.start(server.run)
                cluster.schema_registry_urls.append(server.url)
        yield cluster
        nursery.cancel_scope.cancel()


class ClusterHandle(HostedControls):
    """A cluster on a background Trio thread: the controls of
    :class:`~trikafka.testing.surface.BrokerControls` cluster-wide (a fault goes to every
    broker), the cluster's own controls as plain calls, ``brokers[i]`` for broker ``i``
    and ``.aio`` for all of it as coroutines."""

    def __init__(self, thread: TrioThread, cluster: Any) -> None:
        self.thread = thread
        self.cluster = cluster
        node_ids = thread.call(lambda: [t.node_id for t in broker_targets(cluster)])
        self.brokers = [BrokerHandle(thread, self._target_of(i)) for i in node_ids]
        self.aio = AsyncClusterHandle(self)

    def _target_of(self, node_id: int) -> Callable[[], BrokerTarget]:
        return lambda: target_by_id(self.cluster, node_id)

    def _controls(self) -> BrokerControls:
        """Cluster-wide controls over the brokers the cluster has at each call (a broker it
        restarted has new faults: a scenario's later steps reach it)."""
        cluster = self.cluster
        return BrokerControls(
            lambda: [t.faults for t in broker_targets(cluster)], lambda: broker_targets(cluster)[0].state
        )

    @property
    def bootstrap_servers(self) -> str:
        result: str = self.thread.call(lambda: self.cluster.bootstrap_servers)
        return result

    @property
    def schema_registry_urls(self) -> list[str]:
        """One Schema Registry URL per broker (all serve the cluster's one registry)."""
        def read() -> list[str]:
            urls = getattr(self.cluster, "schema_registry_urls", None)
            if urls is None:  # a single Broker
                urls = [self.cluster.schema_registry_url] if self.cluster.schema_registry_url else []
            return list(urls)

        return self.thread.call(read)

    @property
    def schema_registry_url(self) -> str:
        """The first broker's Schema Registry URL (``schema.registry.port``; the
        ``kafka_cluster`` fixture serves it on free ports)."""
        urls = self.schema_registry_urls
        if not urls:
            raise RuntimeError("this cluster serves no Schema Registry: set schema.registry.port (0: free ports)")
        return urls[0]

    # --- the cluster's own controls (trikafka.cluster.controls), as plain calls -------------

    def _cluster_call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        method = self.thread.call(lambda: getattr(self.cluster, name, None))
        if method is None:
            raise ClusterUnavailableError(f"{name}() needs a cluster from trikafka.cluster; this is one broker")
        if inspect.iscoroutinefunction(method):
            return self.thread.run(method, *args, **kwargs)
        return self.thread.call(method, *args, **kwargs)

    def stop_broker(self, node_id: int) -> None:
        """Stop broker ``node_id`` (its partitions lead elsewhere); back with :meth:`start_broker`."""
        self._cluster_call("stop_broker", node_id)

    def start_broker(self, node_id: int) -> None:
        """Start a stopped broker again, on its old address."""
        self._cluster_call("start_broker", node_id)

    def move_leader(self, topic: str, partition: int, to: int) -> None:
        self._cluster_call("move_leader", topic, partition, to)

    def move_coordinator(self, key: str, to: int, *, key_type: str | None = None) -> None:
        self._cluster_call("move_coordinator", key, to, key_type=key_type)

    def shrink_isr(self, topic: str, partition: int, to: Iterable[int]) -> None:
        self._cluster_call("shrink_isr", topic, partition, to)

    def expand_isr(self, topic: str, partition: int, to: Iterable[int] | None = None) -> None:
        self._cluster_call("expand_isr", topic, partition, to)

    def leader(self, topic: str, partition: int) -> int:
        result: int = self._cluster_call("leader", topic, partition)
        return result

    if not TYPE_CHECKING:  # hidden from type checkers: they see the controls named above

        def __getattr__(self, name: str) -> Any:
            """Any other attribute of the cluster: values as they are, methods as plain calls."""
            if name.startswith("_"):
                raise AttributeError(name)
            target = self.thread.call(lambda: getattr(self.cluster, name))
            if not callable(target):
                return target
            return lambda *args, **kwargs: self._cluster_call(name, *args, **kwargs)

    def stop(self) -> None:
        self.thread.stop()


thread_hosted(ClusterHandle)


class AsyncClusterHandle(AsyncClusterControls):
    """``cluster.aio``: the cluster handle's methods as coroutines, for asyncio tests."""

    def __init__(self, handle: ClusterHandle) -> None:
        self._handle = handle


asyncio_hosted(AsyncClusterHandle, ClusterHandle)


def start_cluster(
    brokers: int = 1, config: Mapping[str, object] | None = None, *, record: bool = True, kafka_defaults: bool = False
) -> ClusterHandle:
    """Start ``brokers`` brokers on a background Trio thread (see the module docstring);
    with ``record`` every broker records requests from the start (a broker the cluster
    restarts later starts without recording). Keys not given take the dev defaults
    (``kafka_defaults=True``: Kafka's own)."""
    if isinstance(brokers, bool) or not isinstance(brokers, int) or brokers < 1:
        raise ValueError(f"brokers must be a positive int, not {brokers!r}")
    opener = _open_cluster(brokers, dict(config or {}), kafka_defaults)
    thread = TrioThread(f"trikafka-cluster-{brokers}")
    cluster = thread.start(lambda: opener)
    try:
        if record:

            def start_recording() -> None:
                for target in broker_targets(cluster):
                    target.faults.recorder.start()

            thread.call(start_recording)
        return ClusterHandle(thread, cluster)
    except BaseException:
        thread.stop()
        raise
