"""The web console as an ASGI application: server-rendered pages, one small script.

Why server-rendered Jinja2: every page is a table of what the cluster says right now, which
HTML renders without a front-end build or a library fetched at run time; Jinja2 (Pallets,
well kept) autoescapes every value put into a page, and nearly everything shown — topic and
group names, keys, values, headers, client ids — is user data. The one script
(``static/console.js``) re-fetches the live request-rate table, rendered by the server too,
so escaping stays in one place; the Content-Security-Policy allows scripts from the console
only, so even a value that got past escaping could not run.

Mounting: the app serves paths relative to ASGI's ``root_path`` (``/ui`` when mounted
there) and builds every link under it; a path that still carries the prefix is accepted too,
whichever way the server mounting it passes paths on. GET and HEAD — the console reads — but
for the produce form's POST below.

Errors: a missing topic, partition or group is a 404 page, a bad query parameter a 400 page
naming the parameter and what is allowed, a cluster that does not answer a 503 page and one
log line — never a traceback in the browser.

The one write: with an HTTP proxy (``rest_proxy``), the topic page has a form that produces a
JSON record through it (``POST <root>/topics/<topic>/produce``, see :mod:`trikafka.console.produce`).
"""

from __future__ import annotations

import base64
import contextvars
import datetime
import importlib.resources
import logging
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import jinja2
import trio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from trikafka.client import KafkaError
from trikafka.console.produce import ProduceProblem, parse_produce_form, produce_through_proxy
from trikafka.console.rates import ApiCounters, RateSampler
from trikafka.console.reader import ClusterReader, GroupReads, NotFound
from trikafka.console.render import format_bytes, format_timestamp
from trikafka.console.schemas import RegistryProblem, SchemaReads

__all__ = ["MAX_RECORDS", "PAGE_TIMEOUT_S", "BadRequest", "ConsoleApp", "parse_timestamp"]

log = logging.getLogger("trikafka.console")

#: The most records one page of the browser shows.
MAX_RECORDS = 500
#: How long a page waits for the cluster before it answers 503.
PAGE_TIMEOUT_S = 15.0

_STATIC_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}
_SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
]

#: The page's caller's HTTP Basic (the ``Authorization`` header the HTTP authentication in
#: front of the console verified), passed on to the registry and the proxy it calls, so they
#: decide as for that user. Each request runs in its own task, hence its own value.
_CALLER: contextvars.ContextVar[str | None] = contextvars.ContextVar("trikafka_console_caller", default=None)

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class BadRequest(ValueError):
    """A query parameter the console cannot use; the message names it and what is allowed."""


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("trikafka.console", "templates"),
        autoescape=True,  # every template, every value: the data is the users'
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["size"] = format_bytes
    env.filters["timestamp"] = format_timestamp
    env.filters["q"] = lambda value: urllib.parse.quote(str(value), safe="")
    env.filters["thousands"] = lambda value: f"{value:,}"
    return env


