"""``topics list|create|delete|describe|alter-config``: kafka-topics.sh, on the Trio admin client.

``describe`` adds what people open a console for: each partition's low and high watermark
(ListOffsets) and its size on the leader (DescribeLogDirs), beside leader, replicas and ISR.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any

from trikafka.client import (
    Admin,
    ConfigResource,
    KafkaError,
    NewTopic,
    OffsetSpec,
    TopicPartition,
    open_admin,
)
from trikafka.commands.common import (
    EXIT_OK,
    Output,
    UsageError,
    add_connection_flags,
    client_settings,
    fail,
)
from trikafka.errors import ErrorCode

__all__ = ["key_values", "partitions_of", "register", "watermarks"]


def key_values(items: Iterable[str], flag: str) -> dict[str, str]:
    """``["k=v", ...]`` → dict; a pair without ``=`` is a usage error naming the flag."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{flag} takes KEY=VALUE, not {item!r}")
        out[key.strip()] = value
    return out


async def partitions_of(admin: Admin, topics: Iterable[str]) -> dict[str, Any]:
    """topic → its metadata (``TopicInfo``); an unknown topic fails the command."""
    await admin.list_topics(internal=True)
    known = admin.client.cluster.topics
    out = {}
    for name in topics:
        info = known.get(name)
        if info is None or not info.partitions:
            raise fail(f"UNKNOWN_TOPIC_OR_PARTITION: topic {name!r} does not exist")
        out[name] = info
    return out


async def watermarks(admin: Admin, tps: Iterable[TopicPartition]) -> dict[TopicPartition, tuple[int, int]]:
    """partition → (low, high) watermark."""
    tps = list(tps)
    if not tps:
        return {}
    low = await admin.list_offsets({tp: OffsetSpec.EARLIEST for tp in tps})
    high = await admin.list_offsets({tp: OffsetSpec.LATEST for tp in tps})
    return {tp: (low[tp].offset, high[tp].offset) for tp in tps}


async def _sizes(admin: Admin) -> dict[TopicPartition, int]:
    """partition → bytes on its leader; empty when the cluster has no DescribeLogDirs."""
    try:
        by_broker = await admin.describe_log_dirs()
    except KafkaError as exc:
        if exc.error_code != ErrorCode.unsupported_version:
            raise
        return {}
    cluster = admin.client.cluster
    return {
        tp: size for node, sizes in by_broker.items() for tp, size in sizes.items() if cluster.leader_for(tp) == node
    }


async def _list(args: argparse.Namespace, out: Output) -> int:
    async with open_admin(**client_settings(args, "admin")) as admin:
        await admin.list_topics(internal=args.internal)
        topics = sorted(
            (info for info in admin.client.cluster.topics.values() if args.internal or not info.is_internal),
            key=lambda info: info.name,
        )
    rows = [
        {
            "name": t.name,
            "partitions": len(t.partitions),
            "replication_factor": max((len(p.replicas) for p in t.partitions.values()), default=0),
            "internal": t.is_internal,
        }
        for t in topics
    ]
    if out.as_json:
        out.json(rows)
    else:
        out.table(
            None,
            ["TOPIC", "PARTITIONS", "REPLICAS", "INTERNAL"],
            [(r["name"], r["partitions"], r["replication_factor"], "yes" if r["internal"] else "") for r in rows],
        )
    return EXIT_OK


async def _create(args: argparse.Namespace, out: Output) -> int:
    configs = key_values(args.config, "--config")
    async with open_admin(**client_settings(args, "admin")) as admin:
        created = await admin.create_topics([NewTopic(args.name, args.partitions, args.replication_factor, configs)])
    topic = created[args.name]
    if out.as_json:
        out.json(
            {
                "name": topic.name,
                "topic_id": str(topic.topic_id) if topic.topic_id else None,
                "partitions": topic.num_partitions,
                "replication_factor": topic.replication_factor,
            }
        )
    else:
        out.line(f"Created topic {args.name}.")
    return EXIT_OK


async def _delete(args: argparse.Namespace, out: Output) -> int:
    async with open_admin(**client_settings(args, "admin")) as admin:
        await partitions_of(admin, args.names)
        await admin.delete_topics(args.names)
    out.deleted("topic", args.names)
    return EXIT_OK


