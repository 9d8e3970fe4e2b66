"""GROUP config resources for consumer groups (Kafka's ``consumer.*`` group configs).

Over the in-memory transport in virtual time: a group's ``consumer.session.timeout.ms`` and
``consumer.heartbeat.interval.ms``, set with IncrementalAlterConfigs, are what the KIP-848
coordinator uses for that group only; they are bounded by the broker's
``group.consumer.min/max.*`` keys and the session must exceed the interval, as Kafka's
GroupConfig validates; DescribeConfigs shows each key's source; Kafka's group configs trikafka
does not build (``streams.*``, ``consumer.assignment.interval.ms``) are refused by name; the
overrides outlive a restart with a data dir. Over TCP, confluent-kafka's AdminClient sets and
describes them.
"""

from __future__ import annotations

from datetime import timedelta

import trio
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource

from tests.coordinator.test_consumer_groups import DESCRIBE, Member, create_topic, request
from trikafka.errors import ErrorCode
from trikafka.testing import open_test_broker

GROUP_RESOURCE = 32
GROUP_CONFIG, STATIC_BROKER, DEFAULT = 8, 4, 5


def alter(group: str, **configs: str | None):
    return request(44, 1, validate_only=False, resources=[{
        "resource_type": GROUP_RESOURCE, "resource_name": group, "configs": [
            {"name": k.replace("_", "."), "config_operation": 0 if v is not None else 1, "value": v}
            for k, v in configs.items()]}])


async def describe_configs(client, group: str) -> dict[str, tuple[str, int]]:
    answer = await client.request(request(32, 4, include_synonyms=True, include_documentation=False, resources=[
        {"resource_type": GROUP_RESOURCE, "resource_name": group, "configuration_keys": None}]))
    assert answer.results[0].error_code == ErrorCode.none
    return {c.name: (c.value, c.config_source) for c in answer.results[0].configs}


async def members(client, group: str) -> list[str]:
    answer = await client.request(request(DESCRIBE, 0, group_ids=[group], include_authorized_operations=False))
    return [m.member_id for m in answer.groups[0].members]


async def test_a_groups_session_timeout_and_heartbeat_interval_are_its_own(autojump_clock):
    async with open_test_broker() as tb, tb.client() as c:
        await create_topic(c, "t", 2)
        answer = await c.request(alter("slow", consumer_session_timeout_ms="55000",
                                       consumer_heartbeat_interval_ms="7000"))
        assert answer.responses[0].error_code == ErrorCode.none
        slow, other = Member(c, "slow", "a"), Member(c, "other", "b")
        assert (await slow.heartbeat()).heartbeat_interval == timedelta(milliseconds=7000)
        assert (await other.heartbeat()).heartbeat_interval == timedelta(milliseconds=5000)  # the broker's default
        start = trio.current_time()
        await trio.sleep(45.001)  # the broker's session timeout: only "other" is gone
        assert await members(c, "other") == []
        assert await members(c, "slow") == ["a"]
        await trio.sleep(55 - (trio.current_time() - start) - 0.002)
        assert await members(c, "slow") == ["a"]
        await trio.sleep(0.004)
        assert await members(c, "slow") == []
        # Deleting the override gives the group the broker's value again.
        answer = await c.request(alter("slow", consumer_session_timeout_ms=None, consumer_heartbeat_interval_ms=None))
        assert answer.responses[0].error_code == ErrorCode.none
        again = Member(c, "slow", "c")
        assert (await again.heartbeat()).heartbeat_interval == timedelta(milliseconds=5000)


