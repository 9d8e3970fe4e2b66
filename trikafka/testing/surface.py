"""The one shape of every test handle: the same control methods, whatever hosts the broker.

:class:`BrokerControls` is that shape, in the Trio thread that runs the broker: faults,
the recorder, state readers and waits over one broker (a ``Broker``, a cluster node) or a
whole cluster (a fault added there is added to every broker; its waits read the cluster's
shared state). Who sees it how:

* Trio code (``trikafka_broker``, which *is* one; ``controls(broker_or_cluster)``): faults
  and readers are plain calls (they take effect at once), waits are coroutines.
* Thread-hosted handles (``kafka_broker``, ``kafka_cluster(...)`` and its ``brokers[i]``):
  every method is a plain call, made in the broker's thread (:func:`thread_hosted`).
* ``handle.aio``: every method is a coroutine for asyncio tests (:func:`asyncio_hosted`).

Defaults shared by all: a fault hits every matching request until removed
(:data:`DEFAULT_COUNT`; give ``count=n`` for n); every wait gives up after
:data:`WAIT_TIMEOUT` seconds (on the broker's trio clock) with a ``TimeoutError`` saying
what it saw.
"""

from __future__ import annotations

import asyncio
import functools
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

import attrs
import trio

from trikafka.testing import topics
from trikafka.testing.faults import DEFAULT_COUNT, Fault, Faults
from trikafka.testing.scenario import Scenario
from trikafka.testing.scenario_run import ScenarioRun, start_scenario
from trikafka.testing.topics import Record

if TYPE_CHECKING:
    from kio.schema.errors import ErrorCode

    from trikafka.server.awaitable import GroupSnapshot
    from trikafka.server.client_metrics import ClientMetricsSnapshot
    from trikafka.server.share_awaitable import ShareGroupSnapshot, SharePartitionSnapshot
    from trikafka.testing.recorder import RecordedRequest

#: An error a fault answers with: kio's ``ErrorCode``, its name (``"NOT_LEADER_OR_FOLLOWER"``)
#: or its number.
ErrorSpec: TypeAlias = "ErrorCode | str | int"

__all__ = [
    "BrokerControls",
    "CONTROL_METHODS",
    "FaultSet",
    "TOPIC_METHODS",
    "WAIT_METHODS",
    "WAIT_TIMEOUT",
    "asyncio_hosted",
    "controls",
    "describe_state",
    "refuse_in_event_loop",
    "thread_hosted",
]

WAIT_TIMEOUT = 10.0

#: The plain (non-waiting) controls, in every handle.
CONTROL_METHODS = (
    "inject_error", "add_latency", "drop_connection", "hold_responses", "throttle",
    "push_request_errors", "hold_until", "set_round_trip_time", "release", "remove_fault", "clear_faults",
    "active_faults",
    "start_recording", "stop_recording", "recorded", "clear_recorded",
    "high_watermark", "committed", "transaction_state", "share_partition", "client_metrics",
    "apply_scenario", "scenario_status", "cancel_scenario",
)  # fmt: skip
#: The waits: coroutines in Trio, plain blocking calls on thread-hosted handles.
WAIT_METHODS = (
    "wait_for_high_watermark", "wait_for_last_stable_offset", "wait_for_group_state",
    "wait_for_committed", "wait_for_transaction_state", "wait_for_share_group_state",
    "wait_for_share_records", "wait_for_scenario", "wait_for_client_metric",
)  # fmt: skip
#: The helpers over the Kafka protocol (trikafka.testing.topics): coroutines in Trio, plain
#: calls on thread-hosted handles (``read`` refused inside an asyncio loop, as the waits).
TOPIC_METHODS = topics.TOPIC_METHODS


@attrs.define(eq=False)
class FaultSet:
    """A fault added cluster-wide: one :class:`Fault` per broker."""

    faults: tuple[Fault, ...]

    @property
    def applied(self) -> int:
        """Requests hit so far, on every broker together."""
        return sum(f.applied for f in self.faults)

    @property
    def kind(self) -> str:
        return self.faults[0].kind

    def describe(self) -> str:
        return f"{self.faults[0].describe()} on {len(self.faults)} brokers"


