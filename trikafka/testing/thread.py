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

import threading
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import trio

from trikafka.broker import Broker, open_broker
from trikafka.config import BrokerConfig
from trikafka.config.dev import DEV_DEFAULTS
from trikafka.testing.faults import Fault, Faults
from trikafka.testing.surface import WAIT_TIMEOUT, BrokerControls, asyncio_hosted, thread_hosted
from trikafka.testing.targets import BrokerTarget, broker_targets

if TYPE_CHECKING:
    from trikafka.testing.hosted_types import AsyncHostedControls, HostedControls
else:  # the methods are set by thread_hosted/asyncio_hosted; these bases are for type checkers
    HostedControls = AsyncHostedControls = object

__all__ = [
    "AsyncBrokerHandle", "BrokerHandle", "QUEUED_MAX_REQUEST_BYTES", "ThreadedBroker", "TrioThread", "WAIT_TIMEOUT",
    "test_broker_config",
]

_T = TypeVar("_T")
_P = ParamSpec("_P")

START_TIMEOUT = 30.0
STOP_TIMEOUT = 30.0

#: queued.max.request.bytes of the test kit's brokers, in memory and over TCP: the dev default.
QUEUED_MAX_REQUEST_BYTES = int(DEV_DEFAULTS["queued.max.request.bytes"][0])

#: What a test broker is unless the test says otherwise: in memory, a free port on 127.0.0.1,
#: and the dev defaults every development broker has (``trikafka.config.dev.DEV_DEFAULTS``:
#: a lone consumer's group forms at once, requests pile up to a bound, ...) unless the test
#: asks for Kafka's own (``kafka_defaults=True``).
TEST_DEFAULTS = {
    "listeners": "PLAINTEXT://127.0.0.1:0",
    "log.dirs": "",
}


def test_broker_config(
    config: BrokerConfig | Mapping[str, object] | None = None, *, kafka_defaults: bool = False
) -> BrokerConfig:
    """``TEST_DEFAULTS`` and the dev defaults (Kafka's with ``kafka_defaults=True``) under
    ``config`` (a BrokerConfig is taken as it is)."""
    if isinstance(config, BrokerConfig):
        return config
    return BrokerConfig.coerce({**TEST_DEFAULTS, **(config or {})}, kafka_defaults=kafka_defaults)


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

    def start(self, open_cm: Callable[[], AbstractAsyncContextManager[_T]], timeout: float = START_TIMEOUT) -> _T:
        if self._thread is not None:
            raise RuntimeError(f"{self.name} was started already")
        self._thread = threading.Thread(target=self._main, args=(open_cm,), name=self.name, daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError(f"{self.name} did not start within {timeout} s")
        if self._error is not None:
            self._thread.join(timeout)
            raise self._error
        value: _T = self.value
        return value

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

    def call(self, fn: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """``fn(*args, **kwargs)`` run in the Trio thread (between its tasks); its result."""
        return trio.from_thread.run_sync(lambda: fn(*args, **kwargs), trio_token=self._check())

    def run(
        self, async_fn: Callable[..., Awaitable[_T]], *args: object, timeout: float | None = None, **kwargs: object
    ) -> _T:
        """``await async_fn(*args, **kwargs)`` in the Trio thread, bounded by ``timeout``
        seconds (on its clock): a ``TimeoutError`` when it does not finish in time."""

        async def bounded() -> _T:
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


class BrokerHandle(HostedControls):
    """One broker of a :class:`TrioThread`, controlled from another thread: every method
    of :class:`~trikafka.testing.surface.BrokerControls` as a plain call (``.aio``: the
    same as coroutines). ``target`` finds the broker at each call (a broker a cluster
    restarted is a new object)."""

    def __init__(self, thread: TrioThread, target: Callable[[], BrokerTarget]) -> None:
        self.thread = thread
        self._target = target
        self.aio = AsyncBrokerHandle(self)

    def _controls(self) -> BrokerControls:
        """This broker's controls (in the Trio thread only)."""
        target = self._target()
        return BrokerControls(lambda: [target.faults], lambda: target.state)

    @property
    def bootstrap_servers(self) -> str:
        return self.thread.call(lambda: self._target().bootstrap_servers)

    @property
    def node_id(self) -> int:
        return self._target().node_id

    @property
    def rack(self) -> str | None:
        """The broker's rack (``broker.rack``), as Metadata shows it; None without one."""
        return self.thread.call(lambda: self._target().rack)

    @property
    def faults(self) -> list[Fault]:
        """The active faults."""
        return self.thread.call(lambda: list(self._target().faults.faults))


thread_hosted(BrokerHandle)


class AsyncBrokerHandle(AsyncHostedControls):
    """``handle.aio``: the handle's methods as coroutines, for asyncio tests (each runs in a
    worker thread, so the event loop keeps serving its clients while a wait waits)."""

    def __init__(self, handle: BrokerHandle) -> None:
        self._handle = handle


asyncio_hosted(AsyncBrokerHandle, BrokerHandle)


class ThreadedBroker(BrokerHandle):
    """A broker on its own Trio thread (see the module docstring). A context manager.

    ``config`` is a BrokerConfig or a mapping of Kafka keys over the test defaults (in
    memory, 127.0.0.1 on a free port) and the dev defaults (no initial rebalance delay, ...;
    ``kafka_defaults=True``: Kafka's own).
    """

    def __init__(
        self, config: BrokerConfig | Mapping[str, object] | None = None, *, record: bool = False,
        kafka_defaults: bool = False,
    ) -> None:
        self.config = test_broker_config(config, kafka_defaults=kafka_defaults)
        self.record = record
        thread = TrioThread(f"trikafka-broker-{id(self):x}")
        super().__init__(thread, lambda: broker_targets(thread.value)[0])

    @property
    def broker(self) -> Broker:
        """The Broker itself: touch it only in its thread (``thread.call``/``thread.run``)."""
        result: Broker = self.thread.value
        return result

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
            raise RuntimeError(
                "this broker serves no Schema Registry: set schema.registry.port (0: a free port; the "
                "kafka_broker fixture does when the registry extra is installed: pip install 'trikafka[registry]')"
            )
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
