"""KIP-848's consumer-group APIs: ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69).
(ListGroups, in ``groups.py``, lists both types of group.)

Translation only: topic ids on the wire ↔ topic names in the coordinator (an id the broker
does not know is dropped from a member's owned partitions, as Kafka's metadata image would),
v0's coordinator-generated member id (from v1 the client makes its own), and the
``group.coordinator.rebalance.protocols`` switch: without ``consumer`` the two APIs are not
advertised and not served, as in Kafka.
"""

from __future__ import annotations

from typing import Any

from trikafka.coordinator.consumer.consumer_group import Assignment, ConsumerGroup
from trikafka.coordinator.consumer.consumer_group_machine import new_member_id
from trikafka.coordinator.consumer.consumer_group_protocol import ConsumerGroupHeartbeat
from trikafka.errors import ErrorCode
from trikafka.network.request_channel import Request
from trikafka.protocol.registry import ApiKey
from trikafka.server.apis.share_groups import describe_groups, share_group_exists, topic_ids
from trikafka.server.authorization import AclOperation, ResourceType
from trikafka.server.kafka_apis import Answer, ApiFamily, handles

__all__ = ["ConsumerGroupApis"]

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
def _ms(value: Any) -> int:
    return int(value.total_seconds() * 1000) if hasattr(value, "total_seconds") else int(value)


class ConsumerGroupApis(ApiFamily):
    def _names(self, topic_partitions: Any) -> Assignment | None:
        if topic_partitions is None:
            return None
        owned: dict[str, frozenset[int]] = {}
        for entry in topic_partitions:
            info = self.replicas.topic_by_id(entry.topic_id) if entry.topic_id is not None else None
            if info is not None and entry.partitions:
                owned[info.name] = owned.get(info.name, frozenset()) | frozenset(entry.partitions)
        return owned

    @handles(ApiKey.CONSUMER_GROUP_HEARTBEAT)
    async def handle_consumer_group_heartbeat_request(self, request: Request) -> Any:
        body = request.body
        self.require(request, AclOperation.READ, ResourceType.GROUP, body.group_id)  # as Kafka
        if share_group_exists(self.context, body.group_id):
            return Answer(throttle_time=0, error_code=ErrorCode.group_id_not_found,
                          error_message=f"Group {body.group_id} is not a consumer group.", member_id=None,
                          member_epoch=-1, heartbeat_interval=0, assignment=None)
        member_id = body.member_id
        if request.api_version == 0 and not member_id and body.member_epoch == 0:
            member_id = new_member_id()
        names = body.subscribed_topic_names
        result = self.context.groups.consumer_group_heartbeat(
            ConsumerGroupHeartbeat(
                group_id=body.group_id,
                member_id=member_id,
                member_epoch=body.member_epoch,
                instance_id=body.instance_id,
                rack_id=body.rack_id,
                rebalance_timeout_ms=_ms(body.rebalance_timeout),
                subscribed_topic_names=tuple(names) if names is not None else None,
                subscribed_topic_regex=getattr(body, "subscribed_topic_regex", None),
                server_assignor=body.server_assignor,
                owned=self._names(body.topic_partitions),
                client_id=request.client_id or "",
                client_host=f"/{request.client_host}",
            )
        )
        assignment = None
        if result.assignment is not None:
            assignment = {"topic_partitions": topic_ids(self.replicas.topics, result.assignment)}
        return Answer(
            throttle_time=0,
            error_code=result.error_code,
            error_message=result.error_message,
            member_id=result.member_id,
            member_epoch=result.member_epoch,
            heartbeat_interval=result.heartbeat_interval_ms,
            assignment=assignment,
        )

    @handles(ApiKey.CONSUMER_GROUP_DESCRIBE)
    async def handle_consumer_group_describe_request(self, request: Request) -> Any:
        def not_found(group_id: str) -> str:
            if self.context.groups.describe(group_id) is not None:
                return f"Group {group_id} is not a consumer group."
            return f"Group {group_id} not found."

        groups = self.context.groups
        return describe_groups(self, request, groups.consumer_group, self._described, _missing, not_found)

    def _described(self, group: ConsumerGroup) -> dict[str, Any]:
        members = [
            {
                "member_id": m.member_id,
                "instance_id": m.instance_id,
                "rack_id": m.rack_id,
                "member_epoch": m.member_epoch,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "subscribed_topic_names": list(m.subscribed_topic_names),
                "subscribed_topic_regex": m.subscribed_topic_regex,
                "assignment": {"topic_partitions": topic_ids(self.replicas.topics, m.assigned, with_names=True)},
                "target_assignment": {
                    "topic_partitions": topic_ids(
                        self.replicas.topics, group.target.get(m.member_id, {}), with_names=True
                    )
                },
                "member_type": 0 if m.uses_classic_protocol else 1,  # KIP-1099: 0 classic, 1 consumer
            }
            for m in group.members.values()
        ]
        return {
            "error_code": ErrorCode.none,
            "error_message": None,
            "group_id": group.group_id,
            "group_state": group.state.value,
            "group_epoch": group.group_epoch,
            "assignment_epoch": group.assignment_epoch,
            "assignor_name": group.preferred_assignor(self.context.config.group_consumer_assignors[0]),
            "members": members,
            "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
        }


def _missing(group_id: str, code: ErrorCode, message: str | None) -> dict[str, Any]:
    """A group not described: refused (no state) or not a consumer group (Dead)."""
    return {"error_code": code, "error_message": message, "group_id": group_id,
            "group_state": "Dead" if code == ErrorCode.group_id_not_found else "", "group_epoch": -1,
            "assignment_epoch": -1, "assignor_name": "", "members": [],
            "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}
