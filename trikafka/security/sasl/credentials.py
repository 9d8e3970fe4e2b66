"""SCRAM credentials: per user and mechanism, only the salted form (never a password).

Kafka keeps them in the cluster metadata, set by AlterUserScramCredentials (or
``kafka-storage format --add-scram``). Here they live in a :class:`ScramCredentials` store
shared by every listener; a development broker can bootstrap users from its config — the
``user_<name>="<password>"`` options of a listener's ScramLoginModule JAAS entry (a
trikafka convenience: Kafka ignores those options, so the same file still works there). The
passwords are salted when the broker starts and only the credentials are kept here.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from trikafka.errors import ConfigError
from trikafka.security.config import SecurityConfig
from trikafka.security.files import write_json_atomically
from trikafka.security.sasl.scram import MECHANISMS, ScramCredential, scram_credential

__all__ = ["CREDENTIALS_FILE", "ScramCredentials"]

#: Where AlterUserScramCredentials' users are kept, in the first data directory.
CREDENTIALS_FILE = "trikafka-scram-credentials.json"


class ScramCredentials:
    def __init__(self, path: Path | None = None) -> None:
        self._credentials: dict[tuple[str, str], ScramCredential] = {}
        self.path = path  # None: in memory only
        if path is not None and path.exists():
            self._load(path)

    def _load(self, path: Path) -> None:
        try:
            entries = json.loads(path.read_text(encoding="utf-8"))
            for entry in entries:
                self._credentials[(entry["user"], entry["mechanism"])] = ScramCredential(
                    base64.b64decode(entry["salt"]), base64.b64decode(entry["stored_key"]),
                    base64.b64decode(entry["server_key"]), int(entry["iterations"]),
                )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(str(path), "[file]", f"unreadable SCRAM credentials: {exc}") from None

    def save(self) -> None:
        """Write every credential (salted forms only) atomically, if kept on disk."""
        if self.path is None:
            return
        entries = [
            {"user": user, "mechanism": mechanism, "iterations": c.iterations,
             "salt": base64.b64encode(c.salt).decode(),
             "stored_key": base64.b64encode(c.stored_key).decode(),
             "server_key": base64.b64encode(c.server_key).decode()}
            for (user, mechanism), c in sorted(self._credentials.items())
        ]
        write_json_atomically(self.path, entries)

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
    def from_config(
        cls, config: SecurityConfig, listeners: list[str], log_dirs: tuple[str, ...] | None = None
    ) -> ScramCredentials:
        """The users kept in the data directory, then the config's for users not there."""
        store = cls(Path(log_dirs[0]) / CREDENTIALS_FILE if log_dirs else None)
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
