"""Records cross between the proxy and real Kafka clients, both ways: what is produced over
REST is read by confluent-kafka and kafka-python, what they produce is read over REST, and
Avro produced over REST is read by confluent-kafka's AvroDeserializer through the broker's
schema registry (and the other way round with its AvroSerializer)."""

from __future__ import annotations

import base64
import json

import httpx
import pytest

V2 = "application/vnd.kafka.v2+json"

pytestmark = [  # kafka-python loads its protocol schemas with importlib.resources' old API
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]


def rest_produce(server, topic: str, fmt: str, body: dict) -> dict:
    answer = httpx.post(
        f"{server.url}/topics/{topic}",
        headers={"Content-Type": f"application/vnd.kafka.{fmt}.v2+json"},
        json=body,
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    assert all(o["error_code"] is None for o in answer.json()["offsets"]), answer.text
    return answer.json()


def rest_read(server, group: str, topic: str, fmt: str, want: int) -> list[dict]:
    with httpx.Client(base_url=server.url, headers={"Content-Type": V2}, timeout=30) as http:
        http.post(f"/consumers/{group}", json={"name": "c", "format": fmt, "auto.offset.reset": "earliest"})
        base = f"/consumers/{group}/instances/c"
        http.post(f"{base}/subscription", json={"topics": [topic]})
        records: list[dict] = []
        for _ in range(10):
            got = http.get(f"{base}/records", params={"timeout": 3000},
                           headers={"Accept": f"application/vnd.kafka.{fmt}.v2+json"})
            assert got.status_code == 200, got.text
            records += got.json()
            if len(records) >= want:
                break
        http.delete(base)
    return records


def confluent_read(server, topic: str, want: int, **extra) -> list:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": server.bootstrap_servers, "group.id": f"ck-{topic}",
                         "auto.offset.reset": "earliest", **extra})
    consumer.subscribe([topic])
    found = []
    try:
        for _ in range(60):
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                found.append(message)
                if len(found) >= want:
                    break
    finally:
        consumer.close()
    return found


def test_rest_to_confluent_kafka_and_kafka_python(proxy_server):
    rest_produce(proxy_server, "to-clients", "binary", {
        "records": [{"key": base64.b64encode(b"key-1").decode(), "value": base64.b64encode(b"value-1").decode()}]
    })
    rest_produce(proxy_server, "to-clients", "json", {"records": [{"key": "key-2", "value": {"n": 2}}]})

    messages = confluent_read(proxy_server, "to-clients", 2)
    assert [(m.key(), m.value()) for m in messages] == [(b"key-1", b"value-1"), (b'"key-2"', b'{"n":2}')]

    from kafka import KafkaConsumer

    consumer = KafkaConsumer("to-clients", bootstrap_servers=proxy_server.bootstrap_servers,
                             auto_offset_reset="earliest", consumer_timeout_ms=10000, group_id="kp-to-clients")
    try:
        got = []
        for message in consumer:
            got.append((message.key, message.value))
            if len(got) == 2:
                break
    finally:
        consumer.close()
    assert got == [(b"key-1", b"value-1"), (b'"key-2"', b'{"n":2}')]


def test_confluent_kafka_and_kafka_python_to_rest(proxy_server):
    from confluent_kafka import Producer
    from kafka import KafkaProducer

    producer = Producer({"bootstrap.servers": proxy_server.bootstrap_servers})
    producer.produce("from-clients", key=b'"ck"', value=json.dumps({"from": "confluent-kafka"}).encode(), partition=0)
    assert producer.flush(30) == 0
    kp = KafkaProducer(bootstrap_servers=proxy_server.bootstrap_servers)
    kp.send("from-clients", key=b'"kp"', value=json.dumps({"from": "kafka-python"}).encode(), partition=0).get(30)
    kp.close()

    records = rest_read(proxy_server, "rest-from-clients", "from-clients", "json", 2)
    assert [(r["offset"], r["key"], r["value"]) for r in records] == [
        (0, "ck", {"from": "confluent-kafka"}),
        (1, "kp", {"from": "kafka-python"}),
    ]
    binary = rest_read(proxy_server, "rest-from-clients-bin", "from-clients", "binary", 2)
    assert [base64.b64decode(r["key"]) for r in binary] == [b'"ck"', b'"kp"']


USER = {
    "type": "record",
    "name": "User",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "age", "type": ["null", "int"], "default": None},
    ],
}


