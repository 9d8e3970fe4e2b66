"""Share state over the HTTP control interface, for suites not written in Python: a
``python -m trikafka`` process, a confluent-kafka ShareConsumer accepting what it reads, and
``/wait/share-group-state`` and ``/wait/share-records`` answering when the broker gets there.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from tests.compat.support import Deadline
from trikafka.testing.process import broker_process

pytestmark = pytest.mark.compat
TIMEOUT = 30


def get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_share_waits_over_the_control_interface(tmp_path):
    with broker_process("--in-memory", "--control-listener", "127.0.0.1:0",
                        "--override", "group.share.heartbeat.interval.ms=500",
                        "--override", "group.share.min.heartbeat.interval.ms=500",
                        "--override", "group.share.assignment.interval.ms=0", cwd=tmp_path) as broker:
        control, bootstrap = broker.control_url, broker.address
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("jobs", 1, 1)])["jobs"].result(TIMEOUT)
        group = ConfigResource(ConfigResource.Type.GROUP, "crew", incremental_configs=[
            ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([group])[group].result(TIMEOUT)
        producer = Producer({"bootstrap.servers": bootstrap})
        for i in range(3):
            producer.produce("jobs", value=b"%d" % i, partition=0)
        assert producer.flush(TIMEOUT) == 0
        too_soon = get(f"{control}/wait/share-records?group=crew&topic=jobs&partition=0&at_least=3&timeout_ms=100")
        assert too_soon[0] == 408
        consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "crew"})
        consumer.subscribe(["jobs"])
        try:
            status, body = get(f"{control}/wait/share-group-state?group=crew&state=Stable&members=1&timeout_ms=20000")
            assert status == 200 and body["reached"]["state"] == "Stable"
            got = 0
            deadline = Deadline(TIMEOUT)
            while got < 3:
                assert deadline, "records not delivered"
                got += sum(1 for m in consumer.poll(0.5) if m.error() is None)
            consumer.commit_sync(TIMEOUT)
            status, body = get(f"{control}/wait/share-records?group=crew&topic=jobs&partition=0"
                               f"&state=Acknowledged&at_least=3&timeout_ms=20000")
            assert status == 200 and body["reached"]["start_offset"] == 3
        finally:
            consumer.close()
        bad = get(f"{control}/wait/share-records?group=crew&topic=jobs&partition=0&state=Done&at_least=1")
        assert bad[0] == 400 and "Done" in bad[1]["error"]
        assert broker.stop() == 0
