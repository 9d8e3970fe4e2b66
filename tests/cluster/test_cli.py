"""``python -m trikafka --brokers 3``: a cluster for clients that are not Python.

librdkafka's own multi-broker tests cannot run here (its test suite ships in no package
available to this environment), so these tests do what they would check first: kcat and
confluent-kafka see three brokers, and data moves through a topic replicated on all three.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import trikafka
from tests.compat.support import KCAT, TIMEOUT, Deadline
from trikafka.cli import main
from trikafka.testing.process import broker_process

_LISTENING = re.compile(r"^\s+listening on PLAINTEXT://([\d.]+):(\d+)\s*$", re.M)


def test_brokers_must_be_positive(capsys):
    assert main(["--brokers", "0", "--in-memory"]) == 2
    assert "--brokers" in capsys.readouterr().err


def test_a_three_broker_cluster_process_serves_kcat_and_confluent_kafka(tmp_path, monkeypatch):
    # The child imports the trikafka under test, wherever the interpreter's own install points.
    monkeypatch.setenv("PYTHONPATH", str(Path(trikafka.__file__).parent.parent))
    with broker_process("--in-memory", "--brokers", "3", cwd=tmp_path) as process:
        # The summary line comes before the first "listening on" line, which means ready.
        addresses = re.search(r"bootstrap\.servers=(\S+)", process.output).group(1).split(",")
        assert len(set(addresses)) == 3 and addresses[0] == process.address

        listing = subprocess.run(
            [KCAT, "-L", "-b", process.address], capture_output=True, text=True, timeout=TIMEOUT, check=True
        ).stdout
        assert " 3 brokers:" in listing
        for node_id, address in enumerate(addresses, start=1):
            assert f"broker {node_id} at {address}" in listing

        bootstrap = ",".join(addresses)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        assert sorted(admin.list_topics(timeout=TIMEOUT).brokers) == [1, 2, 3]
        admin.create_topics([NewTopic("everywhere", num_partitions=3, replication_factor=3)])["everywhere"].result(
            TIMEOUT
        )
        topic = admin.list_topics("everywhere", timeout=TIMEOUT).topics["everywhere"]
        assert sorted(p.leader for p in topic.partitions.values()) == [1, 2, 3]
        assert all(sorted(p.isrs) == [1, 2, 3] for p in topic.partitions.values())

        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for i in range(30):
            producer.produce("everywhere", b"%d" % i, partition=i % 3)
        assert producer.flush(TIMEOUT) == 0
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cli", "auto.offset.reset": "earliest"})
        try:
            consumer.assign([TopicPartition("everywhere", p, 0) for p in range(3)])
            values: set[bytes] = set()
            deadline = Deadline()
            while len(values) < 30 and deadline:
                message = consumer.poll(0.5)
                if message is not None and not message.error():
                    values.add(message.value())
            assert values == {b"%d" % i for i in range(30)}
        finally:
            consumer.close()
        assert process.stop() == 0
    # Every broker's address is named at start-up.
    assert [f"{h}:{p}" for h, p in _LISTENING.findall(process.output)] == addresses
    assert len(re.findall(r"broker \d ready", process.output)) == 3


def test_the_docs_cluster_example_runs_as_written():
    root = Path(trikafka.__file__).parent.parent
    example = (root / "examples" / "cluster.py").read_text()
    assert example.startswith('"""')
    assert '--8<-- "examples/cluster.py"' in (root / "docs" / "clusters.md").read_text()  # shown whole
    result = subprocess.run(
        [sys.executable, str(root / "examples" / "cluster.py")],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "leader 1 ISR (1, 2, 3)"


def test_the_control_listener_reaches_each_broker_of_a_cluster_process(tmp_path, monkeypatch):
    import json
    import urllib.request

    monkeypatch.setenv("PYTHONPATH", str(Path(trikafka.__file__).parent.parent))
    with broker_process("--in-memory", "--brokers", "2", "--control-listener", "127.0.0.1:0", cwd=tmp_path) as process:
        control = re.search(r"control on (http://\S+)", process.output).group(1)
        body = json.dumps({"kind": "error", "api": "Metadata", "error": "REQUEST_TIMED_OUT", "count": 1}).encode()
        added = urllib.request.urlopen(
            urllib.request.Request(f"{control}/faults?broker=2", data=body, method="POST"), timeout=TIMEOUT
        )
        assert added.status == 201
        on_two = json.load(urllib.request.urlopen(f"{control}/faults?broker=2", timeout=TIMEOUT))
        on_one = json.load(urllib.request.urlopen(f"{control}/faults?broker=1", timeout=TIMEOUT))
        assert len(on_two["faults"]) == 1 and on_one["faults"] == []
        assert process.stop() == 0
