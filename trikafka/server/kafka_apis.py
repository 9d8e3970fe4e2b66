"""KafkaApis: one coroutine per API, and the rules every answer follows.

``handle`` never lets an exception escape: the client's mistakes (``KafkaProtocolError``)
become that API's error response with the Kafka error code, or a closed connection where
Kafka closes it; our own bugs become UNKNOWN_SERVER_ERROR with the traceback logged once.
Either way the handler task lives on and every other connection is served.

A handler returns one of:
* an :class:`Answer` — the response's fields as ``build`` takes them, encoded straight to
  bytes (no kio entity is built: building and kio-writing a response cost more than the
  rest of a small request);
* a kio response entity — encoded with the request's version and correlation id;
* a ``SendResponse`` / ``NoOpResponse`` / ``CloseConnectionResponse`` — sent as is;
* ``None`` — it handed the request to the purgatory, which responds later.

Wiring. Each API family (``apis/<family>.py``) is an :class:`ApiFamily` built from one typed
:class:`ApiContext` (what the broker shares: config, registry, caches, the purgatory, the
replica manager, the coordinators, the clock). Its handlers are methods marked with
``@handles(ApiKey.X)``; ``KafkaApis`` collects them from every family and refuses to start if
the registry advertises an API nobody handles or two families claim the same one. The api
keys themselves live in one place, :class:`~trikafka.protocol.registry.ApiKey`.

A broker names its families by :class:`LazyFamily` — a function that imports the family's class,
and the api keys it handles (``server/api_table.py``, the one declaration of which family serves
which API) — so a family's module (and what it imports: coordinators' request code, share
fetches, ACL answers...) is imported and the family built when one of its APIs is first asked
for, not at start-up: a fresh broker answers its first ApiVersions without importing the rest.
``handlers`` holds the handlers of the families built so far; a miss builds the key's family,
whose handlers join the table. The first request of a family that uses the coordinators waits
until they have started (``BrokerCore.coordinators_started``).

Authorization. Handlers ask ``self.authorize(request, AclOperation.X, ResourceType.Y, name)``
(or ``require``/``require_cluster``, which raise the resource's *_AUTHORIZATION_FAILED); the
request carries the principal and the client's address, the context the ACLs
(``server/authorization.py``). Without an authorizer every question is answered yes.

Per-partition errors. A request naming several partitions (or topics, or resources) answers
each on its own: ``with errors_into(result): ...`` turns a ``KafkaProtocolError`` raised for
one entry into that entry's ``error_code`` (and ``error_message``), so one bad partition never
fails its neighbours.
"""

from __future__ import annotations

import logging
import struct
import typing
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import attrs
import trio

from trikafka.clock import Clock, now_ms
from trikafka.config import BrokerConfig
from trikafka.errors import ErrorCode, KafkaProtocolError
from trikafka.log.slices import materialize
from trikafka.metrics import BrokerMetrics
from trikafka.network.request_channel import (
    CloseConnectionResponse,
    NoOpResponse,
    Request,
    RequestChannel,
    SendResponse,
)
from trikafka.protocol.entities import error_response
from trikafka.protocol.headers import encode_response, response_parts
from trikafka.protocol.registry import ApiKey, ApiRegistry
from trikafka.security.acl_store import AclStore
from trikafka.security.authorizer import CLUSTER_NAME
from trikafka.security.quota_store import ClientQuotas
from trikafka.security.sasl.credentials import ScramCredentials
from trikafka.server import authorization
from trikafka.server.authorization import AclOperation, ResourceType
from trikafka.server.awaitable import StateChanges
from trikafka.server.client_metrics import ClientMetricsManager
from trikafka.server.dynamic_broker_config import DynamicBrokerConfigs
from trikafka.server.features import Features
from trikafka.server.metadata_cache import MetadataCache
from trikafka.server.purgatory import Purgatory
from trikafka.server.replica.cluster_view import ClusterView
from trikafka.server.throttling import RequestThrottler

