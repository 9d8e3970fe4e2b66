"""Replication between in-process brokers: every replica a real log, followers kept in step.

Theory of operation. Each broker of the cluster owns a LogManager holding its replicas
(memory, or files under ``<log dir>/broker-<id>``). The cluster's one ReplicaManager sees
them through :class:`ClusterLogManager`, whose ``get_log`` hands out a
:class:`ReplicatedLog`: reads go to the current leader's log, and an append goes to the
leader's log and then — before ``append`` returns, with no checkpoint in between — to every
live in-sync follower, copied batch by batch with the leader's offsets, leader epochs and
(LogAppendTime) timestamps. So:

* the high watermark, the minimum log end offset over the ISR, always equals the leader's
  log end offset, and no task ever sees an acknowledged record missing from an ISR member;
* acks=all waits for nothing more than acks=1 does — the ISR has the data by then;
* a replica out of the ISR (shrunk, or its broker stopped) receives nothing until
  :func:`catch_up` copies what it missed: when it rejoins the ISR or its broker restarts.

Kafka's followers fetch instead; the result a client can observe is the same, without a
replica-fetcher task per partition. A follower whose log does not extend the leader's (it
is ahead, or retention moved the leader's start past it) is truncated and copied anew —
Kafka's truncation to the leader's log, without the epoch cache.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from trikafka.errors import ErrorCode, KafkaProtocolError
from trikafka.log.config import LogConfig
from trikafka.log.log import AppendInfo, Log
from trikafka.protocol.records import iter_batches

__all__ = ["ClusterLogManager", "ReplicatedLog", "catch_up"]

log = logging.getLogger("trikafka.cluster")

_ALL = 2**31 - 1


def catch_up(follower: Log, leader: Log) -> int:
    """Copy into ``follower`` what ``leader`` has beyond it; returns the batches copied."""
    if (
        follower.log_end_offset > leader.log_end_offset
        or follower.log_end_offset < leader.log_start_offset
    ):
        log.info("replica %s truncated to follow the leader", follower.name)
        follower.truncate_fully(leader.log_start_offset)
    copied = 0
    append_time = leader.config.log_append_time
    while follower.log_end_offset < leader.log_end_offset:
        data = leader.read(follower.log_end_offset, _ALL, min_one_batch=True)
        records = data.records
        if not records:
            break
        for header in iter_batches(records, validate_records=False):
            if header.next_offset <= follower.log_end_offset:
                continue  # the read started inside this batch's range
            if header.base_offset != follower.log_end_offset:  # not a prefix: start over
                follower.truncate_fully(leader.log_start_offset)
                return copied + catch_up(follower, leader)
            batch = bytearray(records[header.position : header.position + header.size])
            follower.append(
                batch,
                leader_epoch=header.partition_leader_epoch,
                log_append_time_ms=header.max_timestamp if append_time else None,
                flush_inline=False,
            )
            copied += 1
    if follower.log_start_offset < leader.log_start_offset:
        follower.delete_records_before(min(leader.log_start_offset, follower.high_watermark.value))
    return copied


class ReplicatedLog:
    """A partition's log as the request path sees it: the leader's, kept in step.

    Every attribute not defined here is the leader's log's (high watermark, reads, the
    transaction index, ...), looked up on each access, so it follows leader moves.
    """

    def __init__(self, logs: ClusterLogManager, topic: str, partition: int) -> None:
        self._logs = logs
        self.topic = topic
        self.partition = partition

    def __repr__(self) -> str:
        return (
            f"<ReplicatedLog {self.topic}-{self.partition} leader={self._logs.leader_of(self.topic, self.partition)}>"
        )

    @property
    def leader_log(self) -> Log:
        return self._logs.leader_log(self.topic, self.partition)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.leader_log, name)

    @property
    def closed(self) -> bool:
        """Closed once its topic is deleted (a waiting Fetch then answers
        UNKNOWN_TOPIC_OR_PARTITION), or when no replica is online."""
        if self._logs.get_log(self.topic, self.partition) is not self:
            return True
        try:
            return self.leader_log.closed
        except KafkaProtocolError:
            return True

    def append(self, batches: bytearray | bytes | memoryview, *, leader_epoch: int, **options: Any) -> AppendInfo:
        """Append on the leader with its current epoch (``options`` as ``Log.append`` takes
        them), then copy to the in-sync followers."""
        lead = self._logs.state.leadership(self.topic, self.partition)
        if lead.leader < 0:
            raise KafkaProtocolError(
                f"{self.topic}-{self.partition} has no live leader", ErrorCode.not_leader_or_follower
            )
        leader = self.leader_log
        info = leader.append(batches, leader_epoch=lead.leader_epoch, **options)
        for follower in self._logs.follower_logs(self.topic, self.partition, lead.isr):
            catch_up(follower, leader)
        return info

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords on the leader; in-sync followers move their start along."""
        lead = self._logs.state.leadership(self.topic, self.partition)
        low = self.leader_log.delete_records_before(offset)
        for follower in self._logs.follower_logs(self.topic, self.partition, lead.isr):
            follower.delete_records_before(min(low, follower.high_watermark.value))
        return low


