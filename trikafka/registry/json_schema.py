"""JSON Schema: parse (drafts 7, 2019-09, 2020-12 with ``jsonschema``) and Confluent's rules.

Confluent checks JSON Schemas by diffing the *original* (the writer's) against the *update*
(the reader's) and refusing any difference outside its list of compatible changes
(``json/diff/SchemaDiff.COMPATIBLE_CHANGES_STRICT``). BACKWARD diffs old → new; FORWARD
new → old. What is covered here (the main rules; anything else is taken as compatible):

* ``type``: widening (``integer`` → ``number``, a type added to a list) is compatible,
  narrowing or changing is ``TYPE_NARROWED``/``TYPE_CHANGED``;
* ``properties`` in an open content model (``additionalProperties`` absent or true): adding
  a property with a non-empty schema is ``PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL``; removing
  one is compatible. In a closed model (``additionalProperties: false``): removing a
  property is ``PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL``; adding an optional one is
  compatible, a required one without default ``REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL``;
* ``required``: a name added without a default is ``REQUIRED_ATTRIBUTE_ADDED``;
* ``additionalProperties`` true → false: ``ADDITIONAL_PROPERTIES_REMOVED``;
* ``enum``: values removed (or an enum added) is ``ENUM_ARRAY_NARROWED``; added is compatible;
* bounds: ``maxLength``/``maximum``/``maxItems``/``maxProperties`` added or decreased and
  ``minLength``/``minimum``/``minItems``/``minProperties`` added or increased are incompatible
  (``..._DECREASED``/``..._INCREASED``/``..._ADDED``); ``pattern`` added or changed too;
* ``oneOf``/``anyOf``: a branch added is compatible, one removed or changed is
  ``SUM_TYPE_NARROWED``/``COMBINED_TYPE_SUBSCHEMAS_CHANGED``;
* ``items``, nested ``properties`` and ``$ref`` (within the document, or to a reference)
  are followed recursively.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from trikafka.registry.errors import invalid_schema

__all__ = ["check_json", "parse_json"]

_DRAFTS = {
    "http://json-schema.org/draft-07/schema": "Draft7Validator",
    "https://json-schema.org/draft/2019-09/schema": "Draft201909Validator",
    "https://json-schema.org/draft/2020-12/schema": "Draft202012Validator",
}


def _draft(document: Any) -> Any:
    import jsonschema

    declared = document.get("$schema") if isinstance(document, dict) else None
    if declared is None:
        return jsonschema.Draft7Validator
    name = _DRAFTS.get(str(declared).rstrip("#"))
    if name is None:
        raise invalid_schema(f"$schema {declared!r}: drafts 7, 2019-09 and 2020-12 are supported")
    return getattr(jsonschema, name)


def parse_json(text: str, references: Mapping[str, str]) -> tuple[Any, dict[str, Any]]:
    """(document, referenced documents by reference name); the document is checked
    against its draft's meta-schema and every external ``$ref`` must name a reference."""
    try:
        document = json.loads(text)
        referenced = {name: json.loads(ref) for name, ref in references.items()}
    except (ValueError, RecursionError) as exc:
        raise invalid_schema(f"not JSON: {exc}") from None
    if not isinstance(document, dict | bool):
        raise invalid_schema("a JSON Schema is an object or a boolean")
    validator = _draft(document)
    try:
        validator.check_schema(document)
    except Exception as exc:  # SchemaError, or a meta-schema walk that fails on odd input
        raise invalid_schema(f"{type(exc).__name__}: {getattr(exc, 'message', exc)}") from None
    for ref in _refs(document):
        base = ref.partition("#")[0]
        if base and base not in referenced and not _same_document(document, base):
            raise invalid_schema(f"$ref {ref!r} is neither in the document nor a reference")
    return document, referenced


def _same_document(document: Any, base: str) -> bool:
    return isinstance(document, dict) and document.get("$id") == base


def _refs(node: Any) -> Iterator[str]:
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, dict):
            ref = current.get("$ref")
            if isinstance(ref, str):
                yield ref
            stack.extend(current.values())
        elif isinstance(current, list):
            stack.extend(current)


def check_json(reader: tuple[Any, dict[str, Any]], writer: tuple[Any, dict[str, Any]]) -> list[str]:
    """Incompatible differences when ``reader`` reads what ``writer`` wrote."""
    diff = _Diff(writer, reader)
    diff.compare(writer[0], reader[0], "#", 0)
    return [f"{{errorType:'{kind}', description:'at path {path}'}}" for kind, path in diff.found]


_UPPER = ("maxLength", "maximum", "exclusiveMaximum", "maxItems", "maxProperties")
_LOWER = ("minLength", "minimum", "exclusiveMinimum", "minItems", "minProperties")


def _snake(word: str) -> str:
    return "".join(f"_{c}" if c.isupper() else c.upper() for c in word).upper()


def _types(schema: dict[str, Any]) -> set[str] | None:
    declared = schema.get("type")
    if declared is None:
        return None
    return {declared} if isinstance(declared, str) else {str(t) for t in declared}


