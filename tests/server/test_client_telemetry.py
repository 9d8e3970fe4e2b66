"""Client telemetry on the broker (KIP-714), request by request under the MockClock:
GetTelemetrySubscriptions, PushTelemetry with Kafka's errors in Kafka's order, CLIENT_METRICS
subscriptions through DescribeConfigs / IncrementalAlterConfigs / ListConfigResources, and
what a push leaves in ``client_metrics()`` and ``wait_for_client_metric``."""

from __future__ import annotations

import uuid

import cramjam
import pytest
import trio
import trio.testing
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.metrics.v1 import metrics_pb2

from trikafka.errors import ErrorCode
from trikafka.testing import controls, open_test_broker

from .test_topics_and_data import request

CLIENT_METRICS = 16
ZERO = uuid.UUID(int=0)


def otlp(values: dict[str, float]) -> bytes:
    data = metrics_pb2.MetricsData()
    scope = data.resource_metrics.add().scope_metrics.add()
    for name, value in values.items():
        metric = scope.metrics.add(name=name)
        point = metric.gauge.data_points.add(as_double=value, time_unix_nano=1)
        point.attributes.append(common_pb2.KeyValue(key="node_id", value=common_pb2.AnyValue(string_value="1")))
    return data.SerializeToString()


async def alter(client, name, ops, validate_only=False):
    response = await client.request(request(44, 1, resources=[{
        "resource_type": CLIENT_METRICS, "resource_name": name,
        "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in ops],
    }], validate_only=validate_only))
    (result,) = response.responses
    return result


async def subscribe(client, name="all", metrics="*", interval="1000", **more):
    ops = [("metrics", 0, metrics), ("interval.ms", 0, interval)] + [(k, 0, v) for k, v in more.items()]
    result = await alter(client, name, ops)
    assert result.error_code == ErrorCode.none, result.error_message


async def get_subscriptions(client, instance_id=ZERO):
    return await client.request(request(71, 0, client_instance_id=instance_id))


async def push(client, got, payload=b"", *, compression=0, terminating=False, subscription_id=None):
    response = await client.request(request(
        72, 0, client_instance_id=got.client_instance_id,
        subscription_id=got.subscription_id if subscription_id is None else subscription_id,
        terminating=terminating, compression_type=compression, metrics=payload,
    ))
    return response.error_code


async def test_a_client_gets_an_instance_id_and_no_metrics_until_subscribed(autojump_clock):
    async with open_test_broker(client_telemetry=True) as tb, tb.client() as client:
        advertised = {int(k.api_key): (k.min_version, k.max_version)
                      for k in (await client.request(request(18, 3, client_software_name="t",
                                                             client_software_version="1"))).api_keys}
        assert (advertised[71], advertised[72], advertised[74]) == ((0, 0), (0, 0), (0, 1))
        got = await get_subscriptions(client)
        assert got.error_code == ErrorCode.none
        assert got.client_instance_id not in (None, ZERO)
        assert list(got.requested_metrics) == [] and got.push_interval.total_seconds() == 300
        assert got.telemetry_max_bytes == 1048576 and got.delta_temporality
        assert list(got.accepted_compression_types) == [4, 3, 1, 2]  # zstd, lz4, gzip, snappy
        again = await get_subscriptions(client, got.client_instance_id)
        assert again.error_code == ErrorCode.throttling_quota_exceeded  # sooner than the interval
        await subscribe(client, metrics="org.apache.kafka.producer.", interval="1000")
        changed = await get_subscriptions(client, got.client_instance_id)  # a new subscription: at once
        assert changed.error_code == ErrorCode.none
        assert changed.client_instance_id == got.client_instance_id
        assert list(changed.requested_metrics) == ["org.apache.kafka.producer."]
        assert changed.push_interval.total_seconds() == 1.0
        assert changed.subscription_id != got.subscription_id


