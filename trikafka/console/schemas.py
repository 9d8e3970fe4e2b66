"""The console's reads of the Schema Registry: its subjects, versions and the diff of two, and
record values decoded by their writer's schema.

Everything goes over the registry's REST API (Confluent's), through the same client and
decoder as ``consume --decode`` (:mod:`trikafka.commands.registry_http`): the console never
reaches into the broker's registry objects, so it reads any Confluent-compatible registry.

A registry's refusal becomes a :class:`RegistryProblem` with the HTTP status the page answers
(404 for an unknown subject, version or id; 400 for a version the registry will not take);
an unreachable registry a 503 page naming its URL.
"""

from __future__ import annotations

import difflib
import json
import re
import struct
from typing import Any

import attrs

from trikafka.commands import CommandError, RecordDecoder, RegistryClient, subject_path
from trikafka.console.render import show_bytes
from trikafka.console.values import (
    Decoded,
    RecordsPage,
    SchemaDiff,
    SchemaVersion,
    SubjectDetail,
    SubjectRow,
)

__all__ = ["REGISTRY_TIMEOUT_S", "RegistryProblem", "SchemaReads", "pretty_schema"]

#: How long one call to the registry may take before the page says it did not answer.
REGISTRY_TIMEOUT_S = 10.0

_CODE = re.compile(r"\(error (\d+)\)$")


class RegistryProblem(Exception):
    """The registry refused or did not answer; ``status`` is what the console's page answers."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def _problem(exc: CommandError) -> RegistryProblem:
    message = str(exc)
    found = _CODE.search(message)
    code = found.group(1) if found else ""
    status = 404 if code.startswith("404") else 400 if code.startswith("422") else 503
    return RegistryProblem(message, status)


def pretty_schema(schema_type: str, text: str) -> str:
    """Avro and JSON Schema re-indented (two spaces, keys as written); Protobuf as written."""
    if schema_type in ("AVRO", "JSON"):
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            return text
    return text


def _version(found: dict[str, Any]) -> SchemaVersion:
    schema_type = found.get("schemaType") or "AVRO"
    return SchemaVersion(
        subject=found["subject"],
        version=int(found["version"]),
        schema_id=int(found["id"]),
        schema_type=schema_type,
        text=pretty_schema(schema_type, found["schema"]),
        references=tuple(
            (ref["name"], ref["subject"], int(ref["version"])) for ref in found.get("references") or ()
        ),
    )


class SchemaReads:
    """One page's reads of the registry at ``url``."""

    def __init__(self, url: str, timeout: float = REGISTRY_TIMEOUT_S, *, authorization: str | None = None) -> None:
        self.url = url
        # The console's caller's HTTP Basic, passed on: the registry decides as for them.
        self.client = RegistryClient(url, timeout, authorization=authorization)

    async def _get(self, path: str) -> Any:
        try:
            return await self.client.call("GET", path)
        except CommandError as exc:
            raise _problem(exc) from None

    async def subjects(self) -> tuple[SubjectRow, ...]:
        rows = []
        for subject in sorted(await self._get("/subjects")):
            path = f"/subjects/{subject_path(subject)}"
            latest = await self._get(f"{path}/versions/latest")
            versions = await self._get(f"{path}/versions")
            rows.append(
                SubjectRow(
                    subject=subject,
                    latest_version=int(latest["version"]),
                    schema_id=int(latest["id"]),
                    schema_type=latest.get("schemaType") or "AVRO",
                    compatibility=await self._compatibility(subject),
                    versions=len(versions),
                )
            )
        return tuple(rows)

    async def _compatibility(self, subject: str) -> str:
        config = await self._get(f"/config/{subject_path(subject)}?defaultToGlobal=true")
        return str(config.get("compatibilityLevel", "—"))

    async def subject(self, subject: str) -> SubjectDetail:
        numbers = await self._get(f"/subjects/{subject_path(subject)}/versions")
        versions = [await self.version(subject, str(number)) for number in numbers]
        return SubjectDetail(subject, await self._compatibility(subject), tuple(versions))

    async def version(self, subject: str, version: str) -> SchemaVersion:
        return _version(await self._get(f"/subjects/{subject_path(subject)}/versions/{version}"))

    async def diff(self, subject: str, old: str, new: str) -> SchemaDiff:
        before, after = await self.version(subject, old), await self.version(subject, new)
        lines = difflib.unified_diff(
            before.text.splitlines(),
            after.text.splitlines(),
            fromfile=f"{subject} version {before.version} (id {before.schema_id})",
            tofile=f"{subject} version {after.version} (id {after.schema_id})",
            lineterm="",
        )
        return SchemaDiff(subject, before, after, tuple((_line_kind(line), line) for line in lines))

    async def decode(self, page: RecordsPage) -> RecordsPage:
        """``page`` with each framed value decoded by its writer's schema (by id, cached for the
        page); a value its schema will not read keeps its raw view and says why; a value whose
        "id" the registry does not know is left as it is."""
        decoder = RecordDecoder(self.client)
        where: dict[int, tuple[str | None, int | None, str | None, str | None]] = {}
        rows = []
        for row in page.records:
            if row.value_bytes is None:
                rows.append(row)
                continue
            (schema_id,) = struct.unpack_from(">i", row.value_bytes, 1)
            if schema_id not in where:
                where[schema_id] = await self._writer(schema_id, f"{page.topic}-value")
            subject, version, schema_type, unread = where[schema_id]
            if schema_type is None and unread is None:  # an id the registry does not know: not framed
                rows.append(row)
                continue
            if unread is not None:  # the registry did not answer for this id: not asked again
                rows.append(attrs.evolve(row, decoded=Decoded(schema_id, None, None, None, None, unread)))
                continue
            try:
                value = await decoder.decode(row.value_bytes)
            except CommandError as exc:
                decoded = Decoded(schema_id, schema_type, subject, version, None, str(exc))
            except Exception as exc:  # a payload its schema cannot read (fastavro, protobuf, JSON): say so
                decoded = Decoded(schema_id, schema_type, subject, version, None, f"{type(exc).__name__}: {exc}")
            else:
                text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
                shown = attrs.evolve(show_bytes(text.encode()), size=len(row.value_bytes))
                decoded = Decoded(schema_id, schema_type, subject, version, shown)
            rows.append(attrs.evolve(row, decoded=decoded))
        return attrs.evolve(page, records=tuple(rows))

    async def _writer(
        self, schema_id: int, preferred: str
    ) -> tuple[str | None, int | None, str | None, str | None]:
        """The subject, version and type of a schema id, and why not when the registry did not
        answer. The subject is the topic's value subject when the id is registered under it,
        else the first the registry lists. An id the registry does not know: all None (bytes
        that only look framed, as a binary value starting with a zero byte: shown as they are)."""
        try:
            schema = await self._get(f"/schemas/ids/{schema_id}")
            found = await self._get(f"/schemas/ids/{schema_id}/versions")
        except RegistryProblem as problem:
            return None, None, None, None if problem.status == 404 else str(problem)
        schema_type = schema.get("schemaType") or "AVRO"
        pairs = [(entry["subject"], int(entry["version"])) for entry in found or ()]
        for subject, version in pairs:
            if subject == preferred:
                return subject, version, schema_type, None
        if not pairs:
            return None, None, schema_type, None
        subject, version = pairs[0]
        return subject, version, schema_type, None


def _line_kind(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "file"
    if line.startswith("@@"):
        return "hunk"
    return {"+": "add", "-": "remove"}.get(line[:1], "same")
