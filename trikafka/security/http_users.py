"""The broker's SASL users as HTTP Basic users: who may call the registry, the proxy, the console.

HTTP Basic carries a username and a password, which is what SASL/PLAIN carries and what a
SCRAM client derives its proof from; so the users the Kafka side already knows are the HTTP
side's users too, as Redpanda does for its HTTP proxy and schema registry:

* SCRAM users (``ScramCredentials``: AlterUserScramCredentials, or a listener's
  ScramLoginModule ``user_<name>`` options). A password is checked by salting it with the
  stored salt and iterations and comparing the stored key, so the broker still keeps no
  password. PBKDF2 costs milliseconds, so a verified (user, password) is remembered as long
  as the stored credential it matched is unchanged (a new password forgets it at once).
* PLAIN users (a listener's PlainLoginModule ``user_<name>="<password>"`` options).

A verified caller is ``(mechanism, username, password)``: the mechanism names how it was
verified, which is how the HTTP proxy then logs in to the broker as that user. SCRAM wins
over PLAIN when a user has both. The principal is ``User:<username>``, as on a SASL listener.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable

from trikafka.security.config import SecurityConfig
from trikafka.security.sasl.credentials import ScramCredentials
from trikafka.security.sasl.scram import MECHANISMS as SCRAM_MECHANISMS
from trikafka.security.sasl.scram import ScramCredential, scram_credential

__all__ = ["Credentials", "HttpUsers", "principal_of"]

#: (SASL mechanism, username, password): what the HTTP proxy logs in to the broker with.
Credentials = tuple[str, str, str]


def principal_of(username: str) -> str:
    return f"User:{username}"


class HttpUsers:
    """Checks HTTP Basic credentials against the broker's SCRAM and PLAIN users."""

    #: Verified SCRAM passwords remembered (cleared when full).
    MEMO_SIZE = 1024

    def __init__(self, config: SecurityConfig, listeners: Iterable[str], scram: ScramCredentials) -> None:
        self.scram = scram
        self.scram_mechanisms: list[str] = []
        #: username → password, from every SASL listener's PLAIN JAAS entry.
        self.plain: dict[str, str] = {}
        for listener in listeners:
            if config.protocol(listener) not in ("SASL_PLAINTEXT", "SASL_SSL"):
                continue
            mechanisms = config.mechanisms(listener)
            for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
                if mechanism in mechanisms and mechanism not in self.scram_mechanisms:
                    self.scram_mechanisms.append(mechanism)
            if "PLAIN" in mechanisms:
                entry = config.jaas(listener, "PLAIN")
                for user, password in (entry.users() if entry else {}).items():
                    self.plain.setdefault(user, password)
        if not self.scram_mechanisms:
            # No SASL listener names SCRAM (HTTP Basic forced on): users created by
            # AlterUserScramCredentials still count.
            self.scram_mechanisms = sorted(SCRAM_MECHANISMS, reverse=True)
        self._memo: dict[tuple[str, str, bytes], ScramCredential] = {}

    def verify(self, username: str, password: str) -> Credentials | None:
        """The caller's credentials if ``password`` is ``username``'s, else None."""
        for mechanism in self.scram_mechanisms:
            stored = self.scram.get(username, mechanism)
            if stored is not None and self._scram_matches(mechanism, username, password, stored):
                return (mechanism, username, password)
        known = self.plain.get(username)
        if known is not None and hmac.compare_digest(known.encode(), password.encode()):
            return ("PLAIN", username, password)
        return None

    def _scram_matches(self, mechanism: str, username: str, password: str, stored: ScramCredential) -> bool:
        key = (mechanism, username, hashlib.sha256(password.encode()).digest())
        if self._memo.get(key) is stored:
            return True
        candidate = scram_credential(mechanism, password, stored.iterations, stored.salt)
        if not hmac.compare_digest(candidate.stored_key, stored.stored_key):
            return False
        if len(self._memo) >= self.MEMO_SIZE:
            self._memo.clear()
        self._memo[key] = stored
        return True