class ClusterLogManager:
    """The LogManager the cluster's ReplicaManager uses: each broker's replicas, one view.

    ``managers(node_id)`` returns that broker's LogManager, or None while it is stopped.
    """

    def __init__(self, state: Any, managers: Callable[[int], Any], log_dirs: Any = None) -> None:
        self.state = state
        self._managers = managers
        #: The cluster's data directories (each broker's replicas live in ``broker-<id>`` under them).
        self.log_dirs = log_dirs
        self._configs: dict[tuple[str, int], LogConfig | None] = {}
        self._views: dict[tuple[str, int], ReplicatedLog] = {}

    # --- the replicas ------------------------------------------------------------------

    def leader_of(self, topic: str, partition: int) -> int:
        return self.state.leadership(topic, partition).leader

    def replica_log(self, node_id: int, topic: str, partition: int) -> Log | None:
        manager = self._managers(node_id)
        return None if manager is None else manager.get_log(topic, partition)

    def leader_log(self, topic: str, partition: int) -> Log:
        """The leader's log; with no live leader, the last in-sync replica's (reads only)."""
        lead = self.state.leadership(topic, partition)
        for node_id in (lead.leader, *lead.isr, *lead.replicas):
            found = self.replica_log(node_id, topic, partition) if node_id >= 0 else None
            if found is not None and not found.closed:
                return found
        raise KafkaProtocolError(f"no replica of {topic}-{partition} is online", ErrorCode.not_leader_or_follower)

    def follower_logs(self, topic: str, partition: int, isr: tuple[int, ...]) -> Iterator[Log]:
        leader = self.leader_of(topic, partition)
        for node_id in isr:
            if node_id != leader:
                found = self.replica_log(node_id, topic, partition)
                if found is not None and not found.closed:
                    yield found

    def config_of(self, topic: str, partition: int) -> LogConfig | None:
        return self._configs.get((topic, partition))

    def open_replicas(self, node_id: int) -> None:
        """Create (or find, from its files) every replica a (re)started broker holds."""
        manager = self._managers(node_id)
        for topic, partition in self.state.replicas_on(node_id):
            if (topic, partition) in self._configs:
                manager.get_or_create_log(topic, partition, self._configs[(topic, partition)])

    # --- what the ReplicaManager calls ------------------------------------------------

    @property
    def logs(self) -> Mapping[tuple[str, int], ReplicatedLog]:
        return {tp: self._views[tp] for tp in self._configs}

    def get_log(self, topic: str, partition: int) -> ReplicatedLog | None:
        if (topic, partition) not in self._configs:
            return None
        return self._views[(topic, partition)]

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None) -> ReplicatedLog:
        if (topic, partition) not in self.state.partitions:
            found_on = [
                n for n in self.state.node_ids
                if self._managers(n) is not None and self._managers(n).get_log(topic, partition) is not None
            ]
            if found_on:  # a restart: the replicas are where their files are
                self.state.restore(topic, partition, found_on)
            else:
                self.state.assign(topic, range(partition, partition + 1))
        self._configs[(topic, partition)] = config
        for node_id in self.state.leadership(topic, partition).replicas:
            manager = self._managers(node_id)
            if manager is not None:
                manager.get_or_create_log(topic, partition, config)
        view = self._views.get((topic, partition))
        if view is None:
            view = self._views[(topic, partition)] = ReplicatedLog(self, topic, partition)
        return view

    def create_logs(self, topic: str, partitions: Iterable[int], config: LogConfig | None = None) -> None:
        """Every replica of the partitions, all or none (as LogManager.create_logs)."""
        created: list[int] = []
        try:
            for partition in partitions:
                existed = (topic, partition) in self._configs
                self.get_or_create_log(topic, partition, config)
                if not existed:
                    created.append(partition)
        except Exception:
            for partition in created:
                self.delete_log(topic, partition)
            raise

    def update_topic_config(self, topic: str, config: LogConfig) -> None:
        for tp in self._configs:
            if tp[0] == topic:
                self._configs[tp] = config
        for node_id in self.state.node_ids:
            manager = self._managers(node_id)
            if manager is not None:
                manager.update_topic_config(topic, config)

    def delete_log(self, topic: str, partition: int) -> bool:
        deleted = False
        for node_id in self.state.node_ids:
            manager = self._managers(node_id)
            if manager is not None:
                deleted = manager.delete_log(topic, partition) or deleted
        self._configs.pop((topic, partition), None)
        self._views.pop((topic, partition), None)
        if not any(tp[0] == topic for tp in self._configs) and not topic.startswith("__"):
            self.state.forget(topic)
        return deleted

    async def flush_log(self, replicated: Any) -> None:
        lead = self.state.leadership(replicated.topic, replicated.partition)
        for node_id in (lead.leader, *lead.isr):
            manager = self._managers(node_id) if node_id >= 0 else None
            found = manager.get_log(replicated.topic, replicated.partition) if manager else None
            if manager is not None and found is not None and found.flush_messages_due:
                await manager.flush_log(found)
