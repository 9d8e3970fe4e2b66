"""Clusters for synchronous tests: one broker here, several through ``trikafka.cluster``.

The contract this module expects of ``trikafka.cluster`` (imported lazily, so this module
works before and after it exists)::

    async with open_cluster(brokers=N, **config) as cluster:
        cluster.nodes                 # node id → running broker node, each with its own
                                      # request path (Faults.of(node): faults, recorder)
        cluster.wait_for_...          # AwaitableState over the cluster's shared state
                                      # (else each node's own is used)
        cluster.bootstrap_servers     # "host:port,host:port,..." (attribute or method)
        cluster.move_leader(...)      # any other control, sync or async, is passed through

(a ``brokers`` list of Broker objects works in place of ``nodes``; see ``targets.py``).

``config`` are Kafka keys over the test defaults (in memory, free ports on 127.0.0.1, no
initial rebalance delay). With ``brokers=1`` and no cluster module, the cluster is a single
broker.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from trikafka.broker import open_broker
from trikafka.testing.targets import broker_targets, target_by_id
from trikafka.testing.thread import BrokerHandle, TrioThread, test_broker_config

__all__ = ["ClusterHandle", "ClusterUnavailableError", "start_cluster"]


class ClusterUnavailableError(RuntimeError):
    """Several brokers were asked for, and this trikafka has no ``trikafka.cluster``."""


@asynccontextmanager
async def _one_broker(config: dict[str, Any]) -> AsyncIterator[Any]:
    async with open_broker(test_broker_config(config)) as broker:
        yield broker


def _open_cluster(brokers: int, config: dict[str, Any]) -> Any:
    try:
        from trikafka.cluster import open_cluster  # type: ignore[import-not-found]
    except ImportError as exc:
        if brokers == 1:
            return _one_broker(config)
        raise ClusterUnavailableError(
            f"kafka_cluster(brokers={brokers}) needs trikafka.cluster.open_cluster, which this "
            f"installation of trikafka does not have ({exc}); brokers=1 works"
        ) from None
    from trikafka.testing.thread import TEST_DEFAULTS

    return open_cluster(brokers=brokers, **{**TEST_DEFAULTS, **config})


class ClusterHandle:
    """A cluster on a background Trio thread; ``brokers[i]`` controls broker ``i``."""

    def __init__(self, thread: TrioThread, cluster: Any) -> None:
        self.thread = thread
        self.cluster = cluster
        node_ids = thread.call(lambda: [t.node_id for t in broker_targets(cluster)])
        self.brokers = [
            BrokerHandle(thread, lambda i=i: target_by_id(self.cluster, i)) for i in node_ids
        ]

    @property
    def bootstrap_servers(self) -> str:
        def read() -> str:
            value = self.cluster.bootstrap_servers
            return value() if callable(value) else value

        return self.thread.call(read)

    def __getattr__(self, name: str) -> Any:
        """The cluster's own controls (``move_leader``, ``stop_broker``, ...) as plain calls."""
        if name.startswith("_"):
            raise AttributeError(name)
        target = self.thread.call(lambda: getattr(self.cluster, name))
        if not callable(target):
            return target

        def call(*args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
            if inspect.iscoroutinefunction(target):
                return self.thread.run(target, *args, timeout=timeout, **kwargs)
            return self.thread.call(target, *args, **kwargs)

        return call

    def stop(self) -> None:
        self.thread.stop()


def start_cluster(brokers: int = 1, config: dict[str, Any] | None = None, *, record: bool = True) -> ClusterHandle:
    """Start ``brokers`` brokers on a background Trio thread (see the module docstring);
    with ``record`` every broker records requests from the start (a broker the cluster
    restarts later starts without recording)."""
    if isinstance(brokers, bool) or not isinstance(brokers, int) or brokers < 1:
        raise ValueError(f"brokers must be a positive int, not {brokers!r}")
    opener = _open_cluster(brokers, dict(config or {}))
    thread = TrioThread(f"trikafka-cluster-{brokers}")
    cluster = thread.start(lambda: opener)
    try:
        if record:
            thread.call(lambda: [t.faults.recorder.start() for t in broker_targets(cluster)])
        return ClusterHandle(thread, cluster)
    except BaseException:
        thread.stop()
        raise
