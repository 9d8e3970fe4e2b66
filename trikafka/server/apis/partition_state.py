"""What admin tools and clients ask about partitions: OffsetForLeaderEpoch, DescribeLogDirs,
DescribeProducers and DescribeTopicPartitions.

* **OffsetForLeaderEpoch** (v2–v4): clients (KIP-320) and followers ask where a leader epoch
  ended to detect truncation. Each partition keeps a :class:`~trikafka.log.leader_epochs.
  LeaderEpochCache` derived from its batch headers; ``current_leader_epoch`` is checked
  against the partition's leader epoch first (older: FENCED_LEADER_EPOCH, newer:
  UNKNOWN_LEADER_EPOCH), as the leader does in Kafka.
* **DescribeLogDirs** (v1–v5): one result per log directory with the size of each partition's
  log, ``offset_lag`` 0 (no future replicas: ``kafka-reassign-partitions`` between directories
  is not implemented) and, from v4, the file system's total and usable bytes. An in-memory
  broker reports one directory named ``memory`` with -1 for the file-system figures.
* **DescribeProducers** (v0): the idempotent and transactional producers a partition has seen
  since the broker started (producer state is not kept across restarts): id, epoch, last
  sequence, last timestamp and the first offset of an open transaction.
* **DescribeTopicPartitions** (v0): KIP-966's paginated topic description, topics in name
  order, at most ``response_partition_limit`` (capped at Kafka's 2000) partitions per answer
  and a ``next_cursor`` where it stopped. No eligible-leader-replica sets on one broker: ELR
  lists are empty.
"""

from __future__ import annotations

import functools
import shutil
import uuid
import weakref
from pathlib import Path
from typing import Any

from trikafka.errors import ErrorCode
from trikafka.log.leader_epochs import LeaderEpochCache
from trikafka.network.request_channel import Request
from trikafka.protocol.registry import ApiKey
from trikafka.server.authorization import AclOperation, ResourceType
from trikafka.server.kafka_apis import Answer, ApiFamily, handles
from trikafka.server.replica.cluster_view import cluster_view, leader_epoch_error

__all__ = ["PartitionStateApis", "MAX_PARTITIONS_PER_DESCRIBE"]

#: Kafka's ``max.request.partition.size.limit`` default: DescribeTopicPartitions' page cap.
MAX_PARTITIONS_PER_DESCRIBE = 2000
_NO_ID = uuid.UUID(int=0)
_OMITTED = -(2**31)


