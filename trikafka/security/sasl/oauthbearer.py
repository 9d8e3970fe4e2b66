"""SASL/OAUTHBEARER (RFC 7628) with Kafka's *unsecured* JWS validator — for development only.

Kafka's default broker-side handler (``OAuthBearerUnsecuredValidatorCallbackHandler``)
accepts unsigned tokens (``alg: none``): anyone can claim any principal. It exists so that
clients' OAUTHBEARER settings can be tested without an identity provider, and that is all it
is for here; the broker logs a warning for every listener that enables it.

The client's one message: ``n,[a=authzid],`` ``\\x01auth=Bearer <token>\\x01`` (extensions)
``\\x01``. The token is ``base64url(header).base64url(claims).`` with an empty signature; the
claims need the principal (``sub`` by default), a future ``exp``, a past ``iat`` if present,
and the required scopes (JAAS option ``unsecuredValidatorRequiredScope``). A bad token gets
RFC 7628's error challenge ``{"status":"invalid_token"}``; the client answers ``\\x01`` and the
exchange fails with that text, as Kafka does.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from trikafka.security.sasl import SaslAuthenticationError, SaslError

__all__ = ["OAuthBearerServer"]


def _b64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class OAuthBearerServer:
    mechanism = "OAUTHBEARER"

    def __init__(self, options: Mapping[str, str], now: Callable[[], float] = time.time) -> None:
        self._principal_claim = options.get("unsecuredValidatorPrincipalClaimName", "sub")
        self._scope_claim = options.get("unsecuredValidatorScopeClaimName", "scope")
        self._required_scope = options.get("unsecuredValidatorRequiredScope", "").split()
        self._skew = int(options.get("unsecuredValidatorAllowableClockSkewMs", "0")) / 1000
        self._now = now
        self._error: str | None = None
        self.complete = False
        self.authorization_id: str | None = None
        self.username: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if self._error is not None:
            if token == b"\x01":
                raise SaslAuthenticationError(self._error)
            raise SaslError("OAUTHBEARER: expected the client's %x01 after an error challenge")
        try:
            gs2, sep, rest = token.decode("utf-8").partition("\x01")
        except UnicodeDecodeError:
            raise SaslError("OAUTHBEARER message is not UTF-8") from None
        if not sep or not gs2.startswith("n,") or not rest.endswith("\x01\x01"):
            raise SaslError("Invalid OAUTHBEARER client first message")
        authzid = gs2[2:].rstrip(",")
        authzid = authzid[2:] if authzid.startswith("a=") else ""
        pairs = dict(kv.split("=", 1) for kv in rest[:-2].split("\x01") if "=" in kv)
        auth = pairs.get("auth", "")
        if not auth.startswith("Bearer "):
            raise SaslError("Invalid OAUTHBEARER client first message: no bearer token")
        try:
            principal = self._validate(auth[len("Bearer "):].strip())
        except ValueError as exc:
            self.username = None
            self._error = json.dumps({"status": "invalid_token"}, separators=(",", ":"))
            self._reason = str(exc)
            return self._error.encode()
        if authzid and authzid != principal:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        self.username = self.authorization_id = principal
        self.complete = True
        return b""

    def _validate(self, token: str) -> str:
        parts = token.split(".")
        if len(parts) != 3 or parts[2]:
            raise ValueError("an unsecured JWS has three parts and an empty signature")
        try:
            header: Any = json.loads(_b64url(parts[0]))
            claims: Any = json.loads(_b64url(parts[1]))
        except ValueError:
            raise ValueError("the JWS header or claims are not base64url JSON") from None
        if not isinstance(header, dict) or header.get("alg") != "none":
            raise ValueError('an unsecured JWS must have "alg": "none"')
        if not isinstance(claims, dict):
            raise ValueError("the JWS claims are not a JSON object")
        principal = claims.get(self._principal_claim)
        if not isinstance(principal, str) or not principal:
            raise ValueError(f"no {self._principal_claim!r} claim")
        self.username = principal
        now = self._now()
        expires = claims.get("exp")
        if not isinstance(expires, int | float) or expires <= now - self._skew:
            raise ValueError("the token has no exp claim or has expired")
        issued = claims.get("iat")
        if issued is not None and (not isinstance(issued, int | float) or issued > now + self._skew):
            raise ValueError("the token's iat claim is in the future")
        scope = claims.get(self._scope_claim, [])
        scopes = scope.split() if isinstance(scope, str) else list(scope)
        missing = [s for s in self._required_scope if s not in scopes]
        if missing:
            raise ValueError(f"the token lacks the required scope {missing}")
        #: What is left of the token's life: a session lasts no longer (KIP-368, as Kafka's
        #: CREDENTIAL_LIFETIME_MS negotiated property).
        self.credential_lifetime_ms = round((expires - now) * 1000)
        return principal
