"""DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, DescribeCluster, and what the
configs change."""

from __future__ import annotations

from trikafka.errors import ErrorCode
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
        # Kafka's chain: the static value, then the default it overrides
        assert [(s.name, s.source) for s in configs["retention.ms"].synonyms] == [
            ("log.retention.ms", 4), ("log.retention.ms", 5)]
        assert configs["max.message.bytes"].config_source == 5  # DEFAULT_CONFIG
        only = await describe(client, TOPIC, "cfg", keys=["retention.ms"])
        assert [c.name for c in only.configs] == ["retention.ms"]
        missing = await describe(client, TOPIC, "nope")
        assert missing.error_code == ErrorCode.unknown_topic_or_partition
        broker = await describe(client, BROKER, "1")
        props = {c.name: c for c in broker.configs}
        assert props["num.io.threads"].value == "8"
        assert not props["num.io.threads"].read_only  # cluster-wide in Kafka 4.4
        assert props["auto.create.topics.enable"].read_only
        assert not props["log.retention.ms"].read_only
        assert not props["listeners"].read_only  # per-broker


async def test_alter_configs_replaces_and_incremental_edits(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        await create_topic(client, "alt", configs={"segment.bytes": "1048576"})
        for version in versions(33):
            response = await client.request(
                request(
                    33,
                    version,
                    resources=[
                        {
                            "resource_type": TOPIC,
                            "resource_name": "alt",
                            "configs": [{"name": "retention.ms", "value": "1000"}],
                        }
                    ],
                    validate_only=False,
                )
            )
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
                {"name": "auto.create.topics.enable", "config_operation": 0, "value": "false"},
                {"name": "log.retention.hours", "config_operation": 0, "value": "1"}]}], validate_only=False))
        assert readonly.responses[0].error_code == ErrorCode.invalid_request
        assert readonly.responses[0].error_message == (  # Kafka 4.4's HashSet, in its order
            "Cannot update these configs dynamically: [log.retention.hours, auto.create.topics.enable]")


