"""Produce: validate, append, acknowledge — per partition, in one response.

acks=0 gets no response at all (``NoOpResponse``: the connection unmutes and reads on);
acks=1 and acks=-1 answer once the batches are in the log — with one replica the ISR is this
broker, so "all" is "leader"; in an in-process cluster the leader's append reaches every
in-sync follower before it returns (:mod:`trikafka.cluster`). Anything else is
INVALID_REQUIRED_ACKS for every partition. A partition this broker does not lead gets
NOT_LEADER_OR_FOLLOWER (with the current leader from v10); acks=-1 to a partition whose ISR
is smaller than ``min.insync.replicas`` gets NOT_ENOUGH_REPLICAS and is not appended.
Errors are per partition (UNKNOWN_TOPIC_OR_PARTITION, MESSAGE_TOO_LARGE, CORRUPT_MESSAGE,
...) so one bad partition never fails its neighbours. Produce never creates topics: clients
create them through Metadata first, as with Kafka.
"""

from __future__ import annotations

import datetime
import logging
from typing import Any

from trikafka.errors import ErrorCode, KafkaProtocolError
from trikafka.network.request_channel import NoOpResponse, Request
from trikafka.protocol.registry import ApiKey
from trikafka.server.authorization import AclOperation, ResourceType
from trikafka.server.kafka_apis import Answer, ApiFamily, handles
from trikafka.server.replica.cluster_view import cluster_view, leader_endpoints

__all__ = ["ProduceApis"]

log = logging.getLogger("trikafka.server")



