"""The authorizer alone: Kafka's StandardAuthorizer rules as values in, decisions out.

The hypothesis properties compare the indexed authorizer with the rules written out the
slowest, plainest way (every ACL, every rule) — so an index that skips an ACL (a prefixed
one, the wildcard) or finds one that does not apply shows up as a disagreement.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trikafka.errors import ConfigError
from trikafka.security.acl_store import ACLS_FILE, AclStore
from trikafka.security.authorizer import (
    SUPPORTED_OPERATIONS,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    StandardAuthorizer,
    all_operations,
    invalid_new_acl,
    parse_super_users,
)
from trikafka.security.config import SecurityConfig

Op, Pat, Res, Perm = AclOperation, PatternType, ResourceType, AclPermissionType
ALICE, BOB = "User:alice", "User:bob"


def acl(name, operation=Op.READ, permission=Perm.ALLOW, principal=ALICE, host="*",
        pattern=Pat.LITERAL, resource=Res.TOPIC) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, host, operation, permission)


def test_literal_prefixed_and_wildcard_patterns():
    authorizer = StandardAuthorizer(acls=[
        acl("orders"), acl("log-", pattern=Pat.PREFIXED), acl("*", operation=Op.WRITE),
    ])
    may = authorizer.authorize
    assert may(ALICE, "10.0.0.1", Op.READ, Res.TOPIC, "orders")
    assert not may(ALICE, "10.0.0.1", Op.READ, Res.TOPIC, "orders2")  # literal is exact
    assert may(ALICE, "10.0.0.1", Op.READ, Res.TOPIC, "log-app")
    assert may(ALICE, "10.0.0.1", Op.READ, Res.TOPIC, "log-")
    assert not may(ALICE, "10.0.0.1", Op.READ, Res.TOPIC, "log")  # shorter than the prefix
    assert may(ALICE, "10.0.0.1", Op.WRITE, Res.TOPIC, "anything")  # the LITERAL wildcard
    assert not may(BOB, "10.0.0.1", Op.READ, Res.TOPIC, "orders")
    assert not may(ALICE, "10.0.0.1", Op.READ, Res.GROUP, "orders")  # another resource type


def test_a_prefixed_star_is_only_a_prefix():
    authorizer = StandardAuthorizer(acls=[acl("*", pattern=Pat.PREFIXED)])
    assert authorizer.authorize(ALICE, "h", Op.READ, Res.TOPIC, "*x")
    assert not authorizer.authorize(ALICE, "h", Op.READ, Res.TOPIC, "x")


def test_deny_wins_and_hosts_and_wildcard_principal():
    authorizer = StandardAuthorizer(acls=[
        acl("t", principal="User:*"),
        acl("t", permission=Perm.DENY, host="10.0.0.9"),
        acl("t-", pattern=Pat.PREFIXED, operation=Op.ALL, permission=Perm.DENY, principal=BOB),
    ])
    may = authorizer.authorize
    assert may(ALICE, "10.0.0.1", Op.READ, Res.TOPIC, "t")
    assert not may(ALICE, "10.0.0.9", Op.READ, Res.TOPIC, "t")  # DENY from that host
    assert may(BOB, "10.0.0.9", Op.READ, Res.TOPIC, "t")  # the DENY is alice's
    authorizer.create([acl("t-x", principal=BOB)])
    assert not may(BOB, "h", Op.READ, Res.TOPIC, "t-x")  # DENY ALL on the prefix wins


def test_implied_operations_only_for_allow():
    authorizer = StandardAuthorizer(acls=[
        acl("r"), acl("w", operation=Op.WRITE), acl("d", operation=Op.DELETE), acl("a", operation=Op.ALTER),
        acl("c", operation=Op.ALTER_CONFIGS), acl("x", operation=Op.CREATE),
    ])
    may = authorizer.authorize
    for name in "rwda":
        assert may(ALICE, "h", Op.DESCRIBE, Res.TOPIC, name), name
    assert not may(ALICE, "h", Op.DESCRIBE, Res.TOPIC, "x")  # CREATE implies nothing
    assert may(ALICE, "h", Op.DESCRIBE_CONFIGS, Res.TOPIC, "c")
    assert not may(ALICE, "h", Op.DESCRIBE, Res.TOPIC, "c")
    assert not may(ALICE, "h", Op.WRITE, Res.TOPIC, "r")
    # A DENY READ does not deny DESCRIBE (implication is for ALLOW only).
    deny = StandardAuthorizer(acls=[acl("t", operation=Op.DESCRIBE), acl("t", permission=Perm.DENY)])
    assert deny.authorize(ALICE, "h", Op.DESCRIBE, Res.TOPIC, "t")
    assert not deny.authorize(ALICE, "h", Op.READ, Res.TOPIC, "t")


def test_super_users_and_the_no_acl_rule():
    assert parse_super_users(" User:admin ; User:ops;") == {"User:admin", "User:ops"}
    closed = StandardAuthorizer(super_users={"User:admin"}, acls=[acl("t", permission=Perm.DENY, principal="User:*")])
    assert closed.authorize("User:admin", "h", Op.ALTER, Res.CLUSTER, "kafka-cluster")
    assert closed.authorize("User:admin", "h", Op.READ, Res.TOPIC, "t")  # super users pass DENY too
    assert not closed.authorize(ALICE, "h", Op.READ, Res.TOPIC, "free")  # default: deny
    open_ = StandardAuthorizer(allow_everyone_if_no_acl_found=True, acls=[acl("t", principal=BOB)])
    assert open_.authorize(ALICE, "h", Op.READ, Res.TOPIC, "free")  # no ACL at all for "free"
    assert not open_.authorize(ALICE, "h", Op.READ, Res.TOPIC, "t")  # ACLs exist, none for alice


def test_authorize_by_resource_type_follows_kafka():
    """InitProducerId's idempotent check: WRITE on *some* topic, unless a DENY dominates."""
    by_type = StandardAuthorizer(acls=[acl("a", operation=Op.WRITE)]).authorize_by_resource_type
    assert by_type(ALICE, "h", Op.WRITE, Res.TOPIC)
    assert not by_type(BOB, "h", Op.WRITE, Res.TOPIC)
    dominated = StandardAuthorizer(acls=[
        acl("abc", operation=Op.WRITE), acl("ab", pattern=Pat.PREFIXED, operation=Op.WRITE, permission=Perm.DENY),
    ])
    assert not dominated.authorize_by_resource_type(ALICE, "h", Op.WRITE, Res.TOPIC)
    wildcard_deny = StandardAuthorizer(
        acls=[acl("x", operation=Op.WRITE), acl("*", operation=Op.WRITE, permission=Perm.DENY)]
    )
    assert not wildcard_deny.authorize_by_resource_type(ALICE, "h", Op.WRITE, Res.TOPIC)


