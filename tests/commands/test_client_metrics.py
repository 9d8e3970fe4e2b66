"""``client-metrics`` as kafka-client-metrics.sh, and confluent-kafka's librdkafka pushing its
metrics once a subscription matches it: seen by ``wait_for_client_metric`` and on ``/metrics``."""

from __future__ import annotations

import urllib.request

import pytest
from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families

from .support import trikafka

PRODUCER_METRICS = "org.apache.kafka.producer."


def test_alter_list_describe_and_delete_a_subscription(kafka_broker):
    b = kafka_broker.bootstrap_servers
    run = trikafka("client-metrics", "alter", "--name", "prod", "--metrics", PRODUCER_METRICS,
                   "--interval", "1000", "--match", "client_software_name=confluent.*", bootstrap=b)
    assert run.code == 0 and "Altered client metrics config for prod." in run.out, run
    assert trikafka("client-metrics", "list", bootstrap=b).out.split() == ["prod"]
    described = trikafka("client-metrics", "describe", "--name", "prod", bootstrap=b).out
    assert described.splitlines() == [
        "Client metrics configs for prod are:",
        "  interval.ms=1000",
        "  match=client_software_name=confluent.*",
        f"  metrics={PRODUCER_METRICS}",
    ]
    bad = trikafka("client-metrics", "alter", "--name", "prod", "--interval", "5", bootstrap=b)
    assert bad.code == 1 and "Invalid value 5 for interval.ms" in bad.err, bad
    usage = trikafka("client-metrics", "alter", "--interval", "500", bootstrap=b)
    assert usage.code == 2 and "--name NAME and --generate-name" in usage.err, usage
    assert trikafka("client-metrics", "delete", "--name", "prod", bootstrap=b).code == 0
    assert trikafka("client-metrics", "list", "--json", bootstrap=b).json() == []


@pytest.mark.trikafka(config={"metrics.port": 0}, client_telemetry=True)
def test_a_confluent_producer_pushes_its_metrics(kafka_broker):
    b = kafka_broker.bootstrap_servers
    run = trikafka("client-metrics", "alter", "--name", "producers", "--metrics", PRODUCER_METRICS,
                   "--interval", "500", bootstrap=b)
    assert run.code == 0, run
    producer = Producer({"bootstrap.servers": b, "client.id": "billing"})
    for _ in range(20):
        producer.produce("telemetry-orders", b"order")
    assert producer.flush(30) == 0
    seen = kafka_broker.wait_for_client_metric(f"{PRODUCER_METRICS}record.queue.time.avg", client_id="billing")
    assert seen.client_software_name == "confluent-kafka-python"
    assert f"{PRODUCER_METRICS}node.request.latency.max" in seen.metrics
    assert all(name.startswith(PRODUCER_METRICS) for name in seen.metrics)  # only what was asked for
    url = kafka_broker.thread.call(lambda: kafka_broker.broker.http_server.url)
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    samples = {s.name: s for f in text_string_to_metric_families(text) for s in f.samples}
    queue_time = samples["org_apache_kafka_producer_record_queue_time_avg"]
    assert queue_time.labels["client_id"] == "billing"
    assert queue_time.labels["client_instance_id"] == seen.client_instance_id
    assert queue_time.labels["client_software_name"] == "confluent-kafka-python"


@pytest.mark.trikafka(client_telemetry=True)
def test_a_cluster_sees_pushes_to_any_of_its_brokers(kafka_cluster):
    cluster = kafka_cluster(brokers=2)
    b = cluster.bootstrap_servers
    assert trikafka("client-metrics", "alter", "--name", "all", "--metrics", "*", "--interval", "500",
                    bootstrap=b).code == 0
    producer = Producer({"bootstrap.servers": b, "client.id": "fleet"})
    producer.produce("telemetry-fleet", b"x")
    assert producer.flush(30) == 0
    seen = cluster.wait_for_client_metric(PRODUCER_METRICS, client_id="fleet")
    assert seen.requested_metrics == ("*",)
    assert [c.client_id for c in cluster.brokers[1].client_metrics() if c.client_id == "fleet"] == ["fleet"]


def test_it_says_how_to_turn_telemetry_on_when_the_broker_has_it_off(kafka_broker):
    b = kafka_broker.bootstrap_servers
    run = trikafka("client-metrics", "alter", "--name", "prod", "--metrics", "*", bootstrap=b)
    assert run.code == 0 and "Altered client metrics config for prod." in run.out, run
    assert "client.telemetry.enable=false" in run.err and "--client-telemetry" in run.err, run
    listed = trikafka("client-metrics", "list", bootstrap=b)
    assert listed.out.split() == ["prod"] and "client.telemetry.enable" in listed.err


@pytest.mark.trikafka(client_telemetry=True)
def test_no_word_about_it_when_telemetry_is_on(kafka_broker):
    run = trikafka("client-metrics", "list", bootstrap=kafka_broker.bootstrap_servers)
    assert run.code == 0 and "telemetry" not in run.err, run
