"""ReplicaManager: the partitions this broker leads, and every topic operation on them.

A single broker leads every partition with leader epoch 0 and is the whole ISR, so the high
watermark is the log end offset and acks=all means acks=1. In an in-process cluster the
``placement`` (:mod:`trikafka.cluster`) places each new partition's replicas and bounds the
replication factor by the live brokers, and the log manager it is given hands out each
partition's leader's log. Topic metadata (ids, partition counts, config overrides) lives in
the TopicStore; partition data in the LogManager's logs. The topic operations (CreateTopics,
DeleteTopics, CreatePartitions, config changes) are :mod:`topic_operations`'s, inherited.

Transactions: a transactional batch is appended only if the transaction coordinator says its
partition is part of the producer's ongoing transaction (``transaction_verifier``, wired by
the broker; Kafka's KIP-890 verification); clients may not write control batches — only
:meth:`ReplicaManager.write_txn_marker`, called by the coordinator, does.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trikafka.config import BrokerConfig
from trikafka.coordinator.ports import TransactionVerifier
from trikafka.errors import ErrorCode, KafkaProtocolError, RecordErrorsError
from trikafka.log.partition_log import PartitionLog, PartitionLogs
from trikafka.protocol.batch_records import keyless_records
from trikafka.protocol.compression import codec_id, recompress_batches
from trikafka.protocol.records import build_control_batch, iter_batches
from trikafka.server.replica.cluster_view import ReplicaPlacement
from trikafka.server.replica.producer_state import ProducerIdManager, ProducerStateManager
from trikafka.server.replica.topic_config import LogConfigs
from trikafka.server.replica.topic_operations import (
    MAX_PARTITIONS,
    TopicOperations,
    check_assignment,
    known_brokers,
    unknown_topic,
)
from trikafka.server.replica.topics import TopicInfo, TopicStore

__all__ = ["ReplicaManager", "LEADER_EPOCH", "MAX_PARTITIONS", "check_assignment", "check_keys", "known_brokers"]

log = logging.getLogger("trikafka.server")

LEADER_EPOCH = 0


class ReplicaManager(TopicOperations):
    def __init__(self, config: BrokerConfig, log_manager: PartitionLogs) -> None:
        self.static_config = config  # as started
        self.config = config  # with dynamic broker overrides applied
        self.dynamic_broker_configs: dict[str, str] = {}
        #: A broker's LogManager, or an in-process cluster's view of its brokers' replicas.
        self.log_manager: PartitionLogs = log_manager
        path = Path(config.log_dirs[0]) / "trikafka-topics.json" if config.log_dirs else None
        self.topics = TopicStore(path)
        self.producer_ids = ProducerIdManager(
            Path(config.log_dirs[0]) / "trikafka-producer-ids" if config.log_dirs else None
        )
        self._producer_states: dict[tuple[str, int], ProducerStateManager] = {}
        #: (transactional id, producer id, epoch, topic, partition) → raises KafkaProtocolError
        #: unless the partition is in that producer's ongoing transaction.
        self.transaction_verifier: TransactionVerifier | None = None
        #: Broker-side schema validation (topic, configs, batches, headers) → raises
        #: RecordErrorsError; wired to the Schema Registry (trikafka.registry.validation).
        self.record_validator: Callable[[str, Any, bytes | bytearray, list[Any]], None] | None = None
        #: Places new partitions' replicas (an in-process cluster); None: this broker alone.
        self.placement: ReplicaPlacement | None = None
        self._log_configs = LogConfigs()
        for topic in self.topics:
            self._open_logs(topic, range(topic.partitions))

    # --- appends -------------------------------------------------------------------------

    def prepare_records(self, topic: TopicInfo, records: bytes) -> bytes | bytearray:
        """The batches to append: the request's own (the log copies them where its backend
        keeps bytes, once), or re-encoded for a topic whose compression.type is not
        ``producer``.
        """
        codec = topic.configs.get("compression.type", self.config.compression_type)
        if codec == "producer":
            return records
        return recompress_batches(records, list(iter_batches(records)), codec_id(codec))

    async def append_records(
        self,
        topic: TopicInfo,
        partition: int,
        records: bytes,
        now_ms: int,
        transactional_id: str | None = None,
        *,
        add_to_txn: bool = False,
    ) -> Any:
        """Append a Produce request's batches for one partition; returns the AppendInfo.

        Idempotent producers' retries are answered with the original offsets, unappended.
        When flush.messages is reached the fsync runs in a worker thread before we answer
        (measured here: fsync p50 0.2 ms, p99 1.3 ms, max 8 ms — too long for the event
        loop; page-cache writes of 100 KB take 0.04 ms and stay on it).
        """
        name = topic.name
        partition_log = self.get_log(name, partition)
        configs = topic.configs
        data = self.prepare_records(topic, records)
        # Validated once, here (CRC, header, every record): Kafka's order too (LogValidator
        # before the producer-state checks); Log.append takes the headers as they are.
        headers = list(iter_batches(data))
        if partition_log.config.compact_enabled:
            check_keys(data, headers, f"{name}-{partition}")
        if self.record_validator is not None and configs:  # confluent.*.schema.validation
            self.record_validator(name, configs, data, headers)
        key = (name, partition)
        state = self._producer_states.get(key)
        if state is None:
            state = self._producer_states[key] = ProducerStateManager()
        duplicate_of = state.check(headers)
        if duplicate_of is not None:
            from trikafka.log.log import AppendInfo

            return AppendInfo(duplicate_of, duplicate_of, -1, partition_log.log_start_offset)
        for header in headers:
            if header.attributes & 0x30:
                self._check_transactional(header, transactional_id, name, partition, add_to_txn)
        info = partition_log.append(
            data,
            leader_epoch=LEADER_EPOCH,
            log_append_time_ms=now_ms,
            flush_inline=False,
            validated=headers,
        )
        state.update(headers, info.first_offset)
        if partition_log.flush_messages_due:
            await self.log_manager.flush_log(partition_log)
        return info

    def _check_transactional(
        self, header: Any, transactional_id: str | None, topic: str, partition: int, add: bool
    ) -> None:
        if header.is_control:
            raise KafkaProtocolError(
                f"clients may not write control batches ({topic}-{partition})", ErrorCode.invalid_record
            )
        if self.transaction_verifier is not None:
            self.transaction_verifier(
                transactional_id, header.producer_id, header.producer_epoch, topic, partition, add_partition=add
            )

    async def write_txn_marker(
        self,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        *,
        commit: bool,
        coordinator_epoch: int,
        now_ms: int,
    ) -> bool:
        """Append an end-transaction marker (the coordinator's WriteTxnMarkers, in process).
        False if the partition no longer exists (its topic was deleted)."""
        info = self.topics.get(topic)
        if info is None or not 0 <= partition < info.partitions:
            return False
        partition_log = self.log_manager.get_log(topic, partition)
        if partition_log is None or partition_log.closed:
            return False
        batch = bytearray(
            build_control_batch(
                producer_id, producer_epoch, commit=commit, coordinator_epoch=coordinator_epoch, timestamp_ms=now_ms
            )
        )
        headers = list(iter_batches(batch))
        info_ = partition_log.append(
            batch, leader_epoch=LEADER_EPOCH, log_append_time_ms=now_ms, flush_inline=False, validated=headers
        )
        state = self._producer_states.setdefault((topic, partition), ProducerStateManager())
        state.update(headers, info_.first_offset)
        if partition_log.flush_messages_due:
            await self.log_manager.flush_log(partition_log)
        return True

    def open_transactions(self) -> list[tuple[str, int, int, int]]:
        """(topic, partition, producer id, producer epoch) of every transaction open in a log."""
        found = []
        for (topic, partition), partition_log in self.log_manager.logs.items():
            for producer_id, txn in partition_log.transactions.ongoing.items():
                found.append((topic, partition, producer_id, txn.producer_epoch))
        return found

    # --- partitions ----------------------------------------------------------------------

    def producer_states(self, topic: str, partition: int) -> list[tuple[int, Any]]:
        """The producers a partition has seen since start (DescribeProducers)."""
        state = self._producer_states.get((topic, partition))
        return state.producers() if state is not None else []

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self.topics.by_id(topic_id)

    def get_log(self, topic: str, partition: int) -> PartitionLog:
        info = self.topics.get(topic)
        if info is None or not 0 <= partition < info.partitions:
            raise unknown_topic(f"{topic}-{partition}")
        partition_log = self.log_manager.get_log(topic, partition)
        if partition_log is None:  # listed but not open: a bug, not the client's fault
            raise RuntimeError(f"no log for {topic}-{partition}")
        return partition_log


def check_keys(data: bytes | bytearray, headers: list[Any], partition: str) -> None:
    """A compacted topic keeps the last record per key: a record without one has no
    place in it and is refused (Kafka's LogValidator), each listed in record_errors."""
    keyless = keyless_records(data, headers)
    if keyless:
        why = f"Compacted topic cannot accept message without key in topic partition {partition}."
        errors = [(index, why) for index in keyless]
        raise RecordErrorsError(
            f"{len(errors)} record(s) refused, the first {min(3, len(errors))}: "
            + ", ".join(f"record {i}: {m}" for i, m in errors[:3]),
            errors,
        )
