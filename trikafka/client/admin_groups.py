"""The group calls of the Trio admin client (:class:`~trikafka.client.admin.Admin`).

ListGroups on every broker, DescribeGroups, ConsumerGroupDescribe (KIP-848, falling back to
DescribeGroups) and DeleteGroups at each group's coordinator; and the per-item error rules all
admin calls share. ``Admin``'s methods of the same names call these within its timeouts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from trikafka.client.admin_types import GroupDescription, GroupListing, MemberDescription
from trikafka.client.calls import call_any_node, call_coordinator
from trikafka.client.client import CoordinatorType, KafkaClient
from trikafka.client.cluster import TopicPartition
from trikafka.client.errors import KafkaError, UnsupportedVersionError, error_for
from trikafka.errors import ErrorCode
from trikafka.protocol.registry import ApiKey

__all__ = ["Deadline", "delete_groups", "describe_consumer_groups", "describe_groups", "list_groups", "raise_first",
           "retriable"]

#: A fresh retry deadline (trio time) for each request of a call.
Deadline = Callable[[], float]


def retriable(codes: Iterable[Any]) -> list[Any]:
    """The retriable per-item codes: those make the whole call retry; the rest are raised
    per item by :func:`raise_first` after the answer is read."""
    return [code for code in codes if ErrorCode(code).retriable]


def raise_first(errors: list[tuple[str, Any, str | None]]) -> None:
    for item, code, message in errors:
        if code != ErrorCode.none:
            raise error_for(code, f"{item}: {message}" if message else item)


async def list_groups(client: KafkaClient, deadline: Deadline) -> list[GroupListing]:
    """Groups of every broker (each broker lists the groups it coordinates)."""
    await client.refresh_metadata()
    listings = []
    for node_id in sorted(client.cluster.brokers):
        answer = await call_any_node(
            client, ApiKey.LIST_GROUPS, lambda r: [r.error_code], what="ListGroups",
            deadline=deadline(), node_id=node_id, states_filter=[], types_filter=[],
        )
        listings += [
            GroupListing(
                g.group_id,
                g.protocol_type,
                getattr(g, "group_state", ""),
                (getattr(g, "group_type", "") or "classic").lower(),
            )
            for g in answer.groups
        ]
    return sorted(listings, key=lambda g: g.group_id)


async def describe_groups(
    client: KafkaClient, deadline: Deadline, group_ids: Iterable[str]
) -> dict[str, GroupDescription]:
    out = {}
    for group_id in group_ids:
        answer = await call_coordinator(
            client, group_id, CoordinatorType.GROUP, ApiKey.DESCRIBE_GROUPS,
            lambda r: [g.error_code for g in r.groups], what=f"DescribeGroups({group_id!r})",
            deadline=deadline(), groups=[group_id], include_authorized_operations=False,
        )
        group = answer.groups[0]
        out[group_id] = GroupDescription(
            group.group_id,
            group.group_state,
            group.protocol_type,
            group.protocol_data,
            tuple(
                MemberDescription(
                    m.member_id,
                    getattr(m, "group_instance_id", None),
                    m.client_id,
                    m.client_host,
                    bytes(m.member_assignment),
                )
                for m in group.members
            ),
        )
    return out


async def describe_consumer_groups(
    client: KafkaClient, deadline: Deadline, group_ids: Iterable[str]
) -> tuple[dict[str, GroupDescription], list[str]]:
    """Every group, whichever protocol it speaks, as Kafka's ``describeConsumerGroups``
    (kafka-consumer-groups --describe): ConsumerGroupDescribe (API 69) first, and
    DescribeGroups for a group the coordinator does not know as a KIP-848 consumer group
    (GROUP_ID_NOT_FOUND: a classic group, or none) or when the broker has no API 69."""
    out: dict[str, GroupDescription] = {}
    classic = []
    for group_id in group_ids:
        try:
            answer = await call_coordinator(
                client, group_id, CoordinatorType.GROUP, ApiKey.CONSUMER_GROUP_DESCRIBE,
                lambda r: retriable(g.error_code for g in r.groups), what=f"ConsumerGroupDescribe({group_id!r})",
                deadline=deadline(), group_ids=[group_id], include_authorized_operations=False,
            )
        except UnsupportedVersionError:
            classic.append(group_id)
            continue
        group = answer.groups[0]
        if group.error_code == ErrorCode.group_id_not_found:
            classic.append(group_id)
            continue
        raise_first([(f"group {group_id!r}", group.error_code, group.error_message)])
        out[group_id] = GroupDescription(
            group.group_id,
            group.group_state,
            "consumer",
            group.assignor_name,
            tuple(
                MemberDescription(
                    m.member_id,
                    m.instance_id,
                    m.client_id,
                    m.client_host,
                    b"",
                    assigned=tuple(
                        sorted(
                            TopicPartition(t.topic_name, int(p))
                            for t in m.assignment.topic_partitions
                            for p in t.partitions
                        )
                    ),
                    member_epoch=int(m.member_epoch),
                )
                for m in group.members
            ),
            type="consumer",
        )
    return out, classic


async def delete_groups(client: KafkaClient, deadline: Deadline, group_ids: Iterable[str]) -> None:
    errors = []
    for group_id in group_ids:
        try:
            await call_coordinator(
                client, group_id, CoordinatorType.GROUP, ApiKey.DELETE_GROUPS,
                lambda r: [g.error_code for g in r.results], what=f"DeleteGroups({group_id!r})",
                deadline=deadline(), groups_names=[group_id],
            )
        except KafkaError as exc:
            errors.append(exc)
    if errors:
        raise errors[0]
