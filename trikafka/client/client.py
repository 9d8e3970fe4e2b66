"""The client core every role builds on (Java's ``NetworkClient`` + ``Metadata``): a Trio shell.

What the producer, consumer and admin client use — and all they should need:

* ``async with open_client(bootstrap, config, connector=None) as client`` — ``config`` a
  :class:`~trikafka.client.config.ClientConfig`; ``bootstrap`` a ``host:port`` list or a
  ``TestBroker`` (see :mod:`trikafka.client.transport`).
* ``client.cluster`` — the :class:`~trikafka.client.cluster.ClusterMetadata` view (brokers,
  leaders, partition counts). ``client.cluster.add_interest(topics)`` +
  ``await client.refresh_metadata()`` to learn topics; ``await client.wait_for_topic(t)``.
* ``await client.send(node_id, api_key, **fields)`` — builds the request at the version
  negotiated with that broker (fields a version lacks are dropped, see
  :func:`trikafka.protocol.entities.build`), sends it, returns the kio response. Raises
  :class:`KafkaConnectionError` / :class:`KafkaTimeoutError` (both retriable; the connection is
  dropped and metadata marked stale) — the caller decides whether to retry. Error codes
  *inside* the response are the caller's to read (``errors.raise_for``).
  ``send_no_response`` for acks=0 Produce; ``client.version(node_id, api_key)`` (after a
  ``connection(node_id)``) says which version a response was read at.
* ``await client.find_coordinator(key, CoordinatorType.GROUP | TRANSACTION)`` → node id,
  retried on retriable errors and cached; ``client.coordinator_dead(key, type)`` after
  NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE / a dropped connection.
* ``client.request_metadata_update()`` after a stale-metadata error code.
* :mod:`trikafka.client.calls` — ``call_coordinator`` / ``call_any_node``: send with the
  retry rules (retriable codes back off and retry, a moved coordinator is looked up again).
* ``client.least_loaded_node()`` — a node id to send cluster-wide requests to.
* ``await client.retry_sleep(attempt)`` — ``retry.backoff.ms`` exponential backoff on trio's clock.

Connections: one per broker (node id), opened on first use; bootstrap servers get Java's
negative ids (-1, -2, …). A connect failure is remembered per node and the next attempt waits
``reconnect.backoff.ms`` doubling to ``reconnect.backoff.max.ms``. A background task refreshes
metadata when due (:meth:`ClusterMetadata.next_refresh`). Every timer is trio's, so the whole
client runs under ``MockClock``.
"""

from __future__ import annotations

import enum
import functools
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

import trikafka
from trikafka.client.backoff import ExponentialBackoff
from trikafka.client.client_metadata import MetadataRefresh
from trikafka.client.cluster import BrokerNode, ClusterMetadata
from trikafka.client.config import ClientConfig
from trikafka.client.connection import ConnectionClosed, KafkaConnection, ResponseDecodeError
from trikafka.client.deadlines import Sightings, connect_reason, seconds
from trikafka.client.errors import (
    BrokerUnreachableError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    UnsupportedVersionError,
    error_for,
)
from trikafka.client.lifetime import open_service_nursery
from trikafka.client.requests import make
from trikafka.client.sasl import authenticate
from trikafka.client.tls import TLS_PROTOCOLS, closed_during_api_versions, tls_connector
from trikafka.client.transport import Bootstrap, Connector, parse_bootstrap, resolve_bootstrap
from trikafka.client.versions import negotiate
from trikafka.errors import ErrorCode
from trikafka.protocol.registry import ApiKey, ApiVersionSpec

__all__ = ["CoordinatorType", "KafkaClient", "NodeConnection", "open_client"]

log = logging.getLogger(__name__)


class CoordinatorType(enum.IntEnum):
    GROUP = 0
    TRANSACTION = 1


@functools.cache
def request_spec(api_key: int, version: int) -> ApiVersionSpec:
    return ApiVersionSpec.resolve(api_key, version)


@attrs.define
class NodeConnection:
    node_id: int
    connection: KafkaConnection
    versions: dict[int, int]
    in_flight: int = 0