#: Each broker's round-trip-time fault (set_round_trip_time replaces it).
_RTT: weakref.WeakKeyDictionary[Faults, Fault] = weakref.WeakKeyDictionary()
#: The latest scenario run of each handle: by the broker or cluster it runs on, then "all"
#: (cluster-wide) or the one broker's faults.
_RUNS: weakref.WeakKeyDictionary[Any, dict[Any, ScenarioRun]] = weakref.WeakKeyDictionary()


def _run_key(faults: Sequence[Faults]) -> Any:
    return "all" if len(faults) > 1 else id(faults[0])


def describe_state(state: Any, method: str, args: tuple[Any, ...]) -> str:
    """What the state is now, for a wait's timeout message."""
    if method in ("wait_for_high_watermark", "wait_for_last_stable_offset"):
        log = state.partition_log(*args[:2])
        if log is None:
            return "no such partition"
        if method == "wait_for_high_watermark":
            return f"high watermark is {log.high_watermark.value}"
        return f"last stable offset is {log.last_stable_offset.value}"
    if method == "wait_for_group_state":
        snapshot = state.group_snapshot(args[0])
        if snapshot is None:
            return "the group does not exist"
        return f"the group is {snapshot.state} with {len(snapshot.members)} member(s)"
    if method == "wait_for_committed":
        return f"committed offset is {state.committed(*args[:3])}"
    if method == "wait_for_share_group_state":
        snapshot = state.share_group_snapshot(args[0])
        if snapshot is None:
            return "the share group does not exist"
        return f"the share group is {snapshot.state} with {len(snapshot.members)} member(s)"
    if method == "wait_for_share_records":
        snapshot = state.share_partition_snapshot(*args[:3])
        if snapshot is None:
            return "no such share partition"
        states = ("Available", "Acquired", "Acknowledged", "Archived")
        return "records: " + ", ".join(f"{snapshot.count(s)} {s}" for s in states)
    if method == "wait_for_client_metric":
        seen = state.client_metrics()
        if not seen:
            return "no client has asked for telemetry subscriptions (is a client-metrics subscription set?)"
        return "clients seen: " + "; ".join(
            f"{s.client_id or '(no client id)'} ({s.client_software_name or '?'}, {s.pushes} push(es), "
            f"{len(s.metrics)} metric(s), subscribed to {list(s.requested_metrics) or 'nothing'})"
            for s in seen
        )
    return f"the transaction is {state.transaction_state(args[0])}"


