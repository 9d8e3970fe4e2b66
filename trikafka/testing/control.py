"""The control interface: a running dev broker's faults, recorder and waits over HTTP.

Tests that are not written in Python (kafkajs, Go, a shell script around kcat) reach the
same controls as ``kafka_broker`` through ``python -m trikafka --control-listener
127.0.0.1:0``: JSON over HTTP/1.1, one request per connection, so ``curl`` is the whole
client. Routes (``?broker=<node id>`` picks a broker of a cluster; the first by default)::

    GET    /faults                       the active faults
    POST   /faults                       add one: {"kind": "error"|"latency"|"drop"|"hold"|
                                         "throttle"|"sequence", "api": "Produce", "error": "NOT_LEADER_OR_
                                         FOLLOWER", "count": 2, "after": true, "latency_ms":
                                         100, "throttle_time_ms": 500, "topic": "t",
                                         "partition": 0, "group": "g", "client_id": "c",
                                         "connection_id": "...", "errors": ["NONE",
                                         ["NOT_LEADER_OR_FOLLOWER", 250]]}  → 201 {"fault": {...}}
    DELETE /faults                       remove every fault (held responses are released)
    DELETE /faults/<id>                  remove one
    POST   /faults/<id>/release          send a hold's responses   → {"released": n}
    POST   /recorder/start | /recorder/stop;  DELETE /recorder
    GET    /recorder?api=Produce&client_id=app               → {"requests": [...]}
    GET    /wait/high-watermark?topic=t&partition=0&at_least=5&timeout_ms=10000
    GET    /wait/group-state?group=g&state=Stable&members=2&timeout_ms=...
    GET    /wait/committed?group=g&topic=t&partition=0&at_least=5&timeout_ms=...
    GET    /wait/transaction-state?transactional_id=x&state=CompleteCommit&timeout_ms=...
    GET    /wait/share-group-state?group=g&state=Stable&members=2&timeout_ms=...
    GET    /wait/share-records?group=g&topic=t&partition=0&state=Acknowledged&at_least=5&timeout_ms=...
    POST   /scenario  {"steps": [{"trigger": {"at": 1.5}, "action": {"do": "inject_error", ...}}]}
                                         start a fault scenario (trikafka.testing.scenario; a
                                         cluster's steps cluster-wide unless ?broker=) → 201
    GET    /scenario                     its run: steps, fired (step, at, faults), done, error
    GET    /scenario/wait?timeout_ms=... 200 once every step fired; 408 naming the step it waits on
    DELETE /scenario                     cancel it (faults it added stay; DELETE /faults ends them)
    GET    /wait/client-metric?name=org.apache.kafka.producer.&client_id=app&at_least=1&timeout_ms=...
    GET    /client-metrics                   what clients pushed (KIP-714)  → {"clients": [...]}
    POST   /topics  {"name": "t", "partitions": 3, "replication_factor": 1, "config": {...}}
                                         create a topic (every partition led on return) → 201
    POST   /topics/<t>/records  {"records": ["v", {"key": "k", "value": "v", "headers": {"h": "x"}}],
                                 "partition": 0, "encoding": "utf-8"|"base64"}
                                         produce; → {"offsets": [...]} once acknowledged
    GET    /topics/<t>/records?partition=0&from_offset=0&max_records=5&timeout_ms=...&encoding=base64
                                         read back → {"records": [{"topic", "partition", "offset",
                                         "timestamp", "key", "value", "headers": [[n, v]]}]}

A ``--brokers N`` process also serves the cluster's controls (stop and start a broker, move
a leader or a coordinator, shrink and expand an ISR, a broker's round-trip time): see
:mod:`trikafka.testing.control_cluster`.

Keys, values and header values are UTF-8 text unless ``encoding`` is ``base64``; a read
that meets bytes that are not UTF-8 answers 400 saying to ask with ``encoding=base64``. The
topic routes speak Kafka to the broker (``trikafka.testing.topics``): the cluster's refusals
answer 409 (the topic exists), 404 (no such topic) or 400, each naming the topic; a read
that runs out of ``timeout_ms`` answers 408 with what it got.

A wait answers 200 when the state is reached, 408 when ``timeout_ms`` (default 10000, on
trio's clock) passes first, with what it saw (``"saw": "high watermark is 2"``). Bad input
answers 400 with {"error": "..."} naming the field.

Why hand-written HTTP: the control surface is a dozen JSON routes on a loopback port; the
subset needed (request line, headers, a Content-Length body, ``Connection: close``) is a
hundred lines on trio's streams, where hypercorn would add an ASGI stack and a dependency
for a test tool. The head is parsed sans-IO (:func:`parse_head`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import attrs
import trio

from trikafka.testing import topics
from trikafka.testing.control_cluster import RouteError, cluster_route
from trikafka.testing.surface import controls, describe_state
from trikafka.testing.targets import BrokerTarget

__all__ = ["ControlServer", "HttpError", "HttpRequest", "parse_head"]

log = logging.getLogger("trikafka.control")

MAX_HEAD = 16 * 1024
MAX_BODY = 1024 * 1024
READ_TIMEOUT = 10.0
DEFAULT_WAIT_MS = 10_000
_REASONS = {
    200: "OK",
    201: "Created",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    409: "Conflict",
    413: "Payload Too Large",
    500: "Internal Server Error",
}


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@attrs.frozen
class HttpRequest:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]

    @property
    def content_length(self) -> int:
        raw = self.headers.get("content-length", "0")
        if not raw.isdigit():
            raise HttpError(400, f"Content-Length {raw!r} is not a number")
        if int(raw) > MAX_BODY:
            raise HttpError(413, f"body of {raw} bytes is over {MAX_BODY}")
        return int(raw)


def parse_head(head: bytes) -> HttpRequest:
    """The request line and headers (the bytes before the blank line)."""
    try:
        text = head.decode("latin-1")
        request_line, *header_lines = text.split("\r\n")
        method, target, version = request_line.split(" ")
    except ValueError:
        raise HttpError(400, "malformed request line") from None
    if not version.startswith("HTTP/1."):
        raise HttpError(400, f"unsupported protocol {version!r}")
    headers = {}
    for line in header_lines:
        name, sep, value = line.partition(":")
        if not sep:
            raise HttpError(400, f"malformed header line {line!r}")
        headers[name.strip().lower()] = value.strip()
    url = urlsplit(target)
    return HttpRequest(method.upper(), url.path.rstrip("/") or "/", dict(parse_qsl(url.query)), headers)


def _arg(values: dict[str, Any], name: str, kind: type = str, default: Any = ...) -> Any:
    if name not in values or values[name] is None:
        if default is ...:
            raise HttpError(400, f"missing {name!r}")
        return default
    value = values[name]
    try:
        return value if isinstance(value, kind) and not isinstance(value, bool) else kind(value)
    except (TypeError, ValueError):
        raise HttpError(400, f"{name}={value!r} is not a {kind.__name__}") from None


_FAULT_KINDS = ("error", "latency", "drop", "hold", "throttle", "sequence")
_WHERE = ("topic", "partition", "group", "client_id", "connection_id")


def add_fault(faults: Any, spec: dict[str, Any]) -> Any:
    """A fault from its JSON description (see the module docstring)."""
    kind = spec.get("kind")
    if kind not in _FAULT_KINDS:
        raise HttpError(400, f"kind {kind!r} is not one of {', '.join(_FAULT_KINDS)}")
    where = {k: spec[k] for k in _WHERE if spec.get(k) is not None}
    count = {"count": spec["count"]} if "count" in spec else {}
    api = spec.get("api")
    if kind == "error":
        return faults.inject_error(_arg(spec, "api"), spec.get("error"), **count, **where)
    if kind == "latency":
        seconds = _arg(spec, "latency_ms", float) / 1000
        return faults.add_latency(seconds, api=api, **count, **where)
    if kind == "drop":
        return faults.drop_connection(api, after=bool(spec.get("after", False)), **count, **where)
    if kind == "hold":
        return faults.hold_responses(api, **count, **where)
    if kind == "sequence":  # "errors": ["NOT_LEADER_OR_FOLLOWER", ["NONE", 250], ...] (rtt in ms)
        errors = spec.get("errors")
        if not isinstance(errors, list):
            raise HttpError(400, "a sequence needs 'errors': a list of codes or [code, rtt_ms] pairs")
        steps = [
            (e[0], _arg({"rtt_ms": e[1]}, "rtt_ms", float) / 1000) if isinstance(e, list) and len(e) == 2 else e
            for e in errors
        ]
        return faults.push_request_errors(_arg(spec, "api"), steps, **where)
    return faults.throttle(api, _arg(spec, "throttle_time_ms", int), **count, **where)


class ControlServer:
    """Serves the routes above for the brokers ``brokers()`` returns (a cluster's, or one)."""

    def __init__(self, targets: Callable[[], Sequence[BrokerTarget]], cluster: Callable[[], Any] | None = None) -> None:
        self.targets = targets  # e.g. lambda: broker_targets(broker_or_cluster)
        self.cluster = cluster  # the cluster of a --brokers N process (control_cluster.py)

    async def bind(self, host: str, port: int) -> list[trio.SocketListener]:
        """Bind the control listener (``serve`` binds it itself when not given one); a taken
        port is an OSError naming the address."""
        try:
            return await trio.open_tcp_listeners(port, host=host)
        except OSError as exc:
            raise OSError(exc.errno, f"{exc.strerror}: {host}:{port} (--control-listener)") from exc

    async def serve(
        self, host: str, port: int, *, listeners: list[trio.SocketListener] | None = None,
        task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        listeners = listeners or await self.bind(host, port)
        address = listeners[0].socket.getsockname()[:2]
        log.info("control interface on http://%s:%d", *address)
        task_status.started(address)
        await trio.serve_listeners(self.handle_connection, listeners)

    async def handle_connection(self, stream: trio.abc.Stream) -> None:
        try:
            status, body = 500, {"error": "internal error"}
            try:
                with trio.fail_after(READ_TIMEOUT):
                    request, payload = await self._read(stream)
                status, body = await self.dispatch(request, payload)
            except HttpError as exc:
                status, body = exc.status, {"error": str(exc)}
            except trio.TooSlowError:
                status, body = 408, {"error": f"request not received within {READ_TIMEOUT} s"}
            except KeyError as exc:  # no such fault
                status, body = 404, {"error": str(exc).strip("'\"")}
            except ValueError as exc:  # the faults' own validation
                status, body = 400, {"error": str(exc)}
            except Exception:
                log.exception("control request failed")
            data = json.dumps(body).encode()
            head = (
                f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n"
            )
            await stream.send_all(head.encode() + data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await trio.aclose_forcefully(stream)

    async def _read(self, stream: trio.abc.Stream) -> tuple[HttpRequest, Any]:
        buffer = bytearray()
        while b"\r\n\r\n" not in buffer:
            if len(buffer) > MAX_HEAD:
                raise HttpError(400, f"request head over {MAX_HEAD} bytes")
            data = await stream.receive_some(65536)
            if not data:
                raise HttpError(400, "connection closed before the request was complete")
            buffer += data
        head, _, rest = bytes(buffer).partition(b"\r\n\r\n")
        request = parse_head(head)
        length = request.content_length
        body = bytearray(rest)
        while len(body) < length:
            data = await stream.receive_some(65536)
            if not data:
                raise HttpError(400, "connection closed inside the body")
            body += data
        if not length:
            return request, {}
        try:
            payload = json.loads(bytes(body[:length]))
        except ValueError:
            raise HttpError(400, "the body is not JSON") from None
        if not isinstance(payload, dict):
            raise HttpError(400, "the body must be a JSON object")
        return request, payload

    def _target(self, request: HttpRequest) -> BrokerTarget:
        targets = list(self.targets())
        if "broker" not in request.query:
            return targets[0]
        node_id = _arg(request.query, "broker", int)
        for target in targets:
            if target.node_id == node_id:
                return target
        raise HttpError(404, f"no broker {node_id}; brokers: {[t.node_id for t in targets]}")

    async def dispatch(self, request: HttpRequest, payload: dict[str, Any]) -> tuple[int, Any]:
        method, parts = request.method, request.path.strip("/").split("/")
        try:
            answer = await cluster_route(self.cluster and self.cluster(), method, parts, payload)
        except RouteError as exc:
            raise HttpError(exc.status, str(exc)) from None
        if answer is not None:
            return answer
        if parts[0] == "scenario":
            return await self._scenario(request, method, parts[1:], payload)
        if parts[0] == "topics":
            return await self._topics(request, method, parts[1:], payload)
        target = self._target(request)
        faults = target.faults
        if parts[0] == "faults":
            if len(parts) == 1 and method == "GET":
                return 200, {"faults": [f.to_json() for f in faults.faults]}
            if len(parts) == 1 and method == "POST":
                return 201, {"fault": add_fault(faults, payload).to_json()}
            if len(parts) == 1 and method == "DELETE":
                faults.clear()
                return 200, {"faults": []}
            fault_id = _arg({"id": parts[1]}, "id", int)
            if len(parts) == 2 and method == "DELETE":
                faults.remove(fault_id)
                return 200, {"removed": fault_id}
            if parts[2:] == ["release"] and method == "POST":
                return 200, {"released": faults.release(fault_id)}
        elif parts[0] == "recorder":
            recorder = faults.recorder
            if len(parts) == 1 and method == "GET":
                requests = recorder.requests(request.query.get("api"), client_id=request.query.get("client_id"))
                return 200, {"recording": recorder.recording, "requests": [r.to_json() for r in requests]}
            if len(parts) == 1 and method == "DELETE":
                recorder.clear()
                return 200, {"requests": []}
            if parts[1:] in (["start"], ["stop"]) and method == "POST":
                getattr(recorder, parts[1])()
                return 200, {"recording": recorder.recording}
        elif parts == ["client-metrics"] and method == "GET":
            return 200, {"clients": [attrs.asdict(s) for s in target.state.client_metrics()]}
        elif parts[0] == "wait" and len(parts) == 2 and method == "GET":
            return await self._wait(target.state, parts[1], request.query)
        raise HttpError(404, f"no route {method} {request.path}")

    async def _scenario(
        self, request: HttpRequest, method: str, rest: list[str], payload: dict[str, Any]
    ) -> tuple[int, Any]:
        cluster = self.cluster() if self.cluster is not None else None
        if "broker" in request.query or cluster is None:
            target = self._target(request)
            handle = controls(target.node) if cluster is None else controls(cluster, target.node_id)
        else:
            handle = controls(cluster)
        if not rest and method == "POST":
            return 201, {"scenario": handle.apply_scenario(payload).to_json()}
        status = handle.scenario_status()
        if status is None and method in ("GET", "DELETE"):
            raise HttpError(404, "no scenario was started here (POST /scenario)")
        if not rest and method == "GET":
            return 200, {"scenario": status}
        if not rest and method == "DELETE":
            handle.cancel_scenario()
            return 200, {"cancelled": True}
        if rest == ["wait"] and method == "GET":
            timeout = _arg(request.query, "timeout_ms", int, DEFAULT_WAIT_MS) / 1000
            try:
                return 200, {"scenario": await handle.wait_for_scenario(timeout=timeout)}
            except TimeoutError as exc:
                return 408, {"error": str(exc), "scenario": handle.scenario_status()}
            except RuntimeError as exc:
                return 409, {"error": str(exc), "scenario": handle.scenario_status()}
        raise HttpError(404, f"no route {method} {request.path}")

    async def _topics(
        self, request: HttpRequest, method: str, rest: list[str], payload: dict[str, Any]
    ) -> tuple[int, Any]:
        """The topic routes, over the Kafka protocol to the broker (the cluster)."""
        from trikafka.client import KafkaError
        from trikafka.errors import ErrorCode

        bootstrap = self._target(request).state
        q = request.query
        try:
            if not rest and method == "POST":
                name = _arg(payload, "name")
                config = payload.get("config") or {}
                if not isinstance(config, dict):
                    raise HttpError(400, f"config={config!r} must be an object of topic configs")
                await topics.create_topic(
                    bootstrap, name, _arg(payload, "partitions", int, 1), _arg(payload, "replication_factor", int, 1),
                    config, timeout=_arg(payload, "timeout_ms", int, DEFAULT_WAIT_MS) / 1000,
                )
                return 201, {"topic": name}
            if len(rest) == 2 and rest[1] == "records" and method == "POST":
                encoding = topics.check_encoding(payload.get("encoding", "utf-8"))
                records = payload.get("records")
                if not isinstance(records, list):
                    raise HttpError(400, "missing 'records': a list of values or {key, value, headers} objects")
                offsets = await topics.produce(
                    bootstrap, rest[0], [topics.record_from_json(r, i, encoding) for i, r in enumerate(records)],
                    partition=_arg(payload, "partition", int, None),
                    timeout=_arg(payload, "timeout_ms", int, DEFAULT_WAIT_MS) / 1000,
                )
                return 200, {"topic": rest[0], "offsets": offsets}
            if len(rest) == 2 and rest[1] == "records" and method == "GET":
                encoding = topics.check_encoding(q.get("encoding", "utf-8"))
                found = await topics.read(
                    bootstrap, rest[0], _arg(q, "partition", int, None), _arg(q, "from_offset", int, 0),
                    _arg(q, "max_records", int, None), _arg(q, "timeout_ms", int, DEFAULT_WAIT_MS) / 1000,
                )
                return 200, {"records": [topics.record_to_json(r, encoding) for r in found]}
        except TimeoutError as exc:
            return 408, {"error": str(exc)}
        except (TypeError, ValueError) as exc:
            raise HttpError(400, str(exc)) from None
        except KafkaError as exc:
            status = {ErrorCode.topic_already_exists: 409, ErrorCode.unknown_topic_or_partition: 404}
            return status.get(exc.error_code, 400), {"error": str(exc), "code": exc.error_code.name.upper()}
        raise HttpError(404, f"no route {method} {request.path}")

    async def _wait(self, broker: Any, what: str, q: dict[str, str]) -> tuple[int, Any]:
        timeout = _arg(q, "timeout_ms", int, DEFAULT_WAIT_MS) / 1000
        args: tuple[Any, ...]
        if what == "high-watermark":
            method, args, kwargs = (
                "wait_for_high_watermark",
                (_arg(q, "topic"), _arg(q, "partition", int)),
                {"at_least": _arg(q, "at_least", int)},
            )
        elif what == "group-state":
            method, args, kwargs = (
                "wait_for_group_state",
                (_arg(q, "group"), _arg(q, "state")),
                {"members": _arg(q, "members", int, None)},
            )
        elif what == "committed":
            method, args, kwargs = (
                "wait_for_committed",
                (_arg(q, "group"), _arg(q, "topic"), _arg(q, "partition", int)),
                {"at_least": _arg(q, "at_least", int)},
            )
        elif what == "transaction-state":
            method, args, kwargs = "wait_for_transaction_state", (_arg(q, "transactional_id"), _arg(q, "state")), {}
        elif what == "share-group-state":
            method, args, kwargs = (
                "wait_for_share_group_state",
                (_arg(q, "group"), _arg(q, "state")),
                {"members": _arg(q, "members", int, None)},
            )
        elif what == "share-records":
            method, args = "wait_for_share_records", (_arg(q, "group"), _arg(q, "topic"), _arg(q, "partition", int))
            kwargs = {"state": _arg(q, "state", str, "Acknowledged"), "at_least": _arg(q, "at_least", int)}
        elif what == "client-metric":
            method, args = "wait_for_client_metric", (_arg(q, "name"),)
            kwargs = {"client_id": _arg(q, "client_id", str, None), "at_least": _arg(q, "at_least", float, None)}
        else:
            raise HttpError(404, f"no wait {what!r}; waits: high-watermark, group-state, committed, transaction-state, "
                                 "share-group-state, share-records, client-metric")
        call = getattr(broker, method)(*args, **kwargs)
        with trio.move_on_after(timeout):
            result = await call
            return 200, {"reached": attrs.asdict(result) if attrs.has(type(result)) else result}
        saw = describe_state(broker, method, args)
        return 408, {"error": f"{what} not reached within {timeout * 1000:g} ms; {saw}", "saw": saw}
