"""Running a :class:`~trikafka.testing.scenario.Scenario`: one task on trio's clock.

:func:`start_scenario` starts the task in the background of the broker or cluster it acts on
(``Broker.start_soon``/``Cluster.start_soon``: the broker's own nursery, so the test's
``MockClock`` drives it and it ends with the broker) and returns the :class:`ScenarioRun`,
which records each step as it fires. The steps run in order: the task awaits a step's
trigger — ``trio.sleep_until`` for ``at``, an event a request watcher
(:func:`~trikafka.testing.faults.watch_requests`) sets for ``after``, the
state's ``state_changes`` for ``when`` — then does its action through the same controls a
test calls (:class:`~trikafka.testing.surface.BrokerControls`) or the cluster's own.

A step that fails (a cluster refusing to stop a stopped broker, say) ends the run: its error
is in ``run.error`` and one WARNING line; nothing it started is left behind but the faults
it already added (which are the test's to see and clear).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import trio

from trikafka.testing.fault_codes import parse_api
from trikafka.testing.faults import Fault, Faults, watch_requests
from trikafka.testing.scenario import Scenario, Step

__all__ = ["ScenarioRun", "evaluate", "is_cluster", "start_scenario"]

log = logging.getLogger("trikafka.scenario")

_WHERE = ("topic", "partition", "group", "client_id")


def is_cluster(state: Any) -> bool:
    """Whether ``state`` is a cluster (it can stop brokers), not a single broker."""
    return hasattr(state, "stop_broker") and isinstance(getattr(state, "nodes", None), dict)


@attrs.define(eq=False)
class ScenarioRun:
    """One run of a scenario: which steps fired when (seconds after the start, trio's clock)."""

    scenario: Scenario
    fired: list[dict[str, Any]] = attrs.Factory(list)
    started_at: float | None = None
    waiting_on: int | None = 0  # the step whose trigger is awaited; None once done
    error: str | None = None
    finished: trio.Event = attrs.Factory(trio.Event)  # every step fired, or the run ended
    cancel_scope: trio.CancelScope = attrs.Factory(trio.CancelScope)

    @property
    def done(self) -> bool:
        return self.finished.is_set()

    @property
    def complete(self) -> bool:
        """Every step fired."""
        return len(self.fired) == len(self.scenario.steps)

    def cancel(self) -> None:
        """Stop the run: no further step fires (faults already added stay)."""
        self.cancel_scope.cancel()

    async def wait(self) -> ScenarioRun:
        """Until every step has fired or the run ended (no timeout: bound it yourself)."""
        await self.finished.wait()
        return self

    def describe(self) -> str:
        """What the run has done, for a wait's timeout message."""
        total = len(self.scenario.steps)
        text = f"{len(self.fired)} of {total} step(s) fired"
        if self.error is not None:
            return f"{text}; it failed: {self.error}"
        if self.done and not self.complete:
            return f"{text}; the run was cancelled (or its broker stopped)"
        if self.waiting_on is not None and self.waiting_on < total:
            text += f"; waiting on step {self.waiting_on} ({self.scenario.steps[self.waiting_on].describe()})"
        return text

    def to_json(self) -> dict[str, object]:
        return {
            "steps": self.scenario.to_json()["steps"],
            "fired": list(self.fired),
            "waiting_on": self.waiting_on,
            "done": self.done,
            "complete": self.complete,
            "error": self.error,
            "status": self.describe(),
        }


class _RequestCounter:
    """Counts the requests matching an ``after`` trigger; its event is set at the n-th."""

    def __init__(self, trigger: dict[str, Any]) -> None:
        self.wanted = trigger["after"]
        self.api = None if trigger.get("api") is None else parse_api(trigger["api"])
        self.client_id = trigger.get("client_id")
        self.topic = trigger.get("topic")
        self.seen = 0
        self.reached = trio.Event()

    def __call__(self, request: Any, keys: Any) -> None:
        if self.reached.is_set():
            return
        if self.api is not None and request.api_key != self.api:
            return
        if self.client_id is not None and request.client_id != self.client_id:
            return
        if self.topic is not None and (keys is None or self.topic not in keys.topics):
            return
        self.seen += 1
        if self.seen >= self.wanted:
            self.reached.set()


def evaluate(state: Any, trigger: dict[str, Any]) -> bool:
    """Whether a ``when`` trigger's predicate holds over ``state`` (a broker or a cluster)."""
    name = trigger["when"]
    if name in ("group_state", "members"):
        snapshot = state.group_snapshot(trigger["group"])
        if snapshot is None:
            return False
        if name == "members":
            result: bool = len(snapshot.members) >= trigger["at_least"]
            return result
        result = str(snapshot.state).lower() == trigger["state"].lower()
        return result
    if name == "committed":
        offset = state.committed(trigger["group"], trigger["topic"], trigger["partition"])
        return offset is not None and offset >= trigger["at_least"]
    if name == "high_watermark":
        found = state.partition_log(trigger["topic"], trigger["partition"])
        return found is not None and found.high_watermark.value >= trigger["at_least"]
    if name == "transaction_state":
        now = state.transaction_state(trigger["transactional_id"])
        return now is not None and str(now).lower() == trigger["state"].lower()
    raise ValueError(f"unknown predicate {name!r}")


class _Runner:
    def __init__(
        self,
        run: ScenarioRun,
        faults: Callable[[], Sequence[Faults]],
        controls_for: Callable[[int | None], Any],
        state: Any,
    ) -> None:
        self.run = run
        self.faults = faults
        self.controls_for = controls_for
        self.state = state

    async def main(self) -> None:
        run, steps = self.run, self.run.scenario.steps
        counters = {i: _RequestCounter(s.trigger) for i, s in enumerate(steps) if "after" in s.trigger}
        self._counters = list(counters.values())
        self._watched: dict[int, Faults] = {}
        stops: list[Callable[[], None]] = []
        self._stops = stops
        self._watch_new_brokers()
        step_index = 0
        try:
            with run.cancel_scope:
                run.started_at = trio.current_time()
                async with trio.open_nursery() as timers:  # holds released after their seconds
                    for step_index, step in enumerate(steps):
                        run.waiting_on = step_index
                        await self._trigger(step, counters.get(step_index))
                        made = await self._act(step, timers)
                        self._watch_new_brokers()  # a broker started again has new Faults
                        now = trio.current_time() - run.started_at
                        run.fired.append({
                            "step": step_index, "at": now, "action": step.action["do"],
                            "faults": [f.id for f in made], "description": step.describe(),
                        })  # fmt: skip
                        log.info("scenario step %d fired at %.3f s: %s", step_index, now, step.describe())
                    run.waiting_on = None
                    for stop in stops:
                        stop()
                    stops.clear()
                    run.finished.set()
        except Exception as exc:  # a step the broker or cluster refused: the run ends here
            while isinstance(exc, ExceptionGroup) and len(exc.exceptions) == 1:
                exc = exc.exceptions[0]
            run.error = f"step {step_index} ({steps[step_index].describe()}): {exc}"
            log.warning("scenario failed at %s", run.error)
        finally:
            for stop in stops:
                stop()
            run.finished.set()

    def _watch_new_brokers(self) -> None:
        """Count requests at every broker the handle has now (watched once each)."""
        if not self._counters:
            return
        for faults in self.faults():
            if id(faults) not in self._watched:
                self._watched[id(faults)] = faults
                self._stops.extend(watch_requests(faults, counter) for counter in self._counters)

    async def _trigger(self, step: Step, counter: _RequestCounter | None) -> None:
        trigger = step.trigger
        assert self.run.started_at is not None
        if "at" in trigger:
            await trio.sleep_until(self.run.started_at + trigger["at"])
        elif counter is not None:
            await counter.reached.wait()
        else:
            await self.state.state_changes.wait_until(lambda: evaluate(self.state, trigger))

    async def _act(self, step: Step, timers: trio.Nursery) -> list[Fault]:
        action = dict(step.action)
        do = action.pop("do")
        broker = action.pop("broker", None)
        if do == "stop_broker":
            await self.state.stop_broker(broker)
            return []
        if do == "start_broker":
            await self.state.start_broker(broker)
            return []
        if do == "move_leader":
            self.state.move_leader(action["topic"], action["partition"], action["to"])
            return []
        if do == "move_coordinator":
            self.state.move_coordinator(action["key"], action["to"], key_type=action.get("key_type"))
            return []
        controls = self.controls_for(broker)
        where = {k: action.pop(k) for k in _WHERE if k in action}
        if do == "release":
            controls.release()
            return []
        if do == "clear_faults":
            controls.clear_faults()
            return []
        if do == "set_round_trip_time":
            controls.set_round_trip_time(action["seconds"])
            return []
        if do == "push_request_errors":
            errors = [tuple(e) if isinstance(e, list) else e for e in action["errors"]]
            return _faults(controls.push_request_errors(action["api"], errors, **where))
        if do == "inject_error":
            return _faults(controls.inject_error(action.pop("api"), action.pop("error"), **action, **where))
        if do == "add_latency":
            return _faults(controls.add_latency(action.pop("seconds"), **action, **where))
        if do == "drop_connection":
            return _faults(controls.drop_connection(action.pop("api", None), **action, **where))
        # hold: responses kept, released after ``seconds`` when given
        seconds = action.pop("seconds", None)
        fault = controls.hold_responses(action.pop("api", None), **action, **where)
        if seconds is not None:
            timers.start_soon(self._release_after, controls, fault, seconds)
        return _faults(fault)

    @staticmethod
    async def _release_after(controls: Any, fault: Any, seconds: float) -> None:
        await trio.sleep(seconds)
        controls.release(fault)


def _faults(made: Any) -> list[Fault]:
    return list(getattr(made, "faults", (made,)))


def start_scenario(
    scenario: Scenario,
    faults: Callable[[], Sequence[Faults]],
    controls_for: Callable[[int | None], Any],
    state: Any,
) -> ScenarioRun:
    """Start ``scenario`` in the background of ``state`` (a running Broker or cluster): its
    request triggers watch ``faults()``, its fault actions go through ``controls_for(broker)``
    (``None``: the handle's own controls), the rest to ``state``. Refuses cluster-only
    steps on a single broker before anything runs."""
    scenario.check_target(cluster=is_cluster(state))
    run = ScenarioRun(scenario)
    state.start_soon(_Runner(run, faults, controls_for, state).main, name="trikafka-scenario")
    return run
