"""Injected faults: the failures a test wants its Kafka client to survive, on demand.

Theory of operation
-------------------
A test adds *faults* to a broker (``Faults.of(broker)``, ``TestBroker.faults``); each names
the requests it applies to (an API, optionally one topic, partition, group, client id or
connection) and how many of them (``count``; ``None``: until removed). While any fault, mute
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
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio
from kio.schema.index import api_key_map

from trikafka.errors import ErrorCode
from trikafka.network.request_channel import CloseConnectionResponse, SendResponse
from trikafka.protocol.entities import entity_fields, error_response
from trikafka.protocol.registry import api_name
from trikafka.server.kafka_apis import KafkaApis
from trikafka.server.throttling import with_throttle_time
from trikafka.testing.recorder import RequestKeys, RequestRecorder, request_keys

__all__ = ["Fault", "FaultKind", "Faults", "parse_api", "parse_error_code"]

log = logging.getLogger("trikafka.faults")

#: The first version of each API whose throttled responses are sent at once, with the
#: client expected to back off (KIP-219); before it the broker delays the response.
KIP_219_VERSIONS = {
    0: 6, 1: 8, 2: 3, 3: 6, 8: 4, 9: 4, 10: 2, 11: 3, 12: 2, 13: 2, 14: 2, 15: 2, 16: 2,
    18: 2, 19: 3, 20: 2, 21: 1, 22: 1, 24: 1, 25: 1, 26: 1, 28: 1, 32: 2, 33: 1, 37: 1, 42: 1,
}  # fmt: skip


#: What a fault can be narrowed to, and the type of each filter.
WHERE = {"topic": str, "partition": int, "group": str, "client_id": str, "connection_id": str}


class FaultKind:
    ERROR = "error"
    LATENCY = "latency"
    DROP_BEFORE = "drop-before"
    DROP_AFTER = "drop-after"
    HOLD = "hold"
    THROTTLE = "throttle"
    ALL = (ERROR, LATENCY, DROP_BEFORE, DROP_AFTER, HOLD, THROTTLE)


def parse_api(api: str | int) -> int:
    """An api key from a key or Kafka's name in any case (``"Produce"``, ``"produce"``,
    ``"INIT_PRODUCER_ID"``); a clear error naming the known names otherwise."""
    if isinstance(api, int) and not isinstance(api, bool):
        if api in api_key_map:
            return api
    elif isinstance(api, str):
        wanted = api.replace("_", "").replace("-", "").lower()
        for key in api_key_map:
            if api_name(key).lower() == wanted:
                return key
    known = ", ".join(sorted(api_name(k) for k in api_key_map))
    raise ValueError(f"unknown api {api!r}: give an api key or one of {known}")


def parse_error_code(error: ErrorCode | str | int) -> ErrorCode:
    """An ErrorCode from itself, its number or its name (``"NOT_LEADER_OR_FOLLOWER"``)."""
    if isinstance(error, ErrorCode):
        return error
    try:
        if isinstance(error, int) and not isinstance(error, bool):
            return ErrorCode(error)
        if isinstance(error, str):
            return ErrorCode[error.strip().lower()]
    except (KeyError, ValueError):
        pass
    raise ValueError(
        f"unknown error code {error!r}: give a Kafka error name such as "
        "'NOT_LEADER_OR_FOLLOWER' or its number"
    )


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

    @property
    def needs_keys(self) -> bool:
        return self.topic is not None or self.group is not None

    def matches(self, request: Any, keys: RequestKeys | None) -> bool:
        if self.spent:
            return False
        if self.api is not None and request.api_key != self.api:
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
        return " ".join(parts)

    def to_json(self) -> dict[str, Any]:
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
        self.active = bool(self.faults or self._muted_until or self.recorder.recording)
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
        self, api: str | int, error: ErrorCode | str | int, *, count: int | None = 1, **where: Any
    ) -> Fault:
        """Answer the next ``count`` matching requests with ``error`` instead of handling them.

        ``where`` narrows the requests: ``topic``, ``partition`` (with its topic), ``group``,
        ``client_id``, ``connection_id``. A request naming several partitions gets the
        error for all of them.
        """
        return self._add(FaultKind.ERROR, api, count, where, error=parse_error_code(error))

    def add_latency(
        self, seconds: float, *, api: str | int | None = None, count: int | None = None, **where: Any
    ) -> Fault:
        """Delay matching requests (every API unless ``api``; a connection with
        ``connection_id=`` or ``client_id=``) by ``seconds`` on trio's clock before handling."""
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not 0 <= seconds < 1e9:
            raise ValueError(f"latency must be a non-negative number of seconds, not {seconds!r}")
        return self._add(FaultKind.LATENCY, api, count, where, delay=float(seconds))

    def drop_connection(
        self, api: str | int | None, *, after: bool = False, count: int | None = 1, **where: Any
    ) -> Fault:
        """Close the connection of the next ``count`` matching requests: before the broker
        handles them (not applied) or, with ``after=True``, once it has (applied, unanswered)."""
        kind = FaultKind.DROP_AFTER if after else FaultKind.DROP_BEFORE
        return self._add(kind, api, count, where)

    def hold_responses(self, api: str | int | None = None, *, count: int | None = None, **where: Any) -> Fault:
        """Handle matching requests but keep their responses until :meth:`release`."""
        return self._add(FaultKind.HOLD, api, count, where)

    def throttle(self, api: str | int | None, throttle_time_ms: int, *, count: int | None = 1, **where: Any) -> Fault:
        """Throttle the next ``count`` matching requests as a quota violation would (KIP-219)."""
        if isinstance(throttle_time_ms, bool) or not isinstance(throttle_time_ms, int) or throttle_time_ms < 0:
            raise ValueError(f"throttle_time_ms must be a non-negative int, not {throttle_time_ms!r}")
        return self._add(FaultKind.THROTTLE, api, count, where, throttle_time_ms=throttle_time_ms)

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
                released += _put(slot, response)
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
        self.faults.clear()
        self._muted_until.clear()
        self._changed()

    def _remove(self, fault: Fault) -> None:
        if fault in self.faults:
            self.faults.remove(fault)
            self._changed()

    # --- the request path ----------------------------------------------------------------

    def _take(self, request: Any) -> list[Fault]:
        """The faults this request triggers; their counts go down, spent ones go away."""
        keys: RequestKeys | None = None
        if self.recorder.recording or any(f.needs_keys for f in self.faults):
            keys = request_keys(request.body, self.recorder.resolve_topic_id)
        if self.recorder.recording:
            self.recorder.record(request, keys)
        hit = []
        for fault in list(self.faults):
            if fault.matches(request, keys):
                hit.append(fault)
                fault.applied += 1
                if fault.remaining is not None:
                    fault.remaining -= 1
                    if fault.remaining == 0 and fault.kind != FaultKind.HOLD:
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
        if (fault := kinds.get(FaultKind.DROP_BEFORE)) is not None:
            self.note(fault, request)
            self.context.respond(request, CloseConnectionResponse())
            return
        if (fault := kinds.get(FaultKind.ERROR)) is not None:
            self.note(fault, request)
            self.context.respond(request, self.error_response(request, fault.error))
            return
        after = [f for f in hit if f.kind in (FaultKind.DROP_AFTER, FaultKind.THROTTLE, FaultKind.HOLD)]
        if after:
            request.response_channel = _FaultyResponses(self, request, request.response_channel, after)
        await handle(request)

    def error_response(self, request: Any, code: ErrorCode) -> Any:
        """The API's answer carrying ``code``: its family's own error response when it has
        one (Produce, Fetch), else every partition mirrored from the request with the code,
        else the code in the top-level error fields."""
        family = self.families.get(request.api_key)
        answer = family.error_response(request, code) if family is not None else None
        if answer is not None:
            return answer
        response_type = request.spec.response_type
        mirrored = _mirror_topics(request.body, response_type, code)
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


