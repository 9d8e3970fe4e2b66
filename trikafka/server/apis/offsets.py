"""ListOffsets and DeleteRecords: where a partition starts and ends, and moving its start.

ListOffsets' special timestamps are Kafka's: -2 earliest (log start offset), -1 latest (the
high watermark; the last stable offset under read_committed, ``isolation_level`` 1), -3 the record with
the largest timestamp (KIP-734), -4 earliest local (same as earliest: no tiered storage), -5
latest tiered (none: -1). Any other timestamp finds the first record at or after it through
the time index. Both answer NOT_LEADER_OR_FOLLOWER for a partition this broker does not lead.
"""

from __future__ import annotations

from typing import Any

from trikafka.errors import ErrorCode, KafkaProtocolError
from trikafka.network.request_channel import Request
from trikafka.protocol.registry import ApiKey
from trikafka.server.authorization import AclOperation, ResourceType
from trikafka.server.kafka_apis import Answer, ApiFamily, errors_into, handles
from trikafka.server.replica.cluster_view import cluster_view, leader_epoch_error

__all__ = ["OffsetApis"]

EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -2, -1, -3, -4, -5


class OffsetApis(ApiFamily):
    def _leader_log(self, topic: str, partition: int, current_leader_epoch: int = -1) -> tuple[Any, int]:
        """(the partition's log, leader epoch); raises unless this broker leads it, at the
        epoch the client believes in (-1: any)."""
        partition_log = self.replicas.get_log(topic, partition)
        lead = cluster_view(self.context).leadership(topic, partition)
        if epoch_error := leader_epoch_error(current_leader_epoch, lead):
            raise KafkaProtocolError(f"leader epoch {current_leader_epoch} of {topic}-{partition}", epoch_error)
        if lead.leader != self.context.config.node_id:
            raise KafkaProtocolError(
                f"this broker does not lead {topic}-{partition}", ErrorCode.not_leader_or_follower
            )
        return partition_log, lead.leader_epoch

    def _lookup(self, partition_log: Any, timestamp: int, committed: bool = False) -> tuple[int, int]:
        """(timestamp, offset) for one ListOffsets query."""
        if timestamp in (EARLIEST, EARLIEST_LOCAL):
            return -1, partition_log.log_start_offset
        if timestamp == LATEST:
            if committed:
                return -1, partition_log.last_stable_offset.value
            return -1, partition_log.high_watermark.value
        if timestamp == LATEST_TIERED:
            return -1, -1
        if timestamp == MAX_TIMESTAMP:
            if partition_log.log_end_offset == partition_log.log_start_offset:
                return -1, -1
            return partition_log.max_timestamp, partition_log.offset_of_max_timestamp
        found = partition_log.offset_for_timestamp(timestamp)
        if found is None:
            return -1, -1
        offset, ts = found
        if committed and offset >= partition_log.last_stable_offset.value:
            return -1, -1  # not yet readable under read_committed
        return ts, offset

    @handles(ApiKey.LIST_OFFSETS)
    async def handle_list_offset_request(self, request: Request) -> Any:
        committed = getattr(request.body, "isolation_level", 0) == 1
        topics = []
        for topic in request.body.topics:
            partitions = []
            for p in topic.partitions:
                result: dict[str, Any] = {
                    "partition_index": p.partition_index,
                    "error_code": ErrorCode.none,
                    "timestamp": -1,
                    "offset": -1,
                    "leader_epoch": -1,
                    "old_style_offsets": [],
                }
                with errors_into(result):
                    self.require(request, AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name)
                    partition_log, epoch = self._leader_log(
                        topic.name, p.partition_index, getattr(p, "current_leader_epoch", -1)
                    )
                    timestamp, offset = self._lookup(partition_log, p.timestamp, committed)
                    result.update(timestamp=timestamp, offset=offset, leader_epoch=epoch)
                partitions.append(result)
            topics.append({"name": topic.name, "partitions": partitions})
        return Answer(throttle_time=0, topics=topics)

    @handles(ApiKey.DELETE_RECORDS)
    async def handle_delete_records_request(self, request: Request) -> Any:
        topics = []
        for topic in request.body.topics:
            partitions = []
            for p in topic.partitions:
                result: dict[str, Any] = {
                    "partition_index": p.partition_index,
                    "low_watermark": -1,
                    "error_code": ErrorCode.none,
                }
                with errors_into(result):
                    self.require(request, AclOperation.DELETE, ResourceType.TOPIC, topic.name)
                    partition_log, _ = self._leader_log(topic.name, p.partition_index)
                    high = partition_log.high_watermark.value
                    offset = high if p.offset == -1 else p.offset
                    if not 0 <= offset <= high:
                        raise KafkaProtocolError(
                            f"offset {p.offset} is not in [0, {high}]", ErrorCode.offset_out_of_range
                        )
                    result["low_watermark"] = partition_log.delete_records_before(offset)
                partitions.append(result)
            topics.append({"name": topic.name, "partitions": partitions})
        return Answer(throttle_time=0, topics=topics)
