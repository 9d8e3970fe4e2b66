"""Field plans for the generated encoders (see ``encoder.py``): what kio's private
introspection (``kio.serial._introspect``, pinned with kio in pyproject) says about each field
of an entity class, flattened into a :class:`_Plan` the code generator reads.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

from trikafka.protocol.entities import entity_fields

__all__: list[str] = []

# kafka_type → struct code for values of fixed width.
_FIXED = {
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint8": "B",
    "uint16": "H",
    "uint32": "I",
    "uint64": "Q",
    "float64": "d",
    "bool": "?",
    "error_code": "h",
    "timedelta_i32": "i",
    "timedelta_i64": "q",
    "datetime_i64": "q",
    "uuid": "16s",
}
# Array items that need no conversion: packed in one call.
_PLAIN_ARRAY = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float64"}
_INJECTIVE = {
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "error_code",
}


# -- field plans ----------------------------------------------------------------------------------


class _Keep:
    """Marks fields whose ``None`` build() leaves alone."""


_KEEP = _Keep()


@dataclasses.dataclass
class _Plan:
    field: dataclasses.Field[Any]
    name: str
    kind: str  # "prim", "prim_array", "entity", "entity_array"
    ktype: str | None
    nullable: bool  # as kio's writer sees it (tagged fields never are)
    tag: int | None
    default: Any  # dataclass default or _MISSING
    none_to: Any  # what build() turns None into, or _KEEP
    nested: type | None
    hint: Any
    is_tuple: bool
    legacy_client_id: bool


def _plans(cls: type) -> list[_Plan]:
    hints = entity_fields(cls)
    out = []
    for field in dataclasses.fields(cls):
        _, hint, nested, is_tuple = hints[field.name]
        fc = classify_field(field)
        kind = {
            PrimitiveField: "prim",
            PrimitiveTupleField: "prim_array",
            EntityField: "entity",
            EntityTupleField: "entity_array",
        }[type(fc)]
        ktype = field.metadata.get("kafka_type")
        tag = get_field_tag(field)
        none_to: Any = _KEEP
        if type(None) not in typing.get_args(hint):
            if ktype == "string":
                none_to = ""
            elif ktype in ("bytes", "records"):
                none_to = b""
        out.append(
            _Plan(
                field=field,
                name=field.name,
                kind=kind,
                ktype=ktype,
                nullable=False if tag is not None else is_optional(field),
                tag=None if tag is None else int(tag),
                default=field.default,
                none_to=none_to,
                nested=nested if kind in ("entity", "entity_array") else None,
                hint=hint,
                is_tuple=is_tuple,
                legacy_client_id=cls.__name__ == "RequestHeader" and field.name == "client_id",
            )
        )
    return out

