"""ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments on one broker, and
the request shapes real clients do not send (an empty replica list, KIP-860's
``allow_replication_factor_change=false``, an unknown election type) on an in-memory cluster.

One broker answers as a one-broker Kafka does: its replica is the preferred leader and leads
(ELECTION_NOT_NEEDED), the only valid assignment is itself (done at once), nothing is ever in
progress (NO_REASSIGNMENT_IN_PROGRESS on cancel, an empty list).
"""

from __future__ import annotations

from tests.cluster.support import batch, connected
from tests.cluster.support import create_topic as create_replicated_topic
from tests.cluster.support import produce as produce_replicated
from trikafka import open_cluster
from trikafka.errors import ErrorCode
from trikafka.testing import open_test_broker

from .test_topics_and_data import create_topic, request, versions


def reassign(topic: str, partition: int, replicas, version: int = 0, **extra):
    return request(45, version, timeout=1000, topics=[
        {"name": topic, "partitions": [{"partition_index": partition, "replicas": replicas}]}], **extra)


def elect(election_type: int, topics, version: int = 2):
    fields = {"topic_partitions": topics, "timeout": 1000}
    if version >= 1:
        fields["election_type"] = election_type
    return request(43, version, **fields)


async def test_one_broker_answers_as_a_one_broker_kafka(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        await create_topic(client, "solo", partitions=2)
        for version in versions(43):
            response = await client.request(elect(0, [{"topic": "solo", "partitions": [0, 1, 7]}], version))
            (result,) = response.replica_election_results
            assert [(p.partition_id, p.error_code) for p in result.partition_result] == [
                (0, ErrorCode.election_not_needed), (1, ErrorCode.election_not_needed),
                (7, ErrorCode.unknown_topic_or_partition)]
            assert result.partition_result[0].error_message == "Leader election not needed for topic partition."
            assert result.partition_result[2].error_message == "No such partition as solo-7"
        everything = await client.request(elect(1, None))
        assert [(r.topic, r.partition_result) for r in everything.replica_election_results] == [("solo", ())]

        for replicas, code in [([1], ErrorCode.none), ([2], ErrorCode.invalid_replica_assignment),
                               ([], ErrorCode.invalid_replica_assignment),
                               (None, ErrorCode.no_reassignment_in_progress)]:
            response = await client.request(reassign("solo", 0, replicas))
            (partition,) = response.responses[0].partitions
            assert partition.error_code == code, replicas
        response = await client.request(reassign("solo", 0, [2]))
        assert response.responses[0].partitions[0].error_message == (
            "The manual partition assignment includes broker 2, but no such broker is registered.")
        response = await client.request(reassign("gone", 0, [1]))
        assert response.responses[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition
        assert response.responses[0].partitions[0].error_message == "Unable to find a topic named gone."

        listed = await client.request(request(46, 0, timeout=1000, topics=None))
        assert listed.error_code == ErrorCode.none and listed.topics == ()

        bad_type = await client.request(elect(2, None))
        assert bad_type.error_code == ErrorCode.invalid_request


async def test_replication_factor_change_refused_when_not_allowed(autojump_clock):
    async with open_cluster(3, transport="memory") as cluster, connected(cluster) as client:
        await create_replicated_topic(client, "rf", replication_factor=2)
        replicas = list(cluster.leadership("rf", 0).replicas)
        refused = await client.request(reassign("rf", 0, [1, 2, 3], version=1, allow_replication_factor_change=False))
        (partition,) = refused.responses[0].partitions
        assert partition.error_code == ErrorCode.invalid_replication_factor
        assert cluster.leadership("rf", 0).replicas == tuple(replicas)
        same_size = [r for r in (1, 2, 3) if r != replicas[0]]
        moved = await client.request(reassign("rf", 0, same_size, version=1, allow_replication_factor_change=False))
        assert moved.responses[0].partitions[0].error_code == ErrorCode.none
        assert cluster.leadership("rf", 0).replicas == tuple(same_size)
        grown = await client.request(reassign("rf", 0, [1, 2, 3], version=1, allow_replication_factor_change=True))
        assert grown.responses[0].partitions[0].error_code == ErrorCode.none
        assert set(cluster.leadership("rf", 0).replicas) == {1, 2, 3}


async def test_a_replica_reassigned_away_from_a_stopped_broker_is_deleted_when_it_starts(autojump_clock, tmp_path):
    async with open_cluster(3, transport="memory", log_dirs=str(tmp_path)) as cluster, connected(cluster) as client:
        await create_replicated_topic(client, "away", replication_factor=2)
        keep, gone = cluster.leadership("away", 0).replicas
        async with connected(cluster, keep) as leader_client:  # files appear with the first record
            assert (await produce_replicated(leader_client, "away", 0, batch(b"x"))).error_code == ErrorCode.none
        (spare,) = {1, 2, 3} - {keep, gone}
        await cluster.stop_broker(gone)
        async with connected(cluster, keep) as leader_client:
            response = await leader_client.request(reassign("away", 0, [keep, spare]))
        assert response.responses[0].partitions[0].error_code == ErrorCode.none
        assert cluster.leadership("away", 0).replicas == (keep, spare)
        assert (tmp_path / f"broker-{gone}" / "away-0").is_dir()  # stopped: its files wait
        await cluster.start_broker(gone)
        assert cluster.replica_log(gone, "away", 0) is None
        assert not (tmp_path / f"broker-{gone}" / "away-0").exists()
        assert cluster.replica_log(spare, "away", 0) is not None


async def test_acls_are_the_controllers(autojump_clock):
    from trikafka.config import BrokerConfig

    acl_config = BrokerConfig.from_mapping({
        "listeners": "PLAINTEXT://memory:9092",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"})
    async with open_test_broker(acl_config) as tb, tb.client() as client:
        denied = ErrorCode.cluster_authorization_failed
        assert (await client.request(elect(0, None))).error_code == denied
        assert (await client.request(reassign("t", 0, [1]))).error_code == denied
        assert (await client.request(request(46, 0, timeout=1000, topics=None))).error_code == denied
