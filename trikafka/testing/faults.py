"""Injected faults: the failures a test wants its Kafka client to survive, on demand.

Theory of operation
-------------------
A test adds *faults* to a broker (``Faults.of(broker)``, ``TestBroker.faults``); each names
the requests it applies to (an API, optionally one topic, partition, group, client id or
connection) and how many of them (``count``; by default, :data:`DEFAULT_COUNT`, every
matching request until the fault is removed — the same for every kind). While any fault, mute
or recording is active the faults are the broker's request interceptor
(``KafkaApis.interceptor``, the one hook the request path has for the test kit), so
``KafkaApis.handle`` passes each request to :meth:`Faults.intercept` first, which in this
order:

1. records the request (when the recorder is on);
2. waits out a throttle mute of its connection and any injected **latency** — as a delayed
   operation in the purgatory, so no handler task is held;
3. **drops the connection before** handling (the request is never applied), or answers an
   injected **error** without handling — the API's own error response, the code in every
   partition (or top-level) error field the response has;
4. otherwise lets the request through with its response channel wrapped, so the answer can be
   **dropped after** handling (applied, but the client sees its connection close),
   **throttled** (KIP-219: ``throttle_time_ms`` set in the response, sent at once, then the
   connection muted for that long — here its next request waits, which a client cannot tell
   from a muted socket; versions before KIP-219 get the response delayed instead, as Kafka
   does), or **held** until the test releases it.

Every fault that fires logs one WARNING line starting ``injected`` and counts in
``BrokerMetrics.injected_faults`` by (API, kind). All delays are on trio's clock, so a
MockClock test moves through them in no time.

The faults are per broker: a cluster of in-process brokers has one ``Faults`` per broker.
With nothing active the interceptor is unset and no code of this module runs per request.
"""

from __future__ import annotations

import itertools
import logging
import weakref
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import attrs
import trio

from trikafka.errors import ErrorCode
from trikafka.network.request_channel import CloseConnectionResponse
from trikafka.protocol.entities import error_response
from trikafka.protocol.registry import api_name
from trikafka.server.kafka_apis import KafkaApis
from trikafka.testing.fault_codes import (
    REBOOTSTRAP_MIN_VERSION,
    FaultKind,
    check_carried,
    mirror_topics,
    parse_api,
    parse_error_code,
)
from trikafka.testing.fault_responses import FaultyResponses, put
from trikafka.testing.recorder import RequestKeys, RequestRecorder, request_keys

__all__ = ["DEFAULT_COUNT", "Fault", "FaultKind", "Faults", "parse_api", "parse_error_code", "watch_requests"]

#: An error as a fault takes it: kio's ErrorCode, its name or its number.
_Error = ErrorCode | str | int

log = logging.getLogger("trikafka.faults")



#: How many requests a fault hits when no ``count`` is given, for every kind: all that match,
#: until it is removed (a dropped heartbeat stays dropped, so the member's session expires).
DEFAULT_COUNT: int | None = None

#: What a fault can be narrowed to, and the type of each filter.
WHERE = {"topic": str, "partition": int, "group": str, "client_id": str, "connection_id": str}


