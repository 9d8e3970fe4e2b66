"""The Trio admin client against the in-memory broker, in virtual time."""

from __future__ import annotations

import pytest

from trikafka.client import (
    ConfigResource,
    KafkaError,
    NewTopic,
    OffsetSpec,
    TopicPartition,
    open_admin,
    open_producer,
)
from trikafka.errors import ErrorCode
from trikafka.testing import open_test_broker


async def test_topics_partitions_and_configs(autojump_clock):
    async with open_test_broker() as broker, open_admin(broker) as admin:
        created = await admin.create_topics([NewTopic("a", 2, 1, {"retention.ms": "1000"}), "b"])
        assert created["a"].num_partitions == 2
        with pytest.raises(KafkaError) as info:
            await admin.create_topics(["a"])
        assert info.value.error_code == ErrorCode.topic_already_exists and "'a'" in str(info.value)
        await admin.create_partitions({"a": 5})
        assert (await admin.list_topics())["a"] == 5
        configs = await admin.describe_configs([ConfigResource.topic("a")])
        assert configs[ConfigResource.topic("a")]["retention.ms"].value == "1000"
        await admin.incremental_alter_configs(
            {ConfigResource.topic("a"): {"retention.ms": "5000", "cleanup.policy": "compact"}}
        )
        entries = (await admin.describe_configs([ConfigResource.topic("a")], ["retention.ms", "cleanup.policy"]))[
            ConfigResource.topic("a")
        ]
        assert (entries["retention.ms"].value, entries["cleanup.policy"].value) == ("5000", "compact")
        await admin.incremental_alter_configs({ConfigResource.topic("a"): {"retention.ms": None}})
        entries = (await admin.describe_configs([ConfigResource.topic("a")], ["retention.ms"]))[
            ConfigResource.topic("a")
        ]
        assert entries["retention.ms"].is_default
        await admin.delete_topics(["a", "b"])
        assert "a" not in await admin.list_topics()
        with pytest.raises(KafkaError, match="UNKNOWN_TOPIC_OR_PARTITION"):
            await admin.delete_topics(["a"])


async def test_offsets_and_delete_records(autojump_clock):
    async with open_test_broker() as broker, open_admin(broker) as admin:
        async with open_producer(broker) as producer:
            for i in range(5):
                await producer.send("r", f"v{i}".encode(), timestamp=1_000 + i)
        tp = TopicPartition("r", 0)
        listed = await admin.list_offsets({tp: OffsetSpec.LATEST})
        assert listed[tp].offset == 5
        assert (await admin.list_offsets({tp: 1_003}))[tp].offset == 3
        assert await admin.delete_records({tp: 2}) == {tp: 2}
        assert (await admin.list_offsets({tp: OffsetSpec.EARLIEST}))[tp].offset == 2


async def test_groups(autojump_clock):
    async with open_test_broker() as broker, open_admin(broker) as admin:
        async with open_producer(broker, transactional_id="tx") as producer:
            async with producer.transaction():
                await producer.send("in", b"x")
            async with producer.transaction():
                await producer.send("out", b"y")
                await producer.send_offsets_to_transaction({TopicPartition("in", 0): 1}, "readers")
        listed = await admin.list_groups()
        assert [g.group_id for g in listed] == ["readers"]
        described = await admin.describe_groups(["readers"])
        assert described["readers"].state == "Empty" and described["readers"].members == ()
        # Not a KIP-848 group: ConsumerGroupDescribe says GROUP_ID_NOT_FOUND, DescribeGroups answers.
        either = await admin.describe_consumer_groups(["readers"])
        assert (either["readers"].type, either["readers"].state) == ("classic", "Empty")
        await admin.delete_groups(["readers"])
        assert await admin.list_groups() == []
        with pytest.raises(KafkaError, match="GROUP_ID_NOT_FOUND"):
            await admin.delete_groups(["readers"])
