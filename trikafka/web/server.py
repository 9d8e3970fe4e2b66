"""One HTTP server for the broker's web surfaces: ``/metrics`` and the console, on its Trio loop.

The server is hypercorn's Trio worker (``hypercorn.trio.serve``'s ``worker_serve``) running a router
that is a Starlette app (Starlette runs on anyio, which hypercorn's Trio worker drives).
Why hypercorn: it runs *inside* a Trio nursery we own (no second event loop, no thread),
speaks HTTP/1.1 and HTTP/2 with keep-alive and graceful shutdown done as a deadline on its
connection nursery — the pattern the broker follows itself (STYLE.md) — and it serves any
ASGI application, so the console may be written with any ASGI framework that runs on Trio.
uvicorn and granian need asyncio or their own runtime; a hand-rolled server (as the test
control listener is) would have to grow keep-alive, chunking and HTTP/2 for browsers.

Mounting (the hook other edges use)::

    server = HttpServer("127.0.0.1", 9404, routes={"/metrics": metrics_app})
    server.mount("/ui", console_app)        # before or after run() starts

A request goes to the app with the longest mounted prefix that equals the path or is
followed by ``/`` in it (``/ui`` serves ``/ui`` and ``/ui/topics``, not ``/uix``). The app
receives the unchanged ASGI ``http`` or ``websocket`` scope with ``root_path`` extended by
the prefix and ``path`` still the full path (the convention of uvicorn and Starlette >= 0.33),
so links it builds from ``root_path`` are right. ``/`` lists the mounts; anything else is 404.
The router is a Starlette app: it answers lifespan events itself and does not forward them (a
mounted app lives as long as the broker that mounted it and takes what it needs from it, not
from start-up hooks).

Security: with ``users`` every mount but the ``public`` ones (``/metrics``) asks for HTTP
Basic (:mod:`trikafka.web.http_auth`); with ``ssl_context`` the port speaks HTTPS only.

Every broker builds its servers (mounting works before ``run``), but most serve nothing: a
broker without ``metrics.port`` and the other HTTP ports never answers HTTP. So Starlette (and
anyio, email and http.client under it: some 15 ms of a broker process's start) is imported when
a router first answers a request, and hypercorn when a port is bound
(tests/test_startup_imports.py).
"""

from __future__ import annotations

import functools
import logging
import ssl
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

import trio

from trikafka.web.http_auth import Verifier, require_basic

__all__ = ["ASGIApp", "HttpServer", "Router", "not_attached_app", "route_for"]

log = logging.getLogger("trikafka.web")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
#: An ASGI 3 application.
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# hypercorn reports "Running on ... (CTRL + C to quit)" at INFO through this logger: the
# broker's start-up block says where HTTP is served, so only hypercorn's warnings pass.
_hypercorn_log = logging.getLogger("trikafka.web.hypercorn")
_hypercorn_log.setLevel(logging.WARNING)


def _normalise(prefix: str) -> str:
    if not prefix.startswith("/") or (prefix != "/" and prefix.endswith("/")):
        raise ValueError(f"a mount prefix starts with '/' and does not end with one: {prefix!r}")
    return prefix


def route_for(routes: Mapping[str, Any], path: str) -> str | None:
    """The longest prefix in ``routes`` that ``path`` falls under, or None."""
    best = None
    for prefix in routes:
        if path == prefix or path.startswith(prefix.rstrip("/") + "/"):
            if best is None or len(prefix) > len(best):
                best = prefix
    return best


@functools.cache
def _mounts_route() -> type:
    """Starlette's route for the mounted apps (a class made on first use, so that Starlette is
    imported only by a server that answers): the longest mounted prefix wins (see the module
    doc); an app mounted with a verifier gets HTTP Basic in front of it."""
    from starlette.routing import BaseRoute, Match

    class _Mounts(BaseRoute):
        def __init__(self, router: Router) -> None:
            self.router = router

        def matches(self, scope: Scope) -> tuple[Match, Scope]:
            if scope["type"] not in ("http", "websocket"):
                return Match.NONE, {}
            prefix = route_for(self.router.routes, scope.get("path", "/"))
            if prefix is None:
                return Match.NONE, {}
            return Match.FULL, {_MOUNT_KEY: prefix}

        async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
            prefix = scope[_MOUNT_KEY]
            child = dict(scope)
            del child[_MOUNT_KEY]
            child["root_path"] = scope.get("root_path", "") + ("" if prefix == "/" else prefix)
            await self.router.routes[prefix](child, receive, send)

    return _Mounts


_MOUNT_KEY = "trikafka.mount"


class Router:
    """An ASGI app dispatching by path prefix to mounted ASGI apps (see the module doc).

    It is a Starlette app (which answers lifespan, and 404 for a path under no mount) whose
    one dynamic route looks the prefix up per request, so mounting works after start. With
    ``users`` (the broker's SASL users, :class:`~trikafka.security.http_users.HttpUsers`),
    every app mounted without ``public=True`` is behind HTTP Basic (:mod:`trikafka.web.http_auth`).
    """

    def __init__(self, routes: Mapping[str, ASGIApp] | None = None, *, users: Verifier | None = None) -> None:
        self.routes: dict[str, ASGIApp] = {}
        self.users = users
        for prefix, app in (routes or {}).items():
            self.mount(prefix, app)
        self._app: ASGIApp | None = None  # the Starlette app, made when the first request comes

    def mount(self, prefix: str, app: ASGIApp, *, public: bool = False) -> None:
        """Serve ``app`` under ``prefix`` (e.g. ``"/ui"``); replaces an earlier mount there.
        ``public``: no HTTP Basic in front of it even when the server asks for it (``/metrics``,
        a test tool kept on loopback)."""
        if self.users is not None and not public:
            app = require_basic(app, self.users, what=f"HTTP {prefix}")
        self.routes[_normalise(prefix)] = app

    async def _index(self, request: Any) -> Any:
        from starlette.responses import PlainTextResponse

        body = "trikafka\n" + "".join(f"  {prefix}\n" for prefix in sorted(self.routes))
        return PlainTextResponse(body)

    def _starlette(self) -> ASGIApp:
        from starlette.applications import Starlette
        from starlette.routing import Route

        return Starlette(routes=[_mounts_route()(self), Route("/", self._index, include_in_schema=False)])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._app is None:
            self._app = self._starlette()
        await self._app(scope, receive, send)


