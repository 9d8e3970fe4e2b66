"""The consumer-group APIs: translation between kio entities and the GroupCoordinator.

JoinGroup and SyncGroup may have to wait for other members; the coordinator hands back a
Waiter and the request waits in the purgatory, never in a request handler. Version rules
live here: MEMBER_ID_REQUIRED from JoinGroup v4, static membership from v5, batched
FindCoordinator from v4, batched LeaveGroup from v3, multi-group OffsetFetch from v8, topic
ids in OffsetCommit v10 and OffsetFetch v10.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import attrs

from trikafka.coordinator.group_coordinator import GroupCoordinator
from trikafka.coordinator.group_metadata import GroupMetadata
from trikafka.coordinator.group_protocol import JoinGroupRequest, JoinGroupResult, SyncGroupResult
from trikafka.coordinator.timers import Waiter
from trikafka.errors import ErrorCode
from trikafka.network.request_channel import Request
from trikafka.protocol.entities import error_response
from trikafka.protocol.registry import ApiKey
from trikafka.server.cluster_view import cluster_view
from trikafka.server.kafka_apis import Answer, ApiFamily, handles

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
            return make(waiter.value)

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
        waiter = self.coordinator.sync_group(
            body.group_id,
            body.generation_id,
            body.member_id,
            getattr(body, "group_instance_id", None),
            getattr(body, "protocol_type", None),
            getattr(body, "protocol_name", None),
            [(a.member_id, a.assignment) for a in body.assignments],
        )
        def make(result: SyncGroupResult) -> Any:
            return Answer(throttle_time=0, **attrs.asdict(result))

        return self._answer_later(request, waiter, make)

    @handles(ApiKey.HEARTBEAT)
    async def handle_heartbeat_request(self, request: Request) -> Any:
        body = request.body
        code = self.coordinator.heartbeat(
            body.group_id, body.generation_id, body.member_id, getattr(body, "group_instance_id", None)
        )
        return Answer(throttle_time=0, error_code=code)

    @handles(ApiKey.LEAVE_GROUP)
    async def handle_leave_group_request(self, request: Request) -> Any:
        body = request.body
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

    # --- offsets -----------------------------------------------------------------------

    def _topic_name(self, topic: Any) -> tuple[str | None, Any]:
        """(name, the key the response echoes) for a request topic by name or by id."""
        topic_id = getattr(topic, "topic_id", None)
        if topic_id is not None or not hasattr(topic, "name"):  # kio reads a zero id as None
            info = self.replicas.topic_by_id(topic_id) if topic_id is not None else None
            return (info.name if info else None), topic_id
        return topic.name, topic.name

    @handles(ApiKey.OFFSET_COMMIT)
    async def handle_offset_commit_request(self, request: Request) -> Any:
        body = request.body
        by_id = request.api_version >= 10
        wanted: dict[tuple[str, int], tuple[int, int, str | None]] = {}
        unknown: dict[tuple[Any, int], ErrorCode] = {}
        layout: list[tuple[Any, list[tuple[int, tuple[str, int] | None]]]] = []
        for topic in body.topics:
            name, echo = self._topic_name(topic)
            info = self.replicas.topics.get(name) if name else None
            rows = []
            for p in topic.partitions:
                if info is None or not 0 <= p.partition_index < info.partitions:
                    unknown[(echo, p.partition_index)] = (
                        ErrorCode.unknown_topic_id if by_id and name is None else ErrorCode.unknown_topic_or_partition
                    )
                    rows.append((p.partition_index, None))
                    continue
                tp = (name, p.partition_index)
                wanted[tp] = (p.committed_offset, getattr(p, "committed_leader_epoch", -1), p.committed_metadata)
                rows.append((p.partition_index, tp))
            layout.append((echo, rows))
        codes = self.coordinator.commit_offsets(
            body.group_id,
            getattr(body, "generation_id_or_member_epoch", getattr(body, "generation_id", -1)),
            body.member_id,
            getattr(body, "group_instance_id", None),
            wanted,
            api_version=request.api_version,
        )
        topics = []
        for echo, rows in layout:
            partitions = [
                {
                    "partition_index": index,
                    "error_code": codes[tp] if tp is not None else unknown[(echo, index)],
                }
                for index, tp in rows
            ]
            topics.append({"topic_id" if by_id else "name": echo, "partitions": partitions})
        return Answer(throttle_time=0, topics=topics)

    def _unstable(self, group_id: str, tp: tuple[str, int]) -> bool:
        transactions = self.context.transactions
        return transactions is not None and transactions.has_pending_offsets(group_id, tp)

    def _fetch_group(
        self, group_id: str, topics: Any, by_id: bool, require_stable: bool = False
    ) -> tuple[ErrorCode, list[dict[str, Any]]]:
        if topics is None:
            partitions = None
        else:
            partitions = []
            echoes = {}
            for topic in topics:
                name, echo = self._topic_name(topic)
                echoes[name] = echo
                for index in topic.partition_indexes:
                    partitions.append((name, index))
        code, found = self.coordinator.fetch_offsets(group_id, partitions)
        by_topic: dict[Any, list[dict[str, Any]]] = {}
        for (name, index), committed in found.items():
            if require_stable and self._unstable(group_id, (name, index)):
                error, committed = ErrorCode.unstable_offset_commit, None
            else:
                error = ErrorCode.none
            if by_id:
                info = self.replicas.topics.get(name) if name else None
                key = info.topic_id if info else (echoes.get(name) if topics is not None else None)
                if key is None:
                    continue
            else:
                key = name
            by_topic.setdefault(key, []).append(
                {
                    "partition_index": index,
                    "committed_offset": committed.offset if committed else -1,
                    "committed_leader_epoch": committed.leader_epoch if committed else -1,
                    "metadata": committed.metadata if committed else "",
                    "error_code": error,
                }
            )
        return code, [
            {"topic_id" if by_id else "name": key, "partitions": parts} for key, parts in by_topic.items()
        ]

    @handles(ApiKey.OFFSET_FETCH)
    async def handle_offset_fetch_request(self, request: Request) -> Any:
        body = request.body
        by_id = request.api_version >= 10
        if request.api_version >= 8:
            groups = []
            for group in body.groups:
                member_check = self.coordinator.check_offset_fetch(
                    group.group_id, getattr(group, "member_id", None), getattr(group, "member_epoch", -1)
                )
                if member_check is not None:  # v9+: a consumer group's member epoch
                    groups.append({"group_id": group.group_id, "topics": [], "error_code": member_check})
                    continue
                code, topics = self._fetch_group(group.group_id, group.topics, by_id, body.require_stable)
                groups.append({"group_id": group.group_id, "topics": topics, "error_code": code})
            return Answer(throttle_time=0, groups=groups)
        code, topics = self._fetch_group(body.group_id, body.topics, False, getattr(body, "require_stable", False))
        if request.api_version < 2 and code != ErrorCode.none:
            for topic in topics:
                for partition in topic["partitions"]:
                    partition["error_code"] = code
        return Answer(throttle_time=0, topics=topics, error_code=code)

    @handles(ApiKey.OFFSET_DELETE)
    async def handle_offset_delete_request(self, request: Request) -> Any:
        body = request.body
        wanted = [(t.name, p.partition_index) for t in body.topics for p in t.partitions]
        code, codes = self.coordinator.delete_offsets(body.group_id, wanted)
        topics = [
            {
                "name": t.name,
                "partitions": [
                    {"partition_index": p.partition_index, "error_code": codes.get((t.name, p.partition_index), ErrorCode.none)}
                    for p in t.partitions
                ],
            }
            for t in body.topics
        ]
        return Answer(throttle_time=0, error_code=code, topics=topics if code == ErrorCode.none else [])

    # --- describe, list, delete --------------------------------------------------------

    @handles(ApiKey.DESCRIBE_GROUPS)
    async def handle_describe_groups_request(self, request: Request) -> Any:
        version = request.api_version
        groups = []
        for group_id in request.body.groups:
            described = _described(group_id, self.coordinator.describe(group_id), version)
            if self.coordinator.consumer_group(group_id) is not None:  # Kafka: not a classic group
                described = _described(group_id, None, version)
                if version >= 6:
                    described["error_message"] = f"Group {group_id} is not a classic group."
            groups.append(described)
        return Answer(throttle_time=0, groups=groups)

    @handles(ApiKey.DELETE_GROUPS)
    async def handle_delete_groups_request(self, request: Request) -> Any:
        results = [
            {"group_id": group_id, "error_code": self.coordinator.delete_group(group_id)}
            for group_id in request.body.groups_names
        ]
        return Answer(throttle_time=0, results=results)


def _described(group_id: str, group: GroupMetadata | None, version: int) -> dict[str, Any]:
    """One DescribeGroups entry; a missing group is Dead (GROUP_ID_NOT_FOUND from v6)."""
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
