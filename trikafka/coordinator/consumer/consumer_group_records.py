"""Consumer groups in ``__consumer_offsets``: Kafka's record types, as this broker writes them.

Theory of operation
-------------------
Kafka persists a consumer group as several keyed records in the group's partition of
``__consumer_offsets``, last record per key winning, a tombstone deleting; trikafka writes
the same record types under the same keys (as JSON, like its other records there — see
:mod:`~trikafka.coordinator.offsets`):

* ``ConsumerGroupMetadata`` (group) — the group epoch and the subscription metadata (topic →
  partition count) it was computed from (Kafka 3.x's ``ConsumerGroupPartitionMetadata``);
* ``ConsumerGroupMemberMetadata`` (group, member) — the member's subscription and identity;
* ``ConsumerGroupTargetAssignmentMetadata`` (group) — the assignment epoch;
* ``ConsumerGroupTargetAssignmentMember`` (group, member) — its partitions in the target;
* ``ConsumerGroupCurrentMemberAssignment`` (group, member) — its epochs, reconciliation state,
  assigned partitions and partitions pending revocation.

:func:`replay` rebuilds the groups from these, so a restarted broker keeps every group and
member at their epochs; members must then heartbeat within their sessions.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import attrs

from trikafka.coordinator.consumer.consumer_group import (
    Assignment,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
)

__all__ = ["GROUP_RECORD_KINDS", "current_assignment", "group_metadata", "member_metadata",
           "member_tombstones", "group_tombstones", "replay", "target_member", "target_metadata"]

GROUP_RECORD_KINDS = (
    "ConsumerGroupMetadata",
    "ConsumerGroupMemberMetadata",
    "ConsumerGroupTargetAssignmentMetadata",
    "ConsumerGroupTargetAssignmentMember",
    "ConsumerGroupCurrentMemberAssignment",
)
Record = tuple[bytes, dict[str, Any] | None]
_MEMBER_FIELDS = ("instance_id", "rack_id", "client_id", "client_host", "subscribed_topic_names",
                  "subscribed_topic_regex", "server_assignor", "rebalance_timeout_ms")


def _key(*parts: str) -> bytes:
    return json.dumps(list(parts)).encode()


def _plain(assignment: Assignment) -> dict[str, list[int]]:
    return {t: sorted(ps) for t, ps in assignment.items()}


def group_metadata(group: ConsumerGroup) -> Record:
    value = {"epoch": group.group_epoch, "subscription_metadata": group.subscription_metadata}
    return _key("ConsumerGroupMetadata", group.group_id), value


def target_metadata(group: ConsumerGroup) -> Record:
    return _key("ConsumerGroupTargetAssignmentMetadata", group.group_id), {"assignment_epoch": group.assignment_epoch}


def member_metadata(group_id: str, member: ConsumerGroupMember) -> Record:
    value: dict[str, Any] = {name: getattr(member, name) for name in _MEMBER_FIELDS}
    value["classic_member_metadata"] = None if member.classic_protocols is None else {  # Kafka's ClassicMemberMetadata
        "session_timeout_ms": member.classic_session_timeout_ms,
        "supported_protocols": [[name, metadata.hex()] for name, metadata in member.classic_protocols],
    }
    return _key("ConsumerGroupMemberMetadata", group_id, member.member_id), value


def target_member(group_id: str, member_id: str, assignment: Assignment) -> Record:
    return _key("ConsumerGroupTargetAssignmentMember", group_id, member_id), {"partitions": _plain(assignment)}


def current_assignment(group_id: str, member: ConsumerGroupMember) -> Record:
    value = {
        "member_epoch": member.member_epoch,
        "previous_member_epoch": member.previous_member_epoch,
        "state": member.state.value,
        "assigned_partitions": _plain(member.assigned),
        "partitions_pending_revocation": _plain(member.pending_revocation),
    }
    return _key("ConsumerGroupCurrentMemberAssignment", group_id, member.member_id), value


def member_tombstones(group_id: str, member_id: str) -> list[Record]:
    """Kafka's order: current assignment, target, then the member."""
    return [
        (_key("ConsumerGroupCurrentMemberAssignment", group_id, member_id), None),
        (_key("ConsumerGroupTargetAssignmentMember", group_id, member_id), None),
        (_key("ConsumerGroupMemberMetadata", group_id, member_id), None),
    ]


def group_tombstones(group: ConsumerGroup) -> list[Record]:
    records = [r for member_id in group.members for r in member_tombstones(group.group_id, member_id)]
    records.append((_key("ConsumerGroupTargetAssignmentMetadata", group.group_id), None))
    records.append((_key("ConsumerGroupMetadata", group.group_id), None))
    return records


def replay(records: Iterable[tuple[list[Any], dict[str, Any] | None]]) -> dict[str, ConsumerGroup]:
    """Rebuild the consumer groups from the offsets topic's records (others are skipped)."""
    groups: dict[str, ConsumerGroup] = {}
    members: dict[tuple[str, str], dict[str, Any]] = {}
    for key, value in records:
        kind = key[0]
        if kind not in GROUP_RECORD_KINDS:
            continue
        group_id = key[1]
        if kind == "ConsumerGroupMetadata" and value is None:
            groups.pop(group_id, None)
            for gm in [gm for gm in members if gm[0] == group_id]:
                del members[gm]
            continue
        group = groups.setdefault(group_id, ConsumerGroup(group_id))
        if kind == "ConsumerGroupMetadata":
            group.group_epoch = value["epoch"]  # type: ignore[index]  # a tombstone went above
            group.subscription_metadata = dict(value["subscription_metadata"])  # type: ignore[index]  # as above
        elif kind == "ConsumerGroupTargetAssignmentMetadata":
            group.assignment_epoch = value["assignment_epoch"] if value else 0
        elif kind == "ConsumerGroupTargetAssignmentMember":
            if value is None:
                group.target.pop(key[2], None)
            else:
                group.target[key[2]] = {t: frozenset(ps) for t, ps in value["partitions"].items()}
        elif value is None:
            if kind == "ConsumerGroupMemberMetadata":
                members.pop((group_id, key[2]), None)
        else:
            members.setdefault((group_id, key[2]), {}).update(value)
    for (group_id, member_id), fields in members.items():
        target = groups.get(group_id)
        if target is None or "client_id" not in fields:
            continue
        member = ConsumerGroupMember(
            member_id=member_id,
            **{name: fields[name] for name in _MEMBER_FIELDS if name != "subscribed_topic_names"},
            subscribed_topic_names=tuple(fields["subscribed_topic_names"]),
        )
        classic = fields.get("classic_member_metadata")
        if classic is not None:
            member = attrs.evolve(
                member,
                classic_protocols=tuple((name, bytes.fromhex(m)) for name, m in classic["supported_protocols"]),
                classic_session_timeout_ms=classic["session_timeout_ms"],
            )
        if "member_epoch" in fields:
            member = attrs.evolve(
                member,
                member_epoch=fields["member_epoch"],
                previous_member_epoch=fields["previous_member_epoch"],
                state=MemberState(fields["state"]),
                assigned=fields["assigned_partitions"],
                pending_revocation=fields["partitions_pending_revocation"],
            )
        target.put(member)
    return groups