class PartitionStateApis(ApiFamily):
    def __init__(self, context: Any) -> None:
        super().__init__(context)
        #: Log → its epoch cache; a deleted topic's log (and cache) simply goes away.
        self._epochs: weakref.WeakKeyDictionary[Any, LeaderEpochCache] = weakref.WeakKeyDictionary()

    def _epoch_cache(self, log: Any) -> LeaderEpochCache:
        cache = self._epochs.get(log)
        if cache is None:
            cache = self._epochs[log] = LeaderEpochCache()
        cache.catch_up(log)
        return cache

    # --- OffsetForLeaderEpoch ----------------------------------------------------------------

    @handles(ApiKey.OFFSET_FOR_LEADER_EPOCH)
    async def handle_offset_for_leader_epoch_request(self, request: Request) -> Any:
        view = cluster_view(self.context)
        # Followers have CLUSTER_ACTION; consumers (KIP-320) need DESCRIBE on each topic.
        replica = self.authorize(request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER)
        topics = []
        for topic in request.body.topics:
            info = self.replicas.topics.get(topic.topic)
            allowed = replica or self.authorize(request, AclOperation.DESCRIBE, ResourceType.TOPIC, topic.topic)
            partitions = []
            for p in topic.partitions:
                answer = {"error_code": ErrorCode.none, "partition": p.partition, "leader_epoch": -1, "end_offset": -1}
                lead = None if info is None else view.leadership(info.name, p.partition)
                if not allowed:
                    answer["error_code"] = ErrorCode.topic_authorization_failed
                elif info is None or lead is None or not 0 <= p.partition < info.partitions:
                    answer["error_code"] = ErrorCode.unknown_topic_or_partition
                elif epoch_error := leader_epoch_error(p.current_leader_epoch, lead):
                    answer["error_code"] = epoch_error
                elif lead.leader != self.context.config.node_id:  # asked of a follower: Kafka's answer
                    answer["error_code"] = ErrorCode.not_leader_or_follower
                else:
                    log = self.replicas.get_log(info.name, p.partition)
                    epoch, end = self._epoch_cache(log).end_offset_for(p.leader_epoch, log.log_end_offset)
                    answer.update(leader_epoch=epoch, end_offset=end)
                partitions.append(answer)
            topics.append({"topic": topic.topic, "partitions": partitions})
        return Answer(throttle_time=0, topics=topics)

    # --- DescribeLogDirs ---------------------------------------------------------------------

    @handles(ApiKey.DESCRIBE_LOG_DIRS)
    async def handle_describe_log_dirs_request(self, request: Request) -> Any:
        if not self.authorize(request, AclOperation.DESCRIBE, ResourceType.CLUSTER):
            return Answer(throttle_time=0, error_code=ErrorCode.cluster_authorization_failed, results=[])
        wanted = None
        if request.body.topics is not None:
            wanted = {(t.topic, p) for t in request.body.topics for p in t.partitions}
        return Answer(throttle_time=0, error_code=ErrorCode.none, results=self._log_dirs(wanted))

    def _log_dirs(self, wanted: set[tuple[str, int]] | None) -> list[dict[str, Any]]:
        """One result per log directory (statvfs for the totals: microseconds, no thread)."""
        manager = self.replicas.log_manager
        dirs: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for log_dir in manager.log_dirs or ["memory"]:
            dirs[str(Path(log_dir).absolute()) if manager.log_dirs else "memory"] = {}
        for (topic, partition), log in sorted(manager.logs.items()):
            if wanted is not None and (topic, partition) not in wanted:
                continue
            directory = getattr(log, "directory", None)
            where = str(Path(directory).parent.absolute()) if directory is not None else "memory"
            dirs.setdefault(where, {}).setdefault(topic, []).append(
                {
                    "partition_index": partition,
                    "partition_size": log.size_in_bytes,
                    "offset_lag": 0,
                    "is_future_key": False,
                }
            )
        results = []
        for where, topics in dirs.items():
            total = usable = -1
            if where != "memory":
                try:
                    usage = shutil.disk_usage(where)
                    total, usable = usage.total, usage.free
                except OSError:
                    pass
            results.append(
                {
                    "error_code": ErrorCode.none,
                    "log_dir": where,
                    "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
                    "total_bytes": total,
                    "usable_bytes": usable,
                    "is_cordoned": False,
                }
            )
        return results

    # --- DescribeProducers -------------------------------------------------------------------

    @handles(ApiKey.DESCRIBE_PRODUCERS)
    async def handle_describe_producers_request(self, request: Request) -> Any:
        topics = []
        for topic in request.body.topics:
            info = self.replicas.topics.get(topic.name)
            readable = self.authorize(request, AclOperation.READ, ResourceType.TOPIC, topic.name)
            partitions = []
            for index in topic.partition_indexes:
                answer = {
                    "partition_index": index,
                    "error_code": ErrorCode.none,
                    "error_message": None,
                    "active_producers": [],
                }
                if not readable:
                    answer["error_code"] = ErrorCode.topic_authorization_failed
                elif info is None or not 0 <= index < info.partitions:
                    answer["error_code"] = ErrorCode.unknown_topic_or_partition
                    answer["error_message"] = f"This server does not host this topic-partition: {topic.name}-{index}"
                else:
                    log = self.replicas.get_log(info.name, index)
                    answer["active_producers"] = [
                        {
                            "producer_id": pid,
                            "producer_epoch": state.epoch,
                            "last_sequence": state.batches[-1].last_seq if state.batches else -1,
                            "last_timestamp": state.last_timestamp,
                            "coordinator_epoch": state.coordinator_epoch,
                            "current_txn_start_offset": _open_txn_start(log, pid),
                        }
                        for pid, state in self.replicas.producer_states(info.name, index)
                    ]
                partitions.append(answer)
            topics.append({"name": topic.name, "partitions": partitions})
        return Answer(throttle_time=0, topics=topics)

    # --- DescribeTopicPartitions -------------------------------------------------------------

    @handles(ApiKey.DESCRIBE_TOPIC_PARTITIONS)
    async def handle_describe_topic_partitions_request(self, request: Request) -> Any:
        body = request.body
        view = cluster_view(self.context)
        limit = max(1, min(body.response_partition_limit, MAX_PARTITIONS_PER_DESCRIBE))
        may_describe = functools.partial(self.authorize, request, AclOperation.DESCRIBE, ResourceType.TOPIC)
        refused: list[dict[str, Any]] = []
        if body.topics:
            names = sorted({t.name for t in body.topics})
            refused = [_unknown_topic(n, ErrorCode.topic_authorization_failed) for n in names if not may_describe(n)]
            names = [n for n in names if may_describe(n)]
        else:  # no names: every topic the broker has that the principal may describe
            names = sorted(info.name for info in self.replicas.topics if may_describe(info.name))
        cursor = body.cursor
        if cursor is not None:
            names = [n for n in names if n >= cursor.topic_name]
        topics: list[dict[str, Any]] = []
        next_cursor = None
        budget = limit
        for name in names:
            info = self.replicas.topics.get(name)
            if info is None:
                topics.append(_unknown_topic(name))
                continue
            first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
            if budget == 0:
                next_cursor = {"topic_name": name, "partition_index": first}
                break
            last = min(info.partitions, first + budget)
            topics.append(
                {
                    "error_code": ErrorCode.none,
                    "name": name,
                    "topic_id": info.topic_id,
                    "is_internal": info.is_internal,
                    "partitions": [_partition(name, p, view) for p in range(first, last)],
                    "topic_authorized_operations": self.authorized_operations(request, ResourceType.TOPIC, name),
                }
            )
            budget -= last - first
            if last < info.partitions:
                next_cursor = {"topic_name": name, "partition_index": last}
                break
        return Answer(throttle_time=0, topics=topics + refused, next_cursor=next_cursor)


def _partition(topic: str, index: int, view: Any) -> dict[str, Any]:
    lead = view.leadership(topic, index)
    return {
        "error_code": ErrorCode.none if lead.leader >= 0 else ErrorCode.leader_not_available,
        "partition_index": index,
        "leader_id": lead.leader,
        "leader_epoch": lead.leader_epoch,
        "replica_nodes": list(lead.replicas),
        "isr_nodes": list(lead.isr),
        "eligible_leader_replicas": [],
        "last_known_elr": [],
        "offline_replicas": list(lead.offline),
    }


def _unknown_topic(name: str, code: ErrorCode = ErrorCode.unknown_topic_or_partition) -> dict[str, Any]:
    return {
        "error_code": code,
        "name": name,
        "topic_id": _NO_ID,
        "is_internal": False,
        "partitions": [],
        "topic_authorized_operations": _OMITTED,
    }


def _open_txn_start(log: Any, producer_id: int) -> int:
    txn = log.transactions.ongoing.get(producer_id)
    return txn.first_offset if txn is not None else -1
