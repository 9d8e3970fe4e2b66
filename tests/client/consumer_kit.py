"""Helpers of the consumer tests: topics and records written with the client core's raw
requests (so consumer tests do not depend on the producer)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from trikafka.client.client import KafkaClient, open_client
from trikafka.client.cluster import TopicPartition
from trikafka.client.config import ClientConfig
from trikafka.errors import ErrorCode
from trikafka.protocol.records import build_batch
from trikafka.protocol.registry import ApiKey

__all__ = ["Writer", "open_writer"]


class Writer:
    def __init__(self, client: KafkaClient) -> None:
        self.client = client

    async def create_topic(self, name: str, partitions: int, **configs: str) -> None:
        node = self.client.least_loaded_node()
        answer = await self.client.send(
            node, ApiKey.CREATE_TOPICS, timeout_ms=5000, validate_only=False,
            topics=[{"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
                     "configs": [{"name": k.replace("_", "."), "value": v} for k, v in configs.items()]}],
        )
        assert answer.topics[0].error_code in (ErrorCode.none, ErrorCode.topic_already_exists), answer
        await self.client.wait_for_topic(name)

    async def send(
        self,
        topic: str,
        partition: int,
        values: Sequence[bytes | None],
        keys: Sequence[bytes | None] | None = None,
        **batch: Any,
    ) -> int:
        """Write one batch; returns its base offset."""
        keys = keys or [None] * len(values)
        records = build_batch(
            [(k, v, [("h", b"1")], 1_700_000_000_000) for k, v in zip(keys, values, strict=True)], **batch
        )
        await self.client.wait_for_topic(topic)
        node = self.client.cluster.leader_for(TopicPartition(topic, partition))
        answer = await self.client.send(
            node, ApiKey.PRODUCE, transactional_id=None, acks=-1, timeout=5000,
            topic_data=[{"name": topic, "partition_data": [{"index": partition, "records": records}]}],
        )
        part = answer.responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.none, part
        return int(part.base_offset)


@asynccontextmanager
async def open_writer(bootstrap: Any) -> AsyncIterator[Writer]:
    async with open_client(bootstrap, ClientConfig.for_role("admin")) as client:
        yield Writer(client)