@attrs.define(eq=False)
class Fault:
    """One injected fault; ``applied`` counts the requests it has hit so far."""

    id: int
    kind: str
    api: int | None
    remaining: int | None  # requests still to hit; None: until removed
    topic: str | None = None
    partition: int | None = None
    group: str | None = None
    client_id: str | None = None
    connection_id: str | None = None
    error: ErrorCode | None = None
    delay: float = 0.0  # seconds (latency)
    throttle_time_ms: int = 0
    applied: int = 0
    spent: bool = False  # a HOLD that has taken its count: it matches nothing more
    held: list[tuple[Any, Any]] = attrs.Factory(list)  # (slot, response) for HOLD
    steps: list[tuple[ErrorCode, float]] = attrs.Factory(list)  # SEQUENCE: (code, seconds) each
    condition: Callable[[], bool] | None = None  # HOLD_UNTIL
    ended: bool = False  # removed: requests it parked go on
    warned: bool = False  # said once that a request's version cannot carry its error

    def take(self) -> list[Fault]:
        """What this fault does to the request it just matched: itself, or for a SEQUENCE
        its next step as a latency (the round-trip time) and an error (not NONE)."""
        if self.kind != FaultKind.SEQUENCE:
            return [self]
        code, rtt = self.steps.pop(0)
        step = []
        if rtt:
            step.append(Fault(self.id, FaultKind.LATENCY, self.api, 0, delay=rtt))
        if code != ErrorCode.none:
            step.append(Fault(self.id, FaultKind.ERROR, self.api, 0, error=code))
        return step

    @property
    def carries_rebootstrap(self) -> bool:
        return self.error == ErrorCode.rebootstrap_required or any(
            code == ErrorCode.rebootstrap_required for code, _ in self.steps[:1])

    @property
    def needs_keys(self) -> bool:
        return self.topic is not None or self.group is not None

    def matches(self, request: Any, keys: RequestKeys | None) -> bool:
        if self.spent:
            return False
        if self.api is not None and request.api_key != self.api:
            return False
        if self.carries_rebootstrap and request.api_version < REBOOTSTRAP_MIN_VERSION:
            if not self.warned:  # KIP-1102: Metadata older than v13 cannot carry it
                self.warned = True
                log.warning("fault #%d: Metadata v%d cannot carry REBOOTSTRAP_REQUIRED (v%d+ can): handled "
                            "normally", self.id, request.api_version, REBOOTSTRAP_MIN_VERSION)
            return False
        if self.client_id is not None and request.client_id != self.client_id:
            return False
        if self.connection_id is not None and request.connection_id != self.connection_id:
            return False
        if keys is not None:
            if self.topic is not None:
                if self.partition is not None:
                    if (self.topic, self.partition) not in keys.partitions:
                        return False
                elif self.topic not in keys.topics:
                    return False
            if self.group is not None and self.group not in keys.groups:
                return False
        return True

    def describe(self) -> str:
        parts = [self.kind, api_name(self.api) if self.api is not None else "any API"]
        for name in ("topic", "partition", "group", "client_id", "connection_id"):
            value = getattr(self, name)
            if value is not None:
                parts.append(f"{name}={value}")
        if self.error is not None:
            parts.append(self.error.name.upper())
        if self.delay:
            parts.append(f"{self.delay * 1000:g} ms")
        if self.throttle_time_ms:
            parts.append(f"throttle {self.throttle_time_ms} ms")
        for code, rtt in self.steps:
            parts.append(code.name.upper() + (f"+{rtt * 1000:g}ms" if rtt else ""))
        return " ".join(parts)

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "kind": self.kind,
            "api": api_name(self.api) if self.api is not None else None,
            "remaining": self.remaining,
            "applied": self.applied,
            "held": len(self.held),
            "description": self.describe(),
        }


#: Each KafkaApis's faults, made on first use and gone with it.
_ATTACHED: weakref.WeakKeyDictionary[KafkaApis, Faults] = weakref.WeakKeyDictionary()


