"""Everything Kafka keeps in its metadata log survives a restart of ``python -m trikafka
--data-dir D``: a clean one (SIGTERM) and a crash (SIGKILL right after the last answer), on one
broker and on a three-broker cluster (``--brokers 3``).

Each kind of change is made with confluent-kafka's AdminClient where it has the call (topic,
group and broker configs, ACLs, SCRAM users) and as a raw request where it has none (client
quotas, client-metrics subscriptions, UpdateFeatures); after each restart every one is read
back, and the SCRAM user logs in."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from trikafka.client.connection import connect_tcp
from trikafka.errors import ErrorCode
from trikafka.testing.process import BrokerProcess

from ..server.test_topics_and_data import request
from .support import TIMEOUT

pytestmark = pytest.mark.compat

GROUP, CLIENT_METRICS = 32, 16  # ConfigResource.Type
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def _start(data_dir: Path, brokers: int) -> BrokerProcess:
    properties = data_dir.parent / "server.properties"
    properties.write_text(
        f"authorizer.class.name={AUTHORIZER}\nallow.everyone.if.no.acl.found=true\nsuper.users=User:ANONYMOUS\n"
        "sasl.enabled.mechanisms=SCRAM-SHA-512\n"
    )
    return BrokerProcess(
        "--config", str(properties), "--data-dir", str(data_dir), "--brokers", str(brokers),
        "--listeners", "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    ).wait_ready()


def _admin(broker: BrokerProcess):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": broker.address})


async def _raw(broker: BrokerProcess, *requests):
    async with connect_tcp(broker.host, broker.port) as client:
        return [await client.request(r) for r in requests]


def _make_changes(broker: BrokerProcess) -> str:
    """Every kind of change, each answered before the next; the cluster id."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewTopic,
        ResourcePatternType,
        ResourceType,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = _admin(broker)
    admin.create_topics([NewTopic("kept", 1, config={"retention.ms": "123456"})])["kept"].result(TIMEOUT)

    def set_configs(resource_type, name, values):
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in values.items()]
        resource = ConfigResource(resource_type, name, incremental_configs=entries)
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(TIMEOUT)

    set_configs(ResourceType.GROUP, "kept-group", {"share.auto.offset.reset": "earliest"})
    set_configs(ResourceType.BROKER, "1", {"log.retention.ms": "54321"})
    binding = AclBinding(ResourceType.TOPIC, "kept", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    for future in admin.create_acls([binding]).values():
        future.result(TIMEOUT)
    upsertion = UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                             b"alice-secret")
    admin.alter_user_scram_credentials([upsertion])["alice"].result(TIMEOUT)
    # the cluster default (kafka-configs.sh --entity-default; confluent-kafka takes no empty name)
    default, quota, metrics, feature = trio.run(_raw, broker,
        request(44, 1, validate_only=False, resources=[{
            "resource_type": 4, "resource_name": "", "configs": [
                {"name": "log.segment.bytes", "config_operation": 0, "value": "2097152"},
                {"name": "log.cleaner.threads", "config_operation": 0, "value": "3"}]}]),
        request(49, 1, validate_only=False, entries=[{
            "entity": [{"entity_type": "user", "entity_name": "alice"}],
            "ops": [{"key": "producer_byte_rate", "value": 4096.0, "remove": False}]}]),
        request(44, 1, validate_only=False, resources=[{
            "resource_type": CLIENT_METRICS, "resource_name": "kept-metrics", "configs": [
                {"name": "metrics", "config_operation": 0, "value": "org.apache.kafka.producer."},
                {"name": "interval.ms", "config_operation": 0, "value": "60000"}]}]),
        request(57, 1, timeout=60_000, validate_only=False, feature_updates=[
            {"feature": "share.version", "max_version_level": 1, "upgrade_type": 2}]))
    assert default.responses[0].error_code == ErrorCode.none, default
    assert quota.entries[0].error_code == ErrorCode.none
    assert metrics.responses[0].error_code == ErrorCode.none, metrics
    assert feature.error_code == ErrorCode.none and feature.results[0].error_code == ErrorCode.none, feature
    return admin.describe_cluster().result(TIMEOUT).cluster_id