@attrs.define
class _NodeState:
    """Connect bookkeeping of one node: the live connection, or when to try again."""

    connection: NodeConnection | None = None
    connecting: trio.Event | None = None
    failures: int = 0
    retry_at: float = 0.0
    #: Why the last attempt failed: what a caller that waited on that attempt raises.
    last_error: KafkaError | None = None


class KafkaClient(MetadataRefresh):
    def __init__(
        self, config: ClientConfig, bootstrap: list[tuple[str, int]], connector: Connector, nursery: trio.Nursery
    ) -> None:
        self.config = config
        self.connector = connector
        self.nursery = nursery
        self.client_id = config["client.id"]
        self.request_timeout = config["request.timeout.ms"] / 1000
        self.cluster = ClusterMetadata(config["metadata.max.age.ms"], config["retry.backoff.ms"])
        self.allow_auto_topic_creation = config.role != "admin"
        self.bootstrap = [
            BrokerNode(-(index + 1), host, port)
            for index, (host, port) in enumerate(bootstrap)
        ]
        self.reconnect_backoff = ExponentialBackoff(
            config["reconnect.backoff.ms"], config["reconnect.backoff.max.ms"]
        )
        self.retry_backoff = ExponentialBackoff(config["retry.backoff.ms"], config["retry.backoff.max.ms"])
        self._nodes: dict[int, _NodeState] = {}
        self._coordinators: dict[tuple[int, str], int] = {}
        self._init_metadata()
        self.seen = Sightings()  # what a call that runs out of time reports (deadlines.py)
        self.closed = False
        #: The producer's or consumer's ClientTelemetry (KIP-714), fed every answer while a
        #: subscription asks for metrics; None otherwise.
        self.telemetry: Any = None
        self.connections_created = 0
        #: Trio time a broker was last reachable (a connection open, or the client's start):
        #: no broker reached for the call bound's key since then logs one WARNING.
        self.last_reached = trio.current_time()
        self._unreached_warned = False

    @property
    def connected(self) -> bool:
        """True while a connection to some broker is open."""
        return self.live_connections() > 0

    # --- connections ----------------------------------------------------------------------

    def _address(self, node_id: int) -> BrokerNode:
        node = self.cluster.broker(node_id)
        if node is None:
            node = next((b for b in self.bootstrap if b.node_id == node_id), None)
        if node is None:
            raise KafkaConnectionError(f"broker {node_id} is not in the cluster metadata")
        return node

    async def connection(self, node_id: int) -> NodeConnection:
        """The open connection to ``node_id``, connecting (after any backoff) if needed."""
        if self.closed:  # shut down (or cancelled): a shielded caller must not retry forever
            raise KafkaError(ErrorCode.network_exception, "the client is closed", retriable=False)
        state = self._nodes.setdefault(node_id, _NodeState())
        while True:
            if state.connection is not None and not state.connection.connection.closed:
                return state.connection
            if state.connecting is None:
                break
            await state.connecting.wait()
            if state.connection is None:  # that attempt failed: its reason, rather than a spin
                raise _again(state.last_error, self._where(node_id))
        state.connecting = trio.Event()
        try:
            delay = state.retry_at - trio.current_time()
            if delay > 0:
                await trio.sleep(delay)
            state.connection = await self._connect(node_id)
            state.failures = 0
            state.last_error = None
            self.last_reached = trio.current_time()
            self._unreached_warned = False
            return state.connection
        except BaseException as exc:
            state.connection = None
            state.failures += 1
            state.retry_at = trio.current_time() + self.reconnect_backoff.delay(state.failures - 1)
            state.last_error = exc if isinstance(exc, KafkaError) else None
            if isinstance(exc, KafkaConnectionError):
                self._warn_if_unreached()
            raise
        finally:
            state.connecting.set()
            state.connecting = None

    def _where(self, node_id: int) -> str:
        """``bootstrap server 127.0.0.1:9092`` or ``broker 1 at 127.0.0.1:9092``: what a person
        can look up (a bootstrap entry's negative id is the client's own bookkeeping)."""
        try:
            node = self._address(node_id)
        except KafkaConnectionError:
            return f"broker {node_id}"
        if node_id < 0:
            return f"bootstrap server {node.host}:{node.port}"
        return f"broker {node_id} at {node.host}:{node.port}"

    def _warn_if_unreached(self) -> None:
        """One WARNING when no broker has been reachable for the client's call bound
        (``default.api.timeout.ms``, or the producer's ``max.block.ms``): a consumer's
        ``getmany`` returns ``{}`` then, and would otherwise say nothing."""
        if self._unreached_warned or self.closed or self.live_connections():
            return
        key = "default.api.timeout.ms" if "default.api.timeout.ms" in self.config.values else "max.block.ms"
        limit = self.config[key] / 1000
        if trio.current_time() - self.last_reached < limit:
            return
        self._unreached_warned = True
        tried = ", ".join(f"{b.host}:{b.port}" for b in self.bootstrap)
        why = "; ".join(f"{a}: {r}" for a, r in self.seen.unreachable.items()) or "no connection attempt finished"
        log.warning("no broker reached for %s (%s); bootstrap servers %s — %s", seconds(limit), key, tried, why)

    async def _connect(self, node_id: int) -> NodeConnection:
        node = self._address(node_id)
        where = self._where(node_id)
        address = f"{node.host}:{node.port}"
        stream = None
        with trio.move_on_after(self.request_timeout) as scope:
            try:
                stream = await self.connector(node.host, node.port)
            except OSError as exc:
                self.cluster.request_update()
                self.seen.connect_failed(address, reason := connect_reason(exc))
                raise BrokerUnreachableError(f"cannot connect to {where}: {reason}") from exc
            self.seen.connecting(address, "connected, but no answer to ApiVersions yet")
            connection = KafkaConnection(stream, self.client_id, handshake=True)
            await self.nursery.start(self._serve, node_id, connection)
            try:
                answer = await _api_versions(connection, 3)
                if answer is None or answer.error_code == ErrorCode.unsupported_version:
                    # KIP-511: a broker without v3 answers in v0 — ask again in v0.
                    answer = await _api_versions(connection, 0)
            except ConnectionClosed as exc:
                self.cluster.request_update()
                if connection.not_kafka is not None:
                    self.seen.connect_failed(address, f"not a Kafka broker: {connection.not_kafka}")
                    raise BrokerUnreachableError(f"{where} is not a Kafka broker: {connection.not_kafka}") from exc
                error = closed_during_api_versions(where, node.host, node.port, connection.broken_by)
                self.seen.connect_failed(address, str(error).partition(": ")[2] or str(error))
                raise error from exc
        if scope.cancelled_caught:
            self.seen.waiting.pop(address, None)
            if stream is not None:
                await trio.aclose_forcefully(stream)
            self.cluster.request_update()
            limit = seconds(self.request_timeout)
            if stream is None:
                reason = f"no connection within {limit} (request.timeout.ms)"
            else:
                reason = f"connected, but no answer to ApiVersions within {limit} (request.timeout.ms)"
            self.seen.connect_failed(address, reason)
            raise BrokerUnreachableError(f"{where}: {reason}")
        assert stream is not None  # the connector returned: the scope was not cancelled
        connection.handshake_done()
        self.seen.connected(address)
        self.connections_created += 1  # KIP-714's connection.creation.total
        if answer is None or answer.error_code != ErrorCode.none:
            await trio.aclose_forcefully(stream)
            if answer is None:
                raise UnsupportedVersionError(f"{where} answers no ApiVersions version this client reads")
            raise error_for(answer.error_code, f"ApiVersions from {where}")
        versions = negotiate((int(k.api_key), int(k.min_version), int(k.max_version)) for k in answer.api_keys)
        if self.config["security.protocol"] in ("SASL_PLAINTEXT", "SASL_SSL"):
            try:
                await _authenticate(connection, versions, where, self.config)
            except BaseException:
                await trio.aclose_forcefully(stream)
                raise
        return NodeConnection(node_id, connection, versions)

    async def _serve(
        self, node_id: int, connection: KafkaConnection, *, task_status: Any = trio.TASK_STATUS_IGNORED
    ) -> None:
        try:
            await connection.run(task_status=task_status)
        except trio.Cancelled:
            self.closed = True  # the client's nursery is going: no connection will live again
            raise
        finally:
            connection.closed = True
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(connection.stream)
            state = self._nodes.get(node_id)
            if state is not None and state.connection is not None and state.connection.connection is connection:
                state.connection = None
                self.last_reached = trio.current_time()  # reachable until now
            if not self.closed:
                self.cluster.request_update()
                self._coordinators = {k: v for k, v in self._coordinators.items() if v != node_id}

    async def disconnect(self, node_id: int) -> None:
        """Drop the connection to ``node_id`` (its pending requests fail as disconnected)."""
        state = self._nodes.get(node_id)
        if state is not None and state.connection is not None:
            connection, state.connection = state.connection, None
            connection.connection.closed = True
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(connection.connection.stream)

    def live_connections(self) -> int:
        return sum(1 for s in self._nodes.values() if s.connection is not None and not s.connection.connection.closed)

    def version(self, node_id: int, api_key: int) -> int:
        state = self._nodes.get(node_id)
        if state is None or state.connection is None:
            raise KafkaConnectionError(f"no connection to broker {node_id}")
        version = state.connection.versions.get(api_key)
        if version is None:
            raise UnsupportedVersionError(
                f"broker {node_id} supports no version of {_api_name(api_key)} this client speaks"
            )
        return version

    # --- requests -------------------------------------------------------------------------

    async def send(self, node_id: int, api_key: int, **fields: Any) -> Any:
        """Build ``api_key`` at the negotiated version from ``fields``; send; return the answer."""
        node = await self.connection(node_id)
        body = self._build(node, api_key, fields)
        node.in_flight += 1
        started = trio.current_time()
        try:
            with trio.move_on_after(self.request_timeout) as scope:
                try:
                    answer = await node.connection.request(body)
                    if self.telemetry is not None:
                        self.telemetry.request_done(node_id, api_key, trio.current_time() - started, answer)
                    return answer
                except (ConnectionClosed, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                    await self.disconnect(node_id)
                    self.cluster.request_update()
                    raise KafkaConnectionError(f"broker {node_id}: {exc}") from None
            assert scope.cancelled_caught
            await self.disconnect(node_id)
            self.cluster.request_update()
            self.seen.saw(text := f"no answer from broker {node_id} to {_api_name(api_key)} within request.timeout.ms")
            raise KafkaTimeoutError(text)
        finally:
            node.in_flight -= 1

    async def send_no_response(self, node_id: int, api_key: int, **fields: Any) -> None:
        """For Produce with acks=0, which the broker never answers."""
        node = await self.connection(node_id)
        try:
            await node.connection.send_no_response(self._build(node, api_key, fields))
        except ConnectionClosed as exc:
            await self.disconnect(node_id)
            raise KafkaConnectionError(f"broker {node_id}: {exc}") from None

    def _build(self, node: NodeConnection, api_key: int, fields: dict[str, Any]) -> Any:
        version = node.versions.get(api_key)
        if version is None:
            raise UnsupportedVersionError(
                f"broker {node.node_id} supports no version of {_api_name(api_key)} this client speaks"
            )
        return make(request_spec(api_key, version).request_type, **fields)

    def least_loaded_node(self) -> int:
        """A connected node with the fewest requests in flight, else any known broker, else a
        bootstrap server (Java's ``leastLoadedNode``, minus its backoff-aware ordering)."""
        now = trio.current_time()
        candidates = list(self.cluster.brokers) or [b.node_id for b in self.bootstrap]
        connected = [
            (self._nodes[n].connection.in_flight, n)  # type: ignore[union-attr]  # filtered to connected below
            for n in candidates
            if n in self._nodes and self._nodes[n].connection is not None
        ]
        if connected:
            return min(connected)[1]
        ready = [n for n in candidates if n not in self._nodes or self._nodes[n].retry_at <= now]
        if ready:
            return ready[0]
        return min(candidates, key=lambda n: self._nodes[n].retry_at)

    async def retry_sleep(self, attempt: int) -> None:
        await trio.sleep(self.retry_backoff.delay(attempt))

    # --- coordinators ---------------------------------------------------------------------

    async def find_coordinator(self, key: str, key_type: CoordinatorType, deadline: float = float("inf")) -> int:
        """Node id of the group or transaction coordinator for ``key`` (cached); retriable
        errors are retried until ``deadline`` (trio time), then raised."""
        cached = self._coordinators.get((int(key_type), key))
        if cached is not None:
            return cached
        attempt = 0
        while True:
            try:
                node_id = await _find_coordinator_once(self, key, key_type)
            except KafkaError as exc:
                if not exc.retriable or trio.current_time() >= deadline:
                    raise
                await self.retry_sleep(attempt)
                attempt += 1
                continue
            self._coordinators[int(key_type), key] = node_id
            return node_id

    def coordinator_dead(self, key: str, key_type: CoordinatorType) -> None:
        self._coordinators.pop((int(key_type), key), None)


def _again(error: KafkaError | None, where: str) -> KafkaError:
    """For a caller that waited on another task's connection attempt: that attempt's error,
    anew (one exception object is not raised in two tasks)."""
    if error is None:
        return KafkaConnectionError(f"cannot connect to {where}")
    if isinstance(error, BrokerUnreachableError):
        return BrokerUnreachableError(error.message)
    if isinstance(error, KafkaConnectionError):
        return KafkaConnectionError(error.message)
    return KafkaError(error.error_code, error.message, retriable=error.retriable)


def _api_name(api_key: int) -> str:
    """``api 16 (LIST_GROUPS)``: the number a packet capture shows, the name a person reads."""
    try:
        return f"api {api_key} ({ApiKey(api_key).name})"
    except ValueError:
        return f"api {api_key}"


async def _authenticate(
    connection: KafkaConnection, versions: dict[int, int], where: str, config: ClientConfig
) -> None:
    """SASL on a new connection (see :mod:`trikafka.client.sasl`), within request.timeout.ms."""

    async def request(api_key: int, fields: dict[str, Any]) -> Any:
        version = versions.get(api_key)
        if version is None:
            raise UnsupportedVersionError(f"{where} supports no version of {_api_name(api_key)} this client speaks")
        try:
            return await connection.request(make(request_spec(api_key, version).request_type, **fields))
        except ConnectionClosed as exc:
            raise KafkaConnectionError(f"{where} closed the connection during SASL authentication") from exc

    with trio.move_on_after(config["request.timeout.ms"] / 1000) as scope:
        await authenticate(request, config["sasl.mechanism"], config["sasl.jaas.config"], where)
    if scope.cancelled_caught:
        raise KafkaTimeoutError(f"SASL authentication with {where} took longer than request.timeout.ms")


async def _api_versions(connection: KafkaConnection, version: int) -> Any:
    """ApiVersions at ``version``; None when the answer does not parse at that version."""
    body = make(
        request_spec(ApiKey.API_VERSIONS, version).request_type,
        client_software_name="trikafka",
        client_software_version=trikafka.__version__,
    )
    try:
        return await connection.request(body)
    except ResponseDecodeError:
        return None


async def _find_coordinator_once(client: KafkaClient, key: str, key_type: CoordinatorType) -> int:
    node_id = client.least_loaded_node()
    answer = await client.send(
        node_id, ApiKey.FIND_COORDINATOR, key=key, key_type=int(key_type), coordinator_keys=[key]
    )
    entry = answer.coordinators[0] if hasattr(answer, "coordinators") else answer  # v4+ batches keys
    if entry.error_code != ErrorCode.none:
        raise error_for(entry.error_code, f"FindCoordinator({key!r}): {entry.error_message or ''}")
    found = BrokerNode(int(entry.node_id), entry.host, int(entry.port))
    if found.node_id not in client.cluster.brokers:
        client.cluster.brokers[found.node_id] = found
    return found.node_id


@asynccontextmanager
async def open_client(
    bootstrap: Bootstrap, config: ClientConfig, connector: Connector | None = None
) -> AsyncIterator[KafkaClient]:
    """A running client core: connections and the metadata refresher live in its nursery."""
    servers, connector = resolve_bootstrap(bootstrap, connector)
    bootstrap_nodes = parse_bootstrap(servers)  # a wrong list: the caller's ConfigError, not a nursery's group
    if config["security.protocol"] in TLS_PROTOCOLS:
        connector = tls_connector(connector, config)
    async with open_service_nursery("the client core") as nursery:
        client = KafkaClient(config, bootstrap_nodes, connector, nursery)
        nursery.start_soon(client.run_metadata_refresh)
        try:
            yield client
        finally:
            client.closed = True
            for node_id in list(client._nodes):
                await client.disconnect(node_id)
            nursery.cancel_scope.cancel()
