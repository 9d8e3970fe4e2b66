"""Serializers on the producer, deserializers on the consumer (issue 31, item 4).

aiokafka's one-argument callables and confluent-kafka's ``(value, ctx)`` form, over the
in-memory broker: JSON both ways; the key serialized before partitioning; the context naming
topic, field and headers; a deserializer that raises stops at its record, after returning the
records before it, and the position stays there until a seek.
"""

from __future__ import annotations

import json

import pytest

from trikafka.client import (
    NewTopic,
    RecordDeserializationError,
    TopicPartition,
    open_admin,
    open_consumer,
    open_producer,
)
from trikafka.client.partitioner import partition_for_key
from trikafka.testing import open_test_broker

T0 = TopicPartition("t", 0)


async def read(consumer, count):
    out = []
    while len(out) < count:
        batches = await consumer.getmany(timeout_ms=1000)
        out += [r for records in batches.values() for r in records]
    return out


async def test_json_both_ways_in_aiokafkas_one_argument_form(autojump_clock):
    async with open_test_broker() as tb:
        async with open_admin(tb) as admin:
            await admin.create_topics([NewTopic("t", 3, 1)])
        async with open_producer(
            tb, key_serializer=str.encode, value_serializer=lambda v: json.dumps(v).encode()
        ) as producer:
            meta = await producer.send("t", {"n": 1, "tags": ["a"]}, key="user-7")
            await producer.send("t", None, key="user-7")  # applied to None too, as aiokafka: null
        assert meta.partition == partition_for_key(b"user-7", 3)  # the serialized key partitions
        async with open_consumer(
            tb, auto_offset_reset="earliest", key_deserializer=lambda b: b.decode(), value_deserializer=json.loads
        ) as consumer:
            consumer.assign([TopicPartition("t", meta.partition)])
            records = await read(consumer, 2)
        assert [(r.key, r.value) for r in records] == [("user-7", {"n": 1, "tags": ["a"]}), ("user-7", None)]


class ConfluentStyle:
    """The shape of confluent-kafka's serializers: ``__call__(self, obj, ctx=None)``."""

    def __init__(self) -> None:
        self.seen = []

    def __call__(self, obj, ctx=None):
        self.seen.append((ctx.topic, ctx.field, ctx.headers))
        return None if obj is None else f"{ctx.topic}:{ctx.field}:{obj}".encode()


async def test_confluents_two_argument_form_gets_topic_field_and_headers(autojump_clock):
    async with open_test_broker() as tb:
        serializer = ConfluentStyle()
        async with open_producer(tb, key_serializer=serializer, value_serializer=serializer) as producer:
            await producer.send("t", "v", key="k", headers=[("h", b"1")])
        assert serializer.seen == [("t", "key", [("h", b"1")]), ("t", "value", [("h", b"1")])]

        contexts = []

        def value_deserializer(data, ctx):
            contexts.append((ctx.topic, ctx.field, ctx.headers))
            return data.decode().upper()

        async with open_consumer(tb, auto_offset_reset="earliest", value_deserializer=value_deserializer) as consumer:
            consumer.assign([T0])
            (record,) = await read(consumer, 1)
        assert (record.key, record.value) == (b"t:key:k", "T:VALUE:V")
        assert contexts == [("t", "value", (("h", b"1"),))]


async def test_a_failing_deserializer_stops_at_its_record(autojump_clock):
    async with open_test_broker() as tb:
        async with open_producer(tb) as producer:
            for value in (b"1", b"2", b"oops", b"4"):
                await producer.send("t", value, partition=0)
        async with open_consumer(tb, auto_offset_reset="earliest", value_deserializer=int) as consumer:
            consumer.assign([T0])
            first = await consumer.getmany(timeout_ms=1000)
            assert [r.value for r in first[T0]] == [1, 2]  # the records before it come first
            for _ in range(2):  # and the poll raises again: the position stays on the record
                with pytest.raises(
                    RecordDeserializationError, match="value deserializer failed on t-0 at offset 2"
                ) as raised:
                    await consumer.getmany(timeout_ms=1000)
                assert isinstance(raised.value.__cause__, ValueError) and raised.value.offset == 2
                assert await consumer.position(T0) == 2
            consumer.seek(T0, 3)
            assert [r.value for r in (await consumer.getmany(timeout_ms=1000))[T0]] == [4]


async def test_a_serializer_that_is_not_callable_is_refused_before_connecting():
    with pytest.raises(TypeError, match="value_serializer must be a callable"):
        async with open_producer("127.0.0.1:1", value_serializer="json"):
            raise AssertionError("not reached")
    with pytest.raises(TypeError, match="key_deserializer must be a callable"):
        async with open_consumer("127.0.0.1:1", key_deserializer=b"x"):
            raise AssertionError("not reached")