class ConsoleApp:
    """``open_reader()`` opens a :class:`ClusterReader` for one page; ``counters()`` returns
    the request counters per API of the brokers served here; ``listeners()`` their bound
    listeners, for the overview; ``registry()`` the Schema Registry's URL (None: no registry,
    and the schema pages say so), asked at each page since a registry binds its port late."""

    def __init__(
        self,
        open_reader: Callable[[], AbstractAsyncContextManager[ClusterReader]],
        counters: Callable[[], Mapping[str, ApiCounters]],
        *,
        version: str,
        listeners: Callable[[], tuple[str, ...]] = tuple,
        bootstrap: Callable[[], str] | None = None,
        registry: Callable[[], str | None] = lambda: None,
        client_metrics: Callable[[], Sequence[Any]] = list,
        rest_proxy: Callable[[], str | None] = lambda: None,
    ) -> None:
        self.open_reader = open_reader
        #: The HTTP proxy's URL (None: no produce form), asked at each page like the registry's.
        self.rest_proxy = rest_proxy
        #: What clients pushed (KIP-714): the served broker's ``client_metrics()``.
        self.client_metrics = client_metrics
        self.registry = registry
        self.bootstrap = bootstrap
        self.counters = counters
        self.version = version
        self.listeners = listeners
        self.sampler = RateSampler()
        self.templates = _environment()
        self._app = self._routes()
        try:
            self.rates()  # the first sample: the first view then has a rate since start
        except RuntimeError:  # built outside trio: the first view takes the first sample
            pass

    # --- ASGI ---------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            # Routed on the raw path, each segment decoded and re-escaped (``%`` and ``/``
            # only), so that a group id with a '/' stays one path segment.
            raw = scope.get("raw_path")
            path = (raw.decode("latin-1") if raw else urllib.parse.quote(scope["path"])).partition("?")[0]
            path = "/".join(_escape(urllib.parse.unquote(s)) for s in path.split("/"))
            root = scope.get("root_path", "")
            if path == root or path == "":  # the mount itself: the overview
                path += "/"
            scope = {**scope, "path": path}
            _CALLER.set(_authorization(scope))
        await self._app(scope, receive, send)

    def _routes(self) -> Starlette:
        """The console's route table: every page is a GET (and HEAD), the produce form the
        one POST; a path under no route is the 404 page, another method a 405."""
        pages = [
            "/", "/rates", "/rates/table", "/clients", "/topics", "/topics/{topic}", "/groups", "/groups/{group}",
            "/records", "/schemas", "/schemas/{subject}", "/schemas/{subject}/{version}", "/static/{name}",
        ]
        routes = [Route(page, self._page_endpoint, methods=["GET"]) for page in pages]
        routes.append(Route("/topics/{topic}/produce", self._produce_endpoint, methods=["POST"]))
        routes.append(Route("/{rest:path}", self._page_endpoint, methods=["GET"]))  # the 404 page
        return Starlette(routes=routes, exception_handlers={HTTPException: _method_not_allowed})

    async def _page_endpoint(self, request: Request) -> Response:
        root = request.scope.get("root_path", "").rstrip("/")
        path = request.scope["path"][len(request.scope.get("root_path", "")) :] or "/"
        query = {k: v for k, v in request.query_params.items()}
        status, body, content_type = await self.dispatch(path, query, root)
        return _response(status, body, content_type)

    async def _produce_endpoint(self, request: Request) -> Response:
        root = request.scope.get("root_path", "").rstrip("/")
        path = request.scope["path"][len(request.scope.get("root_path", "")) :]
        status, body, content_type = await self._produce(request.scope, request.receive, path, root)
        return _response(status, body, content_type)

    async def dispatch(self, path: str, query: Mapping[str, str], root: str) -> tuple[int, bytes, str]:
        html = "text/html; charset=utf-8"
        if path.startswith("/static/"):
            return self._static(path.removeprefix("/static/"))
        try:
            if path == "/rates/table":
                return 200, self.render("rates_table.html", root, rates=self.rates()), html
            return 200, await self._page(path, query, root), html
        except BaseExceptionGroup as group:  # raised through the client's nursery
            problem = _only_expected(group)
            if problem is None:
                raise
        except _EXPECTED as exc:
            problem = exc
        if isinstance(problem, NotFound):
            return 404, self.render("error.html", root, title="Not found", message=str(problem)), html
        if isinstance(problem, BadRequest):
            return 400, self.render("error.html", root, title="Bad request", message=str(problem)), html
        if isinstance(problem, RegistryProblem) or (
            isinstance(problem, trio.TooSlowError) and path.startswith("/schemas")
        ):
            return self._registry_error(path, problem, root)
        if isinstance(problem, trio.TooSlowError):
            where = f" at {self.bootstrap()}" if self.bootstrap is not None else ""
            message = f"no answer from the cluster{where} within {PAGE_TIMEOUT_S:.0f} s"
        else:
            message = str(problem) or type(problem).__name__
        log.warning("console: %s: the cluster did not answer: %s", path, message)
        return 503, self.render("error.html", root, title="The cluster did not answer", message=message), html

    async def _page(self, path: str, query: Mapping[str, str], root: str) -> bytes:
        parts = [urllib.parse.unquote(p) for p in path.strip("/").split("/")] if path.strip("/") else []
        if parts == ["rates"]:
            return self.render("rates.html", root, page="rates", rates=self.rates())
        if parts == ["clients"]:
            return self.render("clients.html", root, page="clients", clients=self.client_metrics())
        if parts[:1] == ["schemas"]:
            return await self._schemas(parts[1:], query, root)
        if (
            len(parts) > 2
            or (parts and parts[0] not in ("topics", "groups", "records"))
            or parts[:1] == ["records"]
            and len(parts) > 1
        ):
            raise NotFound(f"no page at {path}")
        form = _records_form(query) if parts == ["records"] else None
        async with self.open_reader() as reader:
            with trio.fail_after(PAGE_TIMEOUT_S):
                if not parts:
                    overview = await reader.overview(version=self.version, listeners=self.listeners())
                    return self.render("overview.html", root, page="overview", overview=overview)
                if parts == ["topics"]:
                    return self.render("topics.html", root, page="topics", topics=await reader.topics())
                if parts[0] == "topics":
                    return self.render(
                        "topic.html", root, page="topics", topic=await reader.topic(parts[1]),
                        proxy=self.rest_proxy() is not None, produced=query.get("produced"),
                    )
                if parts == ["groups"]:
                    return self.render("groups.html", root, page="groups", groups=await GroupReads(reader).groups())
                if parts[0] == "groups":
                    group = await GroupReads(reader).group(parts[1])
                    template = "share_group.html" if group.type == "share" else "group.html"
                    return self.render(template, root, page="groups", group=group)
                assert form is not None
                return await self._records(reader, form, root)

    async def _produce(self, scope: Scope, receive: Receive, path: str, root: str) -> tuple[int, bytes, str]:
        """The topic page's form: the record goes through the HTTP proxy; the answer is a
        redirect back to the topic page saying where it was written, or an error page."""
        html = "text/html; charset=utf-8"
        parts = [urllib.parse.unquote(p) for p in path.strip("/").split("/")]
        try:
            body = await _read_form(receive)
            if len(parts) != 3 or not parts[1]:
                raise NotFound(f"no page at {path}")
            if not _same_origin(scope):
                raise ProduceProblem("the form was posted from another site", 403)
            proxy = self.rest_proxy()
            if proxy is None:
                raise ProduceProblem("no HTTP proxy is served (rest.proxy.port)", 404)
            record = parse_produce_form(body)
            produced = await produce_through_proxy(proxy, parts[1], record, authorization=_authorization(scope))
        except NotFound as exc:
            return 404, self.render("error.html", root, title="Not found", message=str(exc)), html
        except ProduceProblem as exc:
            log.info("console: producing to %r: %s", parts[1] if len(parts) > 1 else path, exc)
            title = "Not produced" if exc.status < 500 else "The HTTP proxy did not answer"
            return exc.status, self.render("error.html", root, title=title, message=str(exc)), html
        page = await self.dispatch(f"/topics/{urllib.parse.quote(parts[1], safe='')}", {"produced": produced}, root)
        return page

    async def _records(self, reader: ClusterReader, form: dict[str, Any], root: str) -> bytes:
        cluster = await reader.metadata()  # names for the topic menu: no offsets or sizes needed
        topics = sorted(name for name, info in cluster.topics.items() if info.error_code == 0)
        page = None
        if form["topic"]:
            page = await reader.records(
                form["topic"],
                form["partition"],
                offset=form["offset"],
                timestamp=form["timestamp"],
                count=form["count"],
            )
        url = self.registry()
        if page is not None and url is not None and any(r.value_bytes is not None for r in page.records):
            page = await SchemaReads(url, authorization=_CALLER.get()).decode(page)
        return self.render("records.html", root, page="records", form=form, topics=topics, records=page)

    async def _schemas(self, parts: list[str], query: Mapping[str, str], root: str) -> bytes:
        """``/schemas``, ``/schemas/<subject>``, ``/schemas/<subject>/<version>`` and
        ``/schemas/<subject>/diff?from=V&to=V``, read from the registry's REST API."""
        url = self.registry()
        if url is None:
            return self.render("schemas.html", root, page="schemas", registry=None, subjects=())
        reads = SchemaReads(url, authorization=_CALLER.get())
        with trio.fail_after(PAGE_TIMEOUT_S):
            if not parts:
                return self.render("schemas.html", root, page="schemas", registry=url, subjects=await reads.subjects())
            if len(parts) == 1:
                detail = await reads.subject(parts[0])
                return self.render("subject.html", root, page="schemas", registry=url, subject=detail)
            if len(parts) == 2 and parts[1] == "diff":
                old, new = _version_param(query, "from"), _version_param(query, "to")
                diff = await reads.diff(parts[0], old, new)
                return self.render("schema_diff.html", root, page="schemas", registry=url, diff=diff)
            if len(parts) == 2:
                version = _version_param({"version": parts[1]}, "version")
                schema = await reads.version(parts[0], version)
                return self.render("schema.html", root, page="schemas", registry=url, schema=schema)
        raise NotFound(f"no page at /schemas/{'/'.join(parts)}")

    def _registry_error(self, path: str, problem: BaseException, root: str) -> tuple[int, bytes, str]:
        html = "text/html; charset=utf-8"
        status = problem.status if isinstance(problem, RegistryProblem) else 503
        if status == 503:
            message = str(problem) or f"no answer from the schema registry within {PAGE_TIMEOUT_S:.0f} s"
            log.warning("console: %s: the schema registry did not answer: %s", path, message)
            title = "The schema registry did not answer"
        else:
            message, title = str(problem), "Not found" if status == 404 else "Bad request"
        return status, self.render("error.html", root, title=title, message=message), html

    def rates(self) -> Any:
        return self.sampler.sample(trio.current_time(), self.counters())

    def render(self, template: str, root: str, **values: Any) -> bytes:
        values.setdefault("page", "")
        return self.templates.get_template(template).render(root=root, version=self.version, **values).encode()

    def _static(self, name: str) -> tuple[int, bytes, str]:
        suffix = name[name.rfind(".") :] if "." in name else ""
        if "/" in name or name.startswith(".") or suffix not in _STATIC_TYPES:
            return 404, b"not found\n", "text/plain; charset=utf-8"
        resource = importlib.resources.files("trikafka.console").joinpath("static", name)
        if not resource.is_file():
            return 404, b"not found\n", "text/plain; charset=utf-8"
        return 200, resource.read_bytes(), _STATIC_TYPES[suffix]


