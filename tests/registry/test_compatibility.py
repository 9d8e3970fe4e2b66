"""Compatibility per schema type and level, table-driven from Confluent's documented examples
("Schema Evolution and Compatibility"; the JSON Schema and Protobuf compatibility rules).

Each row: the versions already registered (oldest first), the new schema, and per level
whether Confluent's registry accepts it (True) or refuses it (False).
"""

from __future__ import annotations

import json

import pytest

from trikafka.registry import RegistryError

LEVELS = ("NONE", "BACKWARD", "FORWARD", "FULL", "BACKWARD_TRANSITIVE", "FORWARD_TRANSITIVE", "FULL_TRANSITIVE")


def avro(*fields, name="User", **extra):
    return {"schema": json.dumps({"type": "record", "name": name, "fields": list(fields), **extra})}


def field(name, type_, **extra):
    return {"name": name, "type": type_, **extra}


NAME = field("name", "string")
AGE = field("age", "int")
AGE_DEFAULT = field("age", "int", default=0)
COLOR = {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}
COLOR_MORE = {**COLOR, "symbols": ["RED", "GREEN", "BLUE"]}

# (description, previous versions, new, {level: accepted}); levels not named: as BACKWARD's
# non-transitive twin for single-version rows.
AVRO_CASES = [
    ("add a field with a default", [avro(NAME)], avro(NAME, AGE_DEFAULT), dict(BACKWARD=True, FORWARD=True, FULL=True)),
    ("add a field without a default", [avro(NAME)], avro(NAME, AGE), dict(BACKWARD=False, FORWARD=True, FULL=False)),
    (
        "delete a field with a default",
        [avro(NAME, AGE_DEFAULT)],
        avro(NAME),
        dict(BACKWARD=True, FORWARD=True, FULL=True),
    ),
    ("delete a field without a default", [avro(NAME, AGE)], avro(NAME), dict(BACKWARD=True, FORWARD=False, FULL=False)),
    ("promote int to long", [avro(AGE)], avro(field("age", "long")), dict(BACKWARD=True, FORWARD=False, FULL=False)),
    ("int to string", [avro(AGE)], avro(field("age", "string")), dict(BACKWARD=False, FORWARD=False, FULL=False)),
    ("string to bytes", [avro(NAME)], avro(field("name", "bytes")), dict(BACKWARD=True, FORWARD=True, FULL=True)),
    (
        "add an enum symbol",
        [avro(field("c", COLOR))],
        avro(field("c", COLOR_MORE)),
        dict(BACKWARD=True, FORWARD=False, FULL=False),
    ),
    (
        "add an enum symbol, reader default",
        [avro(field("c", {**COLOR, "default": "RED"}))],
        avro(field("c", {**COLOR_MORE, "default": "RED"})),
        dict(BACKWARD=True, FORWARD=True, FULL=True),
    ),
    (
        "widen to a union",
        [avro(NAME)],
        avro(field("name", ["null", "string"], default=None)),
        dict(BACKWARD=True, FORWARD=False, FULL=False),
    ),
    ("rename the record", [avro(NAME)], avro(NAME, name="Person"), dict(BACKWARD=False, FORWARD=False, FULL=False)),
    (
        "rename with an alias",
        [avro(NAME)],
        avro(NAME, name="Person", aliases=["User"]),
        dict(BACKWARD=True, FORWARD=False, FULL=False),
    ),
    (
        "fixed size changed",
        [avro(field("f", {"type": "fixed", "name": "F", "size": 4}))],
        avro(field("f", {"type": "fixed", "name": "F", "size": 8})),
        dict(BACKWARD=False, FORWARD=False, FULL=False),
    ),
    (
        # Confluent's transitive example: v3 reads v2 (age defaults) but not v1 (age was an int).
        "transitive: compatible with the latest only",
        [avro(NAME, AGE), avro(NAME)],
        avro(NAME, field("age", "string", default="")),
        dict(
            BACKWARD=True,
            BACKWARD_TRANSITIVE=False,
            FORWARD=True,
            FORWARD_TRANSITIVE=False,
            FULL=True,
            FULL_TRANSITIVE=False,
        ),
    ),
]


def jsons(**schema):
    return {"schema": json.dumps(schema), "schemaType": "JSON"}


def obj(closed=False, required=(), **properties):
    schema = {"type": "object", "properties": properties}
    if closed:
        schema["additionalProperties"] = False
    if required:
        schema["required"] = list(required)
    return schema