def test_avro_round_trips_with_confluent_kafkas_serdes(proxy_server):
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    answer = rest_produce(proxy_server, "avro-users", "avro", {
        "value_schema": json.dumps(USER),
        "records": [{"value": {"name": "ada", "age": {"int": 36}}}, {"value": {"name": "bob", "age": None}}],
    })
    schema_id = answer["value_schema_id"]
    registry = SchemaRegistryClient({"url": proxy_server.schema_registry_url})
    assert json.loads(registry.get_schema(schema_id).schema_str)["name"] == "User"

    deserializer = AvroDeserializer(registry)
    messages = confluent_read(proxy_server, "avro-users", 2)
    context = SerializationContext("avro-users", MessageField.VALUE)
    assert [deserializer(m.value(), context) for m in messages] == [
        {"name": "ada", "age": 36},
        {"name": "bob", "age": None},
    ]

    # By id, and the other way: confluent-kafka's AvroSerializer writes, the proxy reads.
    rest_produce(proxy_server, "avro-users", "avro",
                 {"value_schema_id": schema_id, "records": [{"value": {"name": "cy", "age": {"int": 7}}}]})
    from confluent_kafka import Producer

    serializer = AvroSerializer(registry, json.dumps(USER))
    producer = Producer({"bootstrap.servers": proxy_server.bootstrap_servers})
    producer.produce("avro-users", value=serializer({"name": "dee", "age": 5}, context))
    assert producer.flush(30) == 0
    records = rest_read(proxy_server, "rest-avro", "avro-users", "avro", 4)
    assert [r["value"] for r in records] == [
        {"name": "ada", "age": {"int": 36}},
        {"name": "bob", "age": None},
        {"name": "cy", "age": {"int": 7}},
        {"name": "dee", "age": {"int": 5}},
    ]


def test_a_value_the_schema_refuses_writes_nothing(proxy_server):
    answer = httpx.post(
        f"{proxy_server.url}/topics/avro-refused",
        headers={"Content-Type": "application/vnd.kafka.avro.v2+json"},
        json={"value_schema": json.dumps(USER), "records": [{"value": {"name": "ok"}}, {"value": {"name": 3}}]},
        timeout=30,
    )
    assert (answer.status_code, answer.json()["error_code"]) == (422, 42203)
    assert "records[1].value" in answer.json()["message"]
    missing = httpx.post(
        f"{proxy_server.url}/topics/avro-refused",
        headers={"Content-Type": "application/vnd.kafka.avro.v2+json"},
        json={"records": [{"value": {"name": "ok"}}]},
        timeout=30,
    )
    assert (missing.status_code, missing.json()["error_code"]) == (422, 42202)
    bad_schema = httpx.post(
        f"{proxy_server.url}/topics/avro-refused",
        headers={"Content-Type": "application/vnd.kafka.avro.v2+json"},
        json={"value_schema": '{"type": "nope"}', "records": [{"value": 1}]},
        timeout=30,
    )
    assert (bad_schema.status_code, bad_schema.json()["error_code"]) == (422, 42205)


@pytest.mark.parametrize(
    ("fmt", "schema", "value"),
    [
        ("jsonschema", {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}, {"n": 1}),
        ("protobuf", 'syntax = "proto3";\npackage demo;\nmessage Point { int32 x = 1; string label = 2; }\n',
         {"x": 3, "label": "p"}),
    ],
)
def test_json_schema_and_protobuf_round_trip(proxy_server, fmt, schema, value):
    topic = f"schema-{fmt}"
    text = schema if isinstance(schema, str) else json.dumps(schema)
    rest_produce(proxy_server, topic, fmt, {"value_schema": text, "records": [{"value": value}]})
    records = rest_read(proxy_server, f"rest-{fmt}", topic, fmt, 1)
    assert [r["value"] for r in records] == [value]
    refused = httpx.post(
        f"{proxy_server.url}/topics/{topic}",
        headers={"Content-Type": f"application/vnd.kafka.{fmt}.v2+json"},
        json={"value_schema": text, "records": [{"value": {"n": "not a number", "x": "nor this"}}]},
        timeout=30,
    )
    assert (refused.status_code, refused.json()["error_code"]) == (422, 42203)


def test_v3_records_with_a_schema_are_read_by_confluent_kafka(proxy_server):
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    url = f"{proxy_server.url}/v3/clusters/{proxy_server.cluster_id}/topics/v3-avro/records"
    first = httpx.post(url, json={
        "key": {"type": "STRING", "data": "u1"},
        "value": {"type": "AVRO", "schema": json.dumps(USER), "data": {"name": "ada", "age": {"int": 3}}},
    }, timeout=30)
    assert first.status_code == 200, first.text
    schema_id = SchemaRegistryClient({"url": proxy_server.schema_registry_url}).get_latest_version(
        "v3-avro-value"
    ).schema_id
    second = httpx.post(url, json={"value": {"schema_id": schema_id, "data": {"name": "bob", "age": None}}}, timeout=30)
    assert second.status_code == 200 and second.json()["value"]["type"] == "AVRO", second.text
    refused = httpx.post(url, json={"value": {"schema_id": schema_id, "data": {"name": 1}}}, timeout=30)
    assert (refused.status_code, refused.json()["error_code"]) == (422, 42203)

    registry = SchemaRegistryClient({"url": proxy_server.schema_registry_url})
    deserializer = AvroDeserializer(registry)
    context = SerializationContext("v3-avro", MessageField.VALUE)
    messages = confluent_read(proxy_server, "v3-avro", 2)
    assert [m.key() for m in messages] == [b"u1", None]
    assert [deserializer(m.value(), context) for m in messages] == [
        {"name": "ada", "age": 3},
        {"name": "bob", "age": None},
    ]
