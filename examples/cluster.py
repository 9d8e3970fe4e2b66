"""Three brokers in one process: move a leader, shrink an ISR, stop a broker."""

import trio
from kio.schema.errors import ErrorCode

from trikafka import open_cluster
from trikafka.client import open_connection
from trikafka.protocol.entities import build
from trikafka.protocol.records import build_batch
from trikafka.protocol.registry import ApiRegistry

REGISTRY = ApiRegistry()


def request(api_key, version, **fields):
    return build(REGISTRY.get(api_key, version).request_type, **fields)


async def produce(cluster, node_id, value):
    async with open_connection(await cluster.connect(node_id)) as client:
        answer = await client.request(request(0, 10, transactional_id=None, acks=-1, timeout=1000, topic_data=[
            {"name": "orders", "partition_data": [{"index": 0, "records": build_batch([(None, value, [], 0)])}]}]))
        return answer.responses[0].partition_responses[0].error_code


async def main():
    async with open_cluster(brokers=3, min_insync_replicas=2) as cluster:
        print("bootstrap.servers", cluster.bootstrap_servers)
        async with open_connection(await cluster.connect(1)) as client:
            await client.request(request(19, 7, timeout=1000, validate_only=False, topics=[
                {"name": "orders", "num_partitions": 1, "replication_factor": 3, "assignments": [], "configs": []}]))
        assert await produce(cluster, 1, b"first") == ErrorCode.none
        cluster.move_leader("orders", 0, to=2)  # leader epoch + 1
        assert await produce(cluster, 1, b"to-the-old-leader") == ErrorCode.not_leader_or_follower
        cluster.shrink_isr("orders", 0, to=[2])  # below min.insync.replicas
        assert await produce(cluster, 2, b"refused") == ErrorCode.not_enough_replicas
        cluster.expand_isr("orders", 0)  # brokers 1 and 3 catch up and rejoin
        await cluster.stop_broker(2)  # its connections drop; broker 1 leads now
        assert await produce(cluster, 1, b"second") == ErrorCode.none
        await cluster.start_broker(2)  # same address; it catches up and rejoins the ISR
        print("leader", cluster.leader("orders", 0), "ISR", cluster.leadership("orders", 0).isr)


trio.run(main)
