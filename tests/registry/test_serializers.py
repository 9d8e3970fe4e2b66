"""confluent-kafka's serializers with the broker's Schema Registry, records through the broker.

Each test registers (or lets the serializer register) schemas at ``kafka_broker``'s registry,
produces serialized records over TCP, consumes them back and deserializes them: the id in
each record's first bytes is answered by the registry, references included.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("confluent_kafka.schema_registry")

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402

TIMEOUT = 30.0


def _round_trip(kafka_broker, topic, serialize, deserialize, values):
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    for value in values:
        producer.produce(topic, serialize(value, SerializationContext(topic, MessageField.VALUE)))
    assert producer.flush(TIMEOUT) == 0
    consumer = Consumer(
        {"bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": "g", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = []
    try:
        while len(got) < len(values):
            message = consumer.poll(TIMEOUT)
            assert message is not None and message.error() is None, message and message.error()
            assert message.value()[0] == 0  # Confluent's framing: magic byte 0, 4-byte id
            got.append(deserialize(message.value(), SerializationContext(topic, MessageField.VALUE)))
    finally:
        consumer.close()
    return got


ADDRESS = {"type": "record", "name": "Address", "namespace": "com.acme", "fields": [{"name": "city", "type": "string"}]}
PERSON = {
    "type": "record", "name": "Person", "namespace": "com.acme",
    "fields": [{"name": "name", "type": "string"}, {"name": "home", "type": "com.acme.Address"}],
}


def test_avro_round_trip_with_a_reference(kafka_broker):
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer

    client = SchemaRegistryClient({"url": kafka_broker.schema_registry_url})
    client.register_schema("address", Schema(json.dumps(ADDRESS), "AVRO"))
    person = Schema(json.dumps(PERSON), "AVRO", [SchemaReference("com.acme.Address", "address", 1)])
    serializer = AvroSerializer(client, person)
    values = [{"name": "ada", "home": {"city": "London"}}, {"name": "alan", "home": {"city": "Wilmslow"}}]
    got = _round_trip(kafka_broker, "people", serializer, AvroDeserializer(client), values)
    assert got == values
    assert client.get_latest_version("people-value").schema.references[0].subject == "address"
    # Restarting the client (no cache): the deserializer reads the id from the registry.
    fresh = SchemaRegistryClient({"url": kafka_broker.schema_registry_url})
    assert fresh.get_schema(client.get_latest_version("people-value").schema_id).references


def test_json_schema_round_trip_with_a_reference(kafka_broker):
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

    client = SchemaRegistryClient({"url": kafka_broker.schema_registry_url})
    address = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    }
    client.register_schema("address.json", Schema(json.dumps(address), "JSON"))
    order = {
        "$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
        "properties": {"id": {"type": "integer"}, "ship_to": {"$ref": "address.json"}}, "required": ["id", "ship_to"],
    }
    schema = Schema(json.dumps(order), "JSON", [SchemaReference("address.json", "address.json", 1)])
    serializer = JSONSerializer(schema, client)
    values = [{"id": 1, "ship_to": {"city": "Paris"}}, {"id": 2, "ship_to": {"city": "Lyon"}}]
    assert (
        _round_trip(kafka_broker, "orders", serializer, JSONDeserializer(schema, schema_registry_client=client), values)
        == values
    )
    registered = client.get_latest_version("orders-value")
    assert registered.schema.schema_type == "JSON" and registered.schema.references[0].name == "address.json"


@pytest.mark.parametrize("draft", ["https://json-schema.org/draft/2020-12/schema", "https://json-schema.org/draft/2019-09/schema"])
def test_json_schema_later_drafts(kafka_broker, draft):
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

    client = SchemaRegistryClient({"url": kafka_broker.schema_registry_url})
    schema = json.dumps({"$schema": draft, "type": "object", "properties": {"n": {"type": "integer"}}})
    got = _round_trip(
        kafka_broker,
        "numbers",
        JSONSerializer(schema, client),
        JSONDeserializer(schema, schema_registry_client=client),
        [{"n": 1}],
    )
    assert got == [{"n": 1}]


def _protobuf_classes():
    """Two .proto files built in memory, person.proto importing acme/address.proto."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()
    address = descriptor_pb2.FileDescriptorProto(name="acme/address.proto", package="acme", syntax="proto3")
    message = address.message_type.add(name="Address")
    message.field.add(name="city", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING, label=1)
    person = descriptor_pb2.FileDescriptorProto(
        name="acme/person.proto", package="acme", syntax="proto3", dependency=["acme/address.proto"]
    )
    message = person.message_type.add(name="Person")
    message.field.add(name="name", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING, label=1)
    message.field.add(
        name="home", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE, type_name=".acme.Address", label=1
    )
    pool.Add(address)
    pool.Add(person)
    return (
        message_factory.GetMessageClass(pool.FindMessageTypeByName("acme.Person")),
        message_factory.GetMessageClass(pool.FindMessageTypeByName("acme.Address")),
    )


def test_protobuf_round_trip_with_an_import(kafka_broker):
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer

    person_class, address_class = _protobuf_classes()
    client = SchemaRegistryClient({"url": kafka_broker.schema_registry_url})
    serializer = ProtobufSerializer(person_class, client, {"use.deprecated.format": False})
    deserializer = ProtobufDeserializer(person_class, {"use.deprecated.format": False}, schema_registry_client=client)
    values = [person_class(name="ada", home=address_class(city="London"))]
    assert _round_trip(kafka_broker, "pb-people", serializer, deserializer, values) == values
    # The import was registered under its file name (a subject with a '/') and referenced.
    assert "acme/address.proto" in client.get_subjects()
    latest = client.get_latest_version("pb-people-value")
    assert latest.schema.schema_type == "PROTOBUF"
    assert [(r.name, r.subject) for r in latest.schema.references] == [("acme/address.proto", "acme/address.proto")]


def test_protobuf_schema_as_proto_text(kafka_broker):
    """A schema registered as .proto text (as curl or the Java clients do) is served back as
    a FileDescriptorProto to a client asking format=serialized."""
    import base64

    from google.protobuf import descriptor_pb2

    client = SchemaRegistryClient({"url": kafka_broker.schema_registry_url})
    text = (
        'syntax = "proto3";\npackage shop;\nmessage Item {\n  string sku = 1;\n  map<string, int32> stock = 2;\n'
        "  oneof price { int64 cents = 3; string label = 4; }\n}\n"
    )
    schema_id = client.register_schema("items-value", Schema(text, "PROTOBUF"))
    assert client.get_schema(schema_id).schema_str == text.strip()
    fresh = SchemaRegistryClient({"url": kafka_broker.schema_registry_url})  # no cached text
    serialized = fresh.get_schema(schema_id, fmt="serialized").schema_str
    proto = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized))
    assert proto.package == "shop" and [f.name for f in proto.message_type[0].field] == [
        "sku",
        "stock",
        "cents",
        "label",
    ]
