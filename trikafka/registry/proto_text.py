""".proto text → ``FileDescriptorProto``, through ``proto-schema-parser``'s syntax tree.

Confluent's clients exchange Protobuf schemas in two spellings: ``.proto`` text (curl, the
Java clients) and a base64 ``FileDescriptorProto`` (confluent-kafka-python sends that and
asks ``format=serialized`` back). Both become one ``FileDescriptorProto`` here, so the
compatibility rules and ``format=serialized`` see one model. Covered: syntax, package,
imports, messages (nested), fields with labels, map fields (as their ``...Entry`` message),
oneofs, enums (nested). Named field types are left for the descriptor pool to resolve
(``type`` unset, the relative ``type_name`` kept), as protoc's output would resolve them.
"""

from __future__ import annotations

from typing import Any

from trikafka.registry.errors import invalid_schema

__all__ = ["parse_proto_text", "proto_text_descriptor"]

_SCALAR_TYPES = {
    "double": 1, "float": 2, "int64": 3, "uint64": 4, "int32": 5, "fixed64": 6, "fixed32": 7,
    "bool": 8, "string": 9, "bytes": 12, "uint32": 13, "sfixed32": 15, "sfixed64": 16,
    "sint32": 17, "sint64": 18,
}
_LABELS = {"OPTIONAL": 1, "REQUIRED": 2, "REPEATED": 3}


def parse_proto_text(text: str) -> Any:
    """The syntax tree of ``text``; a syntax error is the schema's fault (42201)."""
    from antlr4.error.ErrorListener import ErrorListener
    from proto_schema_parser.parser import Parser

    class Raise(ErrorListener):
        def syntaxError(self, recognizer: Any, symbol: Any, line: int, column: int, msg: str, e: Any) -> None:
            raise invalid_schema(f"line {line}:{column} {msg}")

    def strict(thing: Any) -> None:
        thing.removeErrorListeners()
        thing.addErrorListener(Raise())

    try:
        return Parser(setup_lexer=strict, setup_parser=strict).parse(text)
    except RecursionError:
        raise invalid_schema("nested too deeply") from None


def proto_text_descriptor(text: str, name: str) -> Any:
    """A ``FileDescriptorProto`` named ``name`` for the ``.proto`` ``text``."""
    from google.protobuf import descriptor_pb2
    from proto_schema_parser import ast

    tree = parse_proto_text(text)
    proto = descriptor_pb2.FileDescriptorProto(name=name, syntax=tree.syntax or "proto2")
    for element in tree.file_elements:
        if isinstance(element, ast.Package):
            proto.package = element.name
        elif isinstance(element, ast.Import):
            proto.dependency.append(element.name)
        elif isinstance(element, ast.Message):
            _message(element, proto.message_type.add())
        elif isinstance(element, ast.Enum):
            _enum(element, proto.enum_type.add())
    return proto


def _enum(enum: Any, out: Any) -> None:
    from proto_schema_parser import ast

    out.name = enum.name
    for value in enum.elements:
        if isinstance(value, ast.EnumValue):
            out.value.add(name=value.name, number=value.number)


def _field(field: Any, out: Any, oneof_index: int | None = None) -> None:
    out.name = field.name
    out.number = field.number
    cardinality = getattr(field.cardinality, "value", None)
    out.label = _LABELS.get(str(cardinality), 1)
    if field.type in _SCALAR_TYPES:
        out.type = _SCALAR_TYPES[field.type]
    else:
        out.type_name = field.type
    if oneof_index is not None:
        out.oneof_index = oneof_index


def _message(message: Any, out: Any) -> None:
    from proto_schema_parser import ast

    out.name = message.name
    for element in message.elements:
        if isinstance(element, ast.Field):
            _field(element, out.field.add())
        elif isinstance(element, ast.MapField):
            entry = out.nested_type.add(name="".join(p.capitalize() for p in element.name.split("_")) + "Entry")
            entry.options.map_entry = True
            for number, (field_name, type_name) in enumerate(
                (("key", element.key_type), ("value", element.value_type)), 1
            ):
                item = entry.field.add(name=field_name, number=number, label=1)
                if type_name in _SCALAR_TYPES:
                    item.type = _SCALAR_TYPES[type_name]
                else:
                    item.type_name = type_name
            out.field.add(name=element.name, number=element.number, label=3, type_name=entry.name)
        elif isinstance(element, ast.OneOf):
            index = len(out.oneof_decl)
            out.oneof_decl.add(name=element.name)
            for field in element.elements:
                if isinstance(field, ast.Field):
                    _field(field, out.field.add(), index)
        elif isinstance(element, ast.Message):
            _message(element, out.nested_type.add())
        elif isinstance(element, ast.Enum):
            _enum(element, out.enum_type.add())
