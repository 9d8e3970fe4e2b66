"""A broker on a background Trio thread, controlled by plain calls from synchronous tests.

Synchronous clients (confluent-kafka, kafka-python) and asyncio ones (aiokafka) cannot share
a thread with Trio, so the broker runs ``trio.run`` in a thread of its own and everything a
test does to it crosses over with ``trio.from_thread`` — the only safe door into a running
Trio loop. :class:`TrioThread` is that host, for any async context manager (one broker, or a
cluster from ``trikafka.cluster.open_cluster``); :class:`BrokerHandle` is the control surface
of one broker in it (faults, recorder, ``wait_for_*`` with a timeout); :class:`ThreadedBroker`
puts the two together.

Lifetimes: ``start()`` returns once the context manager has been entered (every listener
bound) or raises what made it fail; ``stop()`` exits it (a graceful broker stop) and joins the
thread, so no thread outlives its test. Waits take a ``timeout`` in seconds, measured on the
broker thread's trio clock.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import trio

from trikafka.broker import Broker, open_broker
from trikafka.config import BrokerConfig
from trikafka.testing.faults import Faults
from trikafka.testing.targets import BrokerTarget, broker_targets

__all__ = ["BrokerHandle", "ThreadedBroker", "TrioThread", "test_broker_config"]

START_TIMEOUT = 30.0
STOP_TIMEOUT = 30.0
WAIT_TIMEOUT = 10.0

#: What a test broker is unless the test says otherwise: in memory, a free port on
#: 127.0.0.1, and a lone consumer's group forms at once (Kafka's 3 s delay suits big groups).
TEST_DEFAULTS = {
    "listeners": "PLAINTEXT://127.0.0.1:0",
    "log.dirs": "",
    "group.initial.rebalance.delay.ms": 0,
}


def test_broker_config(config: BrokerConfig | dict[str, Any] | None = None) -> BrokerConfig:
    """``TEST_DEFAULTS`` under ``config`` (a BrokerConfig is taken as it is)."""
    if isinstance(config, BrokerConfig):
        return config
    return BrokerConfig.from_mapping({**TEST_DEFAULTS, **(config or {})})


test_broker_config.__test__ = False  # type: ignore[attr-defined]  # not a pytest test


class TrioThread:
    """Runs an async context manager in ``trio.run`` on a daemon thread until ``stop()``."""

    def __init__(self, name: str = "trikafka-broker") -> None:
        self.name = name
        self.value: Any = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None

    def start(self, open_cm: Callable[[], AbstractAsyncContextManager[Any]], timeout: float = START_TIMEOUT) -> Any:
        if self._thread is not None:
            raise RuntimeError(f"{self.name} was started already")
        self._thread = threading.Thread(target=self._main, args=(open_cm,), name=self.name, daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError(f"{self.name} did not start within {timeout} s")
        if self._error is not None:
            self._thread.join(timeout)
            raise self._error
        return self.value

    def _main(self, open_cm: Callable[[], AbstractAsyncContextManager[Any]]) -> None:
        try:
            trio.run(self._serve, open_cm)
        except BaseException as exc:  # noqa: BLE001 - handed to the starting thread
            if not self._ready.is_set():
                self._error = exc
        finally:
            self._ready.set()

    async def _serve(self, open_cm: Callable[[], AbstractAsyncContextManager[Any]]) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        async with open_cm() as value:
            self.value = value
            self._ready.set()
            await self._stop.wait()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and self._token is not None

    def _check(self) -> trio.lowlevel.TrioToken:
        if not self.running or self._token is None:
            raise RuntimeError(f"{self.name} is not running")
        return self._token

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` run in the Trio thread (between its tasks); its result."""
        return trio.from_thread.run_sync(lambda: fn(*args, **kwargs), trio_token=self._check())

    def run(self, async_fn: Callable[..., Any], *args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
        """``await async_fn(*args, **kwargs)`` in the Trio thread, bounded by ``timeout``
        seconds (on its clock): a ``TimeoutError`` when it does not finish in time."""

        async def bounded() -> Any:
            if timeout is None:
                return await async_fn(*args, **kwargs)
            with trio.move_on_after(timeout):
                return await async_fn(*args, **kwargs)
            raise TimeoutError(f"not done within {timeout} s")

        return trio.from_thread.run(bounded, trio_token=self._check())

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Leave the context manager (a graceful stop) and join the thread."""
        thread = self._thread
        if thread is None:
            return
        if thread.is_alive() and self._stop is not None:
            try:
                trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
            except trio.RunFinishedError:
                pass
        thread.join(timeout)
        if thread.is_alive():
            raise RuntimeError(f"{self.name} did not stop within {timeout} s")


class AsyncHandle:
    """The same calls as a handle, awaitable from asyncio (each runs in a worker thread, so
    the event loop keeps serving the client while a wait waits)."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._handle, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(method, *args, **kwargs)

        return call


class BrokerHandle:
    """One broker of a :class:`TrioThread`, controlled from another thread. ``target``
    finds it at each call (a broker a cluster restarted is a new object)."""

    def __init__(self, thread: TrioThread, target: Callable[[], BrokerTarget]) -> None:
        self.thread = thread
        self._target = target
        self.aio = AsyncHandle(self)

    @property
    def bootstrap_servers(self) -> str:
        return self.thread.call(lambda: self._target().bootstrap_servers)

    @property
    def node_id(self) -> int:
        return self._target().node_id

    @property
    def _state(self) -> Any:
        """The broker state this handle's waits read (in the Trio thread only)."""
        state = self._target().state
        if not callable(getattr(state, "wait_for_high_watermark", None)):
            raise TypeError(f"{state!r} has no wait_for_* methods (trikafka.server.awaitable)")
        return state

    # --- faults --------------------------------------------------------------------------

    def _faults(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self.thread.call(lambda: getattr(self._target().faults, method)(*args, **kwargs))

    def inject_error(self, api: str | int, error: Any, *, count: int | None = 1, **where: Any) -> Any:
        """Answer the next ``count`` requests of ``api`` with ``error`` (see ``Faults``)."""
        return self._faults("inject_error", api, error, count=count, **where)

    def add_latency(
        self, seconds: float, *, api: str | int | None = None, count: int | None = None, **where: Any
    ) -> Any:
        return self._faults("add_latency", seconds, api=api, count=count, **where)

    def drop_connection(
        self, api: str | int | None, *, after: bool = False, count: int | None = 1, **where: Any
    ) -> Any:
        return self._faults("drop_connection", api, after=after, count=count, **where)

    def hold_responses(self, api: str | int | None = None, *, count: int | None = None, **where: Any) -> Any:
        return self._faults("hold_responses", api, count=count, **where)

    def throttle(self, api: str | int | None, throttle_time_ms: int, *, count: int | None = 1, **where: Any) -> Any:
        return self._faults("throttle", api, throttle_time_ms, count=count, **where)

    def release(self, fault: Any = None) -> int:
        return self._faults("release", fault)

    def remove_fault(self, fault: Any) -> None:
        self._faults("remove", fault)

    def clear_faults(self) -> None:
        self._faults("clear")

    @property
    def faults(self) -> list[Any]:
        return self.thread.call(lambda: list(self._target().faults.faults))

    # --- the recorder --------------------------------------------------------------------

    def start_recording(self) -> None:
        self.thread.call(lambda: self._target().faults.recorder.start())

    def stop_recording(self) -> None:
        self.thread.call(lambda: self._target().faults.recorder.stop())

    def recorded(self, api: str | int | None = None, *, client_id: str | None = None) -> list[Any]:
        """The requests received since recording started, in order (``RecordedRequest``)."""
        return self.thread.call(lambda: self._target().faults.recorder.requests(api, client_id=client_id))

    def clear_recorded(self) -> None:
        self.thread.call(lambda: self._target().faults.recorder.clear())

    # --- state ---------------------------------------------------------------------------

    def _wait(self, method: str, describe: Callable[[], str], *args: Any, timeout: float, **kwargs: Any) -> Any:
        async def wait() -> Any:
            return await getattr(self._state, method)(*args, **kwargs)

        try:
            return self.thread.run(wait, timeout=timeout)
        except TimeoutError:
            shown = ", ".join([*map(repr, args), *(f"{k}={v!r}" for k, v in kwargs.items())])
            now = self.thread.call(describe)
            raise TimeoutError(f"{method}({shown}) not reached within {timeout} s; {now}") from None

    def high_watermark(self, topic: str, partition: int) -> int | None:
        def read() -> int | None:
            log = self._state.partition_log(topic, partition)
            return None if log is None else log.high_watermark.value

        return self.thread.call(read)

    def wait_for_high_watermark(
        self, topic: str, partition: int, *, at_least: int, timeout: float = WAIT_TIMEOUT
    ) -> int:
        def now() -> str:
            log = self._state.partition_log(topic, partition)
            return "no such partition" if log is None else f"high watermark is {log.high_watermark.value}"

        return self._wait("wait_for_high_watermark", now, topic, partition, at_least=at_least, timeout=timeout)

    def wait_for_last_stable_offset(
        self, topic: str, partition: int, *, at_least: int, timeout: float = WAIT_TIMEOUT
    ) -> int:
        def now() -> str:
            log = self._state.partition_log(topic, partition)
            return "no such partition" if log is None else f"last stable offset is {log.last_stable_offset.value}"

        return self._wait("wait_for_last_stable_offset", now, topic, partition, at_least=at_least, timeout=timeout)

    def wait_for_group_state(
        self, group_id: str, state: str, *, members: int | None = None, timeout: float = WAIT_TIMEOUT
    ) -> Any:
        def now() -> str:
            snapshot = self._state.group_snapshot(group_id)
            if snapshot is None:
                return "the group does not exist"
            return f"the group is {snapshot.state} with {len(snapshot.members)} member(s)"

        return self._wait("wait_for_group_state", now, group_id, state, members=members, timeout=timeout)

    def committed(self, group_id: str, topic: str, partition: int) -> int | None:
        return self.thread.call(lambda: self._state.committed(group_id, topic, partition))

    def wait_for_committed(
        self, group_id: str, topic: str, partition: int, *, at_least: int, timeout: float = WAIT_TIMEOUT
    ) -> int:
        def now() -> str:
            return f"committed offset is {self._state.committed(group_id, topic, partition)}"

        return self._wait("wait_for_committed", now, group_id, topic, partition, at_least=at_least, timeout=timeout)

    def transaction_state(self, transactional_id: str) -> str | None:
        return self.thread.call(lambda: self._state.transaction_state(transactional_id))

    def wait_for_transaction_state(self, transactional_id: str, state: str, *, timeout: float = WAIT_TIMEOUT) -> str:
        def now() -> str:
            return f"the transaction is {self._state.transaction_state(transactional_id)}"

        return self._wait("wait_for_transaction_state", now, transactional_id, state, timeout=timeout)


class ThreadedBroker(BrokerHandle):
    """A broker on its own Trio thread (see the module docstring). A context manager.

    ``config`` is a BrokerConfig or a mapping of Kafka keys over the test defaults (in
    memory, 127.0.0.1 on a free port, no initial rebalance delay).
    """

    def __init__(self, config: BrokerConfig | dict[str, Any] | None = None, *, record: bool = False) -> None:
        self.config = test_broker_config(config)
        self.record = record
        thread = TrioThread(f"trikafka-broker-{id(self):x}")
        super().__init__(thread, lambda: broker_targets(thread.value)[0])

    @property
    def broker(self) -> Broker:
        """The Broker itself: touch it only in its thread (``thread.call``/``thread.run``)."""
        return self.thread.value

    def start(self, timeout: float = START_TIMEOUT) -> ThreadedBroker:
        broker = self.thread.start(lambda: open_broker(self.config), timeout)
        if self.record:
            self.thread.call(Faults.of(broker).recorder.start)
        return self

    @property
    def schema_registry_url(self) -> str:
        """``http://host:port`` of the broker's Schema Registry (``schema.registry.port``;
        the ``kafka_broker`` fixture serves it on a free port)."""
        url = self.thread.call(lambda: self.broker.schema_registry_url)
        if url is None:
            raise RuntimeError("this broker serves no Schema Registry: set schema.registry.port (0: a free port)")
        return url

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Clear the faults (held responses go out, so the graceful stop need not wait for
        them), then stop the broker and join its thread."""
        if self.thread.running:
            try:
                self.clear_faults()
            except trio.RunFinishedError:
                pass
        self.thread.stop(timeout)

    def __enter__(self) -> ThreadedBroker:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = self.bootstrap_servers if self.thread.running else "stopped"
        return f"<ThreadedBroker {where}>"
