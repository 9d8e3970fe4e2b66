"""A KIP-848 group (confluent-kafka, ``group.protocol=consumer``) where a developer looks.

DescribeGroups answers GROUP_ID_NOT_FOUND for a consumer-protocol group (as Kafka does), so
every view must ask ConsumerGroupDescribe (API 69) for it, as kafka-consumer-groups does. One
broker process (``python -m trikafka --ui`` with ``/metrics``), one live confluent-kafka member
owning both partitions of a topic and committed at 4 and 10 of 10 (lag 6 and 0); then the
same member, partitions and lag in ``groups describe --json``, in the console's group page in
a headless Chromium and in ``/metrics``' kafka-lag-exporter series.
"""

from __future__ import annotations

import json
import shutil
import time
import urllib.parse
from collections.abc import Iterator

import attrs
import pytest

from tests.commands.support import trikafka
from tests.console.support import _chromium
from tests.web.test_metrics_scrape import scrape, value
from trikafka.testing.process import BrokerProcess

pytestmark = pytest.mark.compat

TOPIC, GROUP, CLIENT = "kip848-orders", "kip848-readers", "kip848-app"
IDLE_GROUP = "kip848-idle"
WAIT_S = 30.0


@attrs.define
class Site:
    broker: BrokerProcess
    ui: str
    metrics: str
    member_id: str


def _member(bootstrap: str, group: str, client_id: str):
    """A ``group.protocol=consumer`` member holding both partitions of TOPIC."""
    from confluent_kafka import Consumer

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer", "client.id": client_id,
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
    })
    consumer.subscribe([TOPIC])
    deadline = time.monotonic() + WAIT_S
    while len(consumer.assignment()) < 2 and time.monotonic() < deadline:
        consumer.poll(0.2)  # the assignment arrives through the heartbeat, applied in poll
    assert len(consumer.assignment()) == 2, f"no assignment: {consumer.assignment()}"
    return consumer


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    from confluent_kafka import Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    broker = BrokerProcess(
        "--in-memory", "--ui", "--override", "metrics.port=0",
        "--override", "group.consumer.heartbeat.interval.ms=500",
        "--override", "group.consumer.min.heartbeat.interval.ms=500",
        cwd=tmp_path_factory.mktemp("kip848ui"),
    )
    try:
        broker.wait_ready()
        ui = broker.wait_for_output("  ui on ").split("ui on", 1)[1].strip()
        metrics = broker.wait_for_output("metrics on").split("metrics on", 1)[1].strip()
        b = broker.bootstrap
        admin = AdminClient({"bootstrap.servers": b})
        for future in admin.create_topics([NewTopic(TOPIC, 2, 1)]).values():
            future.result(WAIT_S)
        producer = Producer({"bootstrap.servers": b, "linger.ms": 0})
        for i in range(20):
            producer.produce(TOPIC, value=b"r%d" % i, partition=i % 2)
        assert producer.flush(WAIT_S) == 0
        consumer, idle = _member(b, GROUP, CLIENT), _member(b, IDLE_GROUP, "idle-app")
        try:
            consumer.commit(offsets=[TopicPartition(TOPIC, 0, 4), TopicPartition(TOPIC, 1, 10)], asynchronous=False)
            yield Site(broker, ui, metrics, consumer.memberid())
        finally:
            consumer.close()
            idle.close()
    finally:
        assert broker.stop() == 0, broker.output


def test_groups_describe_shows_members_and_lag(site):
    b = site.broker.bootstrap
    described = trikafka("groups", "describe", GROUP, "--json", bootstrap=b)
    assert described.code == 0, described
    [group] = described.json()
    assert (group["type"], group["state"], group["protocol_type"], group["lag"]) == (
        "consumer",
        "Stable",
        "consumer",
        6,
    )
    [member] = group["members"]
    assert (member["member_id"], member["client_id"]) == (site.member_id, CLIENT)
    assert member["host"].endswith("127.0.0.1") and member["member_epoch"] > 0
    assert member["partitions"] == [[TOPIC, 0], [TOPIC, 1]]
    assert [(r["partition"], r["committed"], r["end"], r["lag"], r["member_id"]) for r in group["offsets"]] == [
        (0, 4, 10, 6, site.member_id), (1, 10, 10, 0, site.member_id),
    ]
    human = trikafka("groups", "describe", GROUP, bootstrap=b)
    assert "Type: consumer" in human.out and "State: Stable" in human.out and CLIENT in human.out, human


def test_top_groups_panel_shows_members_and_lag(site):
    run = trikafka("top", "--json", "-n", "1", bootstrap=site.broker.bootstrap)
    assert run.code == 0, run
    [group] = [g for g in json.loads(run.out)["groups"] if g["group"] == GROUP]
    assert (group["state"], group["members"], group["lag"]) == ("Stable", 1, 6)


def test_console_group_page_shows_member_and_partitions(site):
    missing = [name for name in ("chromium", "chromedriver") if shutil.which(name) is None]
    assert not missing, f"{missing} not found: apt-get install chromium chromium-driver (make system-deps)"
    driver = _chromium()
    try:
        driver.get(f"{site.ui}/groups/{urllib.parse.quote(GROUP, safe='')}")
        text = lambda element_id: driver.find_element("id", element_id).text  # noqa: E731
        assert (text("state"), text("group-type"), text("member-count"), text("total-lag")) == (
            "Stable",
            "consumer",
            "1",
            "6",
        )
        rows = driver.execute_script(
            "return Array.from(document.querySelectorAll(arguments[0]))"
            ".map(row => Array.from(row.cells).map(cell => cell.innerText.trim()))", "#members tbody tr",
        )
        [member] = rows
        assert member[0] == CLIENT and member[2] == site.member_id
        assert member[3] == f"{TOPIC}: 0, 1"
    finally:
        driver.quit()


def test_metrics_lag_series_name_the_consumer_protocol_member(site):
    samples = scrape(site.metrics)
    labels = {"group": GROUP, "topic": TOPIC, "partition": "0"}
    assert value(samples, "kafka_consumergroup_group_lag", **labels) == 6
    [(got, _)] = [
        s for s in samples["kafka_consumergroup_group_lag"] if s[0]["group"] == GROUP and s[0]["partition"] == "0"
    ]
    assert (got["consumer_id"], got["client_id"]) == (site.member_id, CLIENT)
    assert value(samples, "kafka_consumergroup_group_sum_lag", group=GROUP) == 6
    assert value(samples, "kafka_consumergroup_members", group=GROUP, state="Stable") == 1
    # A consumer-protocol group that never committed has members all the same.
    assert value(samples, "kafka_consumergroup_members", group=IDLE_GROUP, state="Stable") == 1