async def test_values_are_bounded_by_the_broker_and_unbuilt_keys_are_refused(autojump_clock):
    async with open_test_broker() as tb, tb.client() as c:
        for configs, key, value in (
            ({"consumer_session_timeout_ms": "44999"}, "consumer.session.timeout.ms", "group.consumer.min.session"),
            ({"consumer_session_timeout_ms": "60001"}, "consumer.session.timeout.ms", "group.consumer.max.session"),
            ({"consumer_heartbeat_interval_ms": "15001"}, "consumer.heartbeat.interval.ms", "15001"),
            ({"consumer_heartbeat_interval_ms": "abc"}, "consumer.heartbeat.interval.ms", "abc"),
            ({"streams_session_timeout_ms": "45000"}, "streams.session.timeout.ms", "streams groups"),
            ({"consumer_assignment_interval_ms": "0"}, "consumer.assignment.interval.ms", "not built"),
        ):
            answer = (await c.request(alter("g", **configs))).responses[0]
            assert answer.error_code == ErrorCode.invalid_config, configs
            assert key in answer.error_message and value in answer.error_message, answer.error_message
        assert await describe_configs(c, "g") == await describe_configs(c, "untouched")  # nothing was kept
    # The session must exceed the heartbeat interval, each taking the group's or the broker's value.
    async with open_test_broker(group_consumer_max_heartbeat_interval_ms=60_000) as tb, tb.client() as c:
        answer = (await c.request(alter("g", consumer_heartbeat_interval_ms="45000"))).responses[0]
        assert answer.error_code == ErrorCode.invalid_config
        assert "greater than consumer.heartbeat.interval.ms (45000)" in answer.error_message
        answer = (await c.request(alter("g", consumer_heartbeat_interval_ms="45000",
                                        consumer_session_timeout_ms="50000"))).responses[0]
        assert answer.error_code == ErrorCode.none


async def test_describe_configs_shows_each_keys_source(autojump_clock):
    async with open_test_broker(group_consumer_session_timeout_ms=50_000) as tb, tb.client() as c:
        await c.request(alter("g", consumer_heartbeat_interval_ms="6000"))
        configs = await describe_configs(c, "g")
        assert configs["consumer.heartbeat.interval.ms"] == ("6000", GROUP_CONFIG)
        assert configs["consumer.session.timeout.ms"] == ("50000", STATIC_BROKER)  # the broker's --override
        assert configs["share.session.timeout.ms"] == ("45000", DEFAULT)
        assert configs["share.auto.offset.reset"] == ("latest", DEFAULT)


async def test_a_consumer_groups_configs_survive_a_restart(tmp_path, autojump_clock):
    async with open_test_broker(log_dirs=str(tmp_path)) as tb, tb.client() as c:
        await create_topic(c, "t", 1)
        assert (await c.request(alter("g", consumer_heartbeat_interval_ms="8000"))).responses[0].error_code == 0
        await Member(c, "g", "a").heartbeat()
    async with open_test_broker(log_dirs=str(tmp_path)) as tb, tb.client() as c:
        assert (await describe_configs(c, "g"))["consumer.heartbeat.interval.ms"] == ("8000", GROUP_CONFIG)
        assert (await Member(c, "g", "b").heartbeat()).heartbeat_interval == timedelta(milliseconds=8000)
        listed = await c.request(request(16, 5, states_filter=[], types_filter=[]))
        assert [(g.group_id, g.group_type) for g in listed.groups] == [("g", "consumer")]  # not a share group


def test_confluent_admin_client_sets_and_describes_a_consumer_group_config(kafka_broker):
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers})
    resource = ConfigResource(ConfigResource.Type.GROUP, "orders", incremental_configs=[
        ConfigEntry("consumer.session.timeout.ms", "50000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.GROUP, "orders")])
    (configs,) = (f.result(30) for f in described.values())
    assert configs["consumer.session.timeout.ms"].value == "50000"
    assert configs["consumer.session.timeout.ms"].source == ConfigSource.GROUP_CONFIG.value
    assert configs["consumer.heartbeat.interval.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    bad = ConfigResource(ConfigResource.Type.GROUP, "orders", incremental_configs=[
        ConfigEntry("consumer.session.timeout.ms", "1000", incremental_operation=AlterConfigOpType.SET)])
    try:
        admin.incremental_alter_configs([bad])[bad].result(30)
        raise AssertionError("a session timeout below group.consumer.min.session.timeout.ms was accepted")
    except Exception as exc:  # KafkaException(INVALID_CONFIG)
        assert "consumer.session.timeout.ms" in str(exc), exc