if TYPE_CHECKING:
    from trikafka.coordinator.group_coordinator import GroupCoordinator
    from trikafka.coordinator.share.coordinator import ShareCoordinator
    from trikafka.coordinator.transactions.transaction_coordinator import TransactionCoordinator
    from trikafka.server.replica.replica_manager import ReplicaManager

__all__ = [
    "Answer", "ApiContext", "ApiFamily", "CoordinatorSource", "ErrorsInto", "KafkaApis", "LazyFamily",
    "RequestInterceptor", "errors_into",
    "handles",
]

log = logging.getLogger("trikafka.server")

Handler = Callable[[Request], Awaitable[Any]]


class RequestInterceptor(typing.Protocol):
    """Sees a request before its handler: the one hook the request path has for the test
    kit (``trikafka.testing.faults``: injected faults, the request recorder). It handles the
    request by awaiting ``handle(request)`` — now, later or never — or answers it itself.
    ``KafkaApis.interceptor`` is None while nothing is attached: no such code runs then."""

    async def intercept(self, request: Request, handle: Callable[[Request], Awaitable[None]]) -> None: ...

#: Responses at least this big with several parts (record sets) are written scatter-gather,
#: without joining them into one buffer first.
SCATTER_GATHER_BYTES = 64 * 1024


class Answer:
    """A response described by its fields — keyword arguments and nested dicts/lists, exactly
    what :func:`~trikafka.protocol.entities.build` takes — for the request's version."""

    __slots__ = ("values",)

    def __init__(self, **values: Any) -> None:
        self.values = values

    def __repr__(self) -> str:
        return f"Answer({self.values!r})"


F = TypeVar("F", bound=Callable[..., Any])


def handles(api_key: ApiKey) -> Callable[[F], F]:
    """Mark an :class:`ApiFamily` method as the handler of ``api_key``."""

    def mark(method: F) -> F:
        method.__api_key__ = ApiKey(api_key)  # type: ignore[attr-defined]  # the mark @handles reads
        return method

    return mark


class ErrorsInto:
    """``with errors_into(result):`` — a ``KafkaProtocolError`` raised in the block becomes
    ``result["error_code"]`` (and ``result["error_message"]`` with ``message=True``) instead of
    failing the whole request; ``failed`` holds it afterwards. Anything else propagates.

    A class rather than ``@contextmanager``: it may be entered once per resource of a request
    (the config and topic APIs)."""

    __slots__ = ("failed", "message", "result")

    def __init__(self, result: dict[str, Any], message: bool = False) -> None:
        self.result = result
        self.message = message
        self.failed: KafkaProtocolError | None = None

    def __enter__(self) -> ErrorsInto:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        if not isinstance(exc, KafkaProtocolError):
            return False
        self.failed = exc
        self.result["error_code"] = exc.error_code
        if self.message:
            self.result["error_message"] = str(exc)
        return True


errors_into = ErrorsInto


class CoordinatorSource(typing.Protocol):
    """Where an :class:`ApiContext` finds the coordinators (``server/wiring.py``'s BrokerCore):
    each attribute builds them if they were not yet; ``coordinators_started`` also waits until
    they have recovered their state and started their timers."""

    @property
    def groups(self) -> GroupCoordinator: ...

    @property
    def transactions(self) -> TransactionCoordinator: ...

    @property
    def shares(self) -> ShareCoordinator: ...

    async def coordinators_started(self) -> None: ...


