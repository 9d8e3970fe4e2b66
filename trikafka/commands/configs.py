"""``configs describe|alter TYPE NAME``: any resource's configuration, as kafka-configs.sh.

TYPE is ``topic``, ``broker`` or ``broker-logger`` (Kafka's ConfigResource types). ``describe``
shows the overrides (``--all``: every key, with its source); ``alter`` is
IncrementalAlterConfigs with ``--set KEY=VALUE`` and ``--delete KEY``.
"""

from __future__ import annotations

import argparse
from typing import Any

from trikafka.client import ConfigResource, ConfigResourceType, open_admin
from trikafka.commands.common import (
    EXIT_OK,
    Output,
    UsageError,
    add_connection_flags,
    client_settings,
)
from trikafka.commands.topics import key_values

__all__ = ["SOURCES", "register"]

TYPES = {
    "topic": ConfigResourceType.TOPIC,
    "broker": ConfigResourceType.BROKER,
    "broker-logger": ConfigResourceType.BROKER_LOGGER,
}

#: DescribeConfigs' config_source codes, by Kafka's names.
SOURCES = {
    -1: "UNKNOWN", 0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG", 7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG",
}


def _resource(args: argparse.Namespace) -> ConfigResource:
    return ConfigResource(TYPES[args.type], args.name)


async def _describe(args: argparse.Namespace, out: Output) -> int:
    async with open_admin(**client_settings(args, "admin")) as admin:
        described = await admin.describe_configs([_resource(args)])
    entries = sorted((e for values in described.values() for e in values.values()), key=lambda e: e.name)
    if not args.all:
        entries = [e for e in entries if not e.is_default]
    rows = [
        {
            "name": e.name,
            "value": None if e.sensitive else e.value,
            "source": SOURCES.get(e.source, str(e.source)),
            "read_only": e.read_only,
            "sensitive": e.sensitive,
        }
        for e in entries
    ]
    if out.as_json:
        out.json(rows)
    else:
        out.table(
            f"Configs of {args.type} {args.name}" + ("" if args.all else " (overrides; --all for every key)"),
            ["KEY", "VALUE", "SOURCE"],
            [(r["name"], "(sensitive)" if r["sensitive"] else r["value"], r["source"]) for r in rows],
        )
    return EXIT_OK


async def _alter(args: argparse.Namespace, out: Output) -> int:
    changes: dict[str, str | None] = {**key_values(args.set, "--set"), **{k: None for k in args.delete}}
    if not changes:
        raise UsageError("configs alter needs --set KEY=VALUE or --delete KEY")
    async with open_admin(**client_settings(args, "admin")) as admin:
        await admin.incremental_alter_configs({_resource(args): changes})
    if out.as_json:
        out.json(
            {
                "type": args.type,
                "name": args.name,
                "set": {k: v for k, v in changes.items() if v is not None},
                "deleted": [k for k, v in changes.items() if v is None],
            }
        )
    else:
        out.line(f"Altered the configuration of {args.type} {args.name}.")
    return EXIT_OK


def register(commands: Any) -> None:
    parser = commands.add_parser("configs", help="describe or alter a topic's, broker's or broker logger's configs")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    describe = actions.add_parser("describe", help="overrides, or --all keys with their source")
    describe.add_argument("--all", action="store_true", help="every key, defaults included")
    describe.set_defaults(run=_describe)
    alter = actions.add_parser("alter", help="IncrementalAlterConfigs")
    alter.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="set a key (repeatable)")
    alter.add_argument("--delete", action="append", default=[], metavar="KEY", help="remove an override (repeatable)")
    alter.set_defaults(run=_alter)
    for sub in (describe, alter):
        sub.add_argument("type", choices=sorted(TYPES), metavar="TYPE", help="topic, broker or broker-logger")
        sub.add_argument("name", metavar="NAME", help="topic name, or broker id")
        add_connection_flags(sub)
