"""The consumer-group APIs: translation between kio entities and the GroupCoordinator.

JoinGroup and SyncGroup may have to wait for other members; the coordinator hands back a
Waiter and the request waits in the purgatory, never in a request handler. Version rules
live here: MEMBER_ID_REQUIRED from JoinGroup v4, static membership from v5, batched
FindCoordinator from v4, batched LeaveGroup from v3. The offset APIs live in
``group_offsets.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import attrs

from trikafka.coordinator.classic.group_metadata import GroupMetadata
from trikafka.coordinator.group_coordinator import GroupCoordinator
from trikafka.coordinator.group_protocol import JoinGroupRequest, JoinGroupResult, SyncGroupRequest, SyncGroupResult
from trikafka.coordinator.timers import Waiter
from trikafka.errors import ErrorCode, KafkaProtocolError
from trikafka.network.request_channel import Request
from trikafka.protocol.entities import error_response
from trikafka.protocol.registry import ApiKey
from trikafka.server.apis.share_groups import share_group_exists
from trikafka.server.authorization import AclOperation, ResourceType
from trikafka.server.kafka_apis import Answer, ApiFamily, handles
from trikafka.server.replica.cluster_view import cluster_view

__all__ = ["GroupApis"]

GROUP_KEY, TRANSACTION_KEY = 0, 1
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
R = TypeVar("R")


def _ms(value: Any) -> int:
    """A kio timedelta field (or a plain int) in milliseconds."""
    return int(value.total_seconds() * 1000) if hasattr(value, "total_seconds") else int(value)


class GroupApis(ApiFamily):
    @property
    def coordinator(self) -> GroupCoordinator:
        return self.context.groups

    def _answer_later(self, request: Request, waiter: Waiter[R], make: Callable[[R], Any]) -> Any:
        """The response now if the waiter is done, else from the purgatory when it is."""
        if waiter.done:
            return make(waiter.value)  # type: ignore[arg-type]  # done: the value was set

        async def wait_and_respond() -> None:
            with self.context.purgatory.wait_until():
                self.context.respond(request, make(await waiter.wait()))
                return
            # The broker is stopping: answer now; the client finds the coordinator again.
            self.context.respond(request, error_response(request.spec.response_type, ErrorCode.not_coordinator))

        self.context.purgatory.delay(wait_and_respond, name=f"Delayed{request.spec.name}:{request.connection_id}")
        return None

    # --- FindCoordinator ---------------------------------------------------------------

    def _loading(self, key_type: int) -> bool:
        if key_type == TRANSACTION_KEY:
            transactions = self.context.transactions
            return transactions is not None and transactions.loading
        return self.coordinator.loading

    @handles(ApiKey.FIND_COORDINATOR)
    async def handle_find_coordinator_request(self, request: Request) -> Any:
        body = request.body
        view = cluster_view(self.context)
        keys = list(body.coordinator_keys) if request.api_version >= 4 else [body.key]
        key_type = getattr(body, "key_type", GROUP_KEY)
        coordinators = []
        for key in keys:
            broker = None
            if key_type not in (GROUP_KEY, TRANSACTION_KEY):
                error, message = ErrorCode.invalid_request, f"unknown key type {key_type}"
            elif key_type == GROUP_KEY and not self.authorize(request, AclOperation.DESCRIBE, ResourceType.GROUP, key):
                error, message = ErrorCode.group_authorization_failed, None
            elif key_type == TRANSACTION_KEY and not self.authorize(
                request, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key
            ):
                error, message = ErrorCode.transactional_id_authorization_failed, None
            elif self._loading(key_type):
                error, message = ErrorCode.coordinator_not_available, "the coordinator is loading"
            else:
                broker = view.endpoint(view.coordinator(key_type, key), request.listener_name)
                error, message = (
                    (ErrorCode.none, None)
                    if broker is not None
                    else (ErrorCode.coordinator_not_available, "no live coordinator")
                )
            coordinators.append(
                {
                    "key": key,
                    "node_id": broker.node_id if broker else -1,
                    "host": broker.host if broker else "",
                    "port": broker.port if broker else -1,
                    "error_code": error,
                    "error_message": message,
                }
            )
        if request.api_version >= 4:
            return Answer(throttle_time=0, coordinators=coordinators)
        (only,) = coordinators
        return Answer(throttle_time=0, **only)

    # --- JoinGroup / SyncGroup / Heartbeat / LeaveGroup --------------------------------

    @handles(ApiKey.JOIN_GROUP)
    async def handle_join_group_request(self, request: Request) -> Any:
        body = request.body
        self.require(request, AclOperation.READ, ResourceType.GROUP, body.group_id)
        if share_group_exists(self.context, body.group_id):  # Kafka: not a classic group
            raise KafkaProtocolError(f"Group {body.group_id} is a share group.", ErrorCode.inconsistent_group_protocol)
        version = request.api_version
        session_ms = _ms(body.session_timeout)
        rebalance_ms = _ms(body.rebalance_timeout) if version >= 1 else session_ms
        waiter = self.coordinator.join_group(
            JoinGroupRequest(
                group_id=body.group_id,
                member_id=body.member_id,
                group_instance_id=getattr(body, "group_instance_id", None),
                client_id=request.client_id or "",
                client_host=f"/{request.client_host}",
                session_timeout_ms=session_ms,
                rebalance_timeout_ms=rebalance_ms,
                protocol_type=body.protocol_type,
                protocols=[(p.name, p.metadata) for p in body.protocols],
                require_known_member_id=version >= 4,
            )
        )

        def make(result: JoinGroupResult) -> Any:
            return Answer(throttle_time=0, **attrs.asdict(result))

        return self._answer_later(request, waiter, make)

    @handles(ApiKey.SYNC_GROUP)
    async def handle_sync_group_request(self, request: Request) -> Any:
        body = request.body
        self.require(request, AclOperation.READ, ResourceType.GROUP, body.group_id)
        waiter = self.coordinator.sync_group(SyncGroupRequest(
            body.group_id,
            body.generation_id,
            body.member_id,
            getattr(body, "group_instance_id", None),
            getattr(body, "protocol_type", None),
            getattr(body, "protocol_name", None),
            [(a.member_id, a.assignment) for a in body.assignments],
        ))
        def make(result: SyncGroupResult) -> Any:
            return Answer(throttle_time=0, **attrs.asdict(result))

        return self._answer_later(request, waiter, make)

    @handles(ApiKey.HEARTBEAT)
    async def handle_heartbeat_request(self, request: Request) -> Any:
        body = request.body
        self.require(request, AclOperation.READ, ResourceType.GROUP, body.group_id)
        code = self.coordinator.heartbeat(
            body.group_id, body.generation_id, body.member_id, getattr(body, "group_instance_id", None)
        )
        return Answer(throttle_time=0, error_code=code)

    @handles(ApiKey.LEAVE_GROUP)
    async def handle_leave_group_request(self, request: Request) -> Any:
        body = request.body
        self.require(request, AclOperation.READ, ResourceType.GROUP, body.group_id)
        if request.api_version >= 3:
            members = [(m.member_id, m.group_instance_id) for m in body.members]
        else:
            members = [(body.member_id, None)]
        code, codes = self.coordinator.leave_group(body.group_id, members)
        if request.api_version < 3:
            return Answer(throttle_time=0, error_code=codes[0] if codes else code)
        return Answer(
            throttle_time=0,
            error_code=code,
            members=[
                {"member_id": member_id, "group_instance_id": instance_id, "error_code": member_code}
                for (member_id, instance_id), member_code in zip(members, codes, strict=False)
            ],
        )

    # --- describe, list, delete --------------------------------------------------------

    @handles(ApiKey.DESCRIBE_GROUPS)
    async def handle_describe_groups_request(self, request: Request) -> Any:
        version = request.api_version
        include = getattr(request.body, "include_authorized_operations", False)
        groups = []
        for group_id in request.body.groups:
            if not self.authorize(request, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
                groups.append(_described(group_id, None, version, ErrorCode.group_authorization_failed))
                continue
            described = _described(group_id, self.coordinator.describe(group_id), version)
            if self.coordinator.consumer_group(group_id) is not None or share_group_exists(self.context, group_id):
                described = _described(group_id, None, version)
                if version >= 6:
                    described["error_message"] = f"Group {group_id} is not a classic group."
            if include and described["error_code"] == ErrorCode.none:
                described["authorized_operations"] = self.authorized_operations(request, ResourceType.GROUP, group_id)
            groups.append(described)
        return Answer(throttle_time=0, groups=groups)

    @handles(ApiKey.LIST_GROUPS)
    async def handle_list_groups_request(self, request: Request) -> Any:
        states = {s.lower() for s in getattr(request.body, "states_filter", ())}
        types = {t.lower() for t in getattr(request.body, "types_filter", ())}
        # DESCRIBE on the cluster lists every group; else only the groups one may describe.
        everything = self.authorize(request, AclOperation.DESCRIBE, ResourceType.CLUSTER)
        consumer_groups = self.coordinator.consumer.groups
        listed = [
            {
                "group_id": g.group_id,
                "protocol_type": g.protocol_type or "",
                "group_state": g.state.value,
                "group_type": "classic",
            }
            for g in self.coordinator.list_groups(states)
            if (not types or "classic" in types) and g.group_id not in consumer_groups
        ]
        if not types or "consumer" in types:  # KIP-848 groups: type consumer, their own states
            listed += [
                {
                    "group_id": g.group_id,
                    "protocol_type": "consumer",
                    "group_state": g.state.value,
                    "group_type": "consumer",
                }
                for g in consumer_groups.values()
                if not states or g.state.value.lower() in states
            ]
        shares = self.context.shares
        if shares is not None and (not types or "share" in types):  # KIP-932 groups
            listed += [
                {"group_id": g.group_id, "protocol_type": "share", "group_state": g.state, "group_type": "share"}
                for g in shares.groups.values()
                if not states or g.state.lower() in states
            ]
        listed = [
            g for g in listed
            if everything or self.authorize(request, AclOperation.DESCRIBE, ResourceType.GROUP, g["group_id"])
        ]
        return Answer(throttle_time=0, error_code=ErrorCode.none, groups=listed)

    @handles(ApiKey.DELETE_GROUPS)
    async def handle_delete_groups_request(self, request: Request) -> Any:
        results = [
            {"group_id": group_id, "error_code": self._delete_group(group_id)
             if self.authorize(request, AclOperation.DELETE, ResourceType.GROUP, group_id)
             else ErrorCode.group_authorization_failed}
            for group_id in request.body.groups_names
        ]
        return Answer(throttle_time=0, results=results)


    def _delete_group(self, group_id: str) -> ErrorCode:
        shares = self.context.shares
        if shares is None or group_id not in shares.groups:
            return self.coordinator.delete_group(group_id)
        if shares.groups[group_id].members:
            return ErrorCode.non_empty_group
        shares.delete_group(group_id)
        return ErrorCode.none


def _described(
    group_id: str, group: GroupMetadata | None, version: int, refused: ErrorCode | None = None
) -> dict[str, Any]:
    """One DescribeGroups entry; a missing group is Dead (GROUP_ID_NOT_FOUND from v6); a
    group the principal may not describe says only ``refused``."""
    if refused is not None:
        return {"error_code": refused, "error_message": None, "group_id": group_id, "group_state": "",
                "protocol_type": "", "protocol_data": "", "members": [],
                "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}
    if group is None:
        return {
            "error_code": ErrorCode.group_id_not_found if version >= 6 else ErrorCode.none,
            "error_message": f"Group {group_id} not found." if version >= 6 else None,
            "group_id": group_id,
            "group_state": "Dead",
            "protocol_type": "",
            "protocol_data": "",
            "members": [],
            "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
        }
    stable = group.state.value == "Stable"
    protocol = group.protocol_name if stable else None
    return {
        "error_code": ErrorCode.none,
        "error_message": None,
        "group_id": group_id,
        "group_state": group.state.value,
        "protocol_type": group.protocol_type or "",
        "protocol_data": protocol or "",  # Kafka's summary
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_metadata": m.metadata_for(protocol) if protocol else b"",
                "member_assignment": m.assignment if stable else b"",
            }
            for m in group.members.values()
        ],
        "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
    }