def _configs(admin, resource_type, name):
    from confluent_kafka.admin import ConfigResource

    (future,) = admin.describe_configs([ConfigResource(resource_type, name)]).values()
    return future.result(TIMEOUT)


def _check_kept(broker: BrokerProcess, cluster_id: str, retention: str = "54321") -> None:
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ConfigSource,
        ResourcePatternType,
        ResourceType,
    )

    admin = _admin(broker)
    assert admin.describe_cluster().result(TIMEOUT).cluster_id == cluster_id
    topic = _configs(admin, ResourceType.TOPIC, "kept")
    assert topic["retention.ms"].value == "123456"
    assert topic["segment.bytes"].value == "2097152"  # the cluster default, inherited
    assert _configs(admin, ResourceType.GROUP, "kept-group")["share.auto.offset.reset"].value == "earliest"
    node = _configs(admin, ResourceType.BROKER, "1")
    assert (node["log.retention.ms"].value, node["log.retention.ms"].source) == (
        retention, ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert (node["log.segment.bytes"].value, node["log.segment.bytes"].source) == (
        "2097152", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    acls = admin.describe_acls(AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
        AclPermissionType.ANY)).result(TIMEOUT)
    assert [(a.name, a.principal, a.operation) for a in acls] == [("kept", "User:alice", AclOperation.READ)]
    users = admin.describe_user_scram_credentials().result(TIMEOUT)
    assert [(c.mechanism.name, c.iterations) for c in users["alice"].scram_credential_infos] == [
        ("SCRAM_SHA_512", 8192)]
    assert _logs_in(broker, "alice", "alice-secret")
    default, quotas, metrics, versions = trio.run(_raw, broker,
        request(32, 4, include_synonyms=False, include_documentation=False, resources=[{
            "resource_type": 4, "resource_name": "", "configuration_keys": None}]),
        request(48, 1, strict=False, components=[]),
        request(32, 4, include_synonyms=False, include_documentation=False, resources=[{
            "resource_type": CLIENT_METRICS, "resource_name": "kept-metrics", "configuration_keys": None}]),
        request(18, 4, client_software_name="t", client_software_version="1"))
    assert [(v.key, v.value) for e in quotas.entries for v in e.values] == [("producer_byte_rate", 4096.0)]
    assert {c.name: (c.value, c.config_source) for c in default.results[0].configs} == {
        "log.cleaner.threads": ("3", 3), "log.segment.bytes": ("2097152", 3)}  # DYNAMIC_DEFAULT_BROKER_CONFIG
    described = {c.name: c.value for c in metrics.results[0].configs}
    assert (described["metrics"], described["interval.ms"]) == ("org.apache.kafka.producer.", "60000")
    assert {f.name: f.max_version_level for f in versions.finalized_features}["share.version"] == 1


def _logs_in(broker: BrokerProcess, user: str, password: str) -> bool:
    from confluent_kafka import Producer

    host, port = broker.endpoints["SASL_PLAINTEXT"]
    producer = Producer({
        "bootstrap.servers": f"{host}:{port}", "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": password,
    })
    producer.list_topics(timeout=TIMEOUT)
    return True


@pytest.mark.parametrize("brokers", [1, 3])
def test_every_metadata_change_survives_a_kill_9_and_a_clean_restart(tmp_path, brokers):
    data = tmp_path / "data"
    broker = _start(data, brokers)
    try:
        cluster_id = _make_changes(broker)
    finally:
        broker.kill()  # SIGKILL right after the last answer
    broker = _start(data, brokers)
    try:
        _check_kept(broker, cluster_id)
    finally:
        assert broker.stop() == 0  # SIGTERM
    broker = _start(data, brokers)
    try:
        _check_kept(broker, cluster_id)
    finally:
        broker.stop()
