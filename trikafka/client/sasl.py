"""SASL for the Trio client: PLAIN and SCRAM-SHA-256/512 over SASL_PLAINTEXT and SASL_SSL, sans-IO.

What Java's client does on a SASL listener: after ApiVersions, SaslHandshake names the
mechanism (the broker answers with the ones it enables), then SaslAuthenticate carries the
mechanism's tokens until it is done. Credentials come from ``sasl.jaas.config`` with Kafka's
login modules (``PlainLoginModule`` / ``ScramLoginModule`` ``required username="…"
password="…";``). A refused login is ``SASL_AUTHENTICATION_FAILED``, not retried: a retry
would only lock the account out faster.

:class:`PlainClient` and :class:`ScramClient` are fed the server's tokens and return the next
client token (RFC 4616, RFC 5802 with Kafka's channel binding ``n,,``); :func:`authenticate`
is the shell that sends them on one connection. GSSAPI and OAUTHBEARER are refused at
configuration time, naming the mechanisms this client has.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from trikafka.client.errors import KafkaError
from trikafka.errors import ErrorCode
from trikafka.security.jaas import parse_jaas_config

__all__ = ["MECHANISMS", "PlainClient", "ScramClient", "authenticate", "credentials_from_jaas", "mechanism_client"]

#: mechanism → hashlib digest (None: not SCRAM).
MECHANISMS = {"PLAIN": None, "SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
#: The SCRAM mechanisms' hash names.
SCRAM_DIGESTS = {name: digest for name, digest in MECHANISMS.items() if digest is not None}


def credentials_from_jaas(jaas: str | None, key: str = "sasl.jaas.config") -> tuple[str, str]:
    """(username, password) of a PlainLoginModule or ScramLoginModule entry."""
    from trikafka.errors import ConfigError

    if not jaas:
        raise ConfigError(
            key,
            None,
            "a login module with username and password is needed for SASL (e.g. "
            'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";)',
        )
    entry = parse_jaas_config(jaas, key)
    if "username" not in entry.options or "password" not in entry.options:
        raise ConfigError(key, "(hidden)", "the login module needs username and password options")
    return entry.options["username"], entry.options["password"]


class PlainClient:
    """RFC 4616: one token, ``\\0username\\0password``."""

    def __init__(self, username: str, password: str) -> None:
        self.token = b"\0" + username.encode() + b"\0" + password.encode()
        self.done = False

    def first(self) -> bytes:
        return self.token

    def respond(self, server: bytes) -> bytes | None:
        self.done = True
        return None


class ScramClient:
    """RFC 5802 client: client-first, then client-final with the proof; checks the server's
    signature in its final message (a broker that does not know the password cannot forge it)."""

    def __init__(self, mechanism: str, username: str, password: str, nonce: str | None = None) -> None:
        self.digest = SCRAM_DIGESTS[mechanism]
        self.password = password
        self.nonce = nonce or base64.b64encode(secrets.token_bytes(24)).decode()
        name = username.replace("=", "=3D").replace(",", "=2C")
        self.client_first_bare = f"n={name},r={self.nonce}"
        self.server_signature: bytes | None = None
        self.done = False

    def first(self) -> bytes:
        return ("n,," + self.client_first_bare).encode()

    def _hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self.digest).digest()

    def respond(self, server: bytes) -> bytes | None:
        text = server.decode()
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        if self.server_signature is None:
            if "e" in fields:
                raise _auth_failed(f"the broker refused the SCRAM exchange: {fields['e']}")
            nonce, salt, iterations = fields.get("r", ""), fields.get("s", ""), int(fields.get("i", "0"))
            if not nonce.startswith(self.nonce) or iterations < 1:
                raise _auth_failed("the broker's SCRAM answer does not continue our exchange")
            salted = hashlib.pbkdf2_hmac(self.digest, self.password.encode(), base64.b64decode(salt), iterations)
            final_without_proof = f"c=biws,r={nonce}"
            auth_message = f"{self.client_first_bare},{text},{final_without_proof}".encode()
            client_key = self._hmac(salted, b"Client Key")
            signature = self._hmac(hashlib.new(self.digest, client_key).digest(), auth_message)
            proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
            self.server_signature = self._hmac(self._hmac(salted, b"Server Key"), auth_message)
            return f"{final_without_proof},p={base64.b64encode(proof).decode()}".encode()
        if "e" in fields:
            raise _auth_failed(f"the broker refused the SCRAM proof: {fields['e']}")
        if base64.b64decode(fields.get("v", "")) != self.server_signature:
            raise _auth_failed("the broker's SCRAM signature is wrong (it does not know this user's credential)")
        self.done = True
        return None


def _auth_failed(message: str) -> KafkaError:
    return KafkaError(ErrorCode.sasl_authentication_failed, message, retriable=False)


def mechanism_client(mechanism: str, jaas: str | None) -> PlainClient | ScramClient:
    username, password = credentials_from_jaas(jaas)
    if mechanism == "PLAIN":
        return PlainClient(username, password)
    return ScramClient(mechanism, username, password)


async def authenticate(
    request: Callable[[int, dict[str, Any]], Awaitable[Any]], mechanism: str, jaas: str | None, where: str
) -> None:
    """SaslHandshake + SaslAuthenticate rounds; ``request(api_key, fields)`` sends one request
    on the connection being opened. Raises a non-retriable :class:`KafkaError` on refusal."""
    from trikafka.protocol.registry import ApiKey

    client = mechanism_client(mechanism, jaas)
    answer = await request(ApiKey.SASL_HANDSHAKE, {"mechanism": mechanism})
    if answer.error_code != ErrorCode.none:
        enabled = ", ".join(answer.mechanisms) or "none"
        raise KafkaError(
            answer.error_code,
            f"{where} does not enable SASL mechanism {mechanism} (it enables: {enabled})",
            retriable=False,
        )
    token: bytes | None = client.first()
    while token is not None:
        answer = await request(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": token})
        if answer.error_code != ErrorCode.none:
            raise KafkaError(
                answer.error_code, f"{where}: {answer.error_message or 'authentication failed'}", retriable=False
            )
        token = client.respond(bytes(answer.auth_bytes))