class BrokerControls:
    """Faults, recorder, readers and waits over ``faults()`` (one broker's, or every
    broker's) and ``state()`` (what the waits read). See the module docstring."""

    def __init__(
        self,
        faults: Callable[[], Sequence[Faults]],
        state: Callable[[], Any],
        bootstrap: Callable[[], Any] | None = None,
    ) -> None:
        self._faults_now = faults
        self._state_now = state
        #: What the Kafka-protocol helpers connect to (trikafka.testing.topics): by default
        #: the state itself (a Broker or a cluster: its ``bootstrap_servers``).
        self._bootstrap_now = bootstrap or state

    def _all(self) -> list[Faults]:
        return list(self._faults_now())

    def _each(self, method: str, *args: Any, **kwargs: Any) -> Fault | FaultSet:
        made = tuple(getattr(f, method)(*args, **kwargs) for f in self._all())
        return made[0] if len(made) == 1 else FaultSet(made)

    # --- faults (count: every matching request until removed, unless given) ----------------

    def inject_error(
        self, api: str | int, error: ErrorSpec, *, count: int | None = DEFAULT_COUNT, **where: object
    ) -> Fault | FaultSet:
        """Answer matching requests of ``api`` with ``error`` instead of handling them."""
        return self._each("inject_error", api, error, count=count, **where)

    def add_latency(
        self, seconds: float, *, api: str | int | None = None, count: int | None = DEFAULT_COUNT, **where: object
    ) -> Fault | FaultSet:
        """Handle matching requests ``seconds`` later (trio's clock)."""
        return self._each("add_latency", seconds, api=api, count=count, **where)

    def drop_connection(
        self, api: str | int | None, *, after: bool = False, count: int | None = DEFAULT_COUNT, **where: object
    ) -> Fault | FaultSet:
        """Close the connection of matching requests, before handling them or (``after``) once handled."""
        return self._each("drop_connection", api, after=after, count=count, **where)

    def hold_responses(
        self, api: str | int | None = None, *, count: int | None = DEFAULT_COUNT, **where: object
    ) -> Fault | FaultSet:
        """Handle matching requests but keep their responses until :meth:`release`."""
        return self._each("hold_responses", api, count=count, **where)

    def throttle(
        self, api: str | int | None, throttle_time_ms: int, *, count: int | None = DEFAULT_COUNT, **where: object
    ) -> Fault | FaultSet:
        """Throttle matching requests as a quota violation would (KIP-219)."""
        return self._each("throttle", api, throttle_time_ms, count=count, **where)

    def push_request_errors(
        self, api: str | int, errors: Iterable[ErrorSpec | tuple[ErrorSpec, float]], **where: object
    ) -> Fault | FaultSet:
        """The next matching requests answered one step each: an error or ``(error, rtt)``
        (``NONE``: handled). On a cluster each broker gets the sequence (per broker, as
        librdkafka's ``broker_push_request_error_rtts``)."""
        return self._each("push_request_errors", api, list(errors), **where)

    def hold_until(
        self,
        condition: Callable[[Any], bool],
        api: str | int | None = None,
        *,
        count: int | None = DEFAULT_COUNT,
        **where: object,
    ) -> Fault | FaultSet:
        """Park matching requests until ``condition(state)`` is true, then handle them:
        ``state`` is what the waits read (the broker, or the cluster), and the condition
        runs in the broker's thread, after every response the broker sends."""
        state = self._state
        return self._each("hold_until", lambda: condition(state), api, count=count, **where)

    def set_round_trip_time(self, seconds: float) -> None:
        """Every request to the broker (each broker, on a cluster) is handled ``seconds``
        later, as librdkafka's mock ``set_rtt``; 0 removes it. Replaces an earlier one."""
        for faults in self._all():
            old = _RTT.pop(faults, None)
            if old is not None and old in faults.faults:
                faults.remove(old)
            if seconds:
                _RTT[faults] = faults.add_latency(seconds, count=None)

    def release(self, fault: Fault | FaultSet | int | None = None) -> int:
        """Send the responses a hold (or every hold) kept, and end it; how many were sent."""
        if fault is None:
            return sum(f.release() for f in self._all())
        ones = fault.faults if isinstance(fault, FaultSet) else (fault,)
        return sum(f.release(one) for one in ones for f in self._all() if _owns(f, one))

    def remove_fault(self, fault: Fault | FaultSet | int) -> None:
        """End a fault (a hold's kept responses are released)."""
        for one in fault.faults if isinstance(fault, FaultSet) else (fault,):
            for faults in self._all():
                if _owns(faults, one):
                    faults.remove(one)

    def clear_faults(self) -> None:
        """End every fault and throttle mute (held responses are released)."""
        for faults in self._all():
            faults.clear()

    def active_faults(self) -> list[Fault]:
        return [fault for faults in self._all() for fault in faults.faults]

    # --- scenarios (trikafka.testing.scenario) ------------------------------------------------

    def apply_scenario(self, scenario: Scenario | Mapping[str, object] | Sequence[object] | str) -> ScenarioRun:
        """Start ``scenario`` (a Scenario or its JSON) in the background of the broker (the
        cluster) on trio's clock; its fault steps act through these controls. Returns the
        :class:`~trikafka.testing.scenario_run.ScenarioRun` (``fired``, ``done``,
        ``to_json()``); one run per handle at a time (a new one cancels the one before).
        A single broker refuses cluster-only steps (``ScenarioError``) before any runs."""
        scenario = Scenario.coerce(scenario)
        faults = self._all()
        state = self._state_now()

        def controls_for(broker: int | None) -> BrokerControls:
            return self if broker is None else controls(state, broker)

        run = start_scenario(scenario, self._all, controls_for, state)
        runs = _RUNS.setdefault(state, {})
        earlier = runs.get(_run_key(faults))
        if earlier is not None:
            earlier.cancel()
        runs[_run_key(faults)] = run
        return run

    def _run(self) -> ScenarioRun | None:
        return _RUNS.get(self._state_now(), {}).get(_run_key(self._all()))

    def scenario_status(self) -> dict[str, object] | None:
        """The latest scenario's run as JSON (steps, which fired when, done, error); None
        when no scenario was applied through this handle."""
        run = self._run()
        return None if run is None else run.to_json()

    def cancel_scenario(self) -> bool:
        """Stop the latest scenario (no further step fires; faults it added stay until
        cleared); whether there was one."""
        run = self._run()
        if run is not None:
            run.cancel()
        return run is not None

    async def wait_for_scenario(self, *, timeout: float = WAIT_TIMEOUT) -> dict[str, object]:  # noqa: ASYNC109
        """Until every step of the latest scenario has fired (its status); a
        ``TimeoutError`` saying which step it waits on, a ``RuntimeError`` if it failed."""
        run = self._run()
        if run is None:
            raise RuntimeError("no scenario was applied through this handle (apply_scenario)")
        with trio.move_on_after(timeout):
            await run.finished.wait()
        if run.error is not None or (run.done and not run.complete):
            raise RuntimeError(f"the scenario did not complete: {run.describe()}")
        if not run.done:
            raise TimeoutError(f"wait_for_scenario() not reached within {timeout:g} s; {run.describe()}")
        return run.to_json()

    # --- the recorder ------------------------------------------------------------------------

    def start_recording(self) -> None:
        for faults in self._all():
            faults.recorder.start()

    def stop_recording(self) -> None:
        for faults in self._all():
            faults.recorder.stop()

    def recorded(self, api: str | int | None = None, *, client_id: str | None = None) -> list[RecordedRequest]:
        """The requests received while recording, in order (``RecordedRequest``; a
        cluster's brokers one after another)."""
        return [r for faults in self._all() for r in faults.recorder.requests(api, client_id=client_id)]

    def clear_recorded(self) -> None:
        for faults in self._all():
            faults.recorder.clear()

    # --- state -------------------------------------------------------------------------------

    @property
    def _state(self) -> Any:
        state = self._state_now()
        if not callable(getattr(state, "wait_for_high_watermark", None)):
            raise TypeError(f"{state!r} has no wait_for_* methods (trikafka.server.awaitable)")
        return state

    def high_watermark(self, topic: str, partition: int) -> int | None:
        log = self._state.partition_log(topic, partition)
        return None if log is None else log.high_watermark.value

    def committed(self, group_id: str, topic: str, partition: int) -> int | None:
        result: int | None = self._state.committed(group_id, topic, partition)
        return result

    def transaction_state(self, transactional_id: str) -> str | None:
        result: str | None = self._state.transaction_state(transactional_id)
        return result

    def client_metrics(self) -> list[ClientMetricsSnapshot]:
        """Every client instance that asked for telemetry subscriptions (KIP-714), with the
        latest value of each metric it pushed (``ClientMetricsSnapshot``)."""
        result: list[ClientMetricsSnapshot] = self._state.client_metrics()
        return result

    def share_partition(self, group_id: str, topic: str, partition: int) -> SharePartitionSnapshot | None:
        """A snapshot of a share partition: SPSO, end offset, records, states, delivery counts."""
        result: SharePartitionSnapshot | None = self._state.share_partition_snapshot(group_id, topic, partition)
        return result

    # The waits take ``timeout`` (ASYNC109 prefers the caller's cancel scope): every handle's
    # waits share one signature and one default, and a timeout says what the state was.
    async def _wait(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any], timeout: float | None) -> Any:  # noqa: ASYNC109
        state = self._state
        with trio.move_on_after(WAIT_TIMEOUT if timeout is None else timeout):
            return await getattr(state, method)(*args, **kwargs)
        shown = ", ".join([*map(repr, args), *(f"{k}={v!r}" for k, v in kwargs.items())])
        raise TimeoutError(
            f"{method}({shown}) not reached within {timeout or WAIT_TIMEOUT:g} s; {describe_state(state, method, args)}"
        )

    async def wait_for_high_watermark(
        self, topic: str, partition: int, *, at_least: int, timeout: float = WAIT_TIMEOUT  # noqa: ASYNC109
    ) -> int:
        result: int = await self._wait("wait_for_high_watermark", (topic, partition), {"at_least": at_least}, timeout)
        return result

    async def wait_for_last_stable_offset(
        self, topic: str, partition: int, *, at_least: int, timeout: float = WAIT_TIMEOUT  # noqa: ASYNC109
    ) -> int:
        result: int = await self._wait(
            "wait_for_last_stable_offset", (topic, partition), {"at_least": at_least}, timeout
        )
        return result

    async def wait_for_group_state(
        self, group_id: str, state: str, *, members: int | None = None, timeout: float = WAIT_TIMEOUT  # noqa: ASYNC109
    ) -> GroupSnapshot:
        result: GroupSnapshot = await self._wait(
            "wait_for_group_state", (group_id, state), {"members": members}, timeout
        )
        return result

    async def wait_for_committed(
        self, group_id: str, topic: str, partition: int, *, at_least: int, timeout: float = WAIT_TIMEOUT  # noqa: ASYNC109
    ) -> int:
        result: int = await self._wait(
            "wait_for_committed", (group_id, topic, partition), {"at_least": at_least}, timeout
        )
        return result

    async def wait_for_transaction_state(
        self, transactional_id: str, state: str, *, timeout: float = WAIT_TIMEOUT  # noqa: ASYNC109
    ) -> str:
        result: str = await self._wait("wait_for_transaction_state", (transactional_id, state), {}, timeout)
        return result

    async def wait_for_share_group_state(
        self, group_id: str, state: str, *, members: int | None = None, timeout: float = WAIT_TIMEOUT  # noqa: ASYNC109
    ) -> ShareGroupSnapshot:
        result: ShareGroupSnapshot = await self._wait(
            "wait_for_share_group_state", (group_id, state), {"members": members}, timeout
        )
        return result

    async def wait_for_share_records(
        self,
        group_id: str,
        topic: str,
        partition: int,
        *,
        state: str = "Acknowledged",
        at_least: int,
        timeout: float = WAIT_TIMEOUT,  # noqa: ASYNC109
    ) -> SharePartitionSnapshot:
        result: SharePartitionSnapshot = await self._wait(
            "wait_for_share_records", (group_id, topic, partition), {"state": state, "at_least": at_least}, timeout
        )
        return result

    async def wait_for_client_metric(
        self,
        name: str,
        *,
        client_id: str | None = None,
        at_least: float | None = None,
        timeout: float = WAIT_TIMEOUT,  # noqa: ASYNC109
    ) -> ClientMetricsSnapshot:
        """Wait until a client pushed metric ``name`` (a name or a prefix), ≥ ``at_least``."""
        result: ClientMetricsSnapshot = await self._wait(
            "wait_for_client_metric", (name,), {"client_id": client_id, "at_least": at_least}, timeout
        )
        return result


    # --- topics and records, over the Kafka protocol (trikafka.testing.topics) -------------

    async def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        config: Mapping[str, object] | None = None,
        *,
        timeout: float = WAIT_TIMEOUT,  # noqa: ASYNC109
    ) -> None:
        """Create topic ``name``; returns once every partition has a leader."""
        await topics.create_topic(
            self._bootstrap_now(), name, partitions, replication_factor, config, timeout=timeout
        )

    async def produce(
        self,
        topic: str,
        records: Iterable[object],
        *,
        partition: int | None = None,
        timeout: float = WAIT_TIMEOUT,  # noqa: ASYNC109
    ) -> list[int]:
        """Write ``records`` (values, ``(key, value)`` or ``(key, value, headers)`` tuples);
        the offset of each, once acknowledged."""
        return await topics.produce(self._bootstrap_now(), topic, records, partition=partition, timeout=timeout)

    async def read(
        self,
        topic: str,
        partition: int | None = None,
        from_offset: int = 0,
        max_records: int | None = None,
        timeout: float = WAIT_TIMEOUT,  # noqa: ASYNC109
    ) -> list[Record]:
        """The records (``trikafka.testing.Record``) of ``topic`` from ``from_offset``: up to
        the high watermark, or the first ``max_records`` (waiting for them)."""
        return await topics.read(self._bootstrap_now(), topic, partition, from_offset, max_records, timeout)


