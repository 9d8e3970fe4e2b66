"""Errors that blame the right thing (issue 31, item 3).

A missing topic is UNKNOWN_TOPIC_OR_PARTITION (as Kafka's clients say), not a timeout or
LEADER_NOT_AVAILABLE; an unreachable broker is a connection error naming its address (see
also test_deadlines.py); a bootstrap string with a scheme is refused at once, saying what to
write; a normal close logs nothing at WARNING.
"""

from __future__ import annotations

import logging

import pytest
import trio

from trikafka.client import (
    NewTopic,
    OffsetSpec,
    TopicPartition,
    UnknownTopicOrPartitionError,
    open_admin,
    open_consumer,
    open_producer,
)
from trikafka.client.config import ClientConfig
from trikafka.errors import ConfigError
from trikafka.testing import open_test_broker

MISSING = TopicPartition("missing", 0)


async def test_a_missing_topic_is_unknown_topic_or_partition(autojump_clock):
    async with open_test_broker(auto_create_topics_enable=False) as tb:
        async with open_producer(tb, max_block_ms=3000) as producer:
            with pytest.raises(
                UnknownTopicOrPartitionError, match="'missing' does not exist.*3.0 s \\(max.block.ms\\)"
            ):
                await producer.send("missing", b"v")
        async with open_consumer(tb, default_api_timeout_ms=3000) as consumer:
            consumer.assign([MISSING])
            with pytest.raises(UnknownTopicOrPartitionError, match="no topic 'missing'"):
                await consumer.position(MISSING)
            with pytest.raises(UnknownTopicOrPartitionError, match="no topic 'missing'"):
                await consumer.getmany(timeout_ms=5000)
        async with open_admin(tb, default_api_timeout_ms=3000) as admin:
            with pytest.raises(UnknownTopicOrPartitionError, match="missing"):
                await admin.list_offsets({MISSING: OffsetSpec.LATEST})
            with pytest.raises(UnknownTopicOrPartitionError, match="missing"):
                await admin.delete_topics(["missing"])


@pytest.mark.parametrize("servers", ["PLAINTEXT://127.0.0.1:9092", "http://127.0.0.1:9092", "a:1,SSL://b:2"])
async def test_a_bootstrap_string_with_a_scheme_is_refused_at_once(servers):
    expected = servers.split(",")[-1].partition("://")[2]
    for opener in (open_producer, open_consumer, open_admin):
        with trio.fail_after(1):  # refused before any connection is tried
            with pytest.raises(ConfigError, match="bootstrap.servers") as raised:
                async with opener(servers):
                    raise AssertionError("not reached")
        assert "without a scheme" in str(raised.value) and repr(expected) in str(raised.value)
    with pytest.raises(ConfigError, match="without a scheme"):
        ClientConfig.for_role("producer", {"bootstrap.servers": servers})


async def test_a_normal_close_logs_nothing_at_warning(autojump_clock, caplog):
    caplog.set_level(logging.INFO)
    async with open_test_broker() as tb:
        async with open_admin(tb) as admin:
            await admin.create_topics([NewTopic("t", 2, 1)])
        caplog.clear()
        async with open_producer(tb) as producer:
            for i in range(10):
                await producer.send("t", b"%d" % i)
        async with open_consumer(
            tb, group_id="g", auto_offset_reset="earliest", auto_commit_interval_ms=100
        ) as consumer:
            consumer.subscribe(["t"])
            received = 0
            while received < 10:
                batches = await consumer.getmany(timeout_ms=1000)
                received += sum(len(r) for r in batches.values())
            await trio.sleep(1)  # heartbeats and metadata refreshes under way at close
        async with open_consumer(tb, auto_offset_reset="earliest") as consumer:
            consumer.assign([TopicPartition("t", 0)])
            await consumer.getmany(timeout_ms=100)
        async with open_admin(tb, metadata_max_age_ms=100) as admin:
            await admin.list_topics()
            await trio.sleep(1)
        assert [
            r.getMessage()
            for r in caplog.records
            if r.levelno >= logging.WARNING and r.name.startswith("trikafka.client")
        ] == []
