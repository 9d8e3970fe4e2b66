"""ACLs through a broker on the in-memory transport (MockClock): the ACL APIs, what each API
checks, what Metadata hides, the ``*_authorized_operations`` bits, a restart with a data dir,
and no way around a topic's ACLs by naming it by id or by a look-alike name.

A PLAINTEXT listener's principal is ``User:ANONYMOUS``; the SASL principals are exercised by
the real clients in ``tests/compat/test_acl_clients.py``.
"""

from __future__ import annotations

import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trikafka.config import BrokerConfig
from trikafka.errors import ErrorCode
from trikafka.protocol.records import build_batch
from trikafka.security.authorizer import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    all_operations,
)
from trikafka.testing import open_test_broker

from ..server.test_topics_and_data import create_topic, fetch_request, metadata, produce, request

Op, Pat, Res, Perm = AclOperation, PatternType, ResourceType, AclPermissionType
ANON = "User:ANONYMOUS"
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def config(**extra) -> BrokerConfig:
    return BrokerConfig.from_mapping(
        {"listeners": "PLAINTEXT://memory:9092", "authorizer.class.name": STANDARD, **extra}
    )


def allow(name, operation, resource=Res.TOPIC, pattern=Pat.LITERAL, principal=ANON, host="*", permission=Perm.ALLOW):
    return AclBinding(resource, name, pattern, principal, host, operation, permission)


def creation(name, operation, resource=Res.TOPIC, pattern=Pat.LITERAL, principal=ANON, permission=Perm.ALLOW):
    return {"resource_type": resource, "resource_name": name, "resource_pattern_type": pattern,
            "principal": principal, "host": "*", "operation": operation, "permission_type": permission}


def acl_filter(**fields):
    base = {"resource_type_filter": Res.ANY, "resource_name_filter": None, "pattern_type_filter": Pat.ANY,
            "principal_filter": None, "host_filter": None, "operation": Op.ANY, "permission_type": Perm.ANY}
    return {**base, **fields}


BATCH = build_batch([(b"k", b"v", [], 0)])


async def test_without_an_authorizer(autojump_clock):
    """SECURITY_DISABLED from the ACL APIs; every operation in the authorized-operations bits."""
    async with open_test_broker() as tb, tb.client() as client:
        await create_topic(client, "t")
        described = await client.request(request(29, 3, **acl_filter()))
        assert described.error_code == ErrorCode.security_disabled
        created = await client.request(request(30, 3, creations=[creation("t", Op.READ)]))
        assert [r.error_code for r in created.results] == [ErrorCode.security_disabled]
        deleted = await client.request(request(31, 3, filters=[acl_filter()]))
        assert [r.error_code for r in deleted.filter_results] == [ErrorCode.security_disabled]
        answer = await client.request(request(3, 10, topics=[{"name": "t", "topic_id": None}],
                                              allow_auto_topic_creation=False,
                                              include_cluster_authorized_operations=True,
                                              include_topic_authorized_operations=True))
        assert answer.cluster_authorized_operations == all_operations(Res.CLUSTER)
        assert answer.topics[0].topic_authorized_operations == all_operations(Res.TOPIC)
        cluster = await client.request(request(60, 1, include_cluster_authorized_operations=True, endpoint_type=1))
        assert cluster.cluster_authorized_operations == all_operations(Res.CLUSTER)
        groups = await client.request(request(15, 5, groups=["g"], include_authorized_operations=True))
        assert groups.groups[0].authorized_operations == all_operations(Res.GROUP)


