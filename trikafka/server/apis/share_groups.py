"""KIP-932's share-group membership APIs: ShareGroupHeartbeat (76) and ShareGroupDescribe (77).

Translation only (the machine is ``coordinator/share/``): topic ids on the wire ↔ names in the
coordinator, and the rule that a group id names one kind of group. A heartbeat for a group id
that is a classic or consumer group is GROUP_ID_NOT_FOUND ("Group x is not a share group."),
as Kafka answers; the other way round is answered in ``groups.py``/``consumer_groups.py``
through :func:`share_group_exists`. ACLs as Kafka checks them: READ on the group for the
heartbeat and DESCRIBE on each subscribed topic (TOPIC_AUTHORIZATION_FAILED naming those one may
not describe), DESCRIBE on the group to describe it; READ on a topic is checked when it is
fetched.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any, TypeVar

from trikafka.coordinator.share.coordinator import ShareCoordinator
from trikafka.coordinator.share.group import ShareGroup
from trikafka.errors import ErrorCode, KafkaProtocolError
from trikafka.network.request_channel import Request
from trikafka.protocol.registry import ApiKey
from trikafka.server.authorization import AclOperation, ResourceType
from trikafka.server.features import require_share_groups
from trikafka.server.kafka_apis import Answer, ApiFamily, handles
from trikafka.server.replica.topics import TopicStore

__all__ = ["ShareGroupApis", "describe_groups", "other_group_kind", "share_group_exists", "topic_ids"]

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
ASSIGNOR_NAME = "simple"


def share_group_exists(context: Any, group_id: str) -> bool:
    shares: ShareCoordinator | None = getattr(context, "shares", None)
    return shares is not None and group_id in shares.groups


def other_group_kind(context: Any, group_id: str) -> str | None:
    """"classic" or "consumer" when ``group_id`` is a group of that kind, else None."""
    groups = context.groups
    if groups.consumer_group(group_id) is not None:
        return "consumer"
    described = groups.describe(group_id)
    if described is not None:
        return "classic"
    return None


def topic_ids(
    topics: TopicStore, assignment: Mapping[str, AbstractSet[int]], with_names: bool = False
) -> list[dict[str, Any]]:
    """An assignment as heartbeats and describes answer it: topic ids (and names) with sorted
    partitions; a topic deleted since is left out (the next epoch takes it away)."""
    answer = []
    for name, partitions in sorted(assignment.items()):
        info = topics.get(name)
        if info is None:
            continue
        entry: dict[str, Any] = {"topic_id": info.topic_id, "partitions": sorted(partitions)}
        if with_names:
            entry["topic_name"] = name
        answer.append(entry)
    return answer


class ShareGroupApis(ApiFamily):
    @handles(ApiKey.SHARE_GROUP_HEARTBEAT)
    async def handle_share_group_heartbeat_request(self, request: Request) -> Any:
        body = request.body
        answer: dict[str, Any] = {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
                                  "member_id": body.member_id, "member_epoch": body.member_epoch,
                                  "heartbeat_interval": 0, "assignment": None}
        try:
            require_share_groups(self.context.features)
            self.require(request, AclOperation.READ, ResourceType.GROUP, body.group_id)
            if not body.group_id:
                raise KafkaProtocolError("GroupId can't be empty.", ErrorCode.invalid_request)
            kind = other_group_kind(self.context, body.group_id)
            if kind is not None and body.group_id not in self.context.shares.groups:
                raise KafkaProtocolError(f"Group {body.group_id} is not a share group.", ErrorCode.group_id_not_found)
            names = body.subscribed_topic_names
            if names and self.context.acls is not None:
                allowed = self.authorized_names(request, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
                refused = sorted(set(names) - allowed)
                if refused:
                    raise KafkaProtocolError(f"Unauthorized topics: {', '.join(refused)}",
                                             ErrorCode.topic_authorization_failed)
            result = self.context.shares.heartbeat(
                body.group_id, body.member_id, body.member_epoch,
                rack_id=body.rack_id, subscribed=tuple(names) if names is not None else None,
                client_id=request.client_id or "", client_host=f"/{request.client_host}",
            )
        except KafkaProtocolError as exc:
            if exc.close_connection:
                raise
            answer.update(error_code=exc.error_code, error_message=str(exc))
            return Answer(**answer)
        answer.update(member_id=result.member_id, member_epoch=result.member_epoch,
                      heartbeat_interval=result.heartbeat_interval_ms)
        if result.assignment is not None:
            answer["assignment"] = {"topic_partitions": topic_ids(self.replicas.topics, result.assignment)}
        return Answer(**answer)

    @handles(ApiKey.SHARE_GROUP_DESCRIBE)
    async def handle_share_group_describe_request(self, request: Request) -> Any:
        if not self.context.features.share_groups_enabled:
            refused = ErrorCode.unsupported_version, "Share groups are disabled."
            return Answer(throttle_time=0, groups=[_missing(g, *refused) for g in request.body.group_ids])

        def not_found(group_id: str) -> str:
            kind = other_group_kind(self.context, group_id)
            return f"Group {group_id} is not a share group." if kind else f"Group {group_id} not found."

        return describe_groups(self, request, self.context.shares.groups.get, self._described, _missing, not_found)

    def _described(self, group: ShareGroup) -> dict[str, Any]:
        return {
            "error_code": ErrorCode.none,
            "error_message": None,
            "group_id": group.group_id,
            "group_state": group.state,
            "group_epoch": group.group_epoch,
            "assignment_epoch": group.assignment_epoch,
            "assignor_name": ASSIGNOR_NAME,
            "members": [
                {
                    "member_id": m.member_id,
                    "rack_id": m.rack_id,
                    "member_epoch": m.member_epoch,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "subscribed_topic_names": list(m.subscribed),
                    "assignment": {"topic_partitions": topic_ids(self.replicas.topics, m.assignment, with_names=True)},
                }
                for m in group.members.values()
            ],
            "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
        }


G = TypeVar("G")


def describe_groups(
    family: ApiFamily,
    request: Request,
    find: Callable[[str], G | None],
    described: Callable[[G], dict[str, Any]],
    missing: Callable[[str, ErrorCode, str | None], dict[str, Any]],
    not_found: Callable[[str], str],
) -> Answer:
    """ConsumerGroupDescribe's and ShareGroupDescribe's answer: each group the principal may
    describe and ``find`` finds, ``described``; the others, ``missing`` with the error code
    and (for a group not found) ``not_found``'s message."""
    groups = []
    include = request.body.include_authorized_operations
    for group_id in request.body.group_ids:
        if not family.authorize(request, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            groups.append(missing(group_id, ErrorCode.group_authorization_failed, None))
            continue
        group = find(group_id)
        if group is None:
            groups.append(missing(group_id, ErrorCode.group_id_not_found, not_found(group_id)))
            continue
        answer = described(group)
        if include:
            answer["authorized_operations"] = family.authorized_operations(request, ResourceType.GROUP, group_id)
        groups.append(answer)
    return Answer(throttle_time=0, groups=groups)


def _missing(group_id: str, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "group_id": group_id, "group_state": "Dead",
            "group_epoch": -1, "assignment_epoch": -1, "assignor_name": "", "members": [],
            "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}
