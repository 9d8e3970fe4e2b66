"""SCRAM credentials: per user and mechanism, only the salted form (never a password).

Kafka keeps them in the cluster metadata, set by AlterUserScramCredentials (or
``kafka-storage format --add-scram``). Here they live in a :class:`ScramCredentials` store
shared by every listener; a development broker can bootstrap users from its config — the
``user_<name>="<password>"`` options of a listener's ScramLoginModule JAAS entry (a
trikafka convenience: Kafka ignores those options, so the same file still works there). The
passwords are salted when the broker starts and only the credentials are kept here.
"""

from __future__ import annotations

from trikafka.security.config import SecurityConfig
from trikafka.security.sasl.scram import MECHANISMS, ScramCredential, scram_credential

__all__ = ["ScramCredentials"]


class ScramCredentials:
    def __init__(self) -> None:
        self._credentials: dict[tuple[str, str], ScramCredential] = {}

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._credentials.get((user, mechanism))

    def set(self, user: str, mechanism: str, credential: ScramCredential) -> None:
        self._credentials[(user, mechanism)] = credential

    def delete(self, user: str, mechanism: str) -> bool:
        return self._credentials.pop((user, mechanism), None) is not None

    def users(self) -> dict[str, dict[str, int]]:
        """user → mechanism → iterations (what DescribeUserScramCredentials shows)."""
        out: dict[str, dict[str, int]] = {}
        for (user, mechanism), credential in sorted(self._credentials.items()):
            out.setdefault(user, {})[mechanism] = credential.iterations
        return out

    @classmethod
    def from_config(cls, config: SecurityConfig, listeners: list[str]) -> ScramCredentials:
        store = cls()
        for listener in listeners:
            if config.protocol(listener) not in ("SASL_PLAINTEXT", "SASL_SSL"):
                continue
            for mechanism in config.mechanisms(listener):
                if mechanism not in MECHANISMS:
                    continue
                entry = config.jaas(listener, mechanism)
                for user, password in (entry.users() if entry else {}).items():
                    if store.get(user, mechanism) is None:
                        store.set(user, mechanism, scram_credential(mechanism, password))
        return store