async def test_acl_apis_need_the_cluster_and_validate(autojump_clock):
    async with open_test_broker(config()) as tb, tb.client() as client:
        described = await client.request(request(29, 3, **acl_filter()))
        assert described.error_code == ErrorCode.cluster_authorization_failed
        created = await client.request(request(30, 3, creations=[creation("t", Op.READ)] * 2))
        assert [r.error_code for r in created.results] == [ErrorCode.cluster_authorization_failed] * 2
        tb.broker.path.context.acls.create([allow("kafka-cluster", Op.ALTER, Res.CLUSTER)])  # ALTER implies DESCRIBE
        created = await client.request(request(30, 3, creations=[
            creation("t", Op.READ), creation("p-", Op.WRITE, pattern=Pat.PREFIXED, permission=Perm.DENY),
            creation("t", Op.READ),  # again: a success that changes nothing
            creation("other", Op.READ, resource=Res.CLUSTER), creation("x", Op.READ, pattern=Pat.MATCH),
            creation("", Op.READ), creation("x", Op.READ, principal="alice"),
        ]))
        codes = [r.error_code for r in created.results]
        assert codes == [ErrorCode.none] * 3 + [ErrorCode.invalid_request] * 4
        assert "kafka-cluster" in created.results[3].error_message
        listed = await client.request(request(29, 3, **acl_filter(resource_type_filter=Res.TOPIC)))
        got = {
            (r.resource_name, r.pattern_type, a.operation, a.permission_type) for r in listed.resources for a in r.acls
        }
        assert got == {("t", Pat.LITERAL, Op.READ, Perm.ALLOW), ("p-", Pat.PREFIXED, Op.WRITE, Perm.DENY)}
        matched = await client.request(
            request(29, 3, **acl_filter(resource_name_filter="p-x", pattern_type_filter=Pat.MATCH))
        )
        assert [r.resource_name for r in matched.resources] == ["p-"]
        unknown = await client.request(request(29, 3, **acl_filter(operation=0)))
        assert unknown.error_code == ErrorCode.invalid_request and "operation" in unknown.error_message
        deleted = await client.request(
            request(
                31,
                3,
                filters=[
                    acl_filter(resource_type_filter=Res.TOPIC, pattern_type_filter=Pat.PREFIXED),
                    acl_filter(principal_filter="User:x"),
                ],
            )
        )
        first, second = deleted.filter_results
        assert [(m.resource_name, m.operation) for m in first.matching_acls] == [("p-", Op.WRITE)]
        assert second.matching_acls == ()


