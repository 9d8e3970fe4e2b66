"""Hypothesis strategies that generate fault scenarios, so a property test finds the schedule
of faults that breaks a client, and hypothesis shrinks it to the smallest one.

::

    from hypothesis import given, settings
    from trikafka.testing.strategies import scenarios

    @settings(max_examples=50, derandomize=True, deadline=None)
    @given(scenarios(max_steps=3, apis=["Produce", "Fetch", "OffsetCommit"]))
    def test_every_record_is_processed(scenario):
        assert run_my_consumer_under(scenario) == expected  # apply_scenario inside

A falsifying example prints as ``Scenario.from_json('{...}')``: the shrunk schedule, as JSON
that replays it (``POST /scenario`` takes the same). hypothesis's own ``@seed``,
``@reproduce_failure`` (with ``print_blob=True``) and its example database replay it too.

What is generated stays inside the bounds given, and every fault it adds *ends*: a ``count``
of at most ``max_count`` requests, a hold released after at most ``max_delay`` seconds, so a
correct client always gets through eventually — the property can ask for progress.
Triggers shrink toward ``at 0`` and the first request; actions toward the first API, the first
error and a count of 1 (list the likeliest first). Needs hypothesis (``pip install
'trikafka[hypothesis]'``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

try:
    from hypothesis import strategies as st
except ImportError as exc:  # pragma: no cover - hypothesis is the test extra
    raise ImportError(
        "trikafka.testing.strategies needs hypothesis: pip install 'trikafka[hypothesis]' (or hypothesis)"
    ) from exc

from trikafka.testing.scenario import ACTIONS, CLUSTER_ACTIONS, Scenario, ScenarioError, Step

__all__ = [
    "DEFAULT_APIS", "DEFAULT_ERRORS", "FAULT_ACTIONS", "actions", "scenarios", "steps", "triggers",
]  # fmt: skip

#: The APIs a consumer-and-producer client leans on, likeliest trouble first.
DEFAULT_APIS = (
    "Produce", "Fetch", "OffsetCommit", "OffsetFetch", "Metadata", "FindCoordinator", "ListOffsets",
    "JoinGroup", "SyncGroup", "Heartbeat",
)  # fmt: skip
#: Errors a broker answers in normal operation (retriable ones, which clients must survive).
DEFAULT_ERRORS = (
    "NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR",
    "COORDINATOR_LOAD_IN_PROGRESS", "UNKNOWN_TOPIC_OR_PARTITION", "NETWORK_EXCEPTION",
)  # fmt: skip
#: The actions on one broker that generated scenarios use by default.
FAULT_ACTIONS = ("inject_error", "push_request_errors", "add_latency", "drop_connection", "hold")
_TRIGGERS = ("at", "after", "when")


def _tenths(upper: float, lower: float = 0.0) -> st.SearchStrategy[float]:
    """Seconds in tenths (they shrink and print cleanly)."""
    return st.integers(int(lower * 10), int(upper * 10)).map(lambda t: t / 10)


def triggers(
    *,
    kinds: Sequence[str] = ("at", "after"),
    apis: Sequence[str] = DEFAULT_APIS,
    max_time: float = 30.0,
    max_requests: int = 10,
    partitions: Sequence[tuple[str, int]] = (),
    groups: Sequence[str] = (),
    max_offset: int = 10,
) -> st.SearchStrategy[dict[str, Any]]:
    """A step's trigger: ``at`` up to ``max_time`` seconds, ``after`` up to ``max_requests``
    requests (of any API or one of ``apis``), ``when`` a predicate over ``partitions``
    (high watermark) and ``groups`` (members; with partitions, committed offsets)."""
    unknown = set(kinds) - set(_TRIGGERS)
    if unknown or not kinds:
        raise ValueError(f"trigger kinds {sorted(unknown) or '(none)'}: allowed are {', '.join(_TRIGGERS)}")
    options: list[st.SearchStrategy[dict[str, Any]]] = []
    if "at" in kinds:
        options.append(_tenths(max_time).map(lambda t: {"at": t}))
    if "after" in kinds:
        api = st.none() | st.sampled_from(list(apis))
        options.append(
            st.builds(lambda n, a: {"after": n, **({"api": a} if a else {})}, st.integers(1, max_requests), api)
        )
    if "when" in kinds:
        predicates = []
        offset = st.integers(1, max_offset)
        if partitions:
            tp = st.sampled_from(list(partitions))
            predicates.append(st.builds(
                lambda p, n: {"when": "high_watermark", "topic": p[0], "partition": p[1], "at_least": n}, tp, offset
            ))  # fmt: skip
        if groups:
            group = st.sampled_from(list(groups))
            predicates.append(st.builds(lambda g, n: {"when": "members", "group": g, "at_least": n}, group,
                                        st.integers(1, 3)))  # fmt: skip
            if partitions:
                predicates.append(st.builds(
                    lambda g, p, n: {"when": "committed", "group": g, "topic": p[0], "partition": p[1], "at_least": n},
                    group, st.sampled_from(list(partitions)), offset,
                ))  # fmt: skip
        if not predicates:
            raise ValueError("'when' triggers need partitions= or groups= to make predicates over")
        options.append(st.one_of(predicates))
    return st.one_of(options)


def _tagged(kind: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda args: {"do": kind, **args}


def actions(
    *,
    kinds: Sequence[str] = FAULT_ACTIONS,
    apis: Sequence[str] = DEFAULT_APIS,
    errors: Sequence[str] = DEFAULT_ERRORS,
    max_count: int = 3,
    max_delay: float = 5.0,
    brokers: Sequence[int] = (),
    partitions: Sequence[tuple[str, int]] = (),
    groups: Sequence[str] = (),
) -> st.SearchStrategy[dict[str, Any]]:
    """A step's action, of ``kinds`` (:data:`~trikafka.testing.scenario.ACTIONS`; the
    cluster ones need ``brokers``, ``move_leader`` ``partitions`` and ``move_coordinator``
    ``groups``), every fault bounded by ``max_count`` requests and ``max_delay`` seconds."""
    unknown = [k for k in kinds if k not in ACTIONS]
    if unknown or not kinds:
        raise ValueError(f"actions {unknown or '(none)'}: allowed are {', '.join(ACTIONS)}")
    if any(k in CLUSTER_ACTIONS for k in kinds) and not brokers:
        raise ValueError(f"the cluster actions {', '.join(k for k in kinds if k in CLUSTER_ACTIONS)} need brokers=")
    api, error = st.sampled_from(list(apis)), st.sampled_from(list(errors))
    count, delay = st.integers(1, max_count), _tenths(max_delay, 0.1)
    made: dict[str, st.SearchStrategy[dict[str, Any]]] = {
        "inject_error": st.fixed_dictionaries({"api": api, "error": error, "count": count}),
        "push_request_errors": st.fixed_dictionaries({
            "api": api, "errors": st.lists(error | st.tuples(error, delay).map(list), min_size=1, max_size=max_count),
        }),  # fmt: skip
        "add_latency": st.fixed_dictionaries({"seconds": delay, "api": api, "count": count}),
        "drop_connection": st.fixed_dictionaries({"api": api, "after": st.booleans(), "count": count}),
        "hold": st.fixed_dictionaries({"api": api, "count": count, "seconds": delay}),
        "release": st.just({}),
        "clear_faults": st.just({}),
        "set_round_trip_time": st.fixed_dictionaries({"seconds": delay}),
    }
    if brokers:
        broker = st.sampled_from(list(brokers))
        made["stop_broker"] = st.fixed_dictionaries({"broker": broker})
        made["start_broker"] = st.fixed_dictionaries({"broker": broker})
        if "move_leader" in kinds:
            if not partitions:
                raise ValueError("move_leader needs partitions=[(topic, partition), ...]")
            made["move_leader"] = st.builds(
                lambda p, to: {"topic": p[0], "partition": p[1], "to": to}, st.sampled_from(list(partitions)), broker
            )
        if "move_coordinator" in kinds:
            if not groups:
                raise ValueError("move_coordinator needs groups=[...]")
            made["move_coordinator"] = st.fixed_dictionaries({"key": st.sampled_from(list(groups)), "to": broker})
    return st.one_of([made[k].map(_tagged(k)) for k in kinds])


def steps(**bounds: Any) -> st.SearchStrategy[Step]:
    """One step; ``bounds`` are those of :func:`scenarios`."""
    trigger_keys = ("apis", "max_time", "max_requests", "partitions", "groups", "max_offset")
    action_keys = ("apis", "errors", "max_count", "max_delay", "brokers", "partitions", "groups")
    trigger_bounds = {k: bounds[k] for k in trigger_keys if k in bounds}
    action_bounds = {k: bounds[k] for k in action_keys if k in bounds}
    if "triggers" in bounds:
        trigger_bounds["kinds"] = bounds["triggers"]
    if "actions" in bounds:
        action_bounds["kinds"] = bounds["actions"]
    return st.builds(Step, triggers(**trigger_bounds), actions(**action_bounds))


def scenarios(
    *,
    min_steps: int = 1,
    max_steps: int = 5,
    apis: Sequence[str] = DEFAULT_APIS,
    errors: Sequence[str] = DEFAULT_ERRORS,
    actions: Sequence[str] = FAULT_ACTIONS,
    triggers: Sequence[str] = ("at", "after"),
    max_time: float = 30.0,
    max_requests: int = 10,
    max_count: int = 3,
    max_delay: float = 5.0,
    brokers: Sequence[int] = (),
    partitions: Sequence[tuple[str, int]] = (),
    groups: Sequence[str] = (),
) -> st.SearchStrategy[Scenario]:
    """Scenarios of ``min_steps`` to ``max_steps`` steps: triggers of ``triggers`` kinds
    (``at`` within ``max_time`` seconds; ``after`` within ``max_requests`` requests; ``when``
    over ``partitions``/``groups``), actions of ``actions`` kinds over ``apis`` and
    ``errors``, each fault ending (see the module docstring); for a cluster, ``brokers``
    (node ids) with ``stop_broker``/``start_broker``/``move_leader``/``move_coordinator``."""
    if not 0 <= min_steps <= max_steps:
        raise ValueError(f"min_steps={min_steps} and max_steps={max_steps}: need 0 <= min_steps <= max_steps")
    for name, value in (("apis", apis), ("errors", errors)):
        if not value:
            raise ValueError(f"{name} must name at least one")
    try:  # names checked once, here, rather than in every generated step
        Scenario([Step({"at": 0}, {"do": "inject_error", "api": a, "error": e}) for a in apis for e in errors])
    except ScenarioError as exc:
        raise ValueError(str(exc).partition(": ")[2]) from None
    step = steps(
        apis=apis, errors=errors, actions=actions, triggers=triggers, max_time=max_time, max_requests=max_requests,
        max_count=max_count, max_delay=max_delay, brokers=brokers, partitions=partitions, groups=groups,
    )  # fmt: skip
    return _scenario(st.lists(step, min_size=min_steps, max_size=max_steps))


@st.composite
def _scenario(draw: Any, steps: st.SearchStrategy[list[Step]]) -> Scenario:
    # Built in a composite, not .map(Scenario): hypothesis then prints a falsifying example
    # with Scenario's own repr, ``Scenario.from_json('...')``, which replays it as written.
    return Scenario(draw(steps))