async def _describe(args: argparse.Namespace, out: Output) -> int:
    async with open_admin(**client_settings(args, "admin")) as admin:
        infos = await partitions_of(admin, args.names)
        tps = [TopicPartition(name, p) for name, info in infos.items() for p in sorted(info.partitions)]
        marks = await watermarks(admin, tps)
        sizes = await _sizes(admin)
        configs = {}
        for name in infos:
            try:
                described = await admin.describe_configs([ConfigResource.topic(name)])
            except Exception:  # noqa: BLE001 — a cluster without DescribeConfigs still has partitions
                described = {}
            # The topic's own overrides (DYNAMIC_TOPIC_CONFIG), as kafka-topics --describe lists.
            configs[name] = {k: e.value for entries in described.values() for k, e in entries.items() if e.source == 1}
    result = []
    for name, info in infos.items():
        partitions = []
        for index in sorted(info.partitions):
            p = info.partitions[index]
            low, high = marks[TopicPartition(name, index)]
            partitions.append({
                "partition": index, "leader": p.leader, "replicas": list(p.replicas), "isr": list(p.isr),
                "low_watermark": low, "high_watermark": high, "size_bytes": sizes.get(TopicPartition(name, index)),
            })
        result.append(
            {
                "name": name,
                "topic_id": str(info.topic_id) if info.topic_id else None,
                "internal": info.is_internal,
                "configs": configs[name],
                "partitions": partitions,
            }
        )
    if out.as_json:
        out.json(result)
        return EXIT_OK
    for topic in result:
        overrides = ", ".join(f"{k}={v}" for k, v in sorted(topic["configs"].items())) or "(defaults)"
        out.line(
            f"Topic: {topic['name']}  TopicId: {topic['topic_id']}  Partitions: "
            f"{len(topic['partitions'])}  Configs: {overrides}"
        )
        out.table(
            None,
            ["PARTITION", "LEADER", "REPLICAS", "ISR", "LOW", "HIGH", "SIZE"],
            [
                (
                    p["partition"],
                    p["leader"],
                    ",".join(map(str, p["replicas"])),
                    ",".join(map(str, p["isr"])),
                    p["low_watermark"],
                    p["high_watermark"],
                    "" if p["size_bytes"] is None else p["size_bytes"],
                )
                for p in topic["partitions"]
            ],
        )
    return EXIT_OK


async def _alter_config(args: argparse.Namespace, out: Output) -> int:
    changes: dict[str, str | None] = {**key_values(args.set, "--set"), **{k: None for k in args.delete}}
    if not changes:
        raise UsageError("alter-config needs --set KEY=VALUE or --delete KEY")
    async with open_admin(**client_settings(args, "admin")) as admin:
        await partitions_of(admin, [args.name])
        await admin.incremental_alter_configs({ConfigResource.topic(args.name): changes})
    if out.as_json:
        out.json(
            {
                "name": args.name,
                "set": {k: v for k, v in changes.items() if v is not None},
                "deleted": [k for k, v in changes.items() if v is None],
            }
        )
    else:
        out.line(f"Altered the configuration of topic {args.name}.")
    return EXIT_OK


def register(commands: Any) -> None:
    parser = commands.add_parser("topics", help="list, create, delete, describe topics; alter their configs")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    p = actions.add_parser("list", help="topic names, partition counts")
    p.add_argument("--internal", action="store_true", help="include internal topics (__consumer_offsets)")
    p.set_defaults(run=_list)

    p = actions.add_parser("create", help="create a topic")
    p.add_argument("name")
    # kafka-topics' long names, rpk's short ones (rpk topic create -p 3 -r 1 -c key=value).
    p.add_argument("--partitions", "-p", type=int, default=-1, metavar="N", help="default: the broker's num.partitions")
    p.add_argument(
        "--replication-factor",
        "-r",
        type=int,
        default=-1,
        metavar="R",
        help="default: the broker's default.replication.factor",
    )
    p.add_argument(
        "--config", "-c", action="append", default=[], metavar="KEY=VALUE", help="a topic config (repeatable)"
    )
    p.set_defaults(run=_create)

    p = actions.add_parser("delete", help="delete topics")
    p.add_argument("names", nargs="+", metavar="NAME")
    p.set_defaults(run=_delete)

    p = actions.add_parser("describe", help="partitions: leader, replicas, ISR, watermarks, sizes; config overrides")
    p.add_argument("names", nargs="+", metavar="NAME")
    p.set_defaults(run=_describe)

    p = actions.add_parser("alter-config", help="set or delete topic config overrides")
    p.add_argument("name")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="set an override (repeatable)")
    p.add_argument("--delete", action="append", default=[], metavar="KEY", help="remove an override (repeatable)")
    p.set_defaults(run=_alter_config)

    for sub in actions.choices.values():
        add_connection_flags(sub)