async def test_pushes_are_checked_in_kafkas_order(autojump_clock):
    async with open_test_broker(telemetry_max_bytes=4096, client_telemetry=True) as tb, tb.client() as client:
        await subscribe(client, interval="1000")
        got = await get_subscriptions(client)
        assert await push(client, got, subscription_id=got.subscription_id + 1) == ErrorCode.unknown_subscription_id
        assert (await get_subscriptions(client, got.client_instance_id)).error_code == ErrorCode.none  # may re-ask
        assert await push(client, got, otlp({"a.b": 1.0})) == ErrorCode.none  # first push after a Get: on time
        assert await push(client, got, otlp({"a.b": 2.0})) == ErrorCode.throttling_quota_exceeded
        await trio.sleep(1.0)
        assert await push(client, got, b"x" * 5000) == ErrorCode.telemetry_too_large
        await trio.sleep(1.0)
        assert await push(client, got, otlp({"a.b": 3.0}), compression=9) == ErrorCode.unsupported_compression_type
        await trio.sleep(1.0)
        assert await push(client, got, b"\xff\xff\xff") == ErrorCode.invalid_record
        await trio.sleep(1.0)
        bomb = cramjam.gzip.compress(b"\0" * 10_000)
        assert await push(client, got, bytes(bomb), compression=1) == ErrorCode.telemetry_too_large
        assert await push(client, got, otlp({"a.b": 4.0}), terminating=True) == ErrorCode.none  # never throttled
        assert await push(client, got, otlp({"a.b": 5.0})) == ErrorCode.invalid_request  # after terminating
        (seen,) = tb.broker.client_metrics()
        assert seen.metrics == {"a.b": 4.0} and seen.terminating and seen.client_id == "trikafka-test"
        zero = await client.request(request(72, 0, client_instance_id=ZERO, subscription_id=0, terminating=False,
                                            compression_type=0, metrics=b""))
        assert zero.error_code == ErrorCode.invalid_request


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
async def test_compressed_payloads_are_decoded_and_waited_for(autojump_clock, codec):
    compress = {1: cramjam.gzip.compress, 2: cramjam.snappy.compress_raw, 3: cramjam.lz4.compress,
                4: cramjam.zstd.compress}.get(codec, bytes)
    async with open_test_broker(client_telemetry=True) as tb, tb.client(client_id="app") as client:
        await subscribe(client)
        got = await get_subscriptions(client)
        waits = controls(tb.broker)
        async with trio.open_nursery() as nursery:
            seen = []

            async def wait() -> None:
                seen.append(await waits.wait_for_client_metric("org.apache.kafka.producer.", client_id="app",
                                                               at_least=2))

            nursery.start_soon(wait)
            payload = otlp({"org.apache.kafka.producer.record.queue.time.avg": 2.5})
            assert await push(client, got, bytes(compress(payload)), compression=codec) == ErrorCode.none
        assert seen[0].metrics == {"org.apache.kafka.producer.record.queue.time.avg": 2.5}
        assert seen[0].points[0][1] == (("node_id", "1"),)
        with pytest.raises(TimeoutError, match=r"clients seen: app \(\?, 1 push\(es\), 1 metric"):
            await waits.wait_for_client_metric("org.apache.kafka.consumer.", timeout=1)


async def test_subscriptions_match_clients_and_merge(autojump_clock):
    async with open_test_broker(client_telemetry=True) as tb, tb.client(client_id="app") as client:
        await subscribe(client, "others", metrics="x.", interval="500", match="client_id=other.*")
        await subscribe(client, "apps", metrics="a.,b.", interval="2000",
                        match="client_id=ap+, client_source_port=\\d+")
        await subscribe(client, "slow", metrics="c.", interval="9000")
        got = await get_subscriptions(client)
        assert sorted(got.requested_metrics) == ["a.", "b.", "c."]
        assert got.push_interval.total_seconds() == 2.0  # the lowest of those matching
        await subscribe(client, "everything", metrics="*", interval="3000")
        everything = await get_subscriptions(client, got.client_instance_id)
        assert list(everything.requested_metrics) == ["*"]


