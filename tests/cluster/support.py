"""Requests the cluster tests send with the project's Trio client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from trikafka.client import open_connection
from trikafka.protocol.entities import build
from trikafka.protocol.records import build_batch, iter_batches, iter_records
from trikafka.protocol.registry import ApiRegistry

__all__ = [
    "batch",
    "connected",
    "create_topic",
    "fetch",
    "fetch_request",
    "find_coordinator",
    "metadata",
    "produce",
    "records_of",
    "request",
]

REGISTRY = ApiRegistry()


@asynccontextmanager
async def connected(cluster: Any, node_id: int | None = None) -> AsyncIterator[Any]:
    """The project's Trio client connected to one broker of the cluster."""
    async with open_connection(await cluster.connect(node_id), "trikafka-test") as connection:
        yield connection


def request(api_key: int, version: int, **fields: Any) -> Any:
    return build(REGISTRY.get(api_key, version).request_type, **fields)


def batch(*values: bytes, producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1) -> bytes:
    return build_batch(
        [(None, v, [], 0) for v in values],
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )


async def create_topic(
    client: Any, name: str, partitions: int = 1, replication_factor: int = 3, configs: dict | None = None
) -> Any:
    response = await client.request(
        request(
            19,
            7,
            topics=[
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": replication_factor,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
                }
            ],
            timeout=1000,
            validate_only=False,
        )
    )
    return response.topics[0]


async def metadata(client: Any, names: list[str] | None, version: int = 12) -> Any:
    return await client.request(
        request(
            3,
            version,
            topics=None if names is None else [{"name": n, "topic_id": None} for n in names],
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
            include_cluster_authorized_operations=False,
        )
    )


async def produce(client: Any, topic: str, partition: int, records: bytes, *, acks: int = -1, version: int = 10) -> Any:
    response = await client.request(
        request(
            0,
            version,
            transactional_id=None,
            acks=acks,
            timeout=1000,
            topic_data=[
                {"name": topic, "topic_id": None, "partition_data": [{"index": partition, "records": records}]}
            ],
        )
    )
    return response.responses[0].partition_responses[0]


def fetch_request(
    topic: str,
    partition: int,
    offset: int = 0,
    *,
    version: int = 12,
    current_leader_epoch: int = -1,
    topic_id: Any = None,
) -> Any:
    return request(
        1,
        version,
        replica_id=-1,
        max_wait=0,
        min_bytes=1,
        max_bytes=10_000_000,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            {
                "topic": topic,
                "topic_id": topic_id,
                "partitions": [
                    {
                        "partition": partition,
                        "current_leader_epoch": current_leader_epoch,
                        "fetch_offset": offset,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1_000_000,
                    }
                ],
            }
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


async def fetch(
    client: Any, topic: str, partition: int, offset: int = 0, *, version: int = 12, current_leader_epoch: int = -1
) -> Any:
    response = await client.request(
        fetch_request(topic, partition, offset, version=version, current_leader_epoch=current_leader_epoch)
    )
    return response.responses[0].partitions[0]


async def find_coordinator(client: Any, key: str, key_type: int = 0) -> Any:
    return await client.request(request(10, 3, key=key, key_type=key_type))


def records_of(data: bytes) -> list[tuple[int, bytes | None]]:
    return [
        (record.offset, record.value)
        for header in iter_batches(data)
        for record in iter_records(data, header)
    ]