class _FaultyResponses:
    """Stands in for a request's response channel to drop, throttle or hold its answer."""

    __slots__ = ("faults", "request", "slot", "hit")

    def __init__(self, faults: Faults, request: Any, slot: Any, hit: list[Fault]) -> None:
        self.faults, self.request, self.slot, self.hit = faults, request, slot, hit

    def send_nowait(self, response: Any) -> None:
        faults, request = self.faults, self.request
        kinds = {f.kind: f for f in self.hit}
        if (fault := kinds.get(FaultKind.DROP_AFTER)) is not None:
            faults.note(fault, request)
            response = CloseConnectionResponse()
        elif (fault := kinds.get(FaultKind.THROTTLE)) is not None and isinstance(response, SendResponse):
            faults.note(fault, request)
            seconds = fault.throttle_time_ms / 1000
            if request.api_version >= KIP_219_VERSIONS.get(request.api_key, 0):
                response = with_throttle_time(request, response, fault.throttle_time_ms)
                faults.mute(request.connection_id, trio.current_time() + seconds)
            else:  # before KIP-219 the broker held the response for the throttle time
                faults.context.purgatory.delay(
                    _put_later, self.slot, response, trio.current_time() + seconds, name="fault-throttle"
                )
                return
        if (fault := kinds.get(FaultKind.HOLD)) is not None and fault in faults.faults:
            faults.note(fault, request)
            fault.held.append((self.slot, response))
            return
        _put(self.slot, response)


async def _put_later(slot: Any, response: Any, until: float) -> None:
    await trio.sleep_until(until)
    _put(slot, response)


def _put(channel: Any, response: Any) -> int:
    try:
        channel.send_nowait(response)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return 0  # the client went away meanwhile
    return 1


def _times(count: int | None) -> str:
    return "until removed" if count is None else f"next {count} request(s)"


def _mirror_topics(body: Any, response_type: type, code: ErrorCode) -> Any:
    """The request's ``topics[]`` (and their ``partitions[]``) answered with ``code`` in
    every error field — for responses shaped that way (CreateTopics, OffsetCommit,
    ListOffsets, TxnOffsetCommit, ...); None for any other shape."""
    topic_cls = entity_fields(response_type).get("topics", (None, None, None))[2]
    if topic_cls is None or not isinstance(getattr(body, "topics", None), tuple):
        return None
    topic_fields = entity_fields(topic_cls)
    if "name" not in topic_fields:
        return None
    partition_cls = topic_fields.get("partitions", (None, None, None))[2]
    topics = []
    for topic in body.topics:
        name = getattr(topic, "name", None)
        if not isinstance(name, str):
            return None
        values: dict[str, Any] = {"name": name}
        if partition_cls is not None:
            indexes = [
                p if isinstance(p, int) else getattr(p, "partition_index", None)
                for p in getattr(topic, "partitions", None) or ()
            ]
            values["partitions"] = [
                error_response(partition_cls, code, partition_index=i) for i in indexes if i is not None
            ]
        topics.append(error_response(topic_cls, code, **values))
    return error_response(response_type, code, topics=topics)