async def not_attached_app(scope: Scope, receive: Receive, send: Send) -> None:
    """What ``rest.proxy.port`` answers before the HTTP proxy (an edge) is mounted on it:
    503 with Confluent's error body, saying how to attach it."""
    if scope["type"] != "http":
        if scope["type"] == "websocket":
            await receive()
            await send({"type": "websocket.close", "code": 1000})
        return
    body = (
        b'{"error_code":50301,"message":"the HTTP proxy is not attached to this port: '
        b'python -m trikafka serves it, or trikafka.rest.serve_rest_proxy(broker) in a program"}'
    )
    await send(
        {
            "type": "http.response.start",
            "status": 503,
            "headers": [
                (b"content-type", b"application/vnd.kafka.v2+json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class HttpServer:
    """hypercorn on ``host:port`` serving a :class:`Router`; one ``run`` per lifetime.

    ``run`` reports started with the bound ``(host, port)`` (port 0 picks a free one); it
    ends on ``stop()`` (in-flight requests get ``graceful_timeout`` seconds) or when
    cancelled — the broker cancels it with the rest of its nursery.
    """

    def __init__(
        self,
        host: str,
        port: int,
        routes: Mapping[str, ASGIApp] | None = None,
        *,
        graceful_timeout: float = 1.0,
        key: str = "metrics.port",
        users: Verifier | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.host = host
        self.port = port
        #: The config key that chose ``port``, named when the port is taken.
        self.key = key
        self.router = Router(routes, users=users)
        #: HTTPS only when set (``http.ssl.*``, see trikafka.security.config.HTTP_PORTS).
        self.ssl_context = ssl_context
        if ssl_context is not None:
            ssl_context.set_alpn_protocols(["h2", "http/1.1"])
        self.graceful_timeout = graceful_timeout
        #: (host, port) once bound; None before.
        self.bound: tuple[str, int] | None = None
        self._stop = trio.Event()
        self._sockets: Any = None  # hypercorn's Sockets, once bound

    def mount(self, prefix: str, app: ASGIApp, *, public: bool = False) -> None:
        """Serve ``app`` under ``prefix``; works before and after ``run`` started. ``public``:
        without HTTP Basic even when the server asks for it."""
        self.router.mount(prefix, app, public=public)

    @property
    def url(self) -> str | None:
        if self.bound is None:
            return None
        host, port = self.bound
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"

    def stop(self) -> None:
        self._stop.set()

    def bind(self) -> tuple[str, int]:
        """Bind the listening socket now (``run`` serves on it later), so that a caller can
        bind every port it needs before it says anything has started. A taken port is an
        OSError naming the address; idempotent."""
        if self._sockets is None:
            from hypercorn.config import Config, Sockets

            config = Config()
            config.bind = [f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"]
            try:
                sockets = config.create_sockets()
            except OSError as exc:
                raise OSError(
                    exc.errno, f"{exc.strerror}: {self.host}:{self.port} (the HTTP server, {self.key})"
                ) from exc
            sock = sockets.insecure_sockets[0]
            sock.listen(config.backlog)
            address = sock.getsockname()
            self.bound = (address[0], address[1])
            if self.ssl_context is not None:  # the same socket, served by hypercorn's TLS path
                sockets = Sockets([sock], [], [])
            self._sockets = sockets
        assert self.bound is not None
        return self.bound

    def close(self) -> None:
        """Close a socket ``bind`` opened when ``run`` will not serve it (a start that failed)."""
        if self._sockets is not None:
            for sock in [*self._sockets.secure_sockets, *self._sockets.insecure_sockets]:
                sock.close()

    async def run(self, *, task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED) -> None:
        from hypercorn.trio.run import worker_serve
        from hypercorn.utils import wrap_app

        config = _hypercorn_config(self.ssl_context)
        config.bind = [f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"]
        config.accesslog = None
        config.errorlog = _hypercorn_log
        config.graceful_timeout = self.graceful_timeout
        config.include_server_header = False
        # Bound here (or by bind()), before hypercorn's nurseries, so that a taken port is a
        # plain OSError for the broker's start-up (hypercorn.trio.serve would bind inside its
        # nursery).
        bound = self.bind()
        sockets = self._sockets
        async with trio.open_nursery() as nursery:
            await nursery.start(
                functools.partial(
                    worker_serve,
                    wrap_app(self.router, config.wsgi_max_body_size, "asgi"),  # type: ignore[arg-type]  # ASGI 3; hypercorn's TypedDict scopes
                    config,
                    sockets=sockets,
                    shutdown_trigger=self._stop.wait,
                )
            )
            log.info("HTTP served at %s (%s)", self.url, ", ".join(sorted(self.router.routes)) or "no mounts")
            task_status.started(bound)


def _hypercorn_config(context: ssl.SSLContext | None) -> Any:
    """hypercorn's settings, with our TLS context (built from the broker's keystore keys)
    instead of one hypercorn would build from certfile/keyfile."""
    from hypercorn.config import Config

    class TlsConfig(Config):
        def create_ssl_context(self) -> ssl.SSLContext | None:
            return context

    return TlsConfig()
