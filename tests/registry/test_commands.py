"""``python -m trikafka schemas ...`` and ``consume --decode`` against the broker's registry,
each run as a subprocess (what a script sees)."""

from __future__ import annotations

import json

from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.commands.support import trikafka

USER = {"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]}


def test_register_list_get_check_delete(kafka_broker, tmp_path):
    url = kafka_broker.schema_registry_url
    v1 = tmp_path / "user.avsc"
    v1.write_text(json.dumps(USER))
    run = trikafka("schemas", "register", "users-value", str(v1), "--registry", url)
    assert run.code == 0 and "version 1, id 1" in run.out, run
    listed = trikafka("schemas", "list", "--registry", url, "--json")
    assert listed.json() == [{"subject": "users-value", "version": 1, "id": 1, "type": "AVRO"}]
    got = trikafka("schemas", "get", "users-value", "--registry", url)
    assert got.code == 0 and '"name": "User"' in got.out and "id 1" in got.out, got
    assert trikafka("schemas", "get", "--id", "1", "--registry", url, "--json").json()["schema"] == json.dumps(
        USER, separators=(",", ":")
    )
    breaking = tmp_path / "breaking.avsc"
    breaking.write_text(json.dumps({**USER, "fields": [*USER["fields"], {"name": "age", "type": "int"}]}))
    check = trikafka("schemas", "check", "users-value", str(breaking), "--registry", url)
    assert check.code == 1 and "NOT compatible" in check.out and "READER_FIELD_MISSING_DEFAULT_VALUE" in check.out, (
        check
    )
    refused = trikafka("schemas", "register", "users-value", str(breaking), "--registry", url)
    assert refused.code == 1 and "incompatible" in refused.err and "error 409" in refused.err, refused
    assert trikafka("schemas", "delete", "users-value", "--registry", url).code == 0
    assert trikafka("schemas", "list", "--registry", url, "--json").json() == []
    gone = trikafka("schemas", "delete", "users-value", "--permanent", "--registry", url)
    assert gone.code == 0 and "permanently" in gone.out, gone
    missing = trikafka("schemas", "get", "users-value", "--registry", url)
    assert missing.code == 1 and "error 40401" in missing.err, missing


def test_unreachable_registry_is_one_line():
    run = trikafka("schemas", "list", "--registry", "http://127.0.0.1:1", "--timeout", "5")
    assert run.code == 1 and run.err.startswith("trikafka: cannot reach the schema registry at http://127.0.0.1:1"), run


def test_consume_decode(kafka_broker):
    url = kafka_broker.schema_registry_url
    client = SchemaRegistryClient({"url": url})
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    avro = AvroSerializer(client, json.dumps(USER))
    as_json = JSONSerializer(json.dumps({"type": "object", "properties": {"n": {"type": "integer"}}}), client)
    producer.produce("mixed", avro({"name": "ada"}, SerializationContext("mixed", MessageField.VALUE)))
    client.set_compatibility("mixed-value", "NONE")
    producer.produce("mixed", as_json({"n": 7}, SerializationContext("mixed", MessageField.VALUE)))
    producer.produce("mixed", b"plain")
    assert producer.flush(30) == 0
    run = trikafka("consume", "mixed", "-e", "--decode", "--registry", url, bootstrap=kafka_broker.bootstrap_servers)
    lines = [json.loads(line) for line in run.out.splitlines()]
    assert lines[:2] == [{"name": "ada"}, {"n": 7}], run
    assert lines[2]["undecodable"].startswith("no schema id")
    with_json = trikafka(
        "consume", "mixed", "-e", "--decode", "--json", "--registry", url, bootstrap=kafka_broker.bootstrap_servers
    )
    assert json.loads(with_json.out.splitlines()[0])["value"] == {"name": "ada"}


def test_consume_decode_protobuf(kafka_broker):
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

    from tests.registry.test_serializers import _protobuf_classes

    person, address = _protobuf_classes()
    client = SchemaRegistryClient({"url": kafka_broker.schema_registry_url})
    serialize = ProtobufSerializer(person, client, {"use.deprecated.format": False})
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    producer.produce(
        "pb", serialize(person(name="ada", home=address(city="London")), SerializationContext("pb", MessageField.VALUE))
    )
    assert producer.flush(30) == 0
    run = trikafka(
        "consume",
        "pb",
        "-e",
        "--decode",
        "--registry",
        kafka_broker.schema_registry_url,
        bootstrap=kafka_broker.bootstrap_servers,
    )
    assert json.loads(run.out) == {"name": "ada", "home": {"city": "London"}}, run
