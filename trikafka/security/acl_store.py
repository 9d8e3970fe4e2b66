"""Where the ACLs live: the pure :class:`StandardAuthorizer` and, with ``--data-dir``, a small
JSON file next to the SCRAM credentials, rewritten atomically after every CreateAcls or
DeleteAcls that changed something (Kafka keeps them in the cluster metadata log; a restart
must not forget who may do what either way).

The file names resource types, pattern types, operations and permissions by Kafka's names
(``TOPIC``, ``PREFIXED``, ``READ``, ``ALLOW``) so that a person can read it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from trikafka.errors import ConfigError
from trikafka.security.authorizer import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    StandardAuthorizer,
    parse_super_users,
)
from trikafka.security.config import SecurityConfig
from trikafka.security.files import write_json_atomically

__all__ = ["ACLS_FILE", "AclStore"]

#: Where CreateAcls' ACLs are kept, in the first data directory.
ACLS_FILE = "trikafka-acls.json"


class AclStore:
    """The broker's authorizer and the file it is kept in (None: in memory only)."""

    def __init__(self, authorizer: StandardAuthorizer, path: Path | None = None) -> None:
        self.authorizer = authorizer
        self.path = path
        if path is not None and path.exists():
            authorizer.create(_load(path))

    @classmethod
    def from_config(cls, config: SecurityConfig, log_dirs: tuple[str, ...] | None = None) -> AclStore | None:
        """None when ``authorizer.class.name`` is empty: no ACLs, everything allowed."""
        if not config.get("authorizer.class.name"):
            return None
        authorizer = StandardAuthorizer(
            parse_super_users(config.get("super.users")),
            config.get("allow.everyone.if.no.acl.found").lower() == "true",
        )
        return cls(authorizer, Path(log_dirs[0]) / ACLS_FILE if log_dirs else None)

    def create(self, acls: Iterable[AclBinding]) -> None:
        if self.authorizer.create(acls):
            self.save()

    def delete(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        gone = self.authorizer.delete(acl_filter)
        if gone:
            self.save()
        return gone

    def save(self) -> None:
        if self.path is None:
            return
        write_json_atomically(self.path, [
            {"resource_type": a.resource_type.name, "resource_name": a.resource_name,
             "pattern_type": a.pattern_type.name, "principal": a.principal, "host": a.host,
             "operation": a.operation.name, "permission_type": a.permission_type.name}
            for a in self.authorizer.acls()
        ])


def _load(path: Path) -> list[AclBinding]:
    try:
        return [
            AclBinding(
                ResourceType[entry["resource_type"]], str(entry["resource_name"]),
                PatternType[entry["pattern_type"]], str(entry["principal"]), str(entry["host"]),
                AclOperation[entry["operation"]], AclPermissionType[entry["permission_type"]],
            )
            for entry in json.loads(path.read_text(encoding="utf-8"))
        ]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(str(path), "[file]", f"unreadable ACL file: {exc}") from None
