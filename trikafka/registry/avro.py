"""Avro: parse with fastavro, and check two schemas by Avro's schema-resolution rules.

Compatibility of Avro schemas is whether a *reader* schema can read what a *writer* schema
wrote (Avro specification, "Schema Resolution"): BACKWARD checks the new schema reading
the old one's data, FORWARD the old reading the new's. The rules followed here:

* the same primitive; or a promotion int → long, float, double; long → float, double;
  float → double; string ↔ bytes;
* records by (full) name or an alias of the reader's; each reader field is found in the
  writer by name or alias (types checked recursively) or has a default;
* enums by name; every writer symbol is a reader symbol, unless the reader has a default;
* fixed by name and size; arrays by items; maps by values;
* a writer union: every branch readable by the reader; a reader union: some branch reads
  the writer's type.

Messages follow Confluent's ``{errorType:'...', description:'...'}`` style, one per problem.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from trikafka.registry.errors import invalid_schema

__all__ = ["check_avro", "parse_avro"]

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
PROMOTIONS = {
    ("int", "long"), ("int", "float"), ("int", "double"), ("long", "float"), ("long", "double"),
    ("float", "double"), ("string", "bytes"), ("bytes", "string"),
}


def parse_avro(text: str, references: Mapping[str, str]) -> tuple[Any, dict[str, Any]]:
    """(parsed schema, named types by full name); ``references`` maps a reference name to
    the referenced schema's text (parsed first, so their named types can be used)."""
    from fastavro.schema import parse_schema

    named: dict[str, Any] = {}
    try:
        for ref_text in references.values():
            parse_schema(json.loads(ref_text), named_schemas=named)
        document = json.loads(text)
        parsed = parse_schema(document, named_schemas=named)
    except Exception as exc:  # fastavro raises several kinds; each is the schema's fault
        raise invalid_schema(f"{type(exc).__name__}: {exc}") from None
    return parsed, named


def check_avro(reader: tuple[Any, dict[str, Any]], writer: tuple[Any, dict[str, Any]]) -> list[str]:
    """Problems met when ``reader`` reads what ``writer`` wrote (empty: compatible)."""
    problems: list[str] = []
    _Resolution(reader[1], writer[1], problems).check(reader[0], writer[0], "/", set())
    return problems


class _Resolution:
    def __init__(self, reader_named: dict[str, Any], writer_named: dict[str, Any], problems: list[str]) -> None:
        self.reader_named = reader_named
        self.writer_named = writer_named
        self.problems = problems

    def _resolve(self, schema: Any, named: dict[str, Any]) -> Any:
        while isinstance(schema, str) and schema not in PRIMITIVES and schema in named:
            schema = named[schema]
        if isinstance(schema, dict) and schema.get("type") in PRIMITIVES and "name" not in schema:
            return schema["type"]
        return schema

    def _kind(self, schema: Any) -> str:
        if isinstance(schema, list):
            return "union"
        if isinstance(schema, str):
            return schema
        return str(schema.get("type"))

    def _problem(self, kind: str, path: str, description: str) -> None:
        self.problems.append(f"{{errorType:'{kind}', description:'{description}', additionalInfo:'at path {path}'}}")

    def check(self, reader: Any, writer: Any, path: str, seen: set[tuple[str, str]]) -> bool:
        reader = self._resolve(reader, self.reader_named)
        writer = self._resolve(writer, self.writer_named)
        rk, wk = self._kind(reader), self._kind(writer)
        if wk == "union":
            ok = True
            for i, branch in enumerate(writer):
                if not self._readable(reader, branch, f"{path}{i}/", seen):
                    ok = False
                    self._problem(
                        "MISSING_UNION_BRANCH",
                        path,
                        f"The new schema is missing a type inside a union field at path '{path}{i}' in the old schema",
                    )
            return ok
        if rk == "union":
            if any(self._quiet(branch, writer, path, seen) for branch in reader):
                return True
            self._problem(
                "MISSING_UNION_BRANCH",
                path,
                f"The type at path '{path}' in the old schema ({wk}) is not in the union of the new schema",
            )
            return False
        if rk in PRIMITIVES or wk in PRIMITIVES:
            if rk == wk or (wk, rk) in PROMOTIONS:
                return True
            self._problem(
                "TYPE_MISMATCH",
                path,
                f"The type (path '{path}') of a field in the new schema ({rk}) does not match with the old "
                f"schema ({wk})",
            )
            return False
        if rk != wk:
            self._problem(
                "TYPE_MISMATCH",
                path,
                f"The type (path '{path}') of a field in the new schema ({rk}) does not match with the old "
                f"schema ({wk})",
            )
            return False
        if rk in ("record", "enum", "fixed") and not self._same_name(reader, writer, path):
            return False
        if rk == "record":
            key = (reader["name"], writer["name"])
            if key in seen:  # a recursive type already being checked
                return True
            return self._record(reader, writer, path, seen | {key})
        if rk == "enum":
            missing = [s for s in writer.get("symbols", []) if s not in reader.get("symbols", [])]
            if missing and "default" not in reader:
                self._problem(
                    "MISSING_ENUM_SYMBOLS",
                    path,
                    f"The new schema is missing enum symbols '{missing}' at path '{path}' in the old schema",
                )
                return False
            return True
        if rk == "fixed":
            if reader.get("size") != writer.get("size"):
                self._problem(
                    "FIXED_SIZE_MISMATCH",
                    path,
                    f"The size of FIXED type field at path '{path}' in the new schema does not match with the "
                    f"old schema",
                )
                return False
            return True
        if rk == "array":
            return self.check(reader.get("items"), writer.get("items"), f"{path}items/", seen)
        if rk == "map":
            return self.check(reader.get("values"), writer.get("values"), f"{path}values/", seen)
        return True

    def _quiet(self, reader: Any, writer: Any, path: str, seen: set[tuple[str, str]]) -> bool:
        held = len(self.problems)
        ok = self.check(reader, writer, path, seen)
        del self.problems[held:]
        return ok

    def _readable(self, reader: Any, writer_branch: Any, path: str, seen: set[tuple[str, str]]) -> bool:
        return self._quiet(reader, writer_branch, path, seen)

    def _same_name(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> bool:
        name = str(reader.get("name"))
        namespace = name.rpartition(".")[0]
        names = {name}
        for alias in reader.get("aliases") or ():
            names.add(alias if "." in alias or not namespace else f"{namespace}.{alias}")
        if writer.get("name") in names:
            return True
        self._problem(
            "NAME_MISMATCH", path, f"The name of the schema has changed (path '{path}'): {writer.get('name')} -> {name}"
        )
        return False

    def _record(self, reader: dict[str, Any], writer: dict[str, Any], path: str, seen: set[tuple[str, str]]) -> bool:
        writer_fields = {f["name"]: f for f in writer.get("fields", [])}
        ok = True
        for i, field in enumerate(reader.get("fields", [])):
            field_path = f"{path}fields/{i}/"
            found = writer_fields.get(field["name"])
            if found is None:
                found = next((writer_fields[a] for a in field.get("aliases") or () if a in writer_fields), None)
            if found is None:
                if "default" not in field:
                    ok = False
                    self._problem(
                        "READER_FIELD_MISSING_DEFAULT_VALUE",
                        field_path,
                        f"The field '{field['name']}' at path '{field_path}' in the new schema has no default value "
                        f"and is missing in the old schema",
                    )
                continue
            if not self.check(field["type"], found["type"], f"{field_path}type/", seen):
                ok = False
        return ok