class _Diff:
    def __init__(self, original: tuple[Any, dict[str, Any]], update: tuple[Any, dict[str, Any]]) -> None:
        self.documents = (original, update)
        self.found: list[tuple[str, str]] = []

    def _deref(self, schema: Any, side: int, depth: int) -> Any:
        root, referenced = self.documents[side]
        while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and depth < 32:
            base, _, pointer = schema["$ref"].partition("#")
            target = referenced.get(base, root) if base else root
            for part in (p for p in pointer.split("/") if p):
                part = part.replace("~1", "/").replace("~0", "~")
                target = target.get(part) if isinstance(target, dict) else None
            if target is None:
                return {}
            schema, depth = target, depth + 1
        return schema

    def compare(self, original: Any, update: Any, path: str, depth: int) -> None:
        if depth > 32:
            return
        original, update = self._deref(original, 0, depth), self._deref(update, 1, depth)
        if original is True or original == {}:
            original = {}
        if update is True or update == {}:
            if original != {}:
                return  # the update accepts anything: compatible
            update = {}
        if original is False or update is False:
            if update is False and original is not False:
                self.found.append(("SCHEMA_ADDED", path))
            return
        if not isinstance(original, dict) or not isinstance(update, dict):
            return
        self._types(original, update, path)
        self._bounds(original, update, path)
        self._enum(original, update, path)
        self._object(original, update, path, depth)
        self._combined(original, update, path, depth)
        if isinstance(original.get("items"), dict | bool) and isinstance(update.get("items"), dict | bool):
            self.compare(original["items"], update["items"], f"{path}/items", depth + 1)

    def _quiet(self, original: Any, update: Any, path: str, depth: int) -> bool:
        held = len(self.found)
        self.compare(original, update, path, depth + 1)
        clean = len(self.found) == held
        del self.found[held:]
        return clean

    def _combined(self, original: dict[str, Any], update: dict[str, Any], path: str, depth: int) -> None:
        """``oneOf``/``anyOf`` (sum types): every original branch must be readable by some
        update branch — a branch added is compatible (SUM_TYPE_EXTENDED), one removed or
        changed is not; a plain schema turning into a sum must fit one of its branches."""
        for key in ("oneOf", "anyOf"):
            before, after = original.get(key), update.get(key)
            if isinstance(before, list) and isinstance(after, list):
                for i, branch in enumerate(before):
                    if not any(self._quiet(branch, other, f"{path}/{key}/{i}", depth) for other in after):
                        kind = "SUM_TYPE_NARROWED" if len(after) < len(before) else "COMBINED_TYPE_SUBSCHEMAS_CHANGED"
                        self.found.append((kind, f"{path}/{key}/{i}"))
            elif isinstance(before, list) and after is None:
                plain = {k: v for k, v in update.items() if k not in ("oneOf", "anyOf")}
                if not all(self._quiet(branch, plain, path, depth) for branch in before):
                    self.found.append(("COMBINED_TYPE_CHANGED", path))
            elif before is None and isinstance(after, list):
                plain = {k: v for k, v in original.items() if k not in ("oneOf", "anyOf")}
                if not any(self._quiet(plain, branch, path, depth) for branch in after):
                    self.found.append(("COMBINED_TYPE_CHANGED", path))

    def _types(self, original: dict[str, Any], update: dict[str, Any], path: str) -> None:
        before, after = _types(original), _types(update)
        if after is None or before == after:
            return
        if before is None:
            self.found.append(("TYPE_NARROWED", path))
            return
        widened = after | ({"integer"} if "number" in after else set())
        if before <= widened:
            return
        self.found.append(("TYPE_NARROWED" if after < before else "TYPE_CHANGED", path))

    def _bounds(self, original: dict[str, Any], update: dict[str, Any], path: str) -> None:
        for keys, tighter in ((_UPPER, lambda old, new: new < old), (_LOWER, lambda old, new: new > old)):
            for key in keys:
                old, new = original.get(key), update.get(key)
                if not isinstance(new, int | float) or isinstance(new, bool):
                    continue
                if not isinstance(old, int | float) or isinstance(old, bool):
                    self.found.append((f"{_snake(key)}_ADDED", path))
                elif tighter(old, new):
                    kind = "DECREASED" if key in _UPPER else "INCREASED"
                    self.found.append((f"{_snake(key)}_{kind}", path))
        if "pattern" in update and update.get("pattern") != original.get("pattern"):
            self.found.append(("PATTERN_ADDED" if "pattern" not in original else "PATTERN_CHANGED", path))

    def _enum(self, original: dict[str, Any], update: dict[str, Any], path: str) -> None:
        after = update.get("enum")
        if not isinstance(after, list):
            return
        before = original.get("enum")
        if not isinstance(before, list):
            self.found.append(("ENUM_ARRAY_NARROWED", path))
        elif any(value not in after for value in before):
            self.found.append(("ENUM_ARRAY_NARROWED", path))

    def _object(self, original: dict[str, Any], update: dict[str, Any], path: str, depth: int) -> None:
        before_properties, after_properties = original.get("properties"), update.get("properties")
        before: dict[str, Any] = before_properties if isinstance(before_properties, dict) else {}
        after: dict[str, Any] = after_properties if isinstance(after_properties, dict) else {}
        open_before = original.get("additionalProperties", True) is not False
        open_after = update.get("additionalProperties", True) is not False
        if open_before and not open_after:
            self.found.append(("ADDITIONAL_PROPERTIES_REMOVED", path))
        required_before = set(original.get("required") or []) if isinstance(original.get("required"), list) else set()
        required_after = set(update.get("required") or []) if isinstance(update.get("required"), list) else set()
        for name, schema in after.items():
            where = f"{path}/properties/{name}"
            if name in before:
                self.compare(before[name], schema, where, depth + 1)
                continue
            has_default = isinstance(schema, dict) and "default" in schema
            if open_before:
                if schema not in ({}, True):
                    self.found.append(("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", where))
            elif name in required_after and not has_default:
                self.found.append(("REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", where))
        for name, schema in before.items():
            if name not in after and not open_after and schema is not False:
                self.found.append(("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", f"{path}/properties/{name}"))
        for name in sorted(required_after - required_before):
            schema = after.get(name)
            if name in before and not (isinstance(schema, dict) and "default" in schema):
                self.found.append(("REQUIRED_ATTRIBUTE_ADDED", f"{path}/required/{name}"))