#: What a page turns into an error page; anything else is a bug and propagates.
_EXPECTED = (NotFound, BadRequest, RegistryProblem, KafkaError, OSError, trio.TooSlowError)


def _only_expected(group: BaseExceptionGroup) -> BaseException | None:
    """The first error of ``group`` when every error in it is an expected one, else None."""
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        exc = pending.pop(0)
        if isinstance(exc, BaseExceptionGroup):
            pending.extend(exc.exceptions)
        else:
            leaves.append(exc)
    if leaves and all(isinstance(leaf, _EXPECTED) for leaf in leaves):
        return leaves[0]
    return None


def _int(query: Mapping[str, str], name: str, default: int | None, low: int, high: int) -> int | None:
    raw = query.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(f"{name}={raw!r}: give a whole number from {low} to {high}") from None
    if not low <= value <= high:
        raise BadRequest(f"{name}={value}: allowed values are {low} to {high}")
    return value


def _version_param(query: Mapping[str, str], name: str) -> str:
    """A schema version as the registry takes it: a number from 1, or ``latest``."""
    raw = query.get(name, "").strip()
    if raw == "latest" or (raw.isdigit() and int(raw) >= 1 and len(raw) <= 10):
        return raw
    raise BadRequest(f"{name}={raw!r}: give a version number from 1, or latest")


