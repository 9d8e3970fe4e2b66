"""Racks on a cluster's handles and Kafka's rack-aware replica placement (KIP-36).

``open_cluster(..., racks=[...])``, ``--racks`` and ``@pytest.mark.trikafka(racks=...)`` give
each broker its rack; every handle shows it (``.rack``), Metadata carries it, and a new
topic's replicas are spread over the racks as Kafka's rack-aware assignment spreads them.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from trikafka import open_cluster
from trikafka.cli import build_config, parse_args
from trikafka.cluster.placement import rack_alternated, rack_aware_replicas
from trikafka.cluster.state import ClusterState
from trikafka.errors import ConfigError

from .support import connected, create_topic, metadata

SIX = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}


def test_brokers_are_laid_out_alternating_by_rack() -> None:
    assert rack_alternated([1, 2, 3, 4, 5, 6], SIX) == [1, 3, 5, 2, 4, 6]
    assert rack_alternated([1, 2, 3], {1: "a", 2: "a", 3: "b"}) == [1, 3, 2]


@pytest.mark.parametrize("factor", [2, 3])
def test_each_partition_spans_as_many_racks_as_it_can(factor: int) -> None:
    placed = [rack_aware_replicas(list(SIX), SIX, p, factor) for p in range(12)]
    for replicas in placed:
        assert len(set(replicas)) == factor
        assert len({SIX[b] for b in replicas}) == factor  # never two replicas in one rack
    assert Counter(r[0] for r in placed) == {b: 2 for b in SIX}  # leaders evenly over brokers
    assert Counter(b for r in placed for b in r) == {b: 2 * factor for b in SIX}  # and replicas


def test_more_replicas_than_racks_use_every_rack_first() -> None:
    racks = {1: "a", 2: "a", 3: "b"}
    for p in range(6):
        replicas = rack_aware_replicas([1, 2, 3], racks, p, 2)
        assert {racks[b] for b in replicas} == {"a", "b"}
        assert {racks[b] for b in rack_aware_replicas([1, 2, 3], racks, p, 3)} == {"a", "b"}


def test_without_racks_placement_stays_round_robin() -> None:
    state = ClusterState([1, 2, 3], internal_replication_factor=1)
    state.assign("t", range(3), 2)
    assert [state.get("t", p).replicas for p in range(3)] == [(1, 2), (2, 3), (3, 1)]
    racked = ClusterState([1, 2, 3, 4], internal_replication_factor=1, racks={1: "x", 2: "x", 3: "y", 4: "y"})
    racked.assign("t", range(4), 2)
    assert all(len({racked.racks[b] for b in racked.get("t", p).replicas}) == 2 for p in range(4))


async def test_open_cluster_racks_show_on_handles_and_in_metadata_and_place_replicas(autojump_clock: Any) -> None:
    racks = ["a", "a", "b", "b", "c", "c"]
    async with open_cluster(brokers=6, transport="memory", racks=racks) as cluster:
        assert [cluster.broker(n).rack for n in cluster.broker_ids()] == racks
        async with connected(cluster, 1) as client:
            answer = await metadata(client, None)
            assert {b.node_id: b.rack for b in answer.brokers} == dict(zip(range(1, 7), racks, strict=True))
            created = await create_topic(client, "spread", partitions=6, replication_factor=3)
            assert created.error_code == ErrorCode.none
            placed = await metadata(client, ["spread"])
            for partition in placed.topics[0].partitions:
                assert sorted(racks[b - 1] for b in partition.replica_nodes) == ["a", "b", "c"]


async def test_racks_must_be_one_per_broker(autojump_clock: Any) -> None:
    with pytest.raises(ConfigError, match=r"racks.*3 rack ids"):
        async with open_cluster(brokers=3, transport="memory", racks=["a", "b"]):
            pass


def test_the_cli_racks_flag_sets_broker_rack() -> None:
    config = build_config(parse_args(["--in-memory", "--brokers", "3", "--racks", "a,b,c"]))
    assert config.broker_rack == "a,b,c"
    with pytest.raises(ConfigError, match="broker.rack"):
        build_config(parse_args(["--in-memory", "--racks", "a,,c"]))


@pytest.mark.trikafka(racks=["east", "west"])
def test_thread_hosted_handles_show_their_rack(kafka_broker: Any, kafka_cluster: Any) -> None:
    assert kafka_broker.rack == "east"  # a lone broker takes the first entry
    cluster = kafka_cluster(brokers=2)
    assert [b.rack for b in cluster.brokers] == ["east", "west"]
    other = kafka_cluster(brokers=3, racks=["r1", "r2", "r3"])
    assert [b.rack for b in other.brokers] == ["r1", "r2", "r3"]


def test_a_cluster_process_with_racks_spreads_replicas(tmp_path: Any, monkeypatch: Any) -> None:
    """``python -m trikafka --brokers 4 --racks a,a,b,b``: confluent-kafka sees the racks,
    and a topic with replication factor 2 has a replica in each rack for every partition."""
    from pathlib import Path

    from confluent_kafka.admin import AdminClient, NewTopic

    import trikafka
    from tests.compat.support import TIMEOUT
    from trikafka.testing.process import broker_process

    monkeypatch.setenv("PYTHONPATH", str(Path(trikafka.__file__).parent.parent))
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    with broker_process("--in-memory", "--brokers", "4", "--racks", "a,a,b,b", cwd=tmp_path) as process:
        admin = AdminClient({"bootstrap.servers": process.address})
        admin.create_topics([NewTopic("racked", num_partitions=4, replication_factor=2)])["racked"].result(TIMEOUT)
        topic = admin.list_topics("racked", timeout=TIMEOUT).topics["racked"]
        for partition in topic.partitions.values():
            assert sorted(racks[b] for b in partition.replicas) == ["a", "b"]
        assert sorted(p.leader for p in topic.partitions.values()) == [1, 2, 3, 4]
        nodes = admin.describe_cluster().result(TIMEOUT).nodes
        assert {node.id: node.rack for node in nodes} == racks
