"""Broker-side schema validation (``confluent.value.schema.validation``): a Produce whose
records lack a schema id registered under the topic's subject is refused whole, with
INVALID_RECORD and each bad record listed; one with valid ids is appended."""

from __future__ import annotations

import json
import struct

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

USER = json.dumps(
    {"type": "record", "name": "User", "namespace": "acme", "fields": [{"name": "name", "type": "string"}]}
)


def _topic(kafka_broker, name, **configs):
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, 1, 1, config=configs)])[name].result(30)


def _produce(kafka_broker, topic, values, key=None):
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers, "linger.ms": 50, "retries": 0})
    results = []
    for value in values:
        producer.produce(topic, value, key, on_delivery=lambda err, msg: results.append(err))
    producer.flush(30)
    return results


def _framed(schema_id, payload=b"\x06ada"):
    return b"\x00" + struct.pack(">i", schema_id) + payload


def test_records_without_a_registered_id_are_refused(kafka_broker):
    client = SchemaRegistryClient({"url": kafka_broker.schema_registry_url})
    good = client.register_schema("checked-value", Schema(USER, "AVRO"))
    other = client.register_schema("elsewhere-value", Schema(USER.replace("User", "Other"), "AVRO"))
    _topic(kafka_broker, "checked", **{"confluent.value.schema.validation": "true"})
    assert _produce(kafka_broker, "checked", [_framed(good), _framed(good)]) == [None, None]
    for bad in (b"plain bytes", _framed(999), _framed(other), b"\x00\x00"):
        errors = _produce(kafka_broker, "checked", [_framed(good), bad])
        assert [e.code() if e else None for e in errors] == [KafkaError.INVALID_RECORD] * 2, bad
    assert kafka_broker.high_watermark("checked", 0) == 2  # nothing of a refused batch


async def test_the_refusal_lists_each_record_and_names_its_batch(autojump_clock):
    from kio.schema.errors import ErrorCode

    from tests.server.test_topics_and_data import create_topic, produce
    from trikafka.protocol.compression import recompress_batches
    from trikafka.protocol.records import build_batch, iter_batches
    from trikafka.testing import open_test_broker

    async with open_test_broker() as tb, tb.client() as client:
        good = tb.broker.core.schemas.register("named-value", {"schema": USER})["id"]
        await create_topic(client, "named", configs={"confluent.value.schema.validation": "true"})
        records = [
            (None, _framed(good), [], 0),
            (None, b"nope", [], 0),
            (None, _framed(good), [], 0),
            (None, _framed(77), [], 0),
        ]
        batches = build_batch(records[:2]) + build_batch(records[2:])
        compressed = bytes(recompress_batches(batches, list(iter_batches(batches)), 4))  # zstd
        for data in (batches, compressed):
            response = await produce(client, 9, "named", None, 0, data)
            part = response.responses[0].partition_responses[0]
            assert part.error_code == ErrorCode.invalid_record
            assert [e.batch_index for e in part.record_errors] == [1, 1]
            messages = [e.batch_index_error_message for e in part.record_errors]
            assert messages[0].startswith("batch 0 record 1: the value does not begin with a schema id")
            assert messages[1].startswith("batch 1 record 1: the value has schema id 77, which is not registered")
        assert tb.broker.replica_manager.get_log("named", 0).log_end_offset == 0, "nothing appended"
        response = await produce(client, 9, "named", None, 0, build_batch(records[:1]))
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.none


def test_key_validation_and_record_name_strategy(kafka_broker):
    client = SchemaRegistryClient({"url": kafka_broker.schema_registry_url})
    by_record = client.register_schema("acme.User", Schema(USER, "AVRO"))
    by_topic = client.register_schema("keyed-value", Schema(USER.replace("User", "V"), "AVRO"))
    _topic(
        kafka_broker, "keyed",
        **{
            "confluent.key.schema.validation": "true",
            "confluent.key.subject.name.strategy": "io.confluent.kafka.serializers.subject.RecordNameStrategy",
        },
    )
    assert _produce(kafka_broker, "keyed", [b"any value"], key=_framed(by_record)) == [None]
    errors = _produce(kafka_broker, "keyed", [b"any value"], key=_framed(by_topic))
    assert errors[0] is not None and errors[0].code() == KafkaError.INVALID_RECORD


def test_a_topic_without_validation_takes_anything(kafka_broker):
    _topic(kafka_broker, "free")
    assert _produce(kafka_broker, "free", [b"plain"]) == [None]


def test_a_bad_strategy_is_refused_naming_the_key(kafka_broker):
    with pytest.raises(KafkaException, match="confluent.value.subject.name.strategy"):
        _topic(kafka_broker, "bad", **{"confluent.value.subject.name.strategy": "Nope"})
