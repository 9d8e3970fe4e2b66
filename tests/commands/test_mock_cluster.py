"""The same commands against librdkafka's mock cluster (benchmarks/mock_cluster.py): Apache
Kafka's behaviour as librdkafka models it, where the mock has the API.

The mock serves Metadata, Produce, Fetch, ListOffsets, the group APIs a consumer needs and
OffsetCommit/OffsetFetch; it has no CreateTopics, DeleteTopics, DescribeConfigs, ListGroups,
DescribeGroups or DescribeLogDirs. Commands that need those fail in one line with exit 1
naming the API; ``topics describe`` and ``top`` leave sizes blank.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.commands.support import ROOT, confluent_consume, confluent_produce, trikafka


@pytest.fixture
def mock_cluster():
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.mock_cluster"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        ready = process.stdout.readline().split()
        assert ready and ready[0] == "READY", ready
        process.bootstrap = ready[1]
        process.stdin.write("topic mocked 3\n")
        process.stdin.flush()
        assert process.stdout.readline().strip() == "ok"
        # A first join is answered at once, not after Kafka's 3 s group.initial.rebalance.delay.ms
        # (trikafka's dev default is 0 too): the commands are tested here, not that wait.
        process.stdin.write("group-initial-rebalance-delay 0\n")
        process.stdin.flush()
        assert process.stdout.readline().strip() == "ok"
        yield process
    finally:
        process.stdin.close()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()


def test_commands_against_librdkafka_mock_cluster(mock_cluster):
    b = mock_cluster.bootstrap
    confluent_produce(b, "mocked", [(b"k", b"from-confluent-%d" % i, i % 3) for i in range(6)])

    listed = trikafka("topics", "list", "--json", bootstrap=b)
    assert listed.code == 0, listed
    assert listed.json() == [{"name": "mocked", "partitions": 3, "replication_factor": 1, "internal": False}]
    [topic] = trikafka("topics", "describe", "mocked", "--json", bootstrap=b).json()
    assert [(p["partition"], p["high_watermark"], p["size_bytes"]) for p in topic["partitions"]] == [
        (0, 2, None),
        (1, 2, None),
        (2, 2, None),
    ]
    cluster = trikafka("cluster", "--json", bootstrap=b).json()
    assert cluster["cluster_id"].startswith("mockCluster") and [x["node_id"] for x in cluster["brokers"]] == [1]

    produced = trikafka("produce", "mocked", "-K", "=", "-p", "1", input="a=1\nb=2\n", bootstrap=b)
    assert produced.code == 0, produced
    read = confluent_consume(b, "mocked", 8)
    assert [(m.key(), m.value()) for m in read if m.partition() == 1 and m.key() != b"k"] == [
        (b"a", b"1"),
        (b"b", b"2"),
    ]

    consumed = trikafka("consume", "mocked", "-e", "--format", r"%p:%k:%s\n", bootstrap=b)
    assert consumed.code == 0, consumed
    assert sorted(consumed.out.splitlines()) == sorted(
        [f"{i % 3}:k:from-confluent-{i}" for i in range(6)] + ["1:a:1", "1:b:2"]
    )
    grouped = trikafka("consume", "mocked", "--group", "mock-readers", "-e", bootstrap=b)
    assert len(grouped.out.splitlines()) == 8, grouped
    # A second member of the same group is not run here: the Trio consumer's LeaveGroup v3
    # answer from the mock does not parse, so the first member stays in the mock's group
    # until session.timeout.ms and a second join waits for it (see the branch report).

    top = trikafka("top", "--json", "-n", "1", bootstrap=b)
    assert top.code == 0, top
    assert json.loads(top.out)["topics"] == [
        {"name": "mocked", "partitions": 3, "size": None, "end_offset": 8, "messages_per_s": None}
    ]

    for args, api in (
        (("groups", "list"), "LIST_GROUPS"),
        (("groups", "describe", "mock-readers"), "DESCRIBE_GROUPS"),
        (("topics", "create", "new"), "CREATE_TOPICS"),
        (("configs", "describe", "topic", "mocked"), "DESCRIBE_CONFIGS"),
    ):
        run = trikafka(*args, bootstrap=b)
        assert run.code == 1, (args, run)
        assert (
            run.err.startswith("trikafka: UNSUPPORTED_VERSION")
            and f"({api})" in run.err
            and len(run.err.splitlines()) == 1
        ), (args, run)