STR, INT, NUM = {"type": "string"}, {"type": "integer"}, {"type": "number"}
JSON_CASES = [
    (
        "open model: add a property",
        [jsons(**obj(a=STR))],
        jsons(**obj(a=STR, b=INT)),
        dict(BACKWARD=False, FORWARD=True, FULL=False),
    ),
    (
        "open model: remove a property",
        [jsons(**obj(a=STR, b=INT))],
        jsons(**obj(a=STR)),
        dict(BACKWARD=True, FORWARD=False, FULL=False),
    ),
    (
        "closed model: add an optional property",
        [jsons(**obj(True, a=STR))],
        jsons(**obj(True, a=STR, b=INT)),
        dict(BACKWARD=True, FORWARD=False, FULL=False),
    ),
    (
        "closed model: add a required property",
        [jsons(**obj(True, a=STR))],
        jsons(**obj(True, ["b"], a=STR, b=INT)),
        dict(BACKWARD=False, FORWARD=False, FULL=False),
    ),
    (
        "closed model: remove a property",
        [jsons(**obj(True, a=STR, b=INT))],
        jsons(**obj(True, a=STR)),
        dict(BACKWARD=False, FORWARD=True, FULL=False),
    ),
    (
        "make a property required",
        [jsons(**obj(a=STR))],
        jsons(**obj(False, ["a"], a=STR)),
        dict(BACKWARD=False, FORWARD=True, FULL=False),
    ),
    ("integer to number", [jsons(**obj(a=INT))], jsons(**obj(a=NUM)), dict(BACKWARD=True, FORWARD=False, FULL=False)),
    ("string to integer", [jsons(**obj(a=STR))], jsons(**obj(a=INT)), dict(BACKWARD=False, FORWARD=False, FULL=False)),
    (
        "enum extended",
        [jsons(enum=["a", "b"])],
        jsons(enum=["a", "b", "c"]),
        dict(BACKWARD=True, FORWARD=False, FULL=False),
    ),
    (
        "maxLength decreased",
        [jsons(type="string", maxLength=10)],
        jsons(type="string", maxLength=5),
        dict(BACKWARD=False, FORWARD=True, FULL=False),
    ),
    (
        "oneOf: a branch added",
        [jsons(oneOf=[STR, INT])],
        jsons(oneOf=[STR, INT, {"type": "boolean"}]),
        dict(BACKWARD=True, FORWARD=False, FULL=False),
    ),
    (
        "oneOf: a branch removed",
        [jsons(oneOf=[STR, INT])],
        jsons(oneOf=[STR]),
        dict(BACKWARD=False, FORWARD=True, FULL=False),
    ),
    ("a type into a oneOf", [jsons(**STR)], jsons(oneOf=[STR, INT]), dict(BACKWARD=True, FORWARD=False, FULL=False)),
    (
        "description changed",
        [jsons(type="string", description="x")],
        jsons(type="string", description="y"),
        dict(BACKWARD=True, FORWARD=True, FULL=True),
    ),
]


def proto(body, package="shop"):
    return {"schema": f'syntax = "proto3";\npackage {package};\n{body}\n', "schemaType": "PROTOBUF"}


ITEM = "message Item { string sku = 1; int32 count = 2; }"
PROTOBUF_CASES = [
    ("add a field", [proto(ITEM)], proto("message Item { string sku = 1; int32 count = 2; string note = 3; }"),
     dict(BACKWARD=True, FORWARD=True, FULL=True)),
    ("remove a field", [proto(ITEM)], proto("message Item { string sku = 1; }"),
     dict(BACKWARD=True, FORWARD=True, FULL=True)),
    ("rename a field", [proto(ITEM)], proto("message Item { string code = 1; int32 count = 2; }"),
     dict(BACKWARD=True, FORWARD=True, FULL=True)),
    ("int32 to int64", [proto(ITEM)], proto("message Item { string sku = 1; int64 count = 2; }"),
     dict(BACKWARD=True, FORWARD=True, FULL=True)),
    ("int32 to string", [proto(ITEM)], proto("message Item { string sku = 1; string count = 2; }"),
     dict(BACKWARD=False, FORWARD=False, FULL=False)),
    ("scalar to message", [proto(ITEM)],
     proto("message Item { string sku = 1; Count count = 2; }\nmessage Count { int32 n = 1; }"),
     dict(BACKWARD=False, FORWARD=False, FULL=False)),
    ("remove a message", [proto(ITEM + "\nmessage Other { int32 x = 1; }")], proto(ITEM),
     dict(BACKWARD=False, FORWARD=True, FULL=False)),
    ("package changed", [proto(ITEM)], proto(ITEM, package="store"), dict(BACKWARD=False, FORWARD=False, FULL=False)),
    ("two fields into a new oneof", [proto(ITEM)],
     proto("message Item { oneof k { string sku = 1; int32 count = 2; } }"),
     dict(BACKWARD=False, FORWARD=True, FULL=False)),
    ("a well-known type imported", [proto(ITEM)],
     proto('import "google/protobuf/timestamp.proto";\n'
           "message Item { string sku = 1; int32 count = 2; google.protobuf.Timestamp at = 3; }"),
     dict(BACKWARD=True, FORWARD=True, FULL=True)),
    ("repeated numeric", [proto(ITEM)], proto("message Item { string sku = 1; repeated int32 count = 2; }"),
     dict(BACKWARD=False, FORWARD=False, FULL=False)),
]


def _rows(cases):
    for description, previous, new, expected in cases:
        for level in LEVELS:
            if level == "NONE":
                accepted = True
            elif level in expected:
                accepted = expected[level]
            elif len(previous) == 1:
                accepted = expected[level.removesuffix("_TRANSITIVE")]
            else:
                continue
            yield pytest.param(previous, new, level, accepted, id=f"{description}-{level}")


@pytest.mark.parametrize(
    ("previous", "new", "level", "accepted"), [*_rows(AVRO_CASES), *_rows(JSON_CASES), *_rows(PROTOBUF_CASES)]
)
def test_compatibility(registry, previous, new, level, accepted):
    registry.set_config("s", {"compatibility": "NONE"})
    for schema in previous:
        registry.register("s", schema)
    registry.set_config("s", {"compatibility": level})
    verdict = registry.check("s", None, new, verbose=True)
    assert verdict["is_compatible"] is accepted, verdict["messages"]
    if accepted:
        assert registry.register("s", new)["version"] == len(previous) + 1
    else:
        with pytest.raises(RegistryError) as refused:
            registry.register("s", new)
        assert (refused.value.status, refused.value.error_code) == (409, 409)
        assert all(reason in refused.value.message for reason in verdict["messages"])


def test_a_schema_of_another_type_is_incompatible(registry):
    registry.register("s", avro(NAME))
    with pytest.raises(RegistryError) as refused:
        registry.register("s", jsons(type="string"))
    assert "SCHEMA_TYPE_CHANGED" in refused.value.message
