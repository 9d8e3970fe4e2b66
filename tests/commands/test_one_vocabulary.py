"""Counted and named alike in the commands, the console and the metrics.

One group-type vocabulary — Kafka's ``group_type`` (ListGroups v5, kafka-groups.sh's TYPE):
``classic``, ``consumer`` (KIP-848), ``share`` — in ``groups list``, ``groups describe``, their
``--json``, the console's group list and the metrics. Internal topics: ``cluster`` says
"Topics: 1 + 1 internal" where the console's overview says 1 and "+ 1 internal"."""

from __future__ import annotations

import re
import time
import urllib.request

import pytest

from tests.commands.support import confluent_produce, trikafka
from tests.web.test_metrics_scrape import scrape, value
from trikafka.testing.process import BrokerProcess

pytestmark = pytest.mark.compat


def _commit_one(bootstrap: str, group: str, **extra: str) -> None:
    _commit_one_from(bootstrap, "kinds", group, **extra)


def _commit_one_from(bootstrap: str, topic: str, group: str, **extra: str) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, **extra})
    consumer.subscribe([topic])
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                consumer.commit(message, asynchronous=False)
                return
        raise AssertionError(f"{group}: no record within 30 s")
    finally:
        consumer.close()


def test_classic_and_consumer_groups_are_named_alike_everywhere(tmp_path):
    broker = BrokerProcess("--in-memory", "--ui", "--override", "metrics.port=0", cwd=tmp_path)
    try:
        broker.wait_ready()
        web = broker.wait_for_output("metrics on").split("metrics on", 1)[1].strip().removesuffix("/metrics")
        b = broker.address
        assert trikafka("topics", "create", "kinds", bootstrap=b).code == 0
        confluent_produce(b, "kinds", [(None, b"x", 0)])
        _commit_one(b, "old-style")
        _commit_one(b, "new-style", **{"group.protocol": "consumer"})

        listed = {g["group"]: g for g in trikafka("groups", "list", "--json", bootstrap=b).json()}
        assert listed["old-style"] == {
            "group": "old-style",
            "type": "classic",
            "protocol_type": "consumer",
            "state": "Empty",
        }
        assert listed["new-style"]["type"] == "consumer"
        described = {
            g["group"]: g["type"]
            for g in trikafka("groups", "describe", "old-style", "new-style", "--json", bootstrap=b).json()
        }
        assert described == {"old-style": "classic", "new-style": "consumer"}
        table = trikafka("groups", "list", bootstrap=b).out
        assert re.search(r"^old-style\s+classic\s+consumer\s+Empty\s*$", table, re.M), table
        assert re.search(r"^new-style\s+consumer\s+", table, re.M), table
        human = trikafka("groups", "describe", "old-style", bootstrap=b).out
        assert "Type: classic" in human

        with urllib.request.urlopen(f"{web}/ui/groups", timeout=10) as page:
            html = page.read().decode()
        for group, kind in (("old-style", "classic"), ("new-style", "consumer")):
            row = re.search(rf"<tr>\s*<td><a [^>]*>{group}</a></td>\s*<td class=\"group-type\">(\w+)</td>", html)
            assert row and row.group(1) == kind, html

        samples = scrape(f"{web}/metrics")
        assert value(samples, "kafka_server_group_coordinator_metrics_group_count", protocol="classic") == 1
        assert value(samples, "kafka_server_group_coordinator_metrics_group_count", protocol="consumer") == 1
    finally:
        broker.stop(15)


def test_internal_topics_are_counted_alike_by_cluster_and_the_console(tmp_path):
    broker = BrokerProcess("--in-memory", "--ui", "--override", "metrics.port=0", cwd=tmp_path)
    try:
        broker.wait_ready()
        web = broker.wait_for_output("metrics on").split("metrics on", 1)[1].strip().removesuffix("/metrics")
        b = broker.address
        assert trikafka("topics", "create", "mine", "--partitions", "2", bootstrap=b).code == 0
        confluent_produce(b, "mine", [(None, b"x", 0)])
        _commit_one_from(b, "mine", "counted")  # __consumer_offsets now exists

        info = trikafka("cluster", "--json", bootstrap=b).json()
        assert (info["topics"], info["internal_topics"]) == (1, 1), info
        with urllib.request.urlopen(f"{web}/ui/", timeout=10) as page:
            html = page.read().decode()
        topics = re.search(r'id="topic-count">(\d+)</span>\s*<span class="note">\+ (\d+) internal', html)
        partitions = re.search(r'id="partition-count">(\d+)<', html)
        assert topics and (int(topics.group(1)), int(topics.group(2))) == (info["topics"], info["internal_topics"]), (
            html
        )
        assert partitions and int(partitions.group(1)) == info["partitions"]
        human = trikafka("cluster", bootstrap=b).out
        assert f"Topics: 1 + 1 internal  Partitions: {info['partitions']}" in human, human
    finally:
        broker.stop(15)