def test_authorized_operations_bits():
    authorizer = StandardAuthorizer(acls=[acl("t"), acl("t", operation=Op.ALTER_CONFIGS)])
    bits = authorizer.authorized_operations(ALICE, "h", Res.TOPIC, "t")
    assert bits == (1 << Op.READ) | (1 << Op.DESCRIBE) | (1 << Op.ALTER_CONFIGS) | (1 << Op.DESCRIBE_CONFIGS)
    # Without an authorizer Kafka answers every supported operation.
    assert all_operations(Res.TOPIC) == 0b1101_1111_1000  # READ..DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS
    assert all_operations(Res.CLUSTER) == sum(1 << o for o in SUPPORTED_OPERATIONS[Res.CLUSTER])


def test_filters_match_as_kafka_describes_and_deletes():
    authorizer = StandardAuthorizer(acls=[
        acl("orders"), acl("ord", pattern=Pat.PREFIXED), acl("*", operation=Op.WRITE), acl("other"),
        acl("g", resource=Res.GROUP),
    ])
    def names(f):
        return sorted((a.resource_name, a.pattern_type.name) for a in authorizer.acls(f))
    match = AclBindingFilter(Res.TOPIC, "orders", Pat.MATCH, None, None, Op.ANY, Perm.ANY)
    assert names(match) == [("*", "LITERAL"), ("ord", "PREFIXED"), ("orders", "LITERAL")]
    literal = AclBindingFilter(Res.ANY, "orders", Pat.LITERAL, None, None, Op.ANY, Perm.ANY)
    assert names(literal) == [("orders", "LITERAL")]
    anything = AclBindingFilter(Res.ANY, None, Pat.ANY, ALICE, None, Op.READ, Perm.ALLOW)
    assert len(authorizer.acls(anything)) == 4
    assert authorizer.delete(AclBindingFilter(Res.TOPIC, None, Pat.PREFIXED, None, None, Op.ANY, Perm.ANY)) == [
        acl("ord", pattern=Pat.PREFIXED)
    ]
    assert not authorizer.authorize(ALICE, "h", Op.READ, Res.TOPIC, "ordinary")  # gone
    assert authorizer.acls(AclBindingFilter(Res.ANY, None, Pat.ANY, BOB, None, Op.ANY, Perm.ANY)) == []