@attrs.define(kw_only=True)
class ApiContext:
    """What API families share: the broker's parts they read and call, each by its type."""

    config: BrokerConfig
    registry: ApiRegistry
    metadata_cache: MetadataCache
    purgatory: Purgatory
    channel: RequestChannel
    metrics: BrokerMetrics
    replicas: ReplicaManager
    #: The group, transaction and share coordinators (a BrokerCore builds them on first use).
    coordinators: CoordinatorSource
    now_ms: Clock = now_ms
    state_changes: StateChanges = attrs.Factory(StateChanges)  # awaitable broker state
    #: Leadership, ISRs and coordinators (server/cluster_view.py); None: this broker alone.
    cluster_view: ClusterView | None = None
    #: SCRAM users (AlterUserScramCredentials); None: no SASL/SCRAM store was built.
    scram_credentials: ScramCredentials | None = None
    #: The ACLs; None: no authorizer, everything allowed.
    acls: AclStore | None = None
    #: Dynamic broker configs, per broker and the cluster default (AlterConfigs on BROKER).
    dynamic_configs: DynamicBrokerConfigs = attrs.Factory(DynamicBrokerConfigs)
    #: Finalized feature levels (ApiVersions; UpdateFeatures changes ``share.version``).
    features: Features = attrs.Factory(lambda self: Features(self.config), takes_self=True)
    #: Client quotas (AlterClientQuotas) and their enforcement on every answer (KIP-219).
    client_quotas: ClientQuotas = attrs.Factory(ClientQuotas)
    #: Client telemetry (KIP-714): subscriptions, client instances and what they pushed.
    client_metrics: ClientMetricsManager = attrs.Factory(ClientMetricsManager)
    throttler: RequestThrottler = attrs.Factory(
        lambda self: RequestThrottler(self.client_quotas), takes_self=True
    )

    @property
    def groups(self) -> GroupCoordinator:
        return self.coordinators.groups

    @property
    def transactions(self) -> TransactionCoordinator:
        return self.coordinators.transactions

    @property
    def shares(self) -> ShareCoordinator:
        """Share groups (KIP-932): membership and share partitions."""
        return self.coordinators.shares

    def respond(self, request: Request, body: Any) -> None:
        """Send ``body`` (a kio entity or a Response) as the answer to ``request``.

        Never raises: a response that cannot be encoded is our bug, answered with
        UNKNOWN_SERVER_ERROR (or, failing that, a closed connection) and logged — the task
        calling this (a handler or a purgatory operation) must survive it. Every answer
        passes the client quotas here, the one place (``server/throttling.py``).
        """
        response = to_response(request, body)
        try:
            response = self.throttler.throttle(request, response)
        except Exception:
            log.exception("cannot apply client quotas to %s v%s", request.spec.name, request.api_version)
        self.channel.send_response(request, response)
        self.state_changes.bump()


_READY = (SendResponse, NoOpResponse, CloseConnectionResponse)
_FRAME_SIZE = struct.Struct(">i")


def to_response(request: Request, body: Any) -> Any:
    if isinstance(body, _READY):
        return body
    try:
        is_answer = isinstance(body, Answer)
        parts = response_parts(
            request.spec, request.correlation_id, body.values if is_answer else body, is_answer
        )
        # parts[0] is the frame's size prefix and header: the size is there, no second sum.
        if len(parts) > 2 and _FRAME_SIZE.unpack_from(parts[0])[0] + 4 >= SCATTER_GATHER_BYTES:
            return SendResponse(tuple(parts))
        try:
            return SendResponse(b"".join(parts))
        except TypeError:  # a small answer holding file slices: read them now
            return SendResponse(b"".join(map(materialize, parts)))
    except Exception:
        log.exception("cannot encode %s v%s response", request.spec.name, request.api_version)
    try:
        fallback = error_response(request.spec.response_type, ErrorCode.unknown_server_error)
        return SendResponse(encode_response(request.spec, request.correlation_id, fallback))
    except Exception:
        log.exception("cannot encode an error response for %s", request.spec.name)
        return CloseConnectionResponse()


def _family_name(family: ApiFamily | LazyFamily) -> str:
    return family.load.__name__ if isinstance(family, LazyFamily) else type(family).__name__


