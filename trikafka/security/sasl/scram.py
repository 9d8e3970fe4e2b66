"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), as Kafka's ScramSaslServer.

The broker keeps, per user and mechanism, only the salted credential Kafka keeps: the salt,
the iteration count, StoredKey = H(HMAC(SaltedPassword, "Client Key")) and
ServerKey = HMAC(SaltedPassword, "Server Key"). The password itself is never stored: a
client proves it knows it, and the server proves it knows the credential back.

The exchange::

    client-first   n,[a=authzid],n=<user>,r=<client nonce>[,extensions]
    server-first   r=<client nonce + server nonce>,s=<base64 salt>,i=<iterations>
    client-final   c=<base64 gs2 header>,r=<nonce>,p=<base64 proof>
    server-final   v=<base64 server signature>

Failures follow Kafka: an unknown user and a wrong proof both end as the generic
"invalid credentials" answer (:class:`SaslError`), so a client cannot tell which it was.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable

import attrs

from trikafka.security.sasl import SaslAuthenticationError, SaslError

__all__ = [
    "MECHANISMS",
    "ScramCredential",
    "ScramServer",
    "credential_from_salted_password",
    "scram_credential",
]

#: mechanism → (hashlib name, Kafka's minimum iterations).
MECHANISMS = {"SCRAM-SHA-256": ("sha256", 4096), "SCRAM-SHA-512": ("sha512", 4096)}
DEFAULT_ITERATIONS = 4096


@attrs.frozen
class ScramCredential:
    salt: bytes
    stored_key: bytes = attrs.field(repr=False)
    server_key: bytes = attrs.field(repr=False)
    iterations: int


def _hmac(digest: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, digest).digest()


def scram_credential(
    mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    """The salted credential of ``password`` (Kafka's ScramFormatter.generateCredential)."""
    digest, _ = MECHANISMS[mechanism]
    salt = salt if salt is not None else secrets.token_bytes(32)
    salted = hashlib.pbkdf2_hmac(digest, password.encode("utf-8"), salt, iterations)
    return credential_from_salted_password(mechanism, salt, salted, iterations)


def credential_from_salted_password(
    mechanism: str, salt: bytes, salted_password: bytes, iterations: int
) -> ScramCredential:
    """What AlterUserScramCredentials sends (SaltedPassword = Hi(password, salt, i)) as the
    credential kept; the salted password itself is dropped."""
    digest, _ = MECHANISMS[mechanism]
    client_key = _hmac(digest, salted_password, b"Client Key")
    return ScramCredential(
        salt,
        hashlib.new(digest, client_key).digest(),
        _hmac(digest, salted_password, b"Server Key"),
        iterations,
    )


def _attributes(message: str) -> list[tuple[str, str]]:
    out = []
    for part in message.split(","):
        name, sep, value = part.partition("=")
        if not sep or len(name) != 1:
            raise SaslError(f"Invalid SCRAM attribute {part!r}")
        out.append((name, value))
    return out


def _username(sasl_name: str) -> str:
    """RFC 5802 saslname: ``=2C`` is a comma and ``=3D`` an equals sign; any other ``=`` is bad."""
    text = sasl_name.replace("=2C", ",").replace("=3D", "=")
    if "=" in sasl_name.replace("=2C", "").replace("=3D", ""):
        raise SaslError("Invalid username")
    return text


class ScramServer:
    def __init__(
        self,
        mechanism: str,
        credentials: Callable[[str, str], ScramCredential | None],
        server_nonce: Callable[[], str] = lambda: secrets.token_urlsafe(24),
    ) -> None:
        self.mechanism = mechanism
        self._server_nonce = server_nonce  # a test gives RFC 7677's
        self._digest, self._min_iterations = MECHANISMS[mechanism]
        self._credentials = credentials
        self._state = "CLIENT_FIRST"
        self.complete = False
        self.authorization_id: str | None = None
        self.username: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            self._state = "FAILED"
            raise SaslError("SCRAM message is not UTF-8") from None
        try:
            if self._state == "CLIENT_FIRST":
                return self._client_first(text)
            if self._state == "CLIENT_FINAL":
                return self._client_final(text)
            raise SaslError(f"Unexpected challenge in Sasl server state {self._state}")
        except SaslError:
            self._state = "FAILED"
            raise

    def _client_first(self, text: str) -> bytes:
        gs2_flag, sep, rest = text.partition(",")
        authzid_part, sep2, bare = rest.partition(",")
        if not sep or not sep2 or gs2_flag not in ("n", "y"):
            raise SaslError("Invalid SCRAM client first message (channel binding is not supported)")
        authzid = authzid_part[2:] if authzid_part.startswith("a=") else ""
        attributes = _attributes(bare)
        if len(attributes) < 2 or attributes[0][0] != "n" or attributes[1][0] != "r":
            raise SaslError("Invalid SCRAM client first message")
        extensions = dict(attributes[2:])
        self.username = username = _username(attributes[0][1])
        client_nonce = attributes[1][1]
        if extensions.get("t") == "true" or "tokenauth=true" in bare:
            raise SaslError("Delegation tokens are not supported")
        credential = self._credentials(username, self.mechanism)
        if credential is None:
            raise SaslError("Authentication failed: Invalid user credentials")
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        if credential.iterations < self._min_iterations:
            raise SaslError(f"Iterations {credential.iterations} is less than the minimum {self._min_iterations}")
        nonce = client_nonce + self._server_nonce()
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={nonce},s={salt},i={credential.iterations}"
        self._client_first_bare = bare
        self._nonce = nonce
        self._client_nonce = client_nonce
        self._credential = credential
        self._state = "CLIENT_FINAL"
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        without_proof, sep, proof_b64 = text.rpartition(",p=")
        if not sep:
            raise SaslError("Invalid SCRAM client final message: no proof")
        attributes = dict(_attributes(without_proof))
        # librdkafka before 2.6.1 (kcat as packaged today) sends the client nonce twice
        # (confluentinc/librdkafka#4895); Kafka 3.8.1-3.9 accepted it, and so do we — that
        # exact form only: the server nonce is still required, and the proof covers it.
        if attributes.get("r") not in (self._nonce, self._client_nonce + self._nonce):
            raise SaslError("Invalid client nonce in the final client message.")
        try:
            proof = base64.b64decode(proof_b64, validate=True)
        except ValueError:
            raise SaslError("Authentication failed: Invalid client final message") from None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        credential = self._credential
        signature = _hmac(self._digest, credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise SaslError("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self._digest, client_key).digest(), credential.stored_key):
            raise SaslError("Invalid client credentials")
        server_signature = _hmac(self._digest, credential.server_key, auth_message)
        self._credential = None  # type: ignore[assignment]  # dropped: the exchange is over
        self._state = "COMPLETE"
        self.complete = True
        self.authorization_id = self.username
        return b"v=" + base64.b64encode(server_signature)
