"""The committed-offset APIs of consumer groups: OffsetCommit, OffsetFetch, OffsetDelete.

Translation between kio entities and the GroupCoordinator, with Kafka's version rules
(multi-group OffsetFetch from v8, topic ids in OffsetCommit v10 and OffsetFetch v10) and its
authorization: the group first (READ to commit, DESCRIBE to fetch, DELETE to delete), then
each topic (READ to commit or delete, DESCRIBE to fetch — offsets of topics one may not
describe are never shown).
"""

from __future__ import annotations

import functools
from typing import Any

from trikafka.coordinator.group_coordinator import GroupCoordinator
from trikafka.errors import ErrorCode
from trikafka.network.request_channel import Request
from trikafka.protocol.registry import ApiKey
from trikafka.server.authorization import AclOperation, ResourceType
from trikafka.server.kafka_apis import Answer, ApiFamily, handles

__all__ = ["GroupOffsetApis"]


class GroupOffsetApis(ApiFamily):
    @property
    def coordinator(self) -> GroupCoordinator:
        return self.context.groups

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
        group_denied = not self.authorize(request, AclOperation.READ, ResourceType.GROUP, body.group_id)
        wanted: dict[tuple[str, int], tuple[int, int, str | None]] = {}
        unknown: dict[tuple[Any, int], ErrorCode] = {}
        layout: list[tuple[Any, list[tuple[int, tuple[str, int] | None]]]] = []
        refused = False
        for topic in body.topics:
            name, echo = self._topic_name(topic)
            info = self.replicas.topics.get(name) if name else None
            denied = group_denied or (
                name is not None and not self.authorize(request, AclOperation.READ, ResourceType.TOPIC, name)
            )
            refused = refused or denied
            rows: list[tuple[int, tuple[str, int] | None]] = []
            for p in topic.partitions:
                if denied:
                    unknown[(echo, p.partition_index)] = (
                        ErrorCode.group_authorization_failed if group_denied else ErrorCode.topic_authorization_failed
                    )
                    rows.append((p.partition_index, None))
                    continue
                if name is None or info is None or not 0 <= p.partition_index < info.partitions:
                    unknown[(echo, p.partition_index)] = (
                        ErrorCode.unknown_topic_id if by_id and name is None else ErrorCode.unknown_topic_or_partition
                    )
                    rows.append((p.partition_index, None))
                    continue
                tp = (name, p.partition_index)
                wanted[tp] = (p.committed_offset, getattr(p, "committed_leader_epoch", -1), p.committed_metadata)
                rows.append((p.partition_index, tp))
            layout.append((echo, rows))
        # Nothing allowed to commit: the coordinator is not asked (Kafka answers at once).
        codes = {} if group_denied or (refused and not wanted) else self.coordinator.commit_offsets(
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
        self, request: Request, group_id: str, topics: Any, by_id: bool, require_stable: bool = False
    ) -> tuple[ErrorCode, list[dict[str, Any]]]:
        if not self.authorize(request, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            return ErrorCode.group_authorization_failed, []
        may_describe = functools.partial(self.authorize, request, AclOperation.DESCRIBE, ResourceType.TOPIC)
        by_topic: dict[Any, list[dict[str, Any]]] = {}
        if topics is None:
            partitions = None
        else:
            partitions = []
            echoes = {}
            for topic in topics:
                name, echo = self._topic_name(topic)
                echoes[name] = echo
                if name is not None and not may_describe(name):
                    by_topic[echo] = [
                        {"partition_index": index, "committed_offset": -1, "committed_leader_epoch": -1,
                         "metadata": "", "error_code": ErrorCode.topic_authorization_failed}
                        for index in topic.partition_indexes
                    ]
                    continue
                for index in topic.partition_indexes:
                    partitions.append((name, index))
        code, found = self.coordinator.fetch_offsets(group_id, partitions)  # type: ignore[arg-type]  # None (unknown id) matches nothing
        for (name, index), committed in found.items():
            if topics is None and not may_describe(name):
                continue  # all of the group's offsets: only topics the principal may describe
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
                code, topics = self._fetch_group(request, group.group_id, group.topics, by_id, body.require_stable)
                groups.append({"group_id": group.group_id, "topics": topics, "error_code": code})
            return Answer(throttle_time=0, groups=groups)
        code, topics = self._fetch_group(
            request, body.group_id, body.topics, False, getattr(body, "require_stable", False)
        )
        if request.api_version < 2 and code != ErrorCode.none:
            for topic in topics:
                for partition in topic["partitions"]:
                    partition["error_code"] = code
        return Answer(throttle_time=0, topics=topics, error_code=code)

    @handles(ApiKey.OFFSET_DELETE)
    async def handle_offset_delete_request(self, request: Request) -> Any:
        body = request.body
        self.require(request, AclOperation.DELETE, ResourceType.GROUP, body.group_id)
        readable = self.authorized_names(request, AclOperation.READ, ResourceType.TOPIC, {t.name for t in body.topics})
        wanted = [(t.name, p.partition_index) for t in body.topics for p in t.partitions if t.name in readable]
        code, codes = self.coordinator.delete_offsets(body.group_id, wanted)
        for t in body.topics:
            if t.name not in readable:
                codes.update({(t.name, p.partition_index): ErrorCode.topic_authorization_failed for p in t.partitions})
        topics = [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": codes.get((t.name, p.partition_index), ErrorCode.none),
                    }
                    for p in t.partitions
                ],
            }
            for t in body.topics
        ]
        return Answer(throttle_time=0, error_code=code, topics=topics if code == ErrorCode.none else [])