def _owns(faults: Faults, fault: Fault | int) -> bool:
    return any(f is fault or f.id == fault for f in faults.faults)


def controls(target: object, broker: int | None = None) -> BrokerControls:
    """The controls of a Broker, or of an ``open_cluster`` cluster: cluster-wide, or of its
    broker ``broker`` (whose waits read the cluster's state), for Trio code."""
    from trikafka.testing.targets import broker_targets, target_by_id

    if hasattr(target, "nodes") and isinstance(target.nodes, dict):
        if broker is not None:
            return BrokerControls(lambda: [target_by_id(target, broker).faults], lambda: target)
        return BrokerControls(lambda: [t.faults for t in broker_targets(target)], lambda: target)
    if broker is not None:
        raise ValueError(f"broker={broker!r} picks a broker of a cluster; {target!r} is one broker")
    return BrokerControls(lambda: [Faults.of(target)], lambda: target)


def refuse_in_event_loop(name: str) -> None:
    """A blocking wait from a running asyncio loop would stall the client it waits for."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise RuntimeError(
        f"{name}() blocks, and it was called inside a running asyncio event loop (it would "
        f"stall the clients of that loop until it timed out): use `await handle.aio.{name}(...)`"
    )


def thread_hosted(cls: type) -> type:
    """Give ``cls`` (which has ``thread`` and ``_controls()``) every control as a plain call
    made in the broker's thread, with the signature and docs of :class:`BrokerControls`."""
    for name in CONTROL_METHODS:
        setattr(cls, name, _plain(name))
    for name in WAIT_METHODS:
        setattr(cls, name, _blocking(name))
    for name in TOPIC_METHODS:
        setattr(cls, name, _blocking(name) if name == "read" else _calling(name))
    return cls


