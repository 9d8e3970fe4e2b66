"""The authorizer: Kafka's StandardAuthorizer rules, as a pure value-and-function module.

Why pure: who may do what is the part of security that must be exactly right, so it is
tested with values alone (hypothesis included); reading and writing the ACL file is the
broker's business (:mod:`trikafka.security.acl_store`), and asking it on each request is the
API layer's (``trikafka/server/authorization.py``).

The rules (Kafka's ``StandardAuthorizerData``):

* a principal named in ``super.users`` may do anything;
* the ACLs that apply to a resource are the LITERAL ones with its exact name, the LITERAL
  wildcard ``*``, and the PREFIXED ones whose name starts the resource's name;
* an ACL matches a request when its principal is the request's or ``User:*``, its host is
  the client's address or ``*``, and its operation is the one asked, or ALL — or, for ALLOW
  ACLs only, an operation that implies it: DESCRIBE is implied by READ, WRITE, DELETE and
  ALTER; DESCRIBE_CONFIGS by ALTER_CONFIGS;
* a matching DENY wins over any ALLOW; else a matching ALLOW allows;
* when no ACL at all exists for the resource (for anyone), ``allow.everyone.if.no.acl.found``
  decides (default false); when ACLs exist but none matches, the answer is deny.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

import attrs

__all__ = [
    "ACCEPTED_CLASS_NAMES",
    "CLUSTER_NAME",
    "WILDCARD",
    "WILDCARD_PRINCIPAL",
    "all_operations",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "PatternType",
    "ResourceType",
    "StandardAuthorizer",
    "SUPPORTED_OPERATIONS",
    "invalid_new_acl",
    "parse_super_users",
]

#: ``authorizer.class.name`` values that turn this authorizer on (Kafka's KRaft and ZooKeeper
#: authorizers behave the same for every rule implemented here).
ACCEPTED_CLASS_NAMES = (
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
)
CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


_O = AclOperation
#: What each resource type supports (Kafka's ``AclEntry.supportedOperations``): the bits of
#: ``*_authorized_operations`` are taken from these.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (_O.READ, _O.WRITE, _O.CREATE, _O.DELETE, _O.ALTER, _O.DESCRIBE,
                         _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS),
    ResourceType.GROUP: (_O.READ, _O.DELETE, _O.DESCRIBE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS),
    ResourceType.CLUSTER: (_O.CREATE, _O.ALTER, _O.DESCRIBE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS,
                           _O.ALTER_CONFIGS, _O.IDEMPOTENT_WRITE),
    ResourceType.TRANSACTIONAL_ID: (_O.WRITE, _O.DESCRIBE),
    ResourceType.DELEGATION_TOKEN: (_O.DESCRIBE,),
    ResourceType.USER: (_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS),
}
_IMPLIES_DESCRIBE = frozenset({_O.DESCRIBE, _O.READ, _O.WRITE, _O.DELETE, _O.ALTER})
_IMPLIES_DESCRIBE_CONFIGS = frozenset({_O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS})


@attrs.frozen(order=True)
class AclBinding:
    """One ACL: a resource pattern and an access control entry, as CreateAcls carries it."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType


@attrs.frozen
class AclBindingFilter:
    """DescribeAcls' and DeleteAcls' filter; None names and ANY codes match anything, and
    pattern type MATCH matches every pattern that would apply to the named resource."""

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type not in (ResourceType.ANY, acl.resource_type):
            return False
        kind = self.pattern_type
        if kind not in (PatternType.ANY, PatternType.MATCH, acl.pattern_type):
            return False
        name = self.resource_name
        if name is not None:
            if kind in (PatternType.ANY, acl.pattern_type):
                if name != acl.resource_name:
                    return False
            elif acl.pattern_type is PatternType.LITERAL:
                if acl.resource_name not in (name, WILDCARD):
                    return False
            elif not name.startswith(acl.resource_name):
                return False
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation not in (AclOperation.ANY, acl.operation):
            return False
        return self.permission_type in (AclPermissionType.ANY, acl.permission_type)