class Faults:
    """A broker's injected faults and its request recorder (see the module docstring)."""

    def __init__(self, apis: KafkaApis, resolve_topic_id: Callable[[Any], str | None] | None = None) -> None:
        self.apis = apis
        self.context = apis.context
        self.families = apis.families  # api key → its API family (``error_response``, when it has one)
        self.recorder = RequestRecorder(resolve_topic_id or self._topic_name, on_change=self._changed)
        self.faults: list[Fault] = []
        self._ids = itertools.count(1)
        self._muted_until: dict[str, float] = {}  # connection id → trio time (throttle)
        self.watchers: list[Callable[[Any, RequestKeys], None]] = []  # see watch_requests()
        self.active = False

    @classmethod
    def of(cls, target: Any) -> Faults:
        """The faults of a broker: a ``Broker``, a cluster node, their ``path`` or their
        ``KafkaApis`` — made (inactive) the first time they are asked for."""
        apis = target
        for step in ("path", "apis"):
            apis = getattr(apis, step, apis)
        if not isinstance(apis, KafkaApis):
            raise TypeError(f"no request path to attach faults to in {target!r}")
        faults = _ATTACHED.get(apis)
        if faults is None:
            faults = _ATTACHED[apis] = cls(apis)
        return faults

    def _changed(self) -> None:
        """Attach as the interceptor while anything is active; detach when nothing is."""
        self.active = bool(self.faults or self._muted_until or self.recorder.recording or self.watchers)
        self.apis.interceptor = self if self.active else None

    def _topic_name(self, topic_id: Any) -> str | None:
        """Fetch v13+ names topics by id only."""
        info = self.context.replicas.topic_by_id(topic_id)
        return None if info is None else info.name

    # --- adding and removing faults ------------------------------------------------------

    def _add(self, kind: str, api: str | int | None, count: int | None, where: dict[str, Any], **fields: Any) -> Fault:
        if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
            raise ValueError(f"count must be a positive number of requests or None, not {count!r}")
        for key, value in where.items():
            if key not in WHERE:
                raise ValueError(f"unknown filter {key!r}; filters are {', '.join(WHERE)}")
            if value is not None and not isinstance(value, WHERE[key]):
                raise ValueError(f"filter {key}={value!r} must be a {WHERE[key].__name__}")
        if where.get("partition") is not None and where.get("topic") is None:
            raise ValueError("a partition filter needs its topic")
        api_key = None if api is None else parse_api(api)
        fault = Fault(next(self._ids), kind, api_key, count, **where, **fields)
        self.faults.append(fault)
        self._changed()
        log.info("fault added: #%d %s (%s)", fault.id, fault.describe(), _times(count))
        return fault

    def inject_error(
        self, api: str | int, error: ErrorCode | str | int, *, count: int | None = DEFAULT_COUNT, **where: object
    ) -> Fault:
        """Answer matching requests (``count`` of them; default all) with ``error`` instead of handling them.

        ``where`` narrows the requests: ``topic``, ``partition`` (with its topic), ``group``,
        ``client_id``, ``connection_id``. A request naming several partitions gets the
        error for all of them.
        """
        code = parse_error_code(error)
        check_carried(parse_api(api), code)
        return self._add(FaultKind.ERROR, api, count, where, error=code)

    def add_latency(
        self, seconds: float, *, api: str | int | None = None, count: int | None = DEFAULT_COUNT, **where: object
    ) -> Fault:
        """Delay matching requests (every API unless ``api``; a connection with
        ``connection_id=`` or ``client_id=``) by ``seconds`` on trio's clock before handling."""
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not 0 <= seconds < 1e9:
            raise ValueError(f"latency must be a non-negative number of seconds, not {seconds!r}")
        return self._add(FaultKind.LATENCY, api, count, where, delay=float(seconds))

    def drop_connection(
        self, api: str | int | None, *, after: bool = False, count: int | None = DEFAULT_COUNT, **where: object
    ) -> Fault:
        """Close the connection of matching requests (``count``; default all): before the broker
        handles them (not applied) or, with ``after=True``, once it has (applied, unanswered)."""
        kind = FaultKind.DROP_AFTER if after else FaultKind.DROP_BEFORE
        return self._add(kind, api, count, where)

    def hold_responses(
        self, api: str | int | None = None, *, count: int | None = DEFAULT_COUNT, **where: object
    ) -> Fault:
        """Handle matching requests but keep their responses until :meth:`release`."""
        return self._add(FaultKind.HOLD, api, count, where)

    def throttle(
        self, api: str | int | None, throttle_time_ms: int, *, count: int | None = DEFAULT_COUNT, **where: object
    ) -> Fault:
        """Throttle matching requests (``count``; default all) as a quota violation would (KIP-219)."""
        if isinstance(throttle_time_ms, bool) or not isinstance(throttle_time_ms, int) or throttle_time_ms < 0:
            raise ValueError(f"throttle_time_ms must be a non-negative int, not {throttle_time_ms!r}")
        return self._add(FaultKind.THROTTLE, api, count, where, throttle_time_ms=throttle_time_ms)

    def push_request_errors(
        self, api: str | int, errors: Iterable[_Error | tuple[_Error, float]], **where: object
    ) -> Fault:
        """Answer the next matching requests one step each, in order, as librdkafka's mock
        ``push_request_errors``: each step an error (``NONE``: handled normally) or an
        ``(error, rtt)`` pair, the request then handled ``rtt`` seconds later. The fault
        ends with its last step."""
        steps = []
        for step in errors:
            code, rtt = step if isinstance(step, tuple | list) else (step, 0.0)
            if isinstance(rtt, bool) or not isinstance(rtt, int | float) or not 0 <= rtt < 1e9:
                raise ValueError(f"round-trip time {rtt!r} must be a non-negative number of seconds")
            steps.append((parse_error_code(code), float(rtt)))
        if not steps:
            raise ValueError("push_request_errors needs at least one error")
        for code, _ in steps:
            check_carried(parse_api(api), code)
        return self._add(FaultKind.SEQUENCE, api, len(steps), where, steps=steps)

    def hold_until(
        self,
        condition: Callable[[], bool],
        api: str | int | None = None,
        *,
        count: int | None = DEFAULT_COUNT,
        **where: object,
    ) -> Fault:
        """Park matching requests (no handler held) until ``condition()`` is true — checked
        now and after every response the broker sends — then handle them, as kfake's
        ``SleepControl``. Removing the fault lets the parked requests go on."""
        if not callable(condition):
            raise ValueError(f"hold_until needs a callable condition, not {condition!r}")
        return self._add(FaultKind.HOLD_UNTIL, api, count, where, condition=condition)

    def get(self, fault_id: int) -> Fault:
        for fault in self.faults:
            if fault.id == fault_id:
                return fault
        raise KeyError(f"no fault #{fault_id}; active: {[f.id for f in self.faults]}")

    def release(self, fault: Fault | int | None = None) -> int:
        """Send the responses a HOLD fault (or every one) kept, and end it; returns how many."""
        faults = [f for f in self.faults if f.kind == FaultKind.HOLD]
        if fault is not None:
            target = self.get(fault) if isinstance(fault, int) else fault
            faults = [target]
        released = 0
        for hold in faults:
            self._remove(hold)
            pending, hold.held = hold.held, []
            for slot, response in pending:
                released += put(slot, response)
        if released:
            log.info("released %d held response(s)", released)
        return released

    def remove(self, fault: Fault | int) -> None:
        """End a fault; a HOLD's kept responses are released."""
        target = self.get(fault) if isinstance(fault, int) else fault
        if target.kind == FaultKind.HOLD:
            self.release(target)
        else:
            self._remove(target)

    def clear(self) -> None:
        """End every fault (held responses are released) and every throttle mute."""
        self.release()
        for fault in self.faults:
            fault.ended = True
        self.faults.clear()
        self._muted_until.clear()
        self._changed()
        self.context.state_changes.bump()  # parked requests see their fault gone

    def _remove(self, fault: Fault) -> None:
        fault.ended = True
        if fault.kind == FaultKind.HOLD_UNTIL:
            self.context.state_changes.bump()
        if fault in self.faults:
            self.faults.remove(fault)
            self._changed()

    # --- the request path ----------------------------------------------------------------

    def _take(self, request: Any) -> list[Fault]:
        """The faults this request triggers; their counts go down, spent ones go away."""
        keys: RequestKeys | None = None
        if self.recorder.recording or self.watchers or any(f.needs_keys for f in self.faults):
            keys = request_keys(request.body, self.recorder.resolve_topic_id)
            if self.recorder.recording:
                self.recorder.record(request, keys)
            for watcher in list(self.watchers):
                watcher(request, keys)
        hit = []
        for fault in list(self.faults):
            if fault.matches(request, keys):
                hit.extend(fault.take())
                fault.applied += 1
                if fault.remaining is not None:
                    fault.remaining -= 1
                    if fault.remaining == 0 and fault.kind not in (FaultKind.HOLD, FaultKind.HOLD_UNTIL):
                        self._remove(fault)
                    elif fault.remaining == 0:
                        fault.spent = True  # it keeps its responses until released
        return hit

    async def intercept(self, request: Any, handle: Callable[[Any], Awaitable[None]]) -> None:
        """Run ``request`` through the faults; ``handle(request)`` handles it."""
        if request.spec is None:  # an ApiVersions at a version we do not know
            await handle(request)
            return
        hit = self._take(request)
        now = trio.current_time()
        until = self._muted_until.pop(request.connection_id, None)
        if until is not None or (self._muted_until and not self.faults):
            # Forget the mutes of connections that are gone since; maybe nothing is left.
            self._muted_until = {c: t for c, t in self._muted_until.items() if t > now}
            self._changed()
        delay = max(0.0, (until or 0.0) - now)
        for fault in hit:
            if fault.kind == FaultKind.LATENCY:
                self.note(fault, request)
                delay += fault.delay
        if delay > 0:
            self.context.purgatory.delay(
                self._after_delay, request, handle, hit, now + delay, name=f"fault-latency-{request.connection_id}"
            )
            return
        await self._apply(request, handle, hit)

    async def _after_delay(self, request: Any, handle: Any, hit: list[Fault], until: float) -> None:
        await trio.sleep_until(until)
        await self._apply(request, handle, hit)

    async def _apply(self, request: Any, handle: Any, hit: list[Fault]) -> None:
        kinds = {f.kind: f for f in hit}
        if (fault := kinds.get(FaultKind.HOLD_UNTIL)) is not None and not self._holds(fault):
            self.note(fault, request)
            self.context.purgatory.delay(self._after_condition, request, handle, hit, fault, name="fault-hold-until")
            return
        if (fault := kinds.get(FaultKind.DROP_BEFORE)) is not None:
            self.note(fault, request)
            self.context.respond(request, CloseConnectionResponse())
            return
        if (fault := kinds.get(FaultKind.ERROR)) is not None:
            self.note(fault, request)
            self.context.respond(request, self.error_response(request, fault.error))  # type: ignore[arg-type]  # an error fault carries its error
            return
        after = [f for f in hit if f.kind in (FaultKind.DROP_AFTER, FaultKind.THROTTLE, FaultKind.HOLD)]
        if after:
            request.response_send = FaultyResponses(self, request, request.response_send, after)
        await handle(request)

    def _holds(self, fault: Fault) -> bool:
        """Whether a HOLD_UNTIL lets its requests go: ended, or its condition true (a
        condition that raises is logged and lets them go)."""
        try:
            return fault.ended or bool(fault.condition and fault.condition())
        except Exception:
            log.exception("hold_until condition of fault #%d failed: its requests go on", fault.id)
            return True

    async def _after_condition(self, request: Any, handle: Any, hit: list[Fault], fault: Fault) -> None:
        await self.context.state_changes.wait_until(lambda: self._holds(fault))
        if fault.spent:
            self._remove(fault)
        await self._apply(request, handle, [f for f in hit if f is not fault])

    def error_response(self, request: Any, code: ErrorCode) -> Any:
        """The API's answer carrying ``code``: its family's own error response when it has
        one (Produce, Fetch), else every partition mirrored from the request with the code,
        else the code in the top-level error fields."""
        family = self.families.get(request.api_key)
        answer = family.error_response(request, code) if family is not None else None
        if answer is not None:
            return answer
        response_type = request.spec.response_type
        mirrored = mirror_topics(request.body, response_type, code)
        return mirrored if mirrored is not None else error_response(response_type, code)

    def note(self, fault: Fault, request: Any) -> None:
        """Log and count one injected fault."""
        name = api_name(request.api_key)
        self.context.metrics.injected_faults[(name, fault.kind)] += 1
        log.warning(
            "injected %s into %s v%d (correlation id %d) from %s (client id %s) [fault #%d]",
            fault.describe(),
            name,
            request.api_version,
            request.correlation_id,
            request.connection_id,
            request.client_id,
            fault.id,
        )

    def mute(self, connection_id: str, until: float) -> None:
        self._muted_until[connection_id] = max(until, self._muted_until.get(connection_id, 0.0))
        self._changed()


def watch_requests(faults: Faults, callback: Callable[[Any, RequestKeys], None]) -> Callable[[], None]:
    """Call ``callback(request, keys)`` for every request ``faults``' broker receives, before
    any fault acts on it, until the returned function is called (a scenario's request
    triggers; ``Faults.clear`` leaves it)."""
    faults.watchers.append(callback)
    faults._changed()

    def stop() -> None:
        if callback in faults.watchers:
            faults.watchers.remove(callback)
            faults._changed()

    return stop


def _times(count: int | None) -> str:
    return "until removed" if count is None else f"next {count} request(s)"