def parse_timestamp(raw: str) -> int:
    """Epoch milliseconds, or ISO 8601 (a time without a zone is UTC) → epoch ms."""
    raw = raw.strip()
    if raw.lstrip("-").isdigit():
        return int(raw)
    try:
        moment = datetime.datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise BadRequest(f"timestamp={raw!r}: give epoch milliseconds or ISO 8601, e.g. 2026-01-31T12:00:00Z") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


def _records_form(query: Mapping[str, str]) -> dict[str, Any]:
    start = query.get("from", "offset") or "offset"
    if start not in ("offset", "timestamp"):
        raise BadRequest(f"from={start!r}: allowed values are offset, timestamp")
    timestamp_text = query.get("timestamp", "").strip()
    if start == "timestamp" and not timestamp_text:
        raise BadRequest("from=timestamp needs timestamp= (epoch ms or ISO 8601)")
    return {
        "topic": query.get("topic", "").strip(),
        "partition": _int(query, "partition", 0, 0, 2**31 - 1),
        "from": start,
        "offset": _int(query, "offset", None, 0, 2**63 - 1) if start == "offset" else None,
        "offset_text": query.get("offset", ""),
        "timestamp": parse_timestamp(timestamp_text) if start == "timestamp" else None,
        "timestamp_text": timestamp_text,
        "count": _int(query, "count", 20, 1, MAX_RECORDS),
    }


async def _read_form(receive: Receive, limit: int = 1024 * 1024) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise ProduceProblem(f"the form is larger than {limit} bytes", 413)
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


def _same_origin(scope: Scope) -> bool:
    """A POST from the console's own page: a browser's ``Sec-Fetch-Site`` says same-origin
    (the console's no-referrer policy makes its form's Origin ``null``); without it, an
    Origin naming this server, or none at all (curl, a script)."""
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
    site = headers.get("sec-fetch-site")
    if site is not None:
        return site in ("same-origin", "none")
    origin = headers.get("origin")
    if origin is None:
        return True
    return urllib.parse.urlsplit(origin).netloc == headers.get("host", "")


def _response(status: int, body: bytes, content_type: str, extra: Mapping[str, str] | None = None) -> Response:
    headers = {k.decode(): v.decode() for k, v in _SECURITY_HEADERS}
    headers.update(extra or {})
    return Response(body, status_code=status, headers=headers, media_type=content_type)


async def _method_not_allowed(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        return _response(
            405, b"the console only reads: GET and HEAD\n", "text/plain; charset=utf-8", {"allow": "GET, HEAD"}
        )
    return _response(exc.status_code, f"{exc.detail}\n".encode(), "text/plain; charset=utf-8")


def _escape(segment: str) -> str:
    return segment.replace("%", "%25").replace("/", "%2F")


def _authorization(scope: Scope) -> str | None:
    """HTTP Basic for the caller the authentication in front of the console verified."""
    credentials = scope.get("trikafka.credentials")
    if not credentials:
        return None
    token = base64.b64encode(f"{credentials[1]}:{credentials[2]}".encode()).decode()
    return f"Basic {token}"
