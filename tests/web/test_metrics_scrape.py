"""``/metrics`` scraped after real traffic, and the shipped Grafana dashboard against it.

A broker process (``python -m trikafka --override metrics.port=0``) takes a confluent-kafka
producer, a consumer in a group that commits, then more records the group has not read; the
scrape is parsed with ``prometheus_client``'s own parser and checked number by number. The
dashboard in ``examples/grafana/`` is then read query by query: every series it names must be
in that scrape, with every label it matches on or groups by — so the dashboard cannot chart
a series the broker does not serve.
"""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from trikafka.testing.process import BrokerProcess

pytestmark = pytest.mark.compat

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "examples" / "grafana" / "trikafka-overview.json"
TOPIC, GROUP, RECORDS, UNREAD = "metrics-orders", "metrics-readers", 60, 7
#: Labels Prometheus adds at scrape time, not the target.
TARGET_LABELS = {"job", "instance"}


def scrape(url: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """sample name → [(labels, value)], parsed by prometheus_client's parser."""
    with urllib.request.urlopen(url, timeout=10) as reply:
        assert reply.status == 200
        assert reply.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = reply.read().decode()
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((sample.labels, sample.value))
    return samples


def value(samples, name: str, **labels: str) -> float:
    found = [v for got, v in samples.get(name, []) if all(got.get(k) == w for k, w in labels.items())]
    assert len(found) == 1, f"{name}{labels}: {found} in {samples.get(name)}"
    return found[0]


@pytest.fixture(scope="module")
def traffic(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, dict]]:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    broker = BrokerProcess("--in-memory", "--override", "metrics.port=0", cwd=tmp_path_factory.mktemp("metrics"))
    try:
        broker.wait_ready()
        url = broker.wait_for_output("metrics on").split("metrics on", 1)[1].strip()
        admin = AdminClient({"bootstrap.servers": broker.address})
        admin.create_topics([NewTopic(TOPIC, num_partitions=3, replication_factor=1)])[TOPIC].result(30)
        producer = Producer({"bootstrap.servers": broker.address, "linger.ms": 5})
        for i in range(RECORDS):
            producer.produce(TOPIC, key=str(i), value=b"v" * 100, partition=i % 3)
        assert producer.flush(30) == 0
        consumer = Consumer(
            {
                "bootstrap.servers": broker.address,
                "group.id": GROUP,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "client.id": "metrics-test-reader",
            }
        )
        consumer.subscribe([TOPIC])
        seen = 0
        for _ in range(300):  # bounded: each poll waits at most 0.1 s
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                seen += 1
            if seen == RECORDS:
                break
        assert seen == RECORDS
        consumer.commit(asynchronous=False)
        for _ in range(UNREAD):  # the lag: produced after the commit, never read
            producer.produce(TOPIC, value=b"late", partition=0)
        assert producer.flush(30) == 0
        committed = consumer.committed([TopicPartition(TOPIC, p) for p in range(3)], timeout=30)
        samples = scrape(url)  # while the member is in the group: its labels are known
        consumer.close()
        yield broker, {"samples": samples, "committed": {tp.partition: tp.offset for tp in committed}, "url": url}
    finally:
        broker.stop(15)


