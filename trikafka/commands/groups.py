"""``groups list|describe|delete|reset-offsets``: kafka-consumer-groups.sh on the Trio admin client.

``describe`` joins what three APIs know: the members and their assignment (ConsumerGroupDescribe
for a KIP-848 ``consumer`` group, DescribeGroups for a classic one, as kafka-consumer-groups),
the committed offsets (OffsetFetch) and the log end offsets (ListOffsets); lag is end minus
committed, per partition, as kafka-consumer-groups prints it.

A share group (KIP-932) is described as kafka-share-groups.sh does: its members and their
assignment (ShareGroupDescribe), and per partition the share-partition start offset, the end
offset and the lag (DescribeShareGroupOffsets); ``reset-offsets`` moves its start offsets
(AlterShareGroupOffsets). A broker without share groups answers those as a classic group.

``reset-offsets`` is a dry run unless ``--execute`` (kafka-consumer-groups' rule): it prints the
offsets it would commit. It only acts on an inactive group (Empty or Dead), as Kafka does: a
live member would overwrite the reset with its next commit.
"""

from __future__ import annotations

import argparse
from typing import Any

from trikafka.client import Admin, KafkaError, OffsetSpec, TopicPartition, open_admin
from trikafka.commands.common import (
    EXIT_OK,
    Output,
    UsageError,
    add_connection_flags,
    client_settings,
    fail,
)
from trikafka.commands.topics import partitions_of

__all__ = ["group_lag", "register"]


async def group_lag(admin: Admin, group_id: str) -> tuple[Any, list[dict[str, Any]]]:
    """(description, one row per partition: committed, end, lag, owner)."""
    description = (await admin.describe_consumer_groups([group_id]))[group_id]
    committed = await admin.list_group_offsets(group_id)
    owners = {tp: m for m in description.members for tp in m.partitions}
    tps = sorted(set(committed) | set(owners))
    ends = await admin.list_offsets({tp: OffsetSpec.LATEST for tp in tps}) if tps else {}
    rows = []
    for tp in tps:
        end = ends[tp].offset
        offset = committed.get(tp)
        member = owners.get(tp)
        rows.append({
            "topic": tp.topic, "partition": tp.partition, "committed": offset, "end": end,
            "lag": None if offset is None else max(0, end - offset),
            "member_id": member.member_id if member else None,
            "client_id": member.client_id if member else None,
            "host": member.client_host if member else None,
        })
    return description, rows


async def share_group_view(admin: Admin, group_id: str) -> dict[str, Any] | None:
    """A share group as ``describe`` prints it; None when ``group_id`` is no share group."""
    try:
        description = (await admin.describe_share_groups([group_id]))[group_id]
    except KafkaError:  # a broker without share groups
        return None
    if description.state == "Dead":
        return None
    offsets = await admin.list_share_group_offsets(group_id)
    ends = await admin.list_offsets({tp: OffsetSpec.LATEST for tp in offsets}) if offsets else {}
    owners: dict[TopicPartition, list[str]] = {}
    for m in description.members:
        for tp in m.partitions:
            owners.setdefault(tp, []).append(m.client_id)
    rows: list[dict[str, Any]] = [
        {"topic": tp.topic, "partition": tp.partition, "start_offset": o.start_offset, "end": ends[tp].offset,
         "lag": o.lag, "members": sorted(owners.get(tp, []))}
        for tp, o in sorted(offsets.items())
    ]
    return {
        "group": group_id,
        "state": description.state,
        "type": "share",
        "assignor": description.assignor,
        "members": [
            {
                "member_id": m.member_id,
                "client_id": m.client_id,
                "host": m.client_host,
                "member_epoch": m.member_epoch,
                "partitions": [[tp.topic, tp.partition] for tp in m.partitions],
            }
            for m in description.members
        ],
        "offsets": rows,
        "lag": sum(max(r["lag"], 0) for r in rows),
    }