@pytest.mark.parametrize(("binding", "message"), [
    (acl("t", resource=Res.ANY), "Invalid resourceType ANY"),
    (acl("t", pattern=Pat.MATCH), "Invalid patternType MATCH"),
    (acl("t", operation=Op.ANY), "Invalid operation ANY"),
    (acl("t", permission=Perm.ANY), "Invalid permissionType ANY"),
    (acl(""), "Resource name should not be empty"),
    (acl("my-cluster", resource=Res.CLUSTER), "The only valid name for the CLUSTER resource is kafka-cluster"),
    (acl("t", principal="alice"), "principalType:principalName"),
])
def test_invalid_new_acls(binding, message):
    assert message in invalid_new_acl(binding)


def test_config_keys():
    for name in ("org.apache.kafka.metadata.authorizer.StandardAuthorizer", "kafka.security.authorizer.AclAuthorizer"):
        SecurityConfig.from_properties({"authorizer.class.name": name})
    with pytest.raises(ConfigError) as refused:
        SecurityConfig.from_properties({"authorizer.class.name": "com.example.MyAuthorizer"})
    assert "authorizer.class.name" in str(refused.value) and "StandardAuthorizer" in str(refused.value)
    with pytest.raises(ConfigError, match="allow.everyone.if.no.acl.found"):
        SecurityConfig.from_properties({"allow.everyone.if.no.acl.found": "yes"})
    assert AclStore.from_config(SecurityConfig()) is None


def test_store_survives_a_restart_and_refuses_a_broken_file(tmp_path):
    config = SecurityConfig.from_properties({
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin",
    })
    store = AclStore.from_config(config, (str(tmp_path),))
    store.create([acl("t"), acl("p-", pattern=Pat.PREFIXED, permission=Perm.DENY)])
    again = AclStore.from_config(config, (str(tmp_path),))
    assert again.authorizer.acls() == store.authorizer.acls()
    assert again.authorizer.super_users == {"User:admin"}
    assert json.loads((tmp_path / ACLS_FILE).read_text())[0]["operation"] == "READ"
    (tmp_path / ACLS_FILE).write_text("[{\"resource_type\": \"NOPE\"}]")
    with pytest.raises(ConfigError, match="unreadable ACL file"):
        AclStore.from_config(config, (str(tmp_path),))


# -- properties: the index agrees with the rules written plainly ----------------------------