def _partition_error(index: int, code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {
        "index": index,
        "error_code": code,
        "base_offset": -1,
        "log_append_time": None,
        "log_start_offset": -1,
        "record_errors": [],
        "error_message": message,
    }


class ProduceApis(ApiFamily):
    def _resolve(self, topic_data: Any) -> tuple[Any, ErrorCode]:
        topic_id = getattr(topic_data, "topic_id", None)
        if (topic_id is not None and topic_id.int != 0) or not hasattr(topic_data, "name"):
            info = self.replicas.topic_by_id(topic_id) if topic_id is not None else None  # zero id: None
            return info, ErrorCode.unknown_topic_id
        info = self.replicas.topics.get(topic_data.name)
        return info, ErrorCode.unknown_topic_or_partition

    @handles(ApiKey.PRODUCE)
    async def handle_produce_request(self, request: Request) -> Any:
        body = request.body
        acks = body.acks
        now = int(self.context.now_ms())
        view = cluster_view(self.context)
        me = self.context.config.node_id
        leaders: set[int] = set()
        topics = []
        transactional_id = getattr(body, "transactional_id", None)
        # Resolved once per request, not per partition.
        api_version = request.api_version
        add_to_txn = api_version >= 12  # KIP-890 part 2: no AddPartitionsToTxn
        bad_acks = acks not in (0, 1, -1)
        append = self.replicas.append_records
        metrics = self.context.metrics
        if self.context.acls is not None and _has_transactional_records(body) and (
            transactional_id is None
            or not self.authorize(request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)
        ):
            return self.error_response(request, ErrorCode.transactional_id_authorization_failed)
        for topic_data in body.topic_data:
            info, unknown_code = self._resolve(topic_data)
            # Checked by the topic's name (a topic id resolves to it first); a topic this
            # principal may not write is refused whether or not it exists, as in Kafka.
            name = info.name if info is not None else getattr(topic_data, "name", None)
            denied = (
                self.context.acls is not None  # no authorizer: everything allowed
                and name is not None
                and not self.authorize(request, AclOperation.WRITE, ResourceType.TOPIC, name)
            )
            partitions = []
            for part in topic_data.partition_data:
                index = part.index
                if denied:
                    partitions.append(_partition_error(index, ErrorCode.topic_authorization_failed))
                    continue
                if bad_acks:
                    partitions.append(_partition_error(index, ErrorCode.invalid_required_acks))
                    continue
                if info is None or not 0 <= index < info.partitions:
                    partitions.append(_partition_error(index, unknown_code))
                    continue
                if info.is_internal:
                    partitions.append(
                        _partition_error(
                            index,
                            ErrorCode.invalid_topic_exception,
                            f"Cannot append to internal topic {info.name}",
                        )
                    )
                    continue
                lead = view.leadership(info.name, index)
                if lead.leader != me:
                    error = _partition_error(index, ErrorCode.not_leader_or_follower)
                    if api_version >= 10:
                        error["current_leader"] = {"leader_id": lead.leader, "leader_epoch": lead.leader_epoch}
                        leaders.add(lead.leader)
                    partitions.append(error)
                    continue
                if acks == -1 and len(lead.isr) < info.configs.get(
                    "min.insync.replicas", self.replicas.config.min_insync_replicas
                ):
                    partitions.append(
                        _partition_error(
                            index,
                            ErrorCode.not_enough_replicas,
                            f"The size of the current ISR {list(lead.isr)} is insufficient to satisfy "
                            f"the min.isr requirement for {info.name}-{index}",
                        )
                    )
                    continue
                records = part.records
                # A try rather than errors_into: this is the per-partition hot path, and the
                # success answer is built once, whole, instead of patched.
                try:
                    if not records:
                        raise KafkaProtocolError("no records", ErrorCode.invalid_record)
                    appended = await append(
                        info, index, records, now, transactional_id, add_to_txn=add_to_txn
                    )
                except KafkaProtocolError as failed:
                    result = _partition_error(index, failed.error_code, str(failed))
                    metrics.record_failed_produce(info.name)
                    result["record_errors"] = [
                        {"batch_index": i, "batch_index_error_message": m}
                        for i, m in getattr(failed, "record_errors", ())
                    ]
                    log.info("produce to %s-%d refused: %s", info.name, index, failed)
                    partitions.append(result)
                    continue
                metrics.record_produce(info.name, appended.last_offset - appended.first_offset + 1, len(records))
                append_time = appended.log_append_time
                partitions.append(
                    {
                        "index": index,
                        "error_code": ErrorCode.none,
                        "base_offset": appended.first_offset,
                        "log_append_time": None if append_time < 0 else _append_time(append_time),
                        "log_start_offset": appended.log_start_offset,
                        "record_errors": [],
                        "error_message": None,
                    }
                )
            topics.append(
                {
                    "name": getattr(topic_data, "name", None),
                    "topic_id": getattr(topic_data, "topic_id", None),
                    "partition_responses": partitions,
                }
            )
        if acks == 0:
            return NoOpResponse()
        if leaders:
            return Answer(
                responses=topics, throttle_time=0, node_endpoints=leader_endpoints(view, leaders, request.listener_name)
            )
        return Answer(responses=topics, throttle_time=0)

    def error_response(self, request: Request, code: ErrorCode) -> Any:
        topics = [
            {
                "name": getattr(t, "name", None),
                "topic_id": getattr(t, "topic_id", None),
                "partition_responses": [_partition_error(p.index, code) for p in t.partition_data],
            }
            for t in request.body.topic_data
        ]
        return Answer(responses=topics, throttle_time=0)


#: Where the low byte of a v2 batch's attributes is, and its transactional bit.
_ATTRIBUTES_LOW_BYTE, _TRANSACTIONAL_BIT = 22, 0x10


def _has_transactional_records(body: Any) -> bool:
    """Kafka's ``RequestUtils.hasTransactionalRecords``: a partition's first batch says so."""
    for topic_data in body.topic_data:
        for part in topic_data.partition_data:
            records = part.records
            if records and len(records) > _ATTRIBUTES_LOW_BYTE and records[_ATTRIBUTES_LOW_BYTE] & _TRANSACTIONAL_BIT:
                return True
    return False


def _append_time(ms: int) -> Any:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