def invalid_new_acl(acl: AclBinding) -> str | None:
    """Why CreateAcls refuses this ACL (INVALID_REQUEST), or None — Kafka's controller's
    ``validateNewAcl`` and the broker's cluster-name check, plus a principal check."""
    if acl.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {acl.resource_type.name}"
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {acl.pattern_type.name}"
    if acl.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation {acl.operation.name}"
    if acl.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return f"Invalid permissionType {acl.permission_type.name}"
    if not acl.resource_name:
        return "Resource name should not be empty"
    if acl.resource_type is ResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    kind, sep, name = acl.principal.partition(":")
    if not sep or not kind or not name:
        return f"expected a principal in the form principalType:principalName but got {acl.principal!r}"
    return None


def parse_super_users(value: str) -> frozenset[str]:
    """``super.users``: principals separated by semicolons (Kafka's separator, not commas)."""
    return frozenset(part.strip() for part in value.split(";") if part.strip())


class StandardAuthorizer:
    """The ACLs and the decision. Mutated only through ``create`` and ``delete``;
    ``version`` grows with every change so that callers may cache answers against it."""

    #: Decisions remembered per version; the memo is emptied when full or when ACLs change.
    MEMO_SIZE = 8192

    def __init__(
        self,
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
        acls: Iterable[AclBinding] = (),
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self.version = 0
        self._acls: set[AclBinding] = set()
        #: (resource type, pattern type, name) → the ACLs of that pattern.
        self._by_pattern: dict[tuple[ResourceType, PatternType, str], set[AclBinding]] = {}
        #: resource type → lengths of its PREFIXED names → how many patterns have that length.
        self._prefix_lengths: dict[ResourceType, dict[int, int]] = {}
        self._memo: dict[tuple, bool] = {}
        self.create(acls)

    # -- changes ---------------------------------------------------------------------------

    def create(self, acls: Iterable[AclBinding]) -> int:
        """Add ACLs (one already there is a success that changes nothing); how many were new."""
        added = 0
        for acl in acls:
            if acl in self._acls:
                continue
            self._acls.add(acl)
            self._by_pattern.setdefault(_pattern_key(acl), set()).add(acl)
            if acl.pattern_type is PatternType.PREFIXED:
                lengths = self._prefix_lengths.setdefault(acl.resource_type, {})
                lengths[len(acl.resource_name)] = lengths.get(len(acl.resource_name), 0) + 1
            added += 1
        if added:
            self._changed()
        return added

    def delete(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """Remove and return every ACL the filter matches."""
        gone = sorted(acl for acl in self._acls if acl_filter.matches(acl))
        for acl in gone:
            self._acls.discard(acl)
            key = _pattern_key(acl)
            same = self._by_pattern[key]
            same.discard(acl)
            if not same:
                del self._by_pattern[key]
            if acl.pattern_type is PatternType.PREFIXED:
                lengths = self._prefix_lengths[acl.resource_type]
                lengths[len(acl.resource_name)] -= 1
                if not lengths[len(acl.resource_name)]:
                    del lengths[len(acl.resource_name)]
        if gone:
            self._changed()
        return gone

    def _changed(self) -> None:
        self.version += 1
        self._memo.clear()

    # -- questions -------------------------------------------------------------------------

    def acls(self, acl_filter: AclBindingFilter | None = None) -> list[AclBinding]:
        """Every ACL the filter matches (all without one), in a stable order."""
        return sorted(a for a in self._acls if acl_filter is None or acl_filter.matches(a))

    def authorize(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        """May ``principal`` connecting from ``host`` do ``operation`` on the named resource?"""
        if principal in self.super_users:
            return True
        key = (principal, host, operation, resource_type, name)
        known = self._memo.get(key)
        if known is None:
            known = self._decide(principal, host, operation, resource_type, name)
            if len(self._memo) >= self.MEMO_SIZE:
                self._memo.clear()
            self._memo[key] = known
        return known

    def _applicable(self, resource_type: ResourceType, name: str) -> Iterable[set[AclBinding]]:
        """The ACL sets whose pattern applies to the resource ``name``."""
        by_pattern = self._by_pattern
        for pattern in ((PatternType.LITERAL, name), (PatternType.LITERAL, WILDCARD)):
            found = by_pattern.get((resource_type, *pattern))
            if found:
                yield found
        for length in self._prefix_lengths.get(resource_type, {}):
            if length <= len(name):
                found = by_pattern.get((resource_type, PatternType.PREFIXED, name[:length]))
                if found:
                    yield found

    def _decide(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        any_acl = allowed = False
        for acls in self._applicable(resource_type, name):
            any_acl = True
            for acl in acls:
                verdict = _verdict(acl, principal, host, operation)
                if verdict is AclPermissionType.DENY:
                    return False
                if verdict is AclPermissionType.ALLOW:
                    allowed = True
        if allowed:
            return True
        return self.allow_everyone_if_no_acl_found and not any_acl

    def authorize_by_resource_type(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """May the principal do ``operation`` on *some* resource of this type? (Kafka's
        ``Authorizer.authorizeByResourceType``, used by InitProducerId: an idempotent producer
        needs IDEMPOTENT_WRITE on the cluster or WRITE on any topic.)"""
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        deny: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        allow: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        for acl in self._acls:
            if acl.resource_type is not resource_type:
                continue
            if acl.host not in (WILDCARD, host) or acl.principal not in (principal, WILDCARD_PRINCIPAL):
                continue
            if acl.operation not in (operation, AclOperation.ALL):
                continue
            if acl.permission_type is AclPermissionType.DENY:
                if acl.pattern_type is PatternType.LITERAL and acl.resource_name == WILDCARD:
                    return False
                deny[acl.pattern_type].add(acl.resource_name)
            elif acl.pattern_type is PatternType.LITERAL and acl.resource_name == WILDCARD:
                return True
            else:
                allow[acl.pattern_type].add(acl.resource_name)
        for kind, names in allow.items():
            for name in names:
                if kind is PatternType.LITERAL and name in deny[PatternType.LITERAL]:
                    continue
                if not any(name[:i] in deny[PatternType.PREFIXED] for i in range(1, len(name) + 1)):
                    return True
        return False

    def authorized_operations(
        self, principal: str, host: str, resource_type: ResourceType, name: str
    ) -> int:
        """The bit set (bit = operation code) of the resource type's operations allowed."""
        bits = 0
        for operation in SUPPORTED_OPERATIONS[resource_type]:
            if self.authorize(principal, host, operation, resource_type, name):
                bits |= 1 << operation
        return bits


def all_operations(resource_type: ResourceType) -> int:
    """The bit set Kafka answers without an authorizer: every supported operation."""
    bits = 0
    for operation in SUPPORTED_OPERATIONS[resource_type]:
        bits |= 1 << operation
    return bits


def _pattern_key(acl: AclBinding) -> tuple[ResourceType, PatternType, str]:
    return (acl.resource_type, acl.pattern_type, acl.resource_name)


def _verdict(acl: AclBinding, principal: str, host: str, operation: AclOperation) -> AclPermissionType | None:
    """ALLOW or DENY if ``acl`` applies to this principal, host and operation, else None."""
    if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
        return None
    if acl.host != WILDCARD and acl.host != host:
        return None
    wanted = acl.operation
    if wanted is not AclOperation.ALL:
        if acl.permission_type is AclPermissionType.ALLOW:
            if operation is AclOperation.DESCRIBE:
                if wanted not in _IMPLIES_DESCRIBE:
                    return None
            elif operation is AclOperation.DESCRIBE_CONFIGS:
                if wanted not in _IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif wanted is not operation:
                return None
        elif wanted is not operation:
            return None
    return acl.permission_type