NAMES = st.text(alphabet="ab-*", min_size=1, max_size=4)
PRINCIPALS = st.sampled_from([ALICE, BOB, "User:*"])
HOSTS = st.sampled_from(["*", "10.0.0.1", "10.0.0.2"])
OPS = st.sampled_from([o for o in Op if o not in (Op.UNKNOWN, Op.ANY)])
ACLS = st.builds(
    AclBinding, st.sampled_from([Res.TOPIC, Res.GROUP]), NAMES, st.sampled_from([Pat.LITERAL, Pat.PREFIXED]),
    PRINCIPALS, HOSTS, OPS, st.sampled_from([Perm.ALLOW, Perm.DENY]),
)


def plainly(acls, principal, host, operation, resource_type, name, allow_if_none) -> bool:
    """StandardAuthorizerData.findAclRule, one ACL at a time, no index."""
    applies = [
        a for a in acls if a.resource_type == resource_type and (
            (a.pattern_type == Pat.LITERAL and a.resource_name in (name, "*"))
            or (a.pattern_type == Pat.PREFIXED and name.startswith(a.resource_name))
        )
    ]
    def matches(a):
        if a.principal not in (principal, "User:*") or a.host not in ("*", host):
            return False
        if a.operation == Op.ALL or a.operation == operation:
            return True
        if a.permission_type == Perm.ALLOW and operation == Op.DESCRIBE:
            return a.operation in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER)
        return a.permission_type == Perm.ALLOW and operation == Op.DESCRIBE_CONFIGS and a.operation == Op.ALTER_CONFIGS
    verdicts = {a.permission_type for a in applies if matches(a)}
    if Perm.DENY in verdicts:
        return False
    return Perm.ALLOW in verdicts or (allow_if_none and not applies)


@settings(max_examples=300, deadline=None)
@given(st.lists(ACLS, max_size=12), st.lists(ACLS, max_size=4), st.sampled_from([ALICE, BOB]), HOSTS,
       OPS, st.sampled_from([Res.TOPIC, Res.GROUP]), NAMES, st.booleans())
def test_the_index_decides_as_the_plain_rules(acls, removed, principal, host, operation, resource_type,
                                              name, allow_if_none):
    authorizer = StandardAuthorizer(allow_everyone_if_no_acl_found=allow_if_none, acls=acls + removed)
    assert authorizer.authorize(principal, host, operation, resource_type, name) == plainly(
        acls + removed, principal, host, operation, resource_type, name, allow_if_none)
    for gone in removed:  # deletion keeps the index right (and forgets remembered answers)
        authorizer.delete(AclBindingFilter(*attrs_of(gone)))
    left = [a for a in acls if a not in removed]
    assert authorizer.authorize(principal, host, operation, resource_type, name) == plainly(
        left, principal, host, operation, resource_type, name, allow_if_none)


def attrs_of(a: AclBinding) -> tuple:
    return (a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host, a.operation, a.permission_type)


def covers(a: AclBinding, name: str) -> bool:
    if a.pattern_type == Pat.PREFIXED:
        return name.startswith(a.resource_name)
    return a.resource_name in (name, "*")


@settings(max_examples=300, deadline=None)
@given(st.lists(ACLS, max_size=12), st.sampled_from([ALICE, BOB]), HOSTS, OPS, st.sampled_from([Res.TOPIC, Res.GROUP]),
       NAMES, st.booleans())
def test_acls_that_do_not_cover_a_name_never_change_its_answer(acls, principal, host, operation, resource_type,
                                                                name, allow_if_none):
    """No bypass through look-alike names: a prefixed ACL on a longer name, a literal one on
    a longer or shorter name, or any ACL of another resource type is never consulted."""
    covering = [a for a in acls if a.resource_type == resource_type and covers(a, name)]
    full = StandardAuthorizer(allow_everyone_if_no_acl_found=allow_if_none, acls=acls)
    only = StandardAuthorizer(allow_everyone_if_no_acl_found=allow_if_none, acls=covering)
    assert full.authorize(principal, host, operation, resource_type, name) == only.authorize(
        principal, host, operation, resource_type, name)
