"""Fault scenarios as data: an ordered list of steps, each a trigger and an action.

A :class:`Scenario` says *when* to do *what* to a broker or a cluster, as plain data that
round-trips through JSON (so a property test can generate it, hypothesis can shrink it, and
a suite in another language can ``POST /scenario`` it)::

    Scenario().at(2.0).inject_error("Produce", "NOT_LEADER_OR_FOLLOWER", count=1)
              .after(3, api="Fetch").hold("Fetch", seconds=5)
              .when("committed", group="g", topic="t", partition=0, at_least=10).stop_broker(2)

Steps fire in order: a step's trigger is awaited once the step before it has fired.

Triggers (the ``trigger`` object of a step in JSON):

* ``{"at": seconds}`` — that many seconds (trio's clock) after the scenario started;
* ``{"after": n, "api": ..., "client_id": ..., "topic": ...}`` — once the broker (on a
  cluster: its brokers together) has received the n-th request matching the filters, counted
  from the scenario's start (every filter optional);
* ``{"when": predicate, ...}`` — once a predicate over the broker's state holds, checked after
  every response: :data:`PREDICATES` names them and their arguments (group state, member
  count, committed offset, high watermark, transaction state) — a vocabulary, not code.

Actions (the ``action`` object, ``{"do": name, ...}``; :data:`ACTIONS` lists each one's
arguments): the faults of :class:`~trikafka.testing.surface.BrokerControls`
(``inject_error``, ``push_request_errors``, ``add_latency``, ``drop_connection``, ``hold``
— ``hold_responses``, released after ``seconds`` when given —, ``release``,
``clear_faults``, ``set_round_trip_time``; ``broker`` narrows one to one broker of a cluster)
and a cluster's own controls (``move_leader``, ``move_coordinator``, ``stop_broker``,
``start_broker``), which a single broker refuses before anything runs. Round-trip times in
``push_request_errors`` are seconds here (``[code, seconds]``), as in the Python API.

This module is pure data; :mod:`trikafka.testing.scenario_run` runs it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

import attrs

from trikafka.testing.fault_codes import parse_api, parse_error_code

__all__ = ["ACTIONS", "CLUSTER_ACTIONS", "PREDICATES", "Scenario", "ScenarioError", "Step"]

_Run = TypeVar("_Run", covariant=True)


class _AppliesScenarios(Protocol[_Run]):
    """A test handle: what ``apply_scenario`` returns (a ``ScenarioRun``) is what ``run`` does."""

    def apply_scenario(self, scenario: Scenario, /) -> _Run: ...


class ScenarioError(ValueError):
    """A scenario that cannot run: the message names the step, the field and what is allowed."""


_FILTERS = {"topic": str, "partition": int, "group": str, "client_id": str}
_NUMBER = (int, float)

#: Each action: its required arguments and its optional ones, with their types.
ACTIONS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "inject_error": ({"api": (str, int), "error": (str, int)}, {"count": int, "broker": int, **_FILTERS}),
    "push_request_errors": ({"api": (str, int), "errors": list}, {"broker": int, **_FILTERS}),
    "add_latency": ({"seconds": _NUMBER}, {"api": (str, int), "count": int, "broker": int, **_FILTERS}),
    "drop_connection": ({}, {"api": (str, int), "after": bool, "count": int, "broker": int, **_FILTERS}),
    "hold": ({}, {"api": (str, int), "count": int, "seconds": _NUMBER, "broker": int, **_FILTERS}),
    "release": ({}, {"broker": int}),
    "clear_faults": ({}, {"broker": int}),
    "set_round_trip_time": ({"seconds": _NUMBER}, {"broker": int}),
    "move_leader": ({"topic": str, "partition": int, "to": int}, {}),
    "move_coordinator": ({"key": str, "to": int}, {"key_type": str}),
    "stop_broker": ({"broker": int}, {}),
    "start_broker": ({"broker": int}, {}),
}
#: The actions only a cluster has (and the ``broker`` argument of the others).
CLUSTER_ACTIONS = ("move_leader", "move_coordinator", "stop_broker", "start_broker")

#: Each predicate of a ``when`` trigger: its required arguments and optional ones.
PREDICATES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "group_state": ({"group": str, "state": str}, {}),
    "members": ({"group": str, "at_least": int}, {}),
    "committed": ({"group": str, "topic": str, "partition": int, "at_least": int}, {}),
    "high_watermark": ({"topic": str, "partition": int, "at_least": int}, {}),
    "transaction_state": ({"transactional_id": str, "state": str}, {}),
}
_REQUEST_FILTERS = {"api": (str, int), "client_id": str, "topic": str}


def _check_fields(where: str, given: dict[str, Any], required: dict[str, Any], optional: dict[str, Any]) -> None:
    for name in required:
        if given.get(name) is None:
            raise ScenarioError(f"{where}: missing {name!r}")
    allowed = {**required, **optional}
    for name, value in given.items():
        if name not in allowed:
            raise ScenarioError(f"{where}: unknown field {name!r}; allowed: {', '.join(allowed) or 'none'}")
        kind = allowed[name]
        if value is not None and (not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool)):
            raise ScenarioError(f"{where}: {name}={value!r} is not {_kind_name(kind)}")


def _kind_name(kind: Any) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join({"str": "a string", "int": "an int", "float": "a number", "list": "a list",
                        "bool": "true/false"}[k.__name__] for k in kinds)  # fmt: skip


def _check_trigger(where: str, trigger: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(trigger, dict):
        raise ScenarioError(f"{where}: the trigger must be an object, not {trigger!r}")
    forms = [k for k in ("at", "after", "when") if k in trigger]
    if len(forms) != 1:
        raise ScenarioError(f"{where}: a trigger has exactly one of 'at', 'after', 'when'; got {sorted(trigger)}")
    form = forms[0]
    rest = {k: v for k, v in trigger.items() if k != form}
    value = trigger[form]
    if form == "at":
        if isinstance(value, bool) or not isinstance(value, _NUMBER) or not 0 <= value < 1e9:
            raise ScenarioError(f"{where}: at={value!r} must be a non-negative number of seconds")
        _check_fields(where, rest, {}, {})
    elif form == "after":
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ScenarioError(f"{where}: after={value!r} must be a positive number of requests")
        _check_fields(where, rest, {}, _REQUEST_FILTERS)
        if rest.get("api") is not None:
            _parse(where, parse_api, rest["api"])
    else:
        if value not in PREDICATES:
            raise ScenarioError(f"{where}: when={value!r} is not a predicate; predicates: {', '.join(PREDICATES)}")
        _check_fields(f"{where} ({value})", rest, *PREDICATES[value])
    return dict(trigger)


def _check_action(where: str, action: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(action, dict):
        raise ScenarioError(f"{where}: the action must be an object, not {action!r}")
    do = action.get("do")
    if do not in ACTIONS:
        raise ScenarioError(f"{where}: do={do!r} is not an action; actions: {', '.join(ACTIONS)}")
    args = {k: v for k, v in action.items() if k != "do"}
    _check_fields(f"{where} ({do})", args, *ACTIONS[do])
    if args.get("api") is not None:
        _parse(where, parse_api, args["api"])
    if args.get("error") is not None:
        _parse(where, parse_error_code, args["error"])
    if do == "push_request_errors":
        if not args["errors"]:
            raise ScenarioError(f"{where}: push_request_errors needs at least one error")
        steps = []
        for step in args["errors"]:
            code, rtt = step if isinstance(step, list | tuple) and len(step) == 2 else (step, 0)
            _parse(where, parse_error_code, code)
            if isinstance(rtt, bool) or not isinstance(rtt, _NUMBER) or rtt < 0:
                raise ScenarioError(f"{where}: round-trip time {rtt!r} must be a non-negative number of seconds")
            steps.append([code, rtt] if rtt else code)
        args["errors"] = steps
    if isinstance(args.get("count"), int) and args["count"] < 1:
        raise ScenarioError(f"{where}: count={args['count']!r} must be a positive number of requests")
    for name in ("seconds",):
        if isinstance(args.get(name), _NUMBER) and not 0 <= args[name] < 1e9:
            raise ScenarioError(f"{where}: {name}={args[name]!r} must be a non-negative number of seconds")
    if args.get("partition") is not None and args.get("topic") is None and do != "move_leader":
        raise ScenarioError(f"{where}: a partition filter needs its topic")
    return {"do": do, **args}


def _parse(where: str, parse: Any, value: Any) -> None:
    try:
        parse(value)
    except ValueError as exc:
        raise ScenarioError(f"{where}: {exc}") from None


@attrs.frozen
class Step:
    """One step: ``trigger`` and ``action`` as in the module docstring (checked when made)."""

    trigger: dict[str, Any]
    action: dict[str, Any]

    def checked(self, where: str) -> Step:
        return Step(_check_trigger(where, self.trigger), _check_action(where, self.action))

    @property
    def cluster_only(self) -> bool:
        return self.action["do"] in CLUSTER_ACTIONS or self.action.get("broker") is not None

    def describe(self) -> str:
        def show(d: dict[str, Any], head: str) -> str:
            return " ".join([str(d[head]), *(f"{k}={v}" for k, v in d.items() if k != head)])

        form = next(k for k in ("at", "after", "when") if k in self.trigger)
        return f"{form} {show(self.trigger, form)}: {show(self.action, 'do')}"

    def to_json(self) -> dict[str, object]:
        return {"trigger": dict(self.trigger), "action": dict(self.action)}


def _steps(steps: Iterable[Step | Mapping[str, object]]) -> tuple[Step, ...]:
    out = []
    for i, step in enumerate(steps):
        if isinstance(step, dict):
            if set(step) != {"trigger", "action"}:
                raise ScenarioError(f"step {i}: a step is {{'trigger': {{...}}, 'action': {{...}}}}, not {step!r}")
            step = Step(step["trigger"], step["action"])
        elif not isinstance(step, Step):
            raise ScenarioError(f"step {i}: {step!r} is not a step")
        out.append(step.checked(f"step {i}"))
    return tuple(out)


@attrs.frozen
class Scenario:
    """An ordered list of :class:`Step`, built with :meth:`at`/:meth:`after`/:meth:`when`
    and an action, or from JSON (:meth:`from_json`); see the module docstring."""

    steps: tuple[Step, ...] = attrs.field(default=(), converter=_steps)

    # --- JSON ----------------------------------------------------------------------------

    def to_json(self) -> dict[str, object]:
        """Plain dicts: ``{"steps": [{"trigger": {...}, "action": {...}}, ...]}``."""
        return {"steps": [step.to_json() for step in self.steps]}

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True)

    @classmethod
    def from_json(cls, data: str | bytes | Mapping[str, object] | Sequence[object]) -> Scenario:
        """A scenario from :meth:`to_json`'s shape (or its text; a bare list of steps too)."""
        if isinstance(data, str | bytes):
            try:
                data = json.loads(data)
            except ValueError as exc:
                raise ScenarioError(f"a scenario is JSON: {exc}") from None
        if isinstance(data, dict):
            if set(data) != {"steps"} or not isinstance(data["steps"], list):
                raise ScenarioError(f"a scenario is {{'steps': [...]}}, not keys {sorted(data)}")
            data = data["steps"]
        if not isinstance(data, list):
            raise ScenarioError(f"a scenario is {{'steps': [...]}}, not {data!r}")
        return cls(data)

    @classmethod
    def coerce(cls, value: Scenario | str | bytes | Mapping[str, object] | Sequence[object]) -> Scenario:
        """A Scenario, or JSON (text, a dict or a list of steps) made into one."""
        return value if isinstance(value, Scenario) else cls.from_json(value)

    def check_target(self, *, cluster: bool) -> None:
        """Refuse, before anything runs, the cluster-only actions on a single broker."""
        if cluster:
            return
        for i, step in enumerate(self.steps):
            if step.cluster_only:
                what = step.action["do"] if step.action["do"] in CLUSTER_ACTIONS else "a 'broker' argument"
                raise ScenarioError(
                    f"step {i} ({step.describe()}): {what} needs a cluster; this is a single broker"
                )

    def describe(self) -> str:
        return "; ".join(f"{i}. {step.describe()}" for i, step in enumerate(self.steps)) or "(no steps)"

    def __len__(self) -> int:
        return len(self.steps)

    def __repr__(self) -> str:
        """The scenario as code that rebuilds it from its JSON (how hypothesis prints a
        falsifying example: copy it, or its JSON, to replay the failure)."""
        return f"Scenario.from_json({self.dumps()!r})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """The same for pretty printers (hypothesis's, IPython's), which would show the fields."""
        printer.text(repr(self))

    # --- building ------------------------------------------------------------------------

    def at(self, seconds: float) -> StepBuilder:
        """The next step fires ``seconds`` after the scenario starts."""
        return StepBuilder(self, {"at": seconds})

    def after(
        self, requests: int, *, api: str | int | None = None, client_id: str | None = None, topic: str | None = None
    ) -> StepBuilder:
        """The next step fires once the ``requests``-th matching request has arrived."""
        filters = {"api": api, "client_id": client_id, "topic": topic}
        return StepBuilder(self, {"after": requests, **{k: v for k, v in filters.items() if v is not None}})

    def when(self, predicate: str, **args: object) -> StepBuilder:
        """The next step fires once ``predicate`` (one of :data:`PREDICATES`) holds."""
        return StepBuilder(self, {"when": predicate, **args})

    def run(self, handle: _AppliesScenarios[_Run]) -> _Run:
        """Start the steps on ``handle`` — ``handle.apply_scenario(self)``: a ``TestBroker``
        or ``trikafka_broker``, ``kafka_broker``, a ``kafka_cluster(...)`` (or one of its
        ``brokers``), ``trikafka.testing.controls(broker_or_cluster)`` — in the background
        of its broker, on trio's clock; the :class:`~trikafka.testing.ScenarioRun`."""
        apply = getattr(handle, "apply_scenario", None)
        if apply is None:
            raise TypeError(
                f"{handle!r} has no apply_scenario: give a test handle (TestBroker, kafka_broker, "
                "kafka_cluster(...)) or trikafka.testing.controls(broker_or_cluster)"
            )
        run: _Run = apply(self)
        return run


