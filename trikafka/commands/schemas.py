"""``schemas list|get|register|check|delete``: a Schema Registry's subjects, over its REST API.

Any Confluent-compatible registry (``--registry URL``, default ``http://127.0.0.1:8081``, where
``make run`` serves the broker's): ``list`` the subjects with their latest version, ``get`` a
subject's version (or ``--id``), ``register`` a schema file (the type from ``--type`` or the
file's extension: ``.avsc`` AVRO, ``.json`` JSON, ``.proto`` PROTOBUF; ``--reference
NAME=SUBJECT:VERSION``), ``check`` it against a subject (exit 1 when incompatible, with the
reasons), ``delete`` a subject or ``--version`` (soft; ``--permanent`` after).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from trikafka.commands.common import EXIT_KAFKA, EXIT_OK, Output, UsageError
from trikafka.commands.registry_http import DEFAULT_REGISTRY, RegistryClient, subject_path

__all__ = ["add_registry_flag", "register"]

_TYPES = {".avsc": "AVRO", ".avro": "AVRO", ".json": "JSON", ".proto": "PROTOBUF"}


def _client(args: argparse.Namespace) -> RegistryClient:
    return RegistryClient(args.registry, args.timeout)


async def _list(args: argparse.Namespace, out: Output) -> int:
    client = _client(args)
    query = "?deleted=true" if args.deleted else ""
    rows = []
    for subject in await client.call("GET", f"/subjects{query}"):
        if not subject.startswith(args.prefix):
            continue
        latest = await client.call("GET", f"/subjects/{subject_path(subject)}/versions/latest{query}")
        rows.append(
            {
                "subject": subject,
                "version": latest["version"],
                "id": latest["id"],
                "type": latest.get("schemaType", "AVRO"),
            }
        )
    if out.as_json:
        out.json(rows)
    else:
        out.table(
            f"Subjects at {client.url}",
            ["SUBJECT", "LATEST", "ID", "TYPE"],
            [(r["subject"], r["version"], r["id"], r["type"]) for r in rows],
        )
    return EXIT_OK


def _pretty(schema: str, schema_type: str) -> str:
    if schema_type == "PROTOBUF":
        return schema
    try:
        return json.dumps(json.loads(schema), indent=2)
    except ValueError:
        return schema


async def _get(args: argparse.Namespace, out: Output) -> int:
    client = _client(args)
    if args.id is not None:
        found = await client.call("GET", f"/schemas/ids/{args.id}")
    elif args.subject:
        found = await client.call("GET", f"/subjects/{subject_path(args.subject)}/versions/{args.version}")
    else:
        raise UsageError("schemas get needs a SUBJECT or --id")
    if out.as_json:
        out.json(found)
    else:
        where = (
            f"id {args.id}"
            if args.id is not None
            else f"{found['subject']} version {found['version']} (id {found['id']})"
        )
        out.line(f"# {where}, {found.get('schemaType', 'AVRO')}" + "".join(
            f"\n# reference {r['name']} = {r['subject']}:{r['version']}" for r in found.get("references") or ()
        ))
        out.line(_pretty(found["schema"], found.get("schemaType", "AVRO")))
    return EXIT_OK


def _body(args: argparse.Namespace) -> dict[str, Any]:
    path = Path(args.file)
    try:
        text = path.read_text()
    except OSError as exc:
        raise UsageError(f"{args.file}: {exc.strerror or exc}") from None
    schema_type = (args.type or _TYPES.get(path.suffix.lower()) or "AVRO").upper()
    body: dict[str, Any] = {"schema": text, "schemaType": schema_type}
    references = []
    for item in args.reference:
        name, sep, rest = item.partition("=")
        subject, colon, version = rest.rpartition(":")
        if not sep or not colon or not name or not subject or not version.isdigit():
            raise UsageError(f"--reference {item!r}: give NAME=SUBJECT:VERSION")
        references.append({"name": name, "subject": subject, "version": int(version)})
    if references:
        body["references"] = references
    return body


async def _register(args: argparse.Namespace, out: Output) -> int:
    found = await _client(args).call("POST", f"/subjects/{subject_path(args.subject)}/versions", _body(args))
    if out.as_json:
        out.json(found)
    else:
        out.line(f"Registered {args.file} under {args.subject}: version {found.get('version')}, id {found['id']}.")
    return EXIT_OK


async def _check(args: argparse.Namespace, out: Output) -> int:
    path = f"/compatibility/subjects/{subject_path(args.subject)}/versions"
    path += f"/{args.version}?verbose=true" if args.version else "?verbose=true"
    verdict = await _client(args).call("POST", path, _body(args))
    if out.as_json:
        out.json(verdict)
    elif verdict["is_compatible"]:
        out.line(f"{args.file} is compatible with {args.subject}.")
    else:
        out.line(f"{args.file} is NOT compatible with {args.subject}:")
        for reason in verdict.get("messages") or ():
            out.line(f"  {reason}")
    return EXIT_OK if verdict["is_compatible"] else EXIT_KAFKA


async def _delete(args: argparse.Namespace, out: Output) -> int:
    path = f"/subjects/{subject_path(args.subject)}"
    if args.version:
        path += f"/versions/{args.version}"
    found = await _client(args).call("DELETE", path + ("?permanent=true" if args.permanent else ""))
    versions = found if isinstance(found, list) else [found]
    if out.as_json:
        out.json({"subject": args.subject, "versions": versions, "permanent": args.permanent})
    else:
        kind = "permanently" if args.permanent else "(soft; --permanent to remove)"
        out.line(f"Deleted {args.subject} version(s) {', '.join(map(str, versions))} {kind}.")
    return EXIT_OK


def add_registry_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--registry", default=DEFAULT_REGISTRY, metavar="URL", help=f"the Schema Registry (default {DEFAULT_REGISTRY})"
    )


def register(commands: Any) -> None:
    parser = commands.add_parser("schemas", help="list, get, register, check or delete Schema Registry subjects")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="subjects with their latest version")
    listing.add_argument("--deleted", action="store_true", help="soft-deleted subjects too")
    listing.add_argument("--prefix", default="", help="only subjects starting with this")
    listing.set_defaults(run=_list)
    get = actions.add_parser("get", help="a subject's version (default latest), or --id")
    get.add_argument("subject", nargs="?")
    get.add_argument("--version", default="latest")
    get.add_argument("--id", type=int)
    get.set_defaults(run=_get)
    reg = actions.add_parser("register", help="register a schema file under a subject")
    check = actions.add_parser("check", help="is a schema file compatible with a subject? (exit 1 if not)")
    check.add_argument("--version", help="against this version only (default: as registering would check)")
    for sub, run in ((reg, _register), (check, _check)):
        sub.add_argument("subject")
        sub.add_argument("file")
        sub.add_argument(
            "--type", choices=["AVRO", "JSON", "PROTOBUF"], type=str.upper, help="default: from the extension"
        )
        sub.add_argument(
            "--reference", action="append", default=[], metavar="NAME=SUBJECT:VERSION", help="a reference (repeatable)"
        )
        sub.set_defaults(run=run)
    delete = actions.add_parser("delete", help="soft-delete a subject or --version; --permanent after")
    delete.add_argument("subject")
    delete.add_argument("--version")
    delete.add_argument("--permanent", action="store_true")
    delete.set_defaults(run=_delete)
    for sub in (listing, get, reg, check, delete):
        add_registry_flag(sub)
        sub.add_argument("--json", action="store_true", help="JSON on stdout, for scripts")
        sub.add_argument(
            "--timeout", type=float, default=10.0, metavar="SECONDS", help="give up on the registry after this long"
        )
