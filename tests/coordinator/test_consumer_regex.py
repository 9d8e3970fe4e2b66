"""KIP-848 regex subscriptions resolve in the background, as in Kafka 4 (MockClock, in memory).

The heartbeat that brings a regex is answered with what was resolved then — the member's
literal topics — and the regex's topics come in a later epoch, after the background
resolution bumped the group epoch (librdkafka's test 0045 expects exactly this of Kafka).
Resolutions are refreshed when topics are created or deleted and every
``group.consumer.regex.refresh.interval.ms``, at most every 10 s.
"""

from __future__ import annotations

import logging

import pytest
import trio
from kio.schema.errors import ErrorCode

from trikafka.config import BrokerConfig
from trikafka.errors import ConfigError
from trikafka.testing import open_test_broker

from .test_consumer_groups import HEARTBEAT, create_topic, describe, request

DELETE_TOPICS = 20


class RegexMember:
    """A consumer-protocol member subscribing by regex (and names), owning what it is told."""

    def __init__(self, client, group: str, member_id: str, regex: str | None, names=()) -> None:
        self.client, self.group, self.member_id = client, group, member_id
        self.regex, self.names = regex, list(names)
        self.epoch = 0
        self.owned: dict = {}  # topic id → partitions

    async def heartbeat(self):
        joining = self.epoch == 0
        response = await self.client.request(request(
            HEARTBEAT, 1, group_id=self.group, member_id=self.member_id, member_epoch=self.epoch,
            instance_id=None, rack_id=None, rebalance_timeout=60_000 if joining else -1,
            subscribed_topic_names=self.names if joining else None,
            subscribed_topic_regex=self.regex if joining else None, server_assignor=None,
            topic_partitions=[{"topic_id": t, "partitions": sorted(ps)} for t, ps in self.owned.items()],
        ))
        assert response.error_code == ErrorCode.none, response
        self.epoch = response.member_epoch
        if response.assignment is not None:
            self.owned = {tp.topic_id: set(tp.partitions) for tp in response.assignment.topic_partitions}
        return response

    async def leave(self):
        response = await self.client.request(request(
            HEARTBEAT, 1, group_id=self.group, member_id=self.member_id, member_epoch=-1, instance_id=None,
            rack_id=None, rebalance_timeout=-1, subscribed_topic_names=None, subscribed_topic_regex=None,
            server_assignor=None, topic_partitions=None))
        assert response.error_code == ErrorCode.none
        self.epoch, self.owned = 0, {}

    def count(self) -> int:
        return sum(len(ps) for ps in self.owned.values())


async def assigned_topics(client, group: str) -> list[str]:
    member = (await describe(client, group)).members[0]
    return sorted(t.topic_name for t in member.assignment.topic_partitions)


def resolutions(caplog: pytest.LogCaptureFixture) -> int:
    return sum("resolved regular expressions" in r.getMessage() for r in caplog.records)


async def test_librdkafka_0045_the_literal_topic_first_the_regex_topics_in_a_later_epoch(autojump_clock):
    async with open_test_broker() as tb, tb.client() as c:
        for name, partitions in (("topic_regex1", 4), ("topic_regex2", 4), ("topic_a", 2)):
            await create_topic(c, name, partitions)
        # Subscribe to the regex alone: nothing is resolved when the first heartbeat is answered.
        m = RegexMember(c, "g45", "m", "^.*topic_regex.*")
        first = await m.heartbeat()
        assert m.count() == 0
        await m.heartbeat()
        assert m.count() == 8 and m.epoch > first.member_epoch
        assert await assigned_topics(c, "g45") == ["topic_regex1", "topic_regex2"]
        # Unsubscribe (leave): the group's last subscriber takes the resolution with it.
        await m.leave()
        # Regex and literal topic: the first answer has the literal topic's 2 partitions only...
        m = RegexMember(c, "g45", "m", "^.*topic_regex.*", names=["topic_a"])
        first = await m.heartbeat()
        assert m.count() == 2
        assert await assigned_topics(c, "g45") == ["topic_a"]
        # ...the regex's 8 come in a later epoch.
        await m.heartbeat()
        assert m.count() == 10 and m.epoch > first.member_epoch
        assert await assigned_topics(c, "g45") == ["topic_a", "topic_regex1", "topic_regex2"]


async def test_a_regex_already_resolved_for_the_group_is_assigned_at_once(autojump_clock):
    async with open_test_broker() as tb, tb.client() as c:
        await create_topic(c, "orders", 4)
        a = RegexMember(c, "g", "a", "ord.*")
        await a.heartbeat()
        await a.heartbeat()
        assert a.count() == 4
        b = RegexMember(c, "g", "b", "ord.*")  # the same regex: its resolution stands
        await b.heartbeat()
        await a.heartbeat()  # a revokes half...
        await a.heartbeat()
        await b.heartbeat()  # ...and b receives it
        assert (a.count(), b.count()) == (2, 2)


async def test_created_and_deleted_topics_are_picked_up_after_the_10_s_guard(autojump_clock):
    async with open_test_broker() as tb, tb.client() as c:
        await create_topic(c, "logs-a", 1)
        m = RegexMember(c, "g", "m", "logs-.*")
        await m.heartbeat()
        await m.heartbeat()
        assert m.count() == 1
        await create_topic(c, "logs-b", 2)
        await m.heartbeat()  # within 10 s of the last resolution: not yet
        await m.heartbeat()
        assert m.count() == 1
        await trio.sleep(10.001)
        await m.heartbeat()  # the topics changed: resolve again (in the background)
        await m.heartbeat()
        assert m.count() == 3
        deleted = await c.request(request(DELETE_TOPICS, 6, topics=[{"name": "logs-a", "topic_id": None}],
                                          timeout=1000))
        assert deleted.responses[0].error_code == ErrorCode.none
        await trio.sleep(10.001)
        for _ in range(3):
            await m.heartbeat()
        assert m.count() == 2
        assert await assigned_topics(c, "g") == ["logs-b"]


async def test_regexes_are_resolved_again_every_refresh_interval(autojump_clock, caplog):
    caplog.set_level(logging.INFO, "trikafka.coordinator")
    async with open_test_broker(group_consumer_regex_refresh_interval_ms=60_000) as tb, tb.client() as c:
        await create_topic(c, "t1", 1)
        m = RegexMember(c, "g", "m", "t.*")
        start = trio.current_time()
        await m.heartbeat()
        await m.heartbeat()
        assert resolutions(caplog) == 1
        while trio.current_time() - start < 60 - 5:  # heartbeats every 5 s, nothing changes
            await trio.sleep(5)
            await m.heartbeat()
        assert resolutions(caplog) == 1
        await trio.sleep_until(start + 60)
        await m.heartbeat()  # the interval has passed: resolved again
        assert resolutions(caplog) == 2
        assert m.count() == 1


def test_the_refresh_interval_is_a_broker_key_with_kafkas_default_and_floor():
    assert BrokerConfig().group_consumer_regex_refresh_interval_ms == 600_000
    assert BrokerConfig.from_mapping({"group.consumer.regex.refresh.interval.ms": "10000"}) \
        .group_consumer_regex_refresh_interval_ms == 10_000
    with pytest.raises(ConfigError, match="group.consumer.regex.refresh.interval.ms"):
        BrokerConfig.from_mapping({"group.consumer.regex.refresh.interval.ms": "9999"})
