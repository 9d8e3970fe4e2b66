"""DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, DescribeCluster, and what the
configs change."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from trikafka.protocol.records import build_batch, iter_batches
from trikafka.testing import open_test_broker

from .test_topics_and_data import create_topic, fetch_request, produce, request, versions

TOPIC, BROKER = 2, 4


async def describe(client, resource_type, name, keys=None, version=4, synonyms=True):
    response = await client.request(request(32, version, resources=[
        {"resource_type": resource_type, "resource_name": name, "configuration_keys": keys}],
        include_synonyms=synonyms, include_documentation=False))
    (result,) = response.results
    return result


async def test_describe_topic_and_broker_configs(autojump_clock):
    async with open_test_broker(log_retention_ms=3_600_000) as tb, tb.client() as client:
        await create_topic(client, "cfg", configs={"segment.bytes": "1048576"})
        for version in versions(32):
            result = await describe(client, TOPIC, "cfg", version=version)
            assert result.error_code == ErrorCode.none
            configs = {c.name: c for c in result.configs}
            assert configs["segment.bytes"].value == "1048576"
            assert configs["retention.ms"].value == "3600000"
            assert configs["cleanup.policy"].value == "delete"
        result = await describe(client, TOPIC, "cfg")
        configs = {c.name: c for c in result.configs}
        assert configs["segment.bytes"].config_source == 1  # TOPIC_CONFIG
        assert configs["retention.ms"].config_source == 4  # STATIC_BROKER_CONFIG
        assert [s.name for s in configs["retention.ms"].synonyms] == ["log.retention.ms"]
        assert configs["max.message.bytes"].config_source == 5  # DEFAULT_CONFIG
        only = await describe(client, TOPIC, "cfg", keys=["retention.ms"])
        assert [c.name for c in only.configs] == ["retention.ms"]
        missing = await describe(client, TOPIC, "nope")
        assert missing.error_code == ErrorCode.unknown_topic_or_partition
        broker = await describe(client, BROKER, "1")
        props = {c.name: c for c in broker.configs}
        assert props["num.io.threads"].value == "8"
        assert props["num.io.threads"].read_only
        assert not props["log.retention.ms"].read_only


async def test_alter_configs_replaces_and_incremental_edits(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        await create_topic(client, "alt", configs={"segment.bytes": "1048576"})
        for version in versions(33):
            response = await client.request(request(33, version, resources=[
                {"resource_type": TOPIC, "resource_name": "alt", "configs": [{"name": "retention.ms", "value": "1000"}]}],
                validate_only=False))
            assert response.responses[0].error_code == ErrorCode.none
        configs = {c.name: c for c in (await describe(client, TOPIC, "alt")).configs}
        assert configs["retention.ms"].value == "1000"
        assert configs["segment.bytes"].config_source != 1  # replaced: the old override is gone
        log = tb.broker.replica_manager.get_log("alt", 0)
        assert log.config.retention_ms == 1000
        for version in versions(44):
            response = await client.request(request(44, version, resources=[
                {"resource_type": TOPIC, "resource_name": "alt", "configs": [
                    {"name": "cleanup.policy", "config_operation": 2, "value": "compact"},
                    {"name": "retention.ms", "config_operation": 1, "value": None},
                    {"name": "max.message.bytes", "config_operation": 0, "value": "5000"}]}],
                validate_only=False))
            assert response.responses[0].error_code == ErrorCode.none
        configs = {c.name: c for c in (await describe(client, TOPIC, "alt")).configs}
        assert configs["cleanup.policy"].value == "delete,compact"
        assert configs["retention.ms"].config_source != 1
        assert configs["max.message.bytes"].value == "5000"
        bad = await client.request(request(44, 1, resources=[
            {"resource_type": TOPIC, "resource_name": "alt", "configs": [
                {"name": "retention.ms", "config_operation": 0, "value": "later"}]}], validate_only=False))
        assert bad.responses[0].error_code == ErrorCode.invalid_config
        assert "retention.ms" in bad.responses[0].error_message


async def test_dynamic_broker_config_reaches_topics(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        await create_topic(client, "dyn")
        response = await client.request(request(44, 1, resources=[
            {"resource_type": BROKER, "resource_name": "1", "configs": [
                {"name": "log.retention.ms", "config_operation": 0, "value": "5000"}]}], validate_only=False))
        assert response.responses[0].error_code == ErrorCode.none
        assert tb.broker.replica_manager.get_log("dyn", 0).config.retention_ms == 5000
        configs = {c.name: c for c in (await describe(client, TOPIC, "dyn")).configs}
        assert configs["retention.ms"].config_source == 2  # DYNAMIC_BROKER_CONFIG
        readonly = await client.request(request(44, 1, resources=[
            {"resource_type": BROKER, "resource_name": "1", "configs": [
                {"name": "num.io.threads", "config_operation": 0, "value": "2"}]}], validate_only=False))
        assert readonly.responses[0].error_code == ErrorCode.invalid_request


async def test_topic_compression_type_recompresses(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        created = await create_topic(client, "zipped", configs={"compression.type": "gzip"})
        batch = build_batch([(b"k", b"v" * 1000, [], 1)])
        await produce(client, 9, "zipped", created.topic_id, 0, batch)
        response = await client.request(fetch_request(12, "zipped", created.topic_id, 0, 0))
        (header,) = iter_batches(response.responses[0].partitions[0].records)
        assert header.attributes & 0x07 == 1  # gzip
        assert header.size < len(batch)


async def test_describe_cluster(autojump_clock):
    async with open_test_broker(cluster_id="c-1") as tb, tb.client() as client:
        for version in versions(60):
            response = await client.request(request(60, version, include_cluster_authorized_operations=False,
                                                    endpoint_type=1, include_fenced_brokers=False))
            assert response.error_code == ErrorCode.none
            assert response.cluster_id == "c-1"
            assert [(b.broker_id, b.host, b.port) for b in response.brokers] == [(1, "memory", 9092)]