def _print_share(out: Output, group: dict[str, Any]) -> None:
    out.line(f"Group: {group['group']}  Type: share  State: {group['state']}  Assignor: {group['assignor']}  "
             f"Members: {len(group['members'])}  Lag: {group['lag']}")
    out.table(None, ["TOPIC", "PARTITION", "START-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBERS"], [
        (r["topic"], r["partition"], "-" if r["start_offset"] < 0 else r["start_offset"], r["end"],
         "-" if r["lag"] < 0 else r["lag"], ",".join(r["members"]) or "-") for r in group["offsets"]])


async def _list(args: argparse.Namespace, out: Output) -> int:
    async with open_admin(**client_settings(args, "admin")) as admin:
        groups = await admin.list_groups()
    # TYPE is Kafka's group type (kafka-groups.sh, ListGroups' group_type): classic, consumer
    # or share — the word `describe`, the console and the metrics use; PROTOCOL-TYPE is what a
    # classic group's members joined with ("consumer" for consumers, "connect", ...).
    rows = [{"group": g.group_id, "type": g.type, "protocol_type": g.protocol_type, "state": g.state} for g in groups]
    if out.as_json:
        out.json(rows)
    else:
        out.table(
            None,
            ["GROUP", "TYPE", "PROTOCOL-TYPE", "STATE"],
            [(r["group"], r["type"], r["protocol_type"] or "-", r["state"]) for r in rows],
        )
    return EXIT_OK


async def _describe(args: argparse.Namespace, out: Output) -> int:
    result = []
    async with open_admin(**client_settings(args, "admin")) as admin:
        for group_id in args.groups:
            description, rows = await group_lag(admin, group_id)
            if description.state == "Dead" and not rows and (share := await share_group_view(admin, group_id)):
                result.append(share)
                continue
            if description.state == "Dead" and not rows:
                raise fail(f"GROUP_ID_NOT_FOUND: group {group_id!r} does not exist")
            result.append(
                {
                    "group": group_id,
                    "state": description.state,
                    "type": description.type,
                    "protocol_type": description.protocol_type,
                    "protocol": description.protocol,
                    "members": [
                        {
                            "member_id": m.member_id,
                            "group_instance_id": m.group_instance_id,
                            "client_id": m.client_id,
                            "host": m.client_host,
                            "member_epoch": m.member_epoch,
                            "partitions": [[tp.topic, tp.partition] for tp in m.partitions],
                        }
                        for m in description.members
                    ],
                    "offsets": rows,
                    "lag": sum(r["lag"] or 0 for r in rows),
                }
            )
    if out.as_json:
        out.json(result)
        return EXIT_OK
    for group in result:
        if group["type"] == "share":
            _print_share(out, group)
            continue
        out.line(f"Group: {group['group']}  Type: {group['type']}  State: {group['state']}  "
                 f"{'Assignor' if group['type'] == 'consumer' else 'Protocol'}: {group['protocol'] or '-'}  "
                 f"Members: {len(group['members'])}  Lag: {group['lag']}")
        out.table(
            None,
            ["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"],
            [
                (
                    r["topic"],
                    r["partition"],
                    "-" if r["committed"] is None else r["committed"],
                    r["end"],
                    "-" if r["lag"] is None else r["lag"],
                    r["member_id"] or "-",
                    r["host"] or "-",
                    r["client_id"] or "-",
                )
                for r in group["offsets"]
            ],
        )
    return EXIT_OK


async def _delete(args: argparse.Namespace, out: Output) -> int:
    async with open_admin(**client_settings(args, "admin")) as admin:
        await admin.delete_groups(args.groups)
    out.deleted("group", args.groups)
    return EXIT_OK