class StepBuilder:
    """What :meth:`Scenario.at`/``after``/``when`` return: name the action to get the
    scenario with the step added (each action takes :data:`ACTIONS`' arguments)."""

    def __init__(self, scenario: Scenario, trigger: dict[str, Any]) -> None:
        self._scenario = scenario
        self._trigger = trigger

    def do(self, action: str, **args: Any) -> Scenario:
        step = Step(self._trigger, {"do": action, **{k: v for k, v in args.items() if v is not None}})
        return Scenario([*self._scenario.steps, step])

    def inject_error(self, api: str | int, error: str | int, **args: Any) -> Scenario:
        return self.do("inject_error", api=api, error=_name(error), **args)

    def push_request_errors(self, api: str | int, errors: list[Any], **args: Any) -> Scenario:
        steps = [[_name(e[0]), e[1]] if isinstance(e, list | tuple) else _name(e) for e in errors]
        return self.do("push_request_errors", api=api, errors=steps, **args)

    def add_latency(self, seconds: float, **args: Any) -> Scenario:
        return self.do("add_latency", seconds=seconds, **args)

    def drop_connection(self, api: str | int | None = None, **args: Any) -> Scenario:
        return self.do("drop_connection", api=api, **args)

    def hold(self, api: str | int | None = None, **args: Any) -> Scenario:
        return self.do("hold", api=api, **args)

    def release(self, **args: Any) -> Scenario:
        return self.do("release", **args)

    def clear_faults(self, **args: Any) -> Scenario:
        return self.do("clear_faults", **args)

    def set_round_trip_time(self, seconds: float, **args: Any) -> Scenario:
        return self.do("set_round_trip_time", seconds=seconds, **args)

    def move_leader(self, topic: str, partition: int, to: int) -> Scenario:
        return self.do("move_leader", topic=topic, partition=partition, to=to)

    def move_coordinator(self, key: str, to: int, *, key_type: str | None = None) -> Scenario:
        return self.do("move_coordinator", key=key, to=to, key_type=key_type)

    def stop_broker(self, broker: int) -> Scenario:
        return self.do("stop_broker", broker=broker)

    def start_broker(self, broker: int) -> Scenario:
        return self.do("start_broker", broker=broker)


def _name(error: Any) -> Any:
    """An ErrorCode as its Kafka name, so the step stays JSON."""
    name = getattr(error, "name", None)
    return name.upper() if isinstance(name, str) and not isinstance(error, str) else error


__all__ += ["StepBuilder"]