async def test_per_broker_dynamic_keys_need_the_broker_id(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        def alter(name, key, value):
            return client.request(request(44, 1, resources=[
                {"resource_type": BROKER, "resource_name": name, "configs": [
                    {"name": key, "config_operation": 0, "value": value}]}], validate_only=False))

        (at_default,) = (await alter("", "sasl.kerberos.min.time.before.relogin", "58000")).responses
        assert at_default.error_code == ErrorCode.invalid_request
        assert at_default.error_message == ("Cannot update these configs at default cluster level, broker id "
                                            "must be specified: [sasl.kerberos.min.time.before.relogin]")
        (unprefixed,) = (await alter("1", "ssl.keystore.location", "/tmp/ks")).responses
        assert unprefixed.error_message == ("These security configs can be dynamically updated only "
                                            "per-listener using the listener prefix: [ssl.keystore.location]")
        (other,) = (await alter("2", "log.retention.ms", "5000")).responses
        assert other.error_message == "Unexpected broker id, expected 1, but received 2"
        (cluster_wide,) = (await alter("", "log.retention.ms", "5000")).responses
        assert cluster_wide.error_code == ErrorCode.none
        assert tb.broker.replica_manager.config.log_retention_ms == 5000


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


# --- config edge cases Kafka accepts (issue 16) ---------------------------------------------


async def test_empty_cleanup_policy_is_accepted_everywhere_and_described_as_empty(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        created = await create_topic(client, "keepall", configs={"cleanup.policy": ""})
        assert created.error_code == ErrorCode.none, created.error_message
        configs = {c.name: c for c in (await describe(client, TOPIC, "keepall")).configs}
        assert configs["cleanup.policy"].value == ""
        assert configs["cleanup.policy"].config_source == 1
        assert tb.broker.replica_manager.get_log("keepall", 0).config.cleanup_policy == ()
        # What `kafka-configs --alter --delete-config`'s cousin, SUBTRACT of the default, leaves.
        await create_topic(client, "sub")
        response = await client.request(request(44, 1, resources=[
            {"resource_type": TOPIC, "resource_name": "sub", "configs": [
                {"name": "cleanup.policy", "config_operation": 3, "value": "delete"}]}], validate_only=False))
        assert response.responses[0].error_code == ErrorCode.none, response.responses[0].error_message
        configs = {c.name: c for c in (await describe(client, TOPIC, "sub")).configs}
        assert configs["cleanup.policy"].value == ""
        log = tb.broker.replica_manager.get_log("sub", 0)
        assert not log.config.delete_enabled and not log.config.compact_enabled
        response = await client.request(request(33, 1, resources=[
            {"resource_type": TOPIC, "resource_name": "sub", "configs": [{"name": "cleanup.policy", "value": ""}]}],
            validate_only=False))
        assert response.responses[0].error_code == ErrorCode.none
        # Still a ValidList: an unknown item is refused, naming key, value and what is allowed.
        bad = await create_topic(client, "bad", configs={"cleanup.policy": "delete,forever"})
        assert bad.error_code == ErrorCode.invalid_config
        assert "cleanup.policy" in bad.error_message and "compact" in bad.error_message


async def test_kafka_3_deprecated_topic_keys_are_accepted_stored_and_ignored(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        created = await create_topic(client, "old", configs={
            "message.format.version": "2.8-IV1",
            "message.downconversion.enable": "false",
            "message.timestamp.difference.max.ms": "60000",
            "leader.replication.throttled.replicas": "0:1,1:1",
            "follower.replication.throttled.replicas": "*",
        })
        assert created.error_code == ErrorCode.none, created.error_message
        configs = {c.name: c.value for c in (await describe(client, TOPIC, "old")).configs}
        assert configs["message.format.version"] == "2.8-IV1"
        assert configs["message.downconversion.enable"] == "false"
        assert configs["leader.replication.throttled.replicas"] == "0:1,1:1"
        assert configs["follower.replication.throttled.replicas"] == "*"
        for key, bad in [("message.format.version", "latest"), ("leader.replication.throttled.replicas", "0-1"),
                         ("message.downconversion.enable", "yes")]:
            refused = await create_topic(client, "bad", configs={key: bad})
            assert refused.error_code == ErrorCode.invalid_config, key
            assert key in refused.error_message
        # Ignored: produce and fetch are what they were (records stay v2).
        batch = build_batch([(b"k", b"v", [], 0)])
        response = await produce(client, 9, "old", None, 0, batch)
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.none


async def test_min_compaction_lag_above_max_is_refused(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        refused = await create_topic(
            client, "lag", configs={"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}
        )
        assert refused.error_code == ErrorCode.invalid_config
        assert "max.compaction.lag.ms" in refused.error_message


async def test_compacted_topic_refuses_records_without_key_one_by_one(autojump_clock):
    from trikafka.protocol.compression import recompress_batches

    async with open_test_broker() as tb, tb.client() as client:
        await create_topic(client, "cmp", configs={"cleanup.policy": "compact"})
        keyless = build_batch([(b"a", b"1", [], 0), (None, b"2", [], 0), (b"c", b"3", [], 0), (None, b"4", [], 0)])
        compressed = bytes(recompress_batches(keyless, list(iter_batches(keyless)), 4))
        for batch in (keyless, compressed):
            for version in (3, 7, 8, 9):
                response = await produce(client, version, "cmp", None, 0, batch)
                part = response.responses[0].partition_responses[0]
                assert part.error_code == ErrorCode.invalid_record
                if version >= 8:
                    assert [e.batch_index for e in part.record_errors] == [1, 3]
                    assert "without key" in part.record_errors[0].batch_index_error_message
                    assert "cmp-0" in part.error_message
        assert tb.broker.replica_manager.get_log("cmp", 0).log_end_offset == 0, "nothing appended"
        tombstone = build_batch([(b"a", None, [], 0)])
        response = await produce(client, 9, "cmp", None, 0, tombstone)
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.none
        # delete-only topics take keyless records, and so does one whose policy becomes empty.
        await create_topic(client, "plain")
        response = await produce(client, 9, "plain", None, 0, keyless)
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.none


async def test_kafka_dynamic_keys_are_accepted_and_described_with_their_levels(autojump_clock):
    """Keys Kafka 4.4 updates per broker or cluster-wide (log.cleaner.threads, num.io.threads,
    a replication throttle trikafka has no field for) are accepted, for the broker and as the
    cluster default, and described back with Kafka's sources and synonym chain."""
    async with open_test_broker(num_io_threads=4) as tb, tb.client() as client:
        def alter(name, configs):
            return client.request(request(44, 1, resources=[
                {"resource_type": BROKER, "resource_name": name, "configs": [
                    {"name": key, "config_operation": 0, "value": value} for key, value in configs.items()]}],
                validate_only=False))

        (default,) = (await alter("", {"log.cleaner.threads": "2", "num.io.threads": "6",
                                        "leader.replication.throttled.rate": "1000000"})).responses
        assert (default.error_code, default.error_message) == (ErrorCode.none, None)
        (own,) = (await alter("1", {"num.io.threads": "7"})).responses
        assert (own.error_code, own.error_message) == (ErrorCode.none, None)
        props = {c.name: c for c in (await describe(client, BROKER, "1")).configs}
        assert (props["num.io.threads"].value, props["num.io.threads"].config_source) == ("7", 2)
        assert [(s.value, s.source) for s in props["num.io.threads"].synonyms] == [
            ("7", 2), ("6", 3), ("4", 4), ("8", 5)]
        assert (props["log.cleaner.threads"].value, props["log.cleaner.threads"].config_source) == ("2", 3)
        assert not props["log.cleaner.threads"].read_only
        throttle = props["leader.replication.throttled.rate"]
        assert (throttle.value, throttle.config_source, throttle.read_only) == ("1000000", 3, False)
        cluster = {c.name: c for c in (await describe(client, BROKER, "")).configs}
        assert sorted(cluster) == ["leader.replication.throttled.rate", "log.cleaner.threads", "num.io.threads"]
        assert (cluster["num.io.threads"].value, cluster["num.io.threads"].config_source) == ("6", 3)
        for key in ("log.cleaner.threads", "log.cleaner.backoff.ms"):  # typed, stored or applied
            (bad,) = (await alter("1", {key: "many"})).responses
            assert bad.error_code != ErrorCode.none and key in bad.error_message
        assert (await describe(client, BROKER, "1", keys=["log.cleaner.threads"])).configs[0].value == "2"


async def test_dynamic_connection_limits_and_cleaner_settings_apply_at_once(autojump_clock):
    """max.connections.per.ip (cluster-wide in Kafka) set as the cluster default holds for the
    next connection; log.cleaner.backoff.ms and the dedupe buffer reach the running cleaner."""
    from trikafka.testing.frames import api_versions_frame, read_frames, read_until_closed

    async with open_test_broker() as tb, tb.client() as client:
        (answer,) = (await client.request(request(44, 1, resources=[
            {"resource_type": BROKER, "resource_name": "", "configs": [
                {"name": "max.connections.per.ip", "config_operation": 0, "value": "1"},
                {"name": "log.cleaner.backoff.ms", "config_operation": 0, "value": "1234"},
                {"name": "log.cleaner.dedupe.buffer.size", "config_operation": 0, "value": "1048576"}]}],
            validate_only=False))).responses
        assert answer.error_code == ErrorCode.none
        first = await tb.connect("10.0.0.7")
        await first.send_all(api_versions_frame(1))
        await read_frames(first, 1)
        assert await read_until_closed(await tb.connect("10.0.0.7")) == b""  # over the new limit
        cleaner = tb.broker.log_cleaner
        assert cleaner.backoff_ms == 1234
        small = cleaner.max_map_entries
        await client.request(request(44, 1, resources=[
            {"resource_type": BROKER, "resource_name": "", "configs": [
                {"name": "log.cleaner.dedupe.buffer.size", "config_operation": 1, "value": None}]}],
            validate_only=False))
        assert cleaner.max_map_entries > small  # back to the static 128 MiB


async def test_broker_logger_levels_change_at_once(autojump_clock):
    """BROKER_LOGGER (kafka-configs.sh --entity-type broker-loggers): the loggers and their
    levels described; SET and DELETE change a level at once; Kafka's errors otherwise."""
    import logging

    logger = logging.getLogger("trikafka.server")
    before = logger.level
    async with open_test_broker() as tb, tb.client() as client:
        def alter(name, op, key, value):
            return client.request(request(44, 1, resources=[
                {"resource_type": 8, "resource_name": name, "configs": [
                    {"name": key, "config_operation": op, "value": value}]}], validate_only=False))

        try:
            described = {c.name: c for c in (await describe(client, 8, "1")).configs}
            assert "root" in described and "trikafka.server" in described
            assert described["trikafka.server"].config_source == 6  # DYNAMIC_BROKER_LOGGER_CONFIG
            (done,) = (await alter("1", 0, "trikafka.server", "TRACE")).responses
            assert done.error_code == ErrorCode.none
            assert logger.isEnabledFor(5) and not logging.getLogger("trikafka.network").isEnabledFor(5)
            assert (await describe(client, 8, "1", keys=["trikafka.server"])).configs[0].value == "TRACE"
            (done,) = (await alter("1", 1, "trikafka.server", None)).responses
            assert done.error_code == ErrorCode.none and logger.level == logging.NOTSET
            errors = [
                (await alter("1", 0, "no.such.logger", "INFO")).responses[0],
                (await alter("1", 0, "trikafka.server", "VERBOSE")).responses[0],
                (await alter("1", 1, "root", None)).responses[0],
                (await alter("1", 2, "trikafka.server", "INFO")).responses[0],
                (await alter("2", 0, "trikafka.server", "INFO")).responses[0],
            ]
            assert [(e.error_code, e.error_message) for e in errors] == [
                (ErrorCode.invalid_config, "Logger no.such.logger does not exist!"),
                (ErrorCode.invalid_config, "Cannot set the log level of trikafka.server to VERBOSE as it is not "
                                           "a supported log level. Valid log levels are DEBUG, ERROR, FATAL, INFO, "
                                           "TRACE, WARN"),
                (ErrorCode.invalid_request, "Removing the log level of the root logger is not allowed"),
                (ErrorCode.invalid_request, "APPEND operation is not allowed for the BROKER_LOGGER resource"),
                (ErrorCode.invalid_request, "Unexpected broker id, expected 1, but received 2"),
            ]
        finally:
            logger.setLevel(before)