class ApiFamily:
    """A group of related APIs sharing the broker's context; its ``@handles`` methods are
    its handlers. ``error_response(request, code)`` may build the family's whole-request
    error answer (Produce and Fetch fill in every partition); None means the generic one."""

    def __init__(self, context: ApiContext) -> None:
        self.context = context

    @property
    def replicas(self) -> ReplicaManager:
        return self.context.replicas

    def handlers(self) -> dict[ApiKey, Handler]:
        found: dict[ApiKey, Handler] = {}
        for cls in reversed(type(self).__mro__):
            for name, value in vars(cls).items():
                key = getattr(value, "__api_key__", None)
                if key is not None:
                    found[key] = getattr(self, name)
        return found

    def error_response(self, request: Request, code: ErrorCode) -> Any:
        return None

    # -- authorization (server/authorization.py): the request's principal against the ACLs --

    def authorize(
        self, request: Request, operation: AclOperation, resource_type: ResourceType, name: str = CLUSTER_NAME
    ) -> bool:
        return authorization.authorize(self.context.acls, request, operation, resource_type, name)

    def require(
        self, request: Request, operation: AclOperation, resource_type: ResourceType, name: str = CLUSTER_NAME
    ) -> None:
        authorization.require(self.context.acls, request, operation, resource_type, name)

    def require_cluster(self, request: Request, operation: AclOperation) -> None:
        authorization.require(self.context.acls, request, operation, ResourceType.CLUSTER)

    def authorized_names(
        self, request: Request, operation: AclOperation, resource_type: ResourceType, names: Any
    ) -> set[str]:
        return authorization.filter_authorized(self.context.acls, request, operation, resource_type, names)

    def authorized_operations(self, request: Request, resource_type: ResourceType, name: str = CLUSTER_NAME) -> int:
        return authorization.authorized_operations(self.context.acls, request, resource_type, name)


class LazyFamily(NamedTuple):
    """An API family built on first use: ``load()`` imports and returns its class (one
    function per family in ``server/api_table.py``), ``api_keys`` are the APIs it answers —
    the one declaration of them; ``tests/server/test_wiring.py`` holds it to the class's
    ``@handles`` methods."""

    load: Callable[[], type[ApiFamily]]
    api_keys: tuple[ApiKey, ...]
    #: Its first request waits until the coordinators are built and started (they are built
    #: on first use: ``BrokerCore.coordinators_started``).
    coordinators: bool = False


class _Families(typing.Mapping[int, ApiFamily]):
    """api key → its family, building a lazy family when it is looked up."""

    def __init__(self, apis: KafkaApis) -> None:
        self._apis = apis

    def __getitem__(self, key: int) -> ApiFamily:
        return self._apis._family(key)

    def __iter__(self) -> Iterator[int]:
        return iter(self._apis._families)

    def __len__(self) -> int:
        return len(self._apis._families)


class _Handlers(dict[int, Handler]):
    """api key → handler, for the families built so far: a miss builds the key's family and
    answers with its handler (a handler put here before then — a test's hook — stays)."""

    def __init__(self, build: Callable[[int], Handler]) -> None:
        super().__init__()
        self._build = build

    def __missing__(self, key: int) -> Handler:
        return self._build(key)


