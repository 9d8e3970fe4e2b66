"""A cluster on a background Trio thread, for synchronous real clients (confluent-kafka).

The test's thread drives the client; the cluster's controls run on the cluster's own Trio
thread through ``trio.from_thread`` — each call returns once the change is made, so the
test never sleeps to wait for one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import trio

from trikafka import open_cluster

READY_TIMEOUT = 30


class ThreadedCluster:
    def __init__(self, brokers: int, **config: Any) -> None:
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.cluster: Any = None
        self._token: Any = None
        self._stop: trio.Event | None = None
        self._thread = threading.Thread(target=self._main, args=(brokers, config), name="trikafka-cluster", daemon=True)
        self._thread.start()
        if not self._ready.wait(READY_TIMEOUT):
            raise RuntimeError("the cluster did not start")
        if self._error is not None:
            raise self._error

    def _main(self, brokers: int, config: dict[str, Any]) -> None:
        async def serve() -> None:
            self._token = trio.lowlevel.current_trio_token()
            self._stop = trio.Event()
            async with open_cluster(brokers, **config) as cluster:  # the test thread bounds the start
                self.cluster = cluster
                self._ready.set()
                await self._stop.wait()

        try:
            trio.run(serve)
        except BaseException as exc:  # reported to the test thread
            self._error = exc
            self._ready.set()

    @property
    def bootstrap_servers(self) -> str:
        return self.cluster.bootstrap_servers

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run a synchronous control (``move_leader``, ``shrink_isr``...) on the cluster's thread."""
        return trio.from_thread.run_sync(lambda: fn(*args, **kwargs), trio_token=self._token)

    def acall(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run an async control (``stop_broker``, ``start_broker``) on the cluster's thread."""
        return trio.from_thread.run(fn, *args, trio_token=self._token)

    def close(self) -> None:
        if self._stop is not None and self._thread.is_alive():
            trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
        self._thread.join(READY_TIMEOUT)
        assert not self._thread.is_alive(), "the cluster did not stop"


@pytest.fixture
def start_cluster() -> Iterator[Callable[..., ThreadedCluster]]:
    started: list[ThreadedCluster] = []

    def start(brokers: int = 3, **config: Any) -> ThreadedCluster:
        config.setdefault("group_initial_rebalance_delay_ms", 0)
        cluster = ThreadedCluster(brokers, **config)
        started.append(cluster)
        return cluster

    yield start
    for cluster in started:
        cluster.close()