def _plain(name: str) -> Any:
    @functools.wraps(getattr(BrokerControls, name))
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        return self.thread.call(lambda: getattr(self._controls(), name)(*args, **kwargs))

    return call


def _blocking(name: str) -> Any:
    @functools.wraps(getattr(BrokerControls, name))
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        refuse_in_event_loop(name)
        return self.thread.run(lambda: getattr(self._controls(), name)(*args, **kwargs))

    return call


def _calling(name: str) -> Any:
    """A coroutine control that waits on nobody but the cluster: fine inside a loop too."""

    @functools.wraps(getattr(BrokerControls, name))
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        return self.thread.run(lambda: getattr(self._controls(), name)(*args, **kwargs))

    return call


def asyncio_hosted(cls: type, source: type) -> type:
    """Give ``cls`` (which has ``_handle``) each public method of ``source`` as a coroutine
    that runs the plain call in a worker thread (the loop keeps serving its clients)."""
    for name in dir(source):
        method = getattr(source, name)
        if name.startswith("_") or not callable(method) or isinstance(method, type):
            continue
        setattr(cls, name, _awaitable(name, method))
    return cls


def _awaitable(name: str, method: Any) -> Any:
    @functools.wraps(method)
    async def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(getattr(self._handle, name), *args, **kwargs)

    return call