class KafkaApis:
    def __init__(self, context: ApiContext, families: Sequence[ApiFamily | LazyFamily]) -> None:
        self.context = context
        #: api key → its family, or the LazyFamily that builds it on first use.
        self._families: dict[int, ApiFamily | LazyFamily] = {}
        #: api key → its handler; looking up a key whose family is not built yet builds it.
        self.handlers: dict[int, Handler] = _Handlers(self._handler_of_new_family)
        #: The api keys of lazy families that wait for the coordinators on their first request
        #: (emptied once they have started).
        self._before_coordinators: set[int] = set()
        for family in families:
            handlers: dict[ApiKey, Handler] = {} if isinstance(family, LazyFamily) else family.handlers()
            keys: Iterable[int] = family.api_keys if isinstance(family, LazyFamily) else handlers
            for key in keys:
                if key in self._families:
                    raise RuntimeError(
                        f"{ApiKey(key).name} is handled by both {_family_name(self._families[key])}"
                        f" and {_family_name(family)}"
                    )
                self._families[key] = family
            self.handlers.update(handlers)  # type: ignore[arg-type]  # ApiKey is an int
            if isinstance(family, LazyFamily) and family.coordinators:
                self._before_coordinators.update(family.api_keys)
        missing = set(context.registry.supported) - set(self._families)
        if missing:
            names = sorted(ApiKey(k).name if k in ApiKey._value2member_map_ else str(k) for k in missing)
            raise RuntimeError(f"registry advertises api keys with no handler: {names}")
        #: Sees every request first while set (RequestInterceptor); None: nothing attached.
        self.interceptor: RequestInterceptor | None = None

    def _build(self, lazy: LazyFamily) -> ApiFamily:
        """Import and build ``lazy``; its handlers join the table (where a key has none yet)."""
        family = lazy.load()(self.context)
        found = family.handlers()
        for key in lazy.api_keys:
            self._families[key] = family
            if key in found:
                self.handlers.setdefault(key, found[key])
        return family

    def _handler_of_new_family(self, key: int) -> Handler:
        """A miss in the handler table: build the key's family, then answer with its handler."""
        family = self._families[key]
        if isinstance(family, LazyFamily):
            family = self._build(family)
        handler = dict.get(self.handlers, key)
        if handler is None:
            raise RuntimeError(f"{_family_name(family)} has no @handles({ApiKey(key).name}) method")
        return handler

    def _family(self, key: int) -> ApiFamily:
        family = self._families[key]
        return self._build(family) if isinstance(family, LazyFamily) else family

    def build_all(self) -> None:
        """Build every lazy family now (a cluster node, before its gate wraps the handlers)."""
        for key in list(self._families):
            self.handlers[key]

    @property
    def families(self) -> typing.Mapping[int, ApiFamily]:
        """api key → the family that handles it (built, if lazy, when looked up)."""
        return _Families(self)

    async def handle(self, request: Request) -> None:
        """Handle ``request`` (in a handler task): through the interceptor when one is set."""
        interceptor = self.interceptor
        if interceptor is not None:
            await interceptor.intercept(request, self.dispatch)
        else:
            await self.dispatch(request)

    async def dispatch(self, request: Request) -> None:
        """Run the API's handler and send its answer (or leave it to the purgatory)."""
        context = self.context
        try:
            if self._before_coordinators and request.api_key in self._before_coordinators:
                await context.coordinators.coordinators_started()  # built and started on first use
                self._before_coordinators.clear()
            result = await self.handlers[request.api_key](request)
        except KafkaProtocolError as exc:
            if exc.close_connection:
                log.warning(
                    "closing connection %s: %s %s",
                    request.connection_id,
                    request.spec.name if request.spec else request.api_key,
                    exc,
                )
                result = CloseConnectionResponse()
            else:
                result = self._error_response(request, exc.error_code)
        except trio.Cancelled:
            raise
        except Exception:
            log.exception(
                "error handling %s v%s from %s (%s)",
                request.spec.name if request.spec else request.api_key,
                request.api_version,
                request.connection_id,
                request.client_id,
            )
            result = self._error_response(request, ErrorCode.unknown_server_error)
        if result is None:
            request.api_local_complete_time = trio.current_time()  # handler time ends here
            return  # the purgatory answers later
        context.respond(request, result)

    def _error_response(self, request: Request, code: ErrorCode) -> Any:
        family = self._family(request.api_key) if request.api_key in self._families else None
        answer = family.error_response(request, code) if family is not None else None
        if answer is not None:
            return answer
        return error_response(request.spec.response_type, code)
