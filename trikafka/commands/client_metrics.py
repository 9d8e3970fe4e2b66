"""``client-metrics list|describe|alter|delete``: client-metrics subscriptions (KIP-714), as
kafka-client-metrics.sh manages them.

A subscription is a CLIENT_METRICS config resource: ``alter --name NAME`` sets the keys given
(``--metrics`` prefixes, ``*`` for all; ``--interval`` ms; ``--match`` selector=regex pairs) with
IncrementalAlterConfigs (``--generate-name`` names a new one with a random UUID, as Kafka's
tool does); ``delete`` removes every key, which removes the subscription; ``list`` is
ListConfigResources; ``describe`` shows one subscription's keys, or every subscription's.

Subscriptions are kept whether or not the broker receives telemetry; one with
``client.telemetry.enable`` off (the default) does not advertise the telemetry APIs, so no
client ever pushes: each action then says so on stderr, and how to turn it on.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from typing import Any

from trikafka.client import ConfigResource, ConfigResourceType, open_admin
from trikafka.commands.common import EXIT_OK, Output, UsageError, add_connection_flags, client_settings
from trikafka.config.client_metrics import TELEMETRY_OFF

__all__ = ["register"]

KEYS = ("metrics", "interval.ms", "match")


def _resource(name: str) -> ConfigResource:
    return ConfigResource(ConfigResourceType.CLIENT_METRICS, name)


#: GetTelemetrySubscriptions' api key: a broker receiving telemetry advertises it.
GET_TELEMETRY_SUBSCRIPTIONS = 71


async def _say_if_telemetry_off(admin: Any) -> None:
    """One line on stderr when the broker does not receive telemetry (its ApiVersions
    lacks GetTelemetrySubscriptions): the subscriptions would never be pushed to."""
    client = admin.client
    connection = await client.connection(client.least_loaded_node())
    if GET_TELEMETRY_SUBSCRIPTIONS not in connection.versions:
        print(f"trikafka: {TELEMETRY_OFF}", file=sys.stderr)


async def _list(args: argparse.Namespace, out: Output) -> int:
    async with open_admin(**client_settings(args, "admin")) as admin:
        names = sorted(r.name for r in await admin.list_config_resources())
        await _say_if_telemetry_off(admin)
    if out.as_json:
        out.json(names)
    else:
        for name in names:
            out.line(name)
    return EXIT_OK


async def _describe(args: argparse.Namespace, out: Output) -> int:
    async with open_admin(**client_settings(args, "admin")) as admin:
        names = [args.name] if args.name else sorted(r.name for r in await admin.list_config_resources())
        described = await admin.describe_configs([_resource(n) for n in names]) if names else {}
        await _say_if_telemetry_off(admin)
    found = {r.name: {e.name: e.value for e in entries.values()} for r, entries in described.items()}
    if out.as_json:
        out.json([{"name": n, "configs": found.get(n, {})} for n in names])
        return EXIT_OK
    for name in names:
        out.line(f"Client metrics configs for {name} are:")
        for key in sorted(found.get(name, {})):
            out.line(f"  {key}={found[name][key]}")
    return EXIT_OK


async def _alter(args: argparse.Namespace, out: Output) -> int:
    if bool(args.name) == bool(args.generate_name):
        raise UsageError("client-metrics alter needs exactly one of --name NAME and --generate-name")
    name = args.name or str(uuid.uuid4())
    changes = {key: value for key, value in zip(KEYS, (args.metrics, args.interval, args.match), strict=True)
               if value is not None}
    if not changes:
        raise UsageError("client-metrics alter needs --metrics, --interval or --match")
    async with open_admin(**client_settings(args, "admin")) as admin:
        await admin.incremental_alter_configs({_resource(name): changes})
        await _say_if_telemetry_off(admin)
    if out.as_json:
        out.json({"name": name, "set": changes})
    else:
        out.line(f"Altered client metrics config for {name}.")
    return EXIT_OK


async def _delete(args: argparse.Namespace, out: Output) -> int:
    async with open_admin(**client_settings(args, "admin")) as admin:
        await admin.incremental_alter_configs({_resource(args.name): dict.fromkeys(KEYS)})
        await _say_if_telemetry_off(admin)
    if out.as_json:
        out.json({"deleted": args.name})
    else:
        out.line(f"Deleted client metrics config for {args.name}.")
    return EXIT_OK


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "client-metrics", help="list, describe, alter or delete client-metrics subscriptions (KIP-714)"
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="the subscriptions' names")
    listing.set_defaults(run=_list)
    describe = actions.add_parser("describe", help="a subscription's configs (every subscription's without --name)")
    describe.add_argument("--name", help="the subscription")
    describe.set_defaults(run=_describe)
    alter = actions.add_parser("alter", help="create or change a subscription (the keys given are set)")
    alter.add_argument("--name", help="the subscription")
    alter.add_argument("--generate-name", action="store_true", help="name a new subscription with a random UUID")
    alter.add_argument("--metrics", metavar="PREFIXES", help="metric-name prefixes, comma-separated ('*': all)")
    alter.add_argument("--interval", metavar="MS", help="push interval in ms (100 to 3600000)")
    alter.add_argument("--match", metavar="PATTERNS",
                       help="selector=regex pairs, comma-separated (client_id, client_software_name, ...)")
    alter.set_defaults(run=_alter)
    delete = actions.add_parser("delete", help="remove a subscription")
    delete.add_argument("--name", required=True, help="the subscription")
    delete.set_defaults(run=_delete)
    for sub in (listing, describe, alter, delete):
        add_connection_flags(sub)
