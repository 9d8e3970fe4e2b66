"""HTTP Basic in front of a mounted app: the caller must be one of the broker's SASL users.

The check is the broker's (:class:`trikafka.security.http_users.HttpUsers`); this module is
the ASGI side of it. A request with the right credentials goes on with
``scope["trikafka.credentials"]`` set to ``(mechanism, username, password)`` — what the
HTTP proxy logs in to the broker with, and whose ``User:<username>`` the schema registry's
ACL checks use. Anything else is answered here: 401 with ``WWW-Authenticate: Basic`` and
Confluent's body (``{"error_code": 40101, "message": …}``), and one log line; a websocket
without credentials is closed (1008, policy violation) before it opens.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Protocol

__all__ = ["CREDENTIALS_KEY", "Verifier", "require_basic"]

log = logging.getLogger("trikafka.web.auth")

#: Where a verified caller's ``(mechanism, username, password)`` is put in the ASGI scope.
CREDENTIALS_KEY = "trikafka.credentials"
REALM = "trikafka"

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class Verifier(Protocol):
    def verify(self, username: str, password: str) -> tuple[str, str, str] | None: ...


def _basic(scope: Scope) -> tuple[str, str] | str:
    """(username, password) from the Authorization header, or why there are none."""
    for name, value in scope.get("headers", ()):
        if name.lower() != b"authorization":
            continue
        scheme, _, token = value.decode("latin-1").strip().partition(" ")
        if scheme.lower() != "basic":
            return f"the Authorization scheme is {scheme!r}, not Basic"
        try:
            decoded = base64.b64decode(token.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return "the Basic credentials are not base64 of UTF-8 user:password"
        username, colon, password = decoded.partition(":")
        if not colon:
            return "the Basic credentials have no ':' between user and password"
        return (username, password)
    return "no credentials"


def require_basic(app: ASGIApp, users: Verifier, *, what: str) -> ASGIApp:
    """``app`` behind HTTP Basic against ``users``; ``what`` names the surface in log lines."""

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await app(scope, receive, send)
            return
        found = _basic(scope)
        credentials = None
        if isinstance(found, tuple):
            credentials = users.verify(*found)
            reason = f"wrong password or unknown user {found[0]!r}"
        else:
            reason = found
        if credentials is not None:
            await app({**scope, CREDENTIALS_KEY: credentials}, receive, send)
            return
        client = scope.get("client")
        log.log(
            logging.INFO if found == "no credentials" else logging.WARNING,
            "%s: %s %s from %s refused (401): %s", what, scope.get("method", "WEBSOCKET"),
            scope.get("path", "/"), client[0] if client else "?", reason,
        )
        if scope["type"] == "websocket":
            await receive()
            await send({"type": "websocket.close", "code": 1008})
            return
        await _unauthorized(send, reason)

    return guarded


async def _unauthorized(send: Send, reason: str) -> None:
    message: dict[str, Any] = {
        "error_code": 40101,
        "message": f"Unauthorized: HTTP Basic credentials of a broker user are required ({reason})",
    }
    body = json.dumps(message).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", f'Basic realm="{REALM}", charset="UTF-8"'.encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