def test_topic_traffic_is_counted(traffic):
    _, seen = traffic
    s = seen["samples"]
    assert value(s, "kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC) == RECORDS + UNREAD
    assert value(s, "kafka_server_brokertopicmetrics_bytesin_total", topic=TOPIC) > RECORDS * 100
    assert value(s, "kafka_server_brokertopicmetrics_bytesout_total", topic=TOPIC) > RECORDS * 100
    assert value(s, "kafka_server_brokertopicmetrics_totalfetchrequests_total", topic=TOPIC) >= 3
    # the all-topics series (no topic label) is the sum, as the JMX MBean without topic= is
    unlabelled = [v for labels, v in s["kafka_server_brokertopicmetrics_messagesin_total"] if "topic" not in labels]
    assert unlabelled == [RECORDS + UNREAD]


def test_requests_and_their_time_split(traffic):
    _, seen = traffic
    s = seen["samples"]
    assert value(s, "kafka_network_requestmetrics_requests_total", request="Produce") >= 2
    assert value(s, "kafka_network_requestmetrics_requests_total", request="OffsetCommit") >= 1
    for part in (
        "requestqueuetimems",
        "localtimems",
        "remotetimems",
        "responsequeuetimems",
        "responsesendtimems",
        "totaltimems",
    ):
        for quantile in ("0.50", "0.75", "0.95", "0.98", "0.99", "0.999"):
            assert value(s, f"kafka_network_requestmetrics_{part}", request="Produce", quantile=quantile) >= 0
        assert value(s, f"kafka_network_requestmetrics_{part}_count", request="Produce") >= 2
    p50 = value(s, "kafka_network_requestmetrics_totaltimems", request="Fetch", quantile="0.50")
    p99 = value(s, "kafka_network_requestmetrics_totaltimems", request="Fetch", quantile="0.99")
    assert 0 < p50 <= p99


def test_partitions_logs_and_connections(traffic):
    _, seen = traffic
    s = seen["samples"]
    # three partitions of the topic and __consumer_offsets' 50, all led here
    assert value(s, "kafka_server_replicamanager_partitioncount") == 53
    assert value(s, "kafka_server_replicamanager_leadercount") == 53
    assert value(s, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(s, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    ends = {p: value(s, "kafka_log_log_logendoffset", topic=TOPIC, partition=str(p)) for p in range(3)}
    assert ends == {0: RECORDS / 3 + UNREAD, 1: RECORDS / 3, 2: RECORDS / 3}
    assert value(s, "kafka_log_log_size", topic=TOPIC, partition="1") > RECORDS / 3 * 100
    assert value(s, "kafka_partition_latest_offset", topic=TOPIC, partition="0") == RECORDS / 3 + UNREAD
    for spelling in ("socketservermetrics", "socket_server_metrics"):
        assert value(s, f"kafka_server_{spelling}_connection_count", listener="PLAINTEXT") >= 2
        assert value(s, f"kafka_server_{spelling}_connection_creation_total", listener="PLAINTEXT") >= 2


def test_request_memory_pool_of_the_dev_broker(traffic):
    """queued.max.request.bytes: the dev broker bounds it (256 MiB, Kafka's default is -1) and
    serves Kafka's SocketServer MemoryPoolAvailable / MemoryPoolUsed; idle, it is all back."""
    _, seen = traffic
    s = seen["samples"]
    assert value(s, "kafka_network_socketserver_memorypoolavailable") == 256 * 1024 * 1024
    assert value(s, "kafka_network_socketserver_memorypoolused") == 0


def test_group_offsets_and_lag_as_kafka_lag_exporter_names_them(traffic):
    broker, seen = traffic
    s = seen["samples"]
    assert seen["committed"] == {0: RECORDS // 3, 1: RECORDS // 3, 2: RECORDS // 3}
    for p in range(3):
        labels = dict(group=GROUP, topic=TOPIC, partition=str(p), cluster_name=broker.cluster_id)
        assert value(s, "kafka_consumergroup_group_offset", **labels) == RECORDS // 3
        assert value(s, "kafka_consumergroup_group_lag", **labels) == (UNREAD if p == 0 else 0)
        owner = next(
            got for got, _ in s["kafka_consumergroup_group_lag"] if got["partition"] == str(p) and got["group"] == GROUP
        )
        assert owner["client_id"] == "metrics-test-reader" and owner["consumer_id"].startswith("metrics-test-reader")
    assert value(s, "kafka_consumergroup_group_max_lag", group=GROUP) == UNREAD
    assert value(s, "kafka_consumergroup_group_sum_lag", group=GROUP) == UNREAD
    assert value(s, "kafka_consumergroup_group_topic_sum_lag", group=GROUP, topic=TOPIC) == UNREAD
    assert value(s, "kafka_coordinator_group_groupmetadatamanager_numgroupsstable") == 1


def _queries(dashboard: dict) -> Iterator[str]:
    def walk(panels: list) -> Iterator[str]:
        for panel in panels:
            yield from (t["expr"] for t in panel.get("targets", ()) if t.get("expr"))
            yield from walk(panel.get("panels", ()))

    yield from walk(dashboard["panels"])
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            yield variable["definition"]


def test_every_series_the_dashboard_queries_is_served(traffic):
    _, seen = traffic
    s = seen["samples"]
    dashboard = json.loads(DASHBOARD.read_text())
    queries = list(_queries(dashboard))
    assert len(queries) > 30  # the walk found the panels
    checked, missing = set(), []
    for query in queries:
        names = set(re.findall(r"\b(kafka_[a-z0-9_]+)\b", query))
        assert names, query
        for name in names:
            checked.add(name)
            if name not in s:
                missing.append(f"{name} (in {query})")
        # Exact matchers (without dashboard variables) must match a served sample.
        for name, matchers in re.findall(r"\b(kafka_[a-z0-9_]+)\{([^}]*)\}", query):
            exact = dict(re.findall(r'(\w+)="([^"$]*)"', matchers))
            exact = {k: v for k, v in exact.items() if k not in TARGET_LABELS}
            if name in s and not any(all(got.get(k) == v for k, v in exact.items()) for got, _ in s[name]):
                missing.append(f"{name}{exact}")
        # Labels grouped by or read by a variable must exist on the series.
        labels = {lab.strip() for group in re.findall(r"by \(([^)]*)\)", query) for lab in group.split(",")}
        labels |= set(re.findall(r"label_values\([^,]+,\s*(\w+)\)", query))
        for label in labels - TARGET_LABELS:
            if not any(label in got for n in names for got, _ in s.get(n, [])):
                missing.append(f"label {label} on {sorted(names)}")
    assert missing == []
    assert "kafka_consumergroup_group_lag" in checked and "kafka_network_requestmetrics_totaltimems" in checked


def test_each_broker_of_a_cluster_serves_its_own_metrics(tmp_path):
    from confluent_kafka.admin import AdminClient, NewTopic

    broker = BrokerProcess("--in-memory", "--brokers", "2", "--override", "metrics.port=0", cwd=tmp_path)
    try:
        broker.wait_ready()
        broker.wait_for_output("Ctrl-C stops gracefully")
        urls = [line.split("metrics on", 1)[1].strip() for line in broker.output.splitlines() if "metrics on" in line]
        assert len(urls) == 2 and urls[0] != urls[1]
        admin = AdminClient({"bootstrap.servers": broker.address})
        admin.create_topics([NewTopic("spread", num_partitions=4, replication_factor=2)])["spread"].result(30)
        scrapes = [scrape(url) for url in urls]
    finally:
        assert broker.stop(15) == 0
    assert sum(value(s, "kafka_server_replicamanager_leadercount") for s in scrapes) == 4
    assert [value(s, "kafka_server_replicamanager_partitioncount") for s in scrapes] == [4, 4]
    assert sum(value(s, "kafka_controller_kafkacontroller_activecontrollercount") for s in scrapes) == 1