async def _reset_offsets(args: argparse.Namespace, out: Output) -> int:
    targets = [flag for flag in ("to_earliest", "to_latest") if getattr(args, flag)] + (
        ["to_offset"] if args.to_offset is not None else []
    )
    if len(targets) != 1:
        raise UsageError("reset-offsets needs exactly one of --to-earliest, --to-latest, --to-offset N")
    if not args.topic and not args.all_topics:
        raise UsageError("reset-offsets needs --topic TOPIC (repeatable) or --all-topics")
    async with open_admin(**client_settings(args, "admin")) as admin:
        description = (await admin.describe_consumer_groups([args.group]))[args.group]
        share = await share_group_view(admin, args.group) if description.state == "Dead" else None
        state = share["state"] if share else description.state
        if state not in ("Empty", "Dead"):
            raise fail(
                f"group {args.group!r} is {state}: offsets can only be reset while it has no members "
                "(stop its consumers)"
            )
        if share:  # kafka-share-groups.sh --reset-offsets: the share-partition start offsets
            committed = {TopicPartition(r["topic"], r["partition"]): r["start_offset"] for r in share["offsets"]
                         if r["start_offset"] >= 0}
        else:
            committed = await admin.list_group_offsets(args.group)
        if args.all_topics:
            tps = sorted(committed)
        else:
            infos = await partitions_of(admin, args.topic)
            tps = [TopicPartition(name, p) for name, info in infos.items() for p in sorted(info.partitions)]
        low = await admin.list_offsets({tp: OffsetSpec.EARLIEST for tp in tps}) if tps else {}
        high = await admin.list_offsets({tp: OffsetSpec.LATEST for tp in tps}) if tps else {}
        plan = {}
        for tp in tps:
            if targets[0] == "to_earliest":
                plan[tp] = low[tp].offset
            elif targets[0] == "to_latest":
                plan[tp] = high[tp].offset
            else:  # kafka-consumer-groups clamps an offset outside the log to its nearest end
                plan[tp] = min(max(args.to_offset, low[tp].offset), high[tp].offset)
        if args.execute and plan:
            await (admin.alter_share_group_offsets if share else admin.alter_group_offsets)(args.group, plan)
    rows = [
        {"topic": tp.topic, "partition": tp.partition, "current": committed.get(tp), "new": offset}
        for tp, offset in plan.items()
    ]
    if out.as_json:
        out.json({"group": args.group, "executed": args.execute, "offsets": rows})
    else:
        out.table(
            f"Group {args.group}: "
            + ("offsets reset" if args.execute else "dry run (add --execute to commit these offsets)"),
            ["TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
            [(r["topic"], r["partition"], "-" if r["current"] is None else r["current"], r["new"]) for r in rows],
        )
    return EXIT_OK


def register(commands: Any) -> None:
    parser = commands.add_parser("groups", help="list, describe (lag), delete groups; reset their offsets")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = actions.add_parser("list", help="groups with type (classic, consumer, share), protocol type and state")
    p.set_defaults(run=_list)
    p = actions.add_parser("describe", help="members, committed offsets, end offsets and lag per partition")
    p.add_argument("groups", nargs="+", metavar="GROUP")
    p.set_defaults(run=_describe)
    p = actions.add_parser("delete", help="delete groups (they must have no members)")
    p.add_argument("groups", nargs="+", metavar="GROUP")
    p.set_defaults(run=_delete)
    p = actions.add_parser("reset-offsets", help="move a group's committed offsets (dry run unless --execute)")
    p.add_argument("group", metavar="GROUP")
    p.add_argument(
        "--topic", action="append", default=[], metavar="TOPIC", help="every partition of TOPIC (repeatable)"
    )
    p.add_argument("--all-topics", action="store_true", help="every partition the group committed")
    p.add_argument("--to-earliest", action="store_true", help="the log start offset")
    p.add_argument("--to-latest", action="store_true", help="the log end offset")
    p.add_argument("--to-offset", type=int, metavar="N", help="offset N (clamped to the log)")
    p.add_argument("--execute", action="store_true", help="commit the new offsets (default: only show them)")
    p.set_defaults(run=_reset_offsets)
    for sub in actions.choices.values():
        add_connection_flags(sub)