async def test_what_each_api_checks(autojump_clock):
    async with open_test_broker(config()) as tb, tb.client() as client:
        acls = tb.broker.path.context.acls
        acls.create([allow("kafka-cluster", Op.CREATE, Res.CLUSTER), allow("open", Op.READ), allow("open", Op.WRITE),
                     allow("auto-", Op.DESCRIBE, pattern=Pat.PREFIXED)])
        for name in ("open", "secret"):
            assert (await create_topic(client, name)).error_code == ErrorCode.none
        secret_id = tb.broker.replica_manager.topics.get("secret").topic_id
        listed = await metadata(client, None)
        assert [t.name for t in listed.topics] == ["open"]  # "secret" is hidden, not reported
        named = await metadata(client, ["secret", "open"])
        assert [(t.name, t.error_code) for t in named.topics] == [
            ("secret", ErrorCode.topic_authorization_failed), ("open", ErrorCode.none)]
        assert named.topics[0].topic_id is None and named.topics[0].partitions == ()
        by_id = await client.request(
            request(
                3,
                12,
                topics=[{"name": None, "topic_id": secret_id}],
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
        assert (by_id.topics[0].name, by_id.topics[0].error_code) == (None, ErrorCode.topic_authorization_failed)
        # Auto-creation needs CREATE (cluster or topic) besides DESCRIBE. Take CREATE away.
        acls.delete(_exact(allow("kafka-cluster", Op.CREATE, Res.CLUSTER)))
        auto = await metadata(client, ["auto-x"], auto_create=True)
        assert auto.topics[0].error_code == ErrorCode.topic_authorization_failed
        assert tb.broker.replica_manager.topics.get("auto-x") is None
        acls.create([allow("auto-", Op.CREATE, pattern=Pat.PREFIXED)])
        assert (await metadata(client, ["auto-x"], auto_create=True)).topics[0].error_code == ErrorCode.none
        assert (await create_topic(client, "nope")).error_code == ErrorCode.topic_authorization_failed
        made = await create_topic(client, "auto-y")  # CREATE on the topic; no DESCRIBE_CONFIGS
        assert (made.error_code, made.topic_config_error_code) == (ErrorCode.none, ErrorCode.topic_authorization_failed)
        assert made.num_partitions == 1 and made.configs is None
        # Produce and Fetch by name and by id, ListOffsets, DeleteRecords.
        refused = await produce(client, 9, "secret", None, 0, BATCH)
        assert refused.responses[0].partition_responses[0].error_code == ErrorCode.topic_authorization_failed
        assert (await produce(client, 9, "open", None, 0, BATCH)).responses[0].partition_responses[0].error_code == 0
        for version, topic, topic_id in ((12, "secret", None), (13, None, secret_id)):
            fetched = await client.request(fetch_request(version, topic, topic_id, 0, 0))
            assert fetched.responses[0].partitions[0].error_code == ErrorCode.topic_authorization_failed
        offsets = await client.request(request(2, 7, replica_id=-1, isolation_level=0, topics=[
            {"name": "secret", "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]))
        assert offsets.topics[0].partitions[0].error_code == ErrorCode.topic_authorization_failed
        deleted = await client.request(request(21, 2, timeout=1000, topics=[
            {"name": "open", "partitions": [{"partition_index": 0, "offset": 0}]}]))
        assert deleted.topics[0].partitions[0].error_code == ErrorCode.topic_authorization_failed  # READ, not DELETE
        # Admin: configs, partitions, deletion; the cluster's own APIs.
        configs = await client.request(request(32, 4, include_synonyms=False, include_documentation=False, resources=[
            {"resource_type": 2, "resource_name": "open", "configuration_keys": None},
            {"resource_type": 4, "resource_name": "", "configuration_keys": None}]))
        assert [r.error_code for r in configs.results] == [ErrorCode.topic_authorization_failed,
                                                           ErrorCode.cluster_authorization_failed]
        grown = await client.request(request(37, 3, topics=[{"name": "open", "count": 2, "assignments": None}],
                                             timeout=1000, validate_only=True))
        assert grown.results[0].error_code == ErrorCode.topic_authorization_failed
        gone = await client.request(request(20, 6, topics=[{"name": None, "topic_id": secret_id}], timeout=1000))
        assert (gone.responses[0].error_code, gone.responses[0].name) == (ErrorCode.topic_authorization_failed, None)
        dirs = await client.request(request(35, 4, topics=None))
        assert dirs.error_code == ErrorCode.cluster_authorization_failed
        cluster = await client.request(request(60, 1, include_cluster_authorized_operations=True, endpoint_type=1))
        assert cluster.error_code == ErrorCode.none and cluster.cluster_authorized_operations == 0
        topic_ops = await client.request(request(3, 10, topics=[{"name": "open", "topic_id": None}],
                                                 allow_auto_topic_creation=False,
                                                 include_cluster_authorized_operations=False,
                                                 include_topic_authorized_operations=True))
        assert topic_ops.topics[0].topic_authorized_operations == (1 << Op.READ) | (1 << Op.WRITE) | (1 << Op.DESCRIBE)


async def test_hosts_and_super_users(autojump_clock):
    async with open_test_broker(config(**{"super.users": "User:nobody;User:ANONYMOUS"})) as tb, tb.client() as admin:
        assert (await create_topic(admin, "t")).error_code == ErrorCode.none  # a super user needs no ACL
    async with open_test_broker(config()) as tb:
        tb.broker.path.context.acls.create(
            [
                allow("*", Op.ALL),
                allow("t", Op.READ, host="10.0.0.66", permission=Perm.DENY),
                allow("kafka-cluster", Op.CREATE, Res.CLUSTER),
            ]
        )
        async with tb.client() as near, tb.client(client_host="10.0.0.66") as far:
            await create_topic(near, "t")
            for client, code in ((near, ErrorCode.none), (far, ErrorCode.topic_authorization_failed)):
                fetched = await client.request(fetch_request(12, "t", None, 0, 0))
                assert fetched.responses[0].partitions[0].error_code == code


async def test_groups_and_transactions(autojump_clock):
    async with open_test_broker(config()) as tb, tb.client() as client:
        acls = tb.broker.path.context.acls
        acls.create(
            [allow("kafka-cluster", Op.CREATE, Res.CLUSTER), allow("t", Op.READ), allow("g", Op.READ, Res.GROUP)]
        )
        await create_topic(client, "t")
        await create_topic(client, "hidden")
        found = await client.request(request(10, 4, key_type=0, coordinator_keys=["g", "other"]))
        assert [c.error_code for c in found.coordinators] == [ErrorCode.none, ErrorCode.group_authorization_failed]
        join = await client.request(request(11, 9, group_id="other", session_timeout=10000, rebalance_timeout=10000,
                                            member_id="", group_instance_id=None, protocol_type="consumer",
                                            protocols=[], reason=None))
        assert join.error_code == ErrorCode.group_authorization_failed
        committed = await client.request(request(8, 9, group_id="g", generation_id_or_member_epoch=-1, member_id="",
                                                 group_instance_id=None, topics=[
            {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1,
                                          "committed_metadata": ""}]},
            {"name": "hidden", "partitions": [{"partition_index": 0, "committed_offset": 0,
                                               "committed_leader_epoch": -1, "committed_metadata": ""}]}]))
        assert [t.partitions[0].error_code for t in committed.topics] == [ErrorCode.none,
                                                                         ErrorCode.topic_authorization_failed]
        fetched = await client.request(request(9, 8, require_stable=False, groups=[
            {"group_id": "g", "topics": None}, {"group_id": "other", "topics": None}]))
        mine, other = fetched.groups
        assert [t.name for t in mine.topics] == ["t"] and other.error_code == ErrorCode.group_authorization_failed
        listed = await client.request(request(16, 4, states_filter=[]))
        assert [g.group_id for g in listed.groups] == ["g"]  # DESCRIBE on g is implied by READ
        described = await client.request(request(15, 5, groups=["g", "other"], include_authorized_operations=True))
        assert [g.error_code for g in described.groups] == [ErrorCode.none, ErrorCode.group_authorization_failed]
        assert described.groups[0].authorized_operations == (1 << Op.READ) | (1 << Op.DESCRIBE)
        deleted = await client.request(request(42, 2, groups_names=["g"]))
        assert deleted.results[0].error_code == ErrorCode.group_authorization_failed
        # InitProducerId: the transactional id's WRITE; idempotence: IDEMPOTENT_WRITE or any topic's WRITE.
        init = {"transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1}
        txn = await client.request(request(22, 4, transactional_id="tx", **init))
        assert txn.error_code == ErrorCode.transactional_id_authorization_failed
        idempotent = await client.request(request(22, 4, transactional_id=None, **init))
        assert idempotent.error_code == ErrorCode.cluster_authorization_failed
        acls.create([allow("w-", Op.WRITE, pattern=Pat.PREFIXED)])
        assert (await client.request(request(22, 4, transactional_id=None, **init))).error_code == ErrorCode.none
        ended = await client.request(
            request(26, 3, transactional_id="tx", producer_id=1, producer_epoch=0, committed=True)
        )
        assert ended.error_code == ErrorCode.transactional_id_authorization_failed


async def test_acls_survive_a_restart(autojump_clock, tmp_path):
    settings_ = config(log_dirs=[str(tmp_path)])
    async with open_test_broker(settings_) as tb, tb.client() as client:
        tb.broker.path.context.acls.create([allow("kafka-cluster", Op.ALTER, Res.CLUSTER)])
        created = await client.request(request(30, 3, creations=[creation("kept", Op.READ, pattern=Pat.PREFIXED)]))
        assert created.results[0].error_code == ErrorCode.none
    async with open_test_broker(settings_) as tb, tb.client() as client:
        listed = await client.request(request(29, 3, **acl_filter(resource_type_filter=Res.TOPIC)))
        assert [(r.resource_name, r.pattern_type) for r in listed.resources] == [("kept", Pat.PREFIXED)]


def _exact(binding: AclBinding) -> AclBindingFilter:
    return AclBindingFilter(binding.resource_type, binding.resource_name, binding.pattern_type, binding.principal,
                            binding.host, binding.operation, binding.permission_type)


# -- no bypass: by id, by a look-alike name -------------------------------------------------

TOPICS = ("ab", "abc", "b-a", "a-b")
NAME = st.text(alphabet="ab-", min_size=1, max_size=3)
GRANT = st.builds(allow, NAME, st.sampled_from([Op.READ, Op.DESCRIBE, Op.ALL, Op.WRITE]), st.just(Res.TOPIC),
                  st.sampled_from([Pat.LITERAL, Pat.PREFIXED]), st.just(ANON), st.just("*"),
                  st.sampled_from([Perm.ALLOW, Perm.ALLOW, Perm.DENY]))


def plainly_allowed(grants, operation, name) -> bool:
    def covers(g):
        return name.startswith(g.resource_name) if g.pattern_type == Pat.PREFIXED else g.resource_name == name
    def matches(g):
        if g.operation in (Op.ALL, operation):
            return True
        return g.permission_type == Perm.ALLOW and operation == Op.DESCRIBE and g.operation in (Op.READ, Op.WRITE)
    verdicts = {g.permission_type for g in grants if covers(g) and matches(g)}
    return Perm.DENY not in verdicts and Perm.ALLOW in verdicts


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(GRANT, max_size=6))
def test_no_bypass_by_topic_id_or_look_alike_names(grants):
    """Whatever the ACLs, Metadata lists, Fetch (by name and by id) reads and Produce writes
    exactly the topics the plain rules allow — never one reached through its id or through
    an ACL on a name that merely resembles it."""

    async def main() -> None:
        async with open_test_broker(config(**{"super.users": "User:admin"})) as tb:
            replicas = tb.broker.replica_manager
            for name in TOPICS:
                replicas.create_topic(name, 1)
            tb.broker.path.context.acls.create(grants)
            async with tb.client() as client:
                listed = await metadata(client, None)
                assert sorted(t.name for t in listed.topics) == sorted(
                    n for n in TOPICS if plainly_allowed(grants, Op.DESCRIBE, n))
                for name in TOPICS:
                    topic_id = replicas.topics.get(name).topic_id
                    may_read = plainly_allowed(grants, Op.READ, name)
                    for fetched in (await client.request(fetch_request(12, name, None, 0, 0)),
                                    await client.request(fetch_request(16, None, topic_id, 0, 0))):
                        code = fetched.responses[0].partitions[0].error_code
                        assert (code == ErrorCode.topic_authorization_failed) == (not may_read), (name, code)
                    produced = await produce(client, 13, None, topic_id, 0, BATCH)
                    code = produced.responses[0].partition_responses[0].error_code
                    assert (code == ErrorCode.topic_authorization_failed) == (
                        not plainly_allowed(grants, Op.WRITE, name)
                    )

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))



async def test_a_transaction_step_by_step(autojump_clock):
    """Each transactional API asks for its own right: granting them one at a time moves the
    producer one step further each time."""
    from ..server.test_transactions import Producer

    async with open_test_broker(config()) as tb, tb.client() as client:
        acls = tb.broker.path.context.acls
        acls.create([allow("kafka-cluster", Op.CREATE, Res.CLUSTER), allow("tx", Op.WRITE, Res.TRANSACTIONAL_ID)])
        await create_topic(client, "t", partitions=1)
        producer = Producer(client, "tx")
        assert (await producer.init()).error_code == ErrorCode.none
        assert await producer.add_partitions(0, topic="t") == {0: ErrorCode.topic_authorization_failed}
        acls.create([allow("t", Op.WRITE), allow("t", Op.READ)])
        assert await producer.add_partitions(0, topic="t") == {0: ErrorCode.none}
        assert (await producer.produce(0, b"v", topic="t")).error_code == ErrorCode.none
        assert await producer.add_offsets("g") == ErrorCode.group_authorization_failed
        assert await producer.commit_offsets("g", {0: 1}, topic="t") == {0: ErrorCode.group_authorization_failed}
        acls.create([allow("g", Op.READ, Res.GROUP)])
        assert await producer.add_offsets("g") == ErrorCode.none
        assert await producer.commit_offsets("g", {0: 1}, topic="t") == {0: ErrorCode.none}
        described = await client.request(request(65, 0, transactional_ids=["tx", "other"]))
        assert [s.error_code for s in described.transaction_states] == [
            ErrorCode.none, ErrorCode.transactional_id_authorization_failed]
        assert described.transaction_states[0].topics[0].topic == "t"
        listed = await client.request(request(66, 1, state_filters=[], producer_id_filters=[], duration_filter=-1))
        assert [s.transactional_id for s in listed.transaction_states] == ["tx"]
        assert await producer.end(commit=True) == ErrorCode.none
        acls.delete(_exact(allow("tx", Op.WRITE, Res.TRANSACTIONAL_ID)))
        assert await producer.end(commit=True) == ErrorCode.transactional_id_authorization_failed
        # Transactional records without WRITE on their transactional id: refused whole.
        refused = await producer.produce(0, b"w", topic="t")
        assert refused.error_code == ErrorCode.transactional_id_authorization_failed


async def test_describe_topic_partitions_and_scram_apis(autojump_clock):
    async with open_test_broker(config()) as tb, tb.client() as client:
        acls = tb.broker.path.context.acls
        acls.create([allow("kafka-cluster", Op.CREATE, Res.CLUSTER), allow("seen", Op.DESCRIBE)])
        for name in ("seen", "unseen"):
            await create_topic(client, name)
        everything = await client.request(request(75, 0, topics=[], response_partition_limit=2000, cursor=None))
        assert [(t.name, t.topic_authorized_operations) for t in everything.topics] == [("seen", 1 << Op.DESCRIBE)]
        named = await client.request(request(75, 0, topics=[{"name": "unseen"}], response_partition_limit=10,
                                             cursor=None))
        assert [(t.name, t.error_code) for t in named.topics] == [("unseen", ErrorCode.topic_authorization_failed)]
        users = await client.request(request(50, 0, users=None))
        assert users.error_code == ErrorCode.cluster_authorization_failed
        altered = await client.request(request(51, 0, deletions=[{"name": "bob", "mechanism": 1}], upsertions=[]))
        assert [(r.user, r.error_code) for r in altered.results] == [("bob", ErrorCode.cluster_authorization_failed)]


async def test_client_quota_apis_need_the_cluster_configs(autojump_clock):
    """DescribeClientQuotas asks DESCRIBE_CONFIGS and AlterClientQuotas ALTER_CONFIGS on the
    cluster (Kafka's KafkaApis); without them the quotas are neither shown nor changed."""
    entity = [{"entity_type": "client-id", "entity_name": "app"}]
    alteration = {"entity": entity, "ops": [{"key": "producer_byte_rate", "value": 1024.0, "remove": False}]}
    describe = request(48, 0, components=[{"entity_type": "client-id", "match_type": 2, "match": None}], strict=False)
    async with open_test_broker(config()) as tb, tb.client() as client:
        denied = await client.request(request(49, 0, entries=[alteration], validate_only=False))
        assert [e.error_code for e in denied.entries] == [ErrorCode.cluster_authorization_failed]
        assert (await client.request(describe)).error_code == ErrorCode.cluster_authorization_failed
        tb.broker.path.context.acls.create([allow("kafka-cluster", Op.ALTER_CONFIGS, Res.CLUSTER)])
        granted = await client.request(request(49, 0, entries=[alteration], validate_only=False))
        assert [e.error_code for e in granted.entries] == [ErrorCode.none]
        found = await client.request(describe)  # ALTER_CONFIGS implies DESCRIBE_CONFIGS
        assert found.error_code == ErrorCode.none
        assert [(v.key, v.value) for e in found.entries for v in e.values] == [("producer_byte_rate", 1024.0)]
