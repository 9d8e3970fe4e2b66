"""KIP-932's share-group offset admin APIs: DescribeShareGroupOffsets (90), AlterShareGroupOffsets
(91) and DeleteShareGroupOffsets (92) — what ``kafka-share-groups.sh --describe/--reset-offsets/
--delete-offsets`` send.

A share group's "offset" on a partition is its share-partition start offset (SPSO): below it
every record is done. Describe answers it (-1 for a partition the group has never read) and,
from v1, the lag: the records between the SPSO and the high watermark that are not yet done.
Alter and Delete need the group to be empty (NON_EMPTY_GROUP otherwise), as Kafka: Alter sets
the SPSO and forgets what was in flight; Delete forgets the group's share partitions of a topic,
so ``share.auto.offset.reset`` decides again where the group starts. ACLs as Kafka checks:
DESCRIBE on the group and on each topic to describe; READ on the group and on each topic to
alter or delete.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trikafka.coordinator.share.partition import DONE
from trikafka.errors import ErrorCode, KafkaProtocolError
from trikafka.network.request_channel import Request
from trikafka.protocol.registry import ApiKey
from trikafka.server.apis.share_groups import other_group_kind
from trikafka.server.authorization import AclOperation, ResourceType
from trikafka.server.features import require_share_groups
from trikafka.server.kafka_apis import Answer, ApiFamily, handles

__all__ = ["ShareOffsetApis"]


class ShareOffsetApis(ApiFamily):
    def _topic_id(self, name: str) -> Any:
        info = self.replicas.topics.get(name)
        return info.topic_id if info is not None else None

    @handles(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS)
    async def handle_describe_share_group_offsets_request(self, request: Request) -> Any:
        groups = []
        for g in request.body.groups:
            entry: dict[str, Any] = {"group_id": g.group_id, "topics": [], "error_code": ErrorCode.none,
                                     "error_message": None}
            groups.append(entry)
            if not self.context.features.share_groups_enabled:
                entry.update(error_code=ErrorCode.unsupported_version, error_message="Share groups are disabled.")
                continue
            if not self.authorize(request, AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id):
                entry["error_code"] = ErrorCode.group_authorization_failed
                continue
            if g.group_id not in self.context.shares.groups and other_group_kind(self.context, g.group_id):
                entry.update(error_code=ErrorCode.group_id_not_found,
                             error_message=f"Group {g.group_id} is not a share group.")
                continue
            if g.topics is None:
                wanted: dict[str, list[int]] = {}
                for group_id, topic, partition in self.context.shares.partitions:
                    if group_id == g.group_id:
                        wanted.setdefault(topic, []).append(partition)
            else:
                wanted = {t.topic_name: list(t.partitions) for t in g.topics}
            for topic, partitions in sorted(wanted.items()):
                if not self.authorize(request, AclOperation.DESCRIBE, ResourceType.TOPIC, topic):
                    continue
                entry["topics"].append(
                    {
                        "topic_name": topic,
                        "topic_id": self._topic_id(topic),
                        "partitions": [self._described(g.group_id, topic, p) for p in sorted(partitions)],
                    }
                )
        return Answer(throttle_time=0, groups=groups)

    def _described(self, group_id: str, topic: str, partition: int) -> dict[str, Any]:
        info = self.replicas.topics.get(topic)
        out = {"partition_index": partition, "start_offset": -1, "leader_epoch": -1, "lag": -1,
               "error_code": ErrorCode.none, "error_message": None}
        if info is None or not 0 <= partition < info.partitions:
            out["error_code"] = ErrorCode.unknown_topic_or_partition
            return out
        sp = self.context.shares.partitions.get((group_id, topic, partition))
        if sp is None or not sp.initialized or sp.topic_id not in (None, str(info.topic_id)):
            return out  # never read, or state of an earlier topic of that name
        hw = self.replicas.get_log(topic, partition).high_watermark.value
        done = sum(1 for r in sp.in_flight.values() if r.state in DONE)
        out.update(start_offset=sp.start_offset, leader_epoch=0, lag=max(hw - sp.start_offset - done, 0))
        return out

    def _refused(self, request: Request, group_id: str) -> Answer | None:
        """Alter and Delete's whole-request answer when share groups are off or ``group_id`` is
        not an empty share group the principal may read; None: go on."""
        try:
            require_share_groups(self.context.features)
            self._empty_group(request, group_id)
        except KafkaProtocolError as exc:
            return Answer(throttle_time=0, error_code=exc.error_code, error_message=str(exc), responses=[])
        return None

    def _empty_group(self, request: Request, group_id: str) -> None:
        self.require(request, AclOperation.READ, ResourceType.GROUP, group_id)
        group = self.context.shares.groups.get(group_id)
        if group is None:
            if other_group_kind(self.context, group_id):
                raise KafkaProtocolError(f"Group {group_id} is not a share group.", ErrorCode.group_id_not_found)
            raise KafkaProtocolError(f"Group {group_id} not found.", ErrorCode.group_id_not_found)
        if group.members:
            raise KafkaProtocolError(f"Share group {group_id} is not empty.", ErrorCode.non_empty_group)

    @handles(ApiKey.ALTER_SHARE_GROUP_OFFSETS)
    async def handle_alter_share_group_offsets_request(self, request: Request) -> Any:
        return self._each_topic(request, self._alter_topic)

    @handles(ApiKey.DELETE_SHARE_GROUP_OFFSETS)
    async def handle_delete_share_group_offsets_request(self, request: Request) -> Any:
        return self._each_topic(request, self._delete_topic)

    def _each_topic(self, request: Request, answer: Callable[[Request, str, Any], dict[str, Any]]) -> Answer:
        """Alter's and Delete's answer: refused as a whole (:meth:`_refused`), else one entry a topic."""
        body = request.body
        refused = self._refused(request, body.group_id)
        if refused is not None:
            return refused
        responses = [answer(request, body.group_id, topic) for topic in body.topics]
        return Answer(throttle_time=0, error_code=ErrorCode.none, error_message=None, responses=responses)

    def _alter_topic(self, request: Request, group_id: str, topic: Any) -> dict[str, Any]:
        entry: dict[str, Any] = {"topic_name": topic.topic_name, "topic_id": self._topic_id(topic.topic_name),
                                 "partitions": []}
        info = self.replicas.topics.get(topic.topic_name)
        readable = self.authorize(request, AclOperation.READ, ResourceType.TOPIC, topic.topic_name)
        for p in topic.partitions:
            result = {"partition_index": p.partition_index, "error_code": ErrorCode.none, "error_message": None}
            entry["partitions"].append(result)
            if not readable:
                result["error_code"] = ErrorCode.topic_authorization_failed
            elif info is None or not 0 <= p.partition_index < info.partitions:
                result["error_code"] = ErrorCode.unknown_topic_or_partition
            elif p.start_offset < 0:
                result.update(error_code=ErrorCode.invalid_request, error_message="StartOffset must be >= 0.")
            else:
                log = self.replicas.get_log(topic.topic_name, p.partition_index)
                shares = self.context.shares
                sp = shares.share_partition(group_id, topic.topic_name, p.partition_index, str(info.topic_id))
                sp.reset_to(min(max(p.start_offset, log.log_start_offset), log.high_watermark.value))
                shares.changed(sp)
        return entry

    def _delete_topic(self, request: Request, group_id: str, topic: Any) -> dict[str, Any]:
        entry = {"topic_name": topic.topic_name, "topic_id": self._topic_id(topic.topic_name),
                 "error_code": ErrorCode.none, "error_message": None}
        if not self.authorize(request, AclOperation.READ, ResourceType.TOPIC, topic.topic_name):
            entry["error_code"] = ErrorCode.topic_authorization_failed
        elif topic.topic_name not in self.replicas.topics:
            entry["error_code"] = ErrorCode.unknown_topic_or_partition
        else:
            self.context.shares.forget_topic(group_id, topic.topic_name)
        return entry
