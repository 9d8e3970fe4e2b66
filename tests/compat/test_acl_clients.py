"""Real clients against ACLs over SASL_PLAINTEXT (PLAIN): confluent-kafka, kafka-python,
aiokafka, kcat and kafkajs each get TOPIC_AUTHORIZATION_FAILED, in their own words, while
``User:alice`` has no ACL for the topic — and produce and consume once the ACLs exist.
confluent-kafka's AdminClient creates, describes and deletes ACLs, and is refused
CLUSTER_AUTHORIZATION_FAILED as a user who may not alter the cluster. A broker process
started with ``--data-dir`` still has its ACLs after a restart.

``User:admin`` is a super user (``super.users``); every case uses its own topic, which the
admin creates, so the only thing alice lacks at first is the ACL.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid
from collections.abc import Iterator

import pytest

from trikafka.testing import ThreadedBroker
from trikafka.testing.process import BrokerProcess

from .support import KCAT, TIMEOUT
from .test_security_clients import CLIENTS, PREFIX, Security, kafka_python_config, kcat_options

pytestmark = [
    pytest.mark.compat,
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]

USERS = {"alice": "alice-secret", "admin": "admin-secret"}
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";")
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
CONFIG = {
    "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
    "authorizer.class.name": AUTHORIZER,
    "super.users": "User:admin",
}
ALICE = Security("SASL_PLAINTEXT", mechanism="PLAIN", username="alice", password=USERS["alice"])


@pytest.fixture(scope="module")
def broker() -> Iterator[ThreadedBroker]:
    with ThreadedBroker(CONFIG) as handle:
        yield handle


def servers(broker: ThreadedBroker) -> str:
    return f"127.0.0.1:{broker.broker.endpoints['SASL_PLAINTEXT'].port}"


def admin(bootstrap: str, user: str = "admin"):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                        "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": USERS[user]})


def binding(name: str, operation: str, resource: str = "TOPIC", pattern: str = "LITERAL",
            principal: str = "User:alice", permission: str = "ALLOW"):
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    return AclBinding(ResourceType[resource], name, ResourcePatternType[pattern], principal, "*",
                      AclOperation[operation], AclPermissionType[permission])


def create_acls(client, bindings) -> None:
    for future in client.create_acls(bindings, request_timeout=TIMEOUT).values():
        future.result(timeout=TIMEOUT)


def create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import NewTopic

    client = admin(bootstrap)  # kept alive until its futures are done
    for future in client.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(timeout=TIMEOUT)


# -- how each client reports a topic it may not write ----------------------------------------


def confluent_denied(bootstrap: str, topic: str) -> str:
    from confluent_kafka import KafkaError, Producer

    reports: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": USERS["alice"],
                         "message.timeout.ms": 15000})
    producer.produce(topic, b"x", on_delivery=lambda error, _message: reports.append(error))
    producer.flush(TIMEOUT)
    assert reports and reports[0] is not None, reports
    assert reports[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, reports[0]
    return str(reports[0])


def kafka_python_denied(bootstrap: str, topic: str) -> str:
    from kafka import KafkaProducer
    from kafka.errors import TopicAuthorizationFailedError

    producer = KafkaProducer(**kafka_python_config(bootstrap, ALICE), max_block_ms=15000)
    try:
        with pytest.raises(TopicAuthorizationFailedError) as info:
            producer.send(topic, b"x").get(timeout=TIMEOUT)
    finally:
        producer.close(timeout=5)
    return repr(info.value)


def aiokafka_denied(bootstrap: str, topic: str) -> str:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import TopicAuthorizationFailedError

    async def run() -> str:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT",
                                    sasl_mechanism="PLAIN", sasl_plain_username="alice",
                                    sasl_plain_password=USERS["alice"], request_timeout_ms=15000)
        await producer.start()
        try:
            with pytest.raises(TopicAuthorizationFailedError) as info:
                await producer.send_and_wait(topic, b"x")
            return repr(info.value)
        finally:
            await producer.stop()

    return asyncio.run(asyncio.wait_for(run(), 2 * TIMEOUT))


def kcat_denied(bootstrap: str, topic: str) -> str:
    done = subprocess.run([KCAT, *kcat_options(bootstrap, ALICE), "-P", "-t", topic, "-X", "message.timeout.ms=15000"],
                          input=b"x\n", capture_output=True, timeout=TIMEOUT)
    report = done.stderr.decode()
    assert "Topic authorization failed" in report, report
    return report


def kafkajs_denied(bootstrap: str, topic: str) -> str:
    from .test_security_clients import KAFKAJS_SECURE, NODE

    done = subprocess.run([NODE, str(KAFKAJS_SECURE), "--bootstrap", bootstrap, "--topic", topic, "--count", "1",
                           "--mechanism", "plain", "--username", "alice", "--password", USERS["alice"]],
                          capture_output=True, timeout=2 * TIMEOUT, cwd=KAFKAJS_SECURE.parent)
    result = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert not result["ok"], result
    # kafkajs wraps the broker's TOPIC_AUTHORIZATION_FAILED from Metadata in its own error.
    assert "Topic authorization failed" in result["error"]["message"], result
    return json.dumps(result["error"])


DENIED = {
    "confluent-kafka": confluent_denied,
    "kafka-python": kafka_python_denied,
    "aiokafka": aiokafka_denied,
    "kcat": kcat_denied,
    "kafkajs": kafkajs_denied,
}


@pytest.mark.parametrize("client", sorted(DENIED))
def test_a_missing_acl_then_the_acl(client, broker):
    bootstrap = servers(broker)
    topic = f"acl-{uuid.uuid4().hex[:10]}"
    create_topic(bootstrap, topic)
    report = DENIED[client](bootstrap, topic)
    assert "authoriz" in report.lower(), report
    # The ACLs a producer and a consumer (kafkajs' in a group) need, then the same client works.
    boss = admin(bootstrap)
    create_acls(boss, [binding(topic, "WRITE"), binding(topic, "READ"),
                                   binding("secure-", "READ", resource="GROUP", pattern="PREFIXED"),
                                   binding("g-", "READ", resource="GROUP", pattern="PREFIXED")])
    values = CLIENTS[client](bootstrap, topic, ALICE)
    assert values == [f"{PREFIX[client]}-{i}" for i in range(5)]


def test_confluent_admin_creates_describes_and_deletes_acls(broker):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    bootstrap = servers(broker)
    boss = admin(bootstrap)
    prefix = f"team-{uuid.uuid4().hex[:6]}-"
    create_acls(boss, [binding(prefix, "READ", pattern="PREFIXED"),
                       binding(prefix, "WRITE", pattern="PREFIXED", principal="User:bob", permission="DENY")])
    wanted = AclBindingFilter(ResourceType.TOPIC, prefix, ResourcePatternType.PREFIXED, None, None,
                              AclOperation.ANY, AclPermissionType.ANY)
    found = boss.describe_acls(wanted, request_timeout=TIMEOUT).result(timeout=TIMEOUT)
    assert sorted((b.principal, b.operation.name, b.permission_type.name) for b in found) == [
        ("User:alice", "READ", "ALLOW"), ("User:bob", "WRITE", "DENY")]
    match = AclBindingFilter(ResourceType.TOPIC, prefix + "orders", ResourcePatternType.MATCH, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)
    assert len(boss.describe_acls(match, request_timeout=TIMEOUT).result(timeout=TIMEOUT)) == 2
    # alice is no super user and may not alter the cluster.
    alice = admin(bootstrap, "alice")
    with pytest.raises(KafkaException) as refused:
        create_acls(alice, [binding("x", "READ")])
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    deny_only = AclBindingFilter(ResourceType.TOPIC, prefix, ResourcePatternType.PREFIXED, None, None,
                                 AclOperation.ANY, AclPermissionType.DENY)
    (deleted,) = boss.delete_acls([deny_only], request_timeout=TIMEOUT).values()
    assert [b.principal for b in deleted.result(timeout=TIMEOUT)] == ["User:bob"]
    left = boss.describe_acls(wanted, request_timeout=TIMEOUT).result(timeout=TIMEOUT)
    assert [b.principal for b in left] == ["User:alice"]


def test_acls_survive_a_broker_restart_with_a_data_dir(tmp_path):
    properties = tmp_path / "server.properties"
    properties.write_text("\n".join(f"{k}={v}" for k, v in CONFIG.items() if k != "listeners") + "\n")
    args = ("--config", str(properties), "--listeners", "SASL_PLAINTEXT://127.0.0.1:0",
            "--data-dir", str(tmp_path / "data"))
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    first = BrokerProcess(*args).wait_ready()
    try:
        host, port = first.endpoints["SASL_PLAINTEXT"]
        client = admin(f"{host}:{port}")
        create_acls(client, [binding("kept", "READ", pattern="PREFIXED")])
    finally:
        assert first.stop() == 0, first.output
    second = BrokerProcess(*args).wait_ready()
    try:
        host, port = second.endpoints["SASL_PLAINTEXT"]
        client = admin(f"{host}:{port}")
        found = client.describe_acls(everything, request_timeout=TIMEOUT).result(timeout=TIMEOUT)
        assert [(b.name, b.resource_pattern_type.name, b.principal) for b in found] == [
            ("kept", "PREFIXED", "User:alice")]
    finally:
        assert second.stop() == 0, second.output