async def test_subscription_configs_are_validated_described_listed_and_deleted(autojump_clock):
    async with open_test_broker(client_telemetry=True) as tb, tb.client() as client:
        bad = {
            (("interval.ms", 0, "50"),): (ErrorCode.invalid_request, "Invalid value 50 for interval.ms, interval "
                                                                     "must be between 100 and 3600000"),
            (("interval", 0, "500"),): (ErrorCode.invalid_request, "Unknown client metrics configuration: interval"),
            (("match", 0, "client=x"),): (ErrorCode.invalid_config, "Illegal client matching pattern: client=x"),
            (("match", 0, "client_id=("),): (ErrorCode.invalid_config, "Illegal client matching pattern: client_id=("),
        }
        for ops, (code, message) in bad.items():
            result = await alter(client, "s", list(ops))
            assert result.error_code == code and message in result.error_message
        assert (await alter(client, "", [("metrics", 0, "*")])).error_code == ErrorCode.invalid_request
        assert (await alter(client, "s", [("metrics", 0, "*")], validate_only=True)).error_code == ErrorCode.none
        assert tb.broker.core.client_metrics.names() == []
        await subscribe(client, "s", metrics="a.", interval="1000")
        assert (await alter(client, "s", [("metrics", 2, "b.,c.")])).error_code == ErrorCode.none  # APPEND
        assert (await alter(client, "s", [("metrics", 3, "a.")])).error_code == ErrorCode.none  # SUBTRACT
        described = await client.request(request(32, 4, resources=[
            {"resource_type": CLIENT_METRICS, "resource_name": "s", "configuration_keys": None}],
            include_synonyms=False, include_documentation=False))
        (result,) = described.results
        assert {c.name: (c.value, c.config_source) for c in result.configs} == {
            "metrics": ("b.,c.", 7), "interval.ms": ("1000", 7)}
        listed = await client.request(request(74, 1, resource_types=[CLIENT_METRICS]))
        assert [(r.resource_name, r.resource_type) for r in listed.config_resources] == [("s", CLIENT_METRICS)]
        v0 = await client.request(request(74, 0))
        assert [r.resource_name for r in v0.config_resources] == ["s"]
        assert (await client.request(request(74, 1, resource_types=[8]))).error_code == ErrorCode.unsupported_version
        deleted = await alter(client, "s", [("metrics", 1, None), ("interval.ms", 1, None)])
        assert deleted.error_code == ErrorCode.none
        assert list((await client.request(request(74, 0))).config_resources) == []


async def test_subscriptions_survive_a_restart_with_a_data_dir(autojump_clock, tmp_path):
    async with open_test_broker(log_dirs=str(tmp_path), client_telemetry=True) as tb, tb.client() as client:
        await subscribe(client, "kept", metrics="org.apache.kafka.", interval="2500")
    async with open_test_broker(log_dirs=str(tmp_path), client_telemetry=True) as tb, tb.client() as client:
        got = await get_subscriptions(client)
        assert list(got.requested_metrics) == ["org.apache.kafka."] and got.push_interval.total_seconds() == 2.5


async def test_acls_as_kafka_checks_them(autojump_clock):
    from trikafka.config import BrokerConfig
    from trikafka.security.authorizer import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType

    config = BrokerConfig.from_mapping({
        "listeners": "PLAINTEXT://memory:9092",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "client.telemetry.enable": True,
    })
    async with open_test_broker(config) as tb, tb.client() as client:
        # No ACL at all: the telemetry APIs need none; the subscriptions need the cluster's.
        got = await get_subscriptions(client)
        assert got.error_code == ErrorCode.none
        listed = await client.request(request(74, 1, resource_types=[]))
        assert listed.error_code == ErrorCode.cluster_authorization_failed
        refused = await alter(client, "s", [("metrics", 0, "*")])
        assert refused.error_code == ErrorCode.cluster_authorization_failed
        described = await client.request(request(32, 4, resources=[
            {"resource_type": CLIENT_METRICS, "resource_name": "s", "configuration_keys": None}],
            include_synonyms=False, include_documentation=False))
        assert described.results[0].error_code == ErrorCode.cluster_authorization_failed
        tb.broker.path.context.acls.create([AclBinding(
            ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, "User:ANONYMOUS", "*",
            AclOperation.ALTER_CONFIGS, AclPermissionType.ALLOW,
        )])  # ALTER_CONFIGS implies DESCRIBE_CONFIGS
        assert (await alter(client, "s", [("metrics", 0, "*")])).error_code == ErrorCode.none
        listed = await client.request(request(74, 1, resource_types=[CLIENT_METRICS]))
        assert [r.resource_name for r in listed.config_resources] == ["s"]


async def test_an_instance_is_dropped_when_its_connection_closes(autojump_clock):
    """Kafka's ClientMetricsManager listens for disconnects: a client's instance (and what it
    pushed) goes when its connection closes, not max(60 s, 3 intervals) later; another
    connection's instance stays."""
    async with open_test_broker(client_telemetry=True) as tb, tb.client() as staying:
        await subscribe(staying, interval="60000")
        kept = await get_subscriptions(staying)
        async with tb.client() as leaving:
            gone = await get_subscriptions(leaving)
            assert await push(leaving, gone, otlp({"a.b": 1.0})) == ErrorCode.none
            ids = {s.client_instance_id for s in tb.broker.client_metrics()}
            assert ids == {str(kept.client_instance_id), str(gone.client_instance_id)}
        await trio.testing.wait_all_tasks_blocked()  # the broker has seen the close
        assert [s.client_instance_id for s in tb.broker.client_metrics()] == [str(kept.client_instance_id)]
