"""The client's view of the cluster (Java's ``Metadata`` + ``Cluster``), sans-IO.

:class:`ClusterMetadata` is fed Metadata responses and answers the questions every client asks:
where is broker N, who leads partition P, how many partitions has topic T, is this topic known
to be missing. It decides *when* a refresh is due — ``metadata.max.age.ms`` after the last
one, or at once after :meth:`request_update` (called on NOT_LEADER_OR_FOLLOWER,
UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE …) — but never performs one: the Trio shell
(:class:`~trikafka.client.client.KafkaClient`) does, on trio's clock, and passes ``now`` in.

Topics of interest: a producer or consumer *adds* the topics it uses; a refresh asks for exactly
those (a client with none asks for no topics, only brokers). ``all_topics`` asks for all (admin,
pattern subscriptions).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from trikafka.errors import ErrorCode

__all__ = ["BrokerNode", "ClusterMetadata", "PartitionInfo", "TopicInfo", "TopicPartition"]

_NO_ERROR = ErrorCode.none  # read once: an enum member lookup per call is not free on 3.11


@attrs.frozen(order=True)
class TopicPartition:
    topic: str
    partition: int


@attrs.frozen
class BrokerNode:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@attrs.frozen
class PartitionInfo:
    partition: int
    leader: int  # -1 when the partition has no leader right now
    leader_epoch: int
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    error_code: ErrorCode = ErrorCode.none


@attrs.frozen
class TopicInfo:
    name: str
    error_code: ErrorCode
    partitions: dict[int, PartitionInfo]
    topic_id: Any = None
    is_internal: bool = False


class ClusterMetadata:
    """What the client knows of brokers, topics and leaders; refresh policy on a given clock."""

    def __init__(self, metadata_max_age_ms: int = 300_000, retry_backoff_ms: int = 0) -> None:
        self.max_age = metadata_max_age_ms / 1000
        self.refresh_backoff = retry_backoff_ms / 1000
        self.retry_streak = 0  # refreshes in a row whose answer asked for another
        self.brokers: dict[int, BrokerNode] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.controller_id: int = -1
        self.cluster_id: str | None = None
        self.interest: set[str] = set()
        self.all_topics = False
        self.last_refresh: float | None = None
        self.update_requested = True
        self.version = 0  # bumps on every update; waiters compare it
        self._available: dict[str, list[int]] = {}

    # --- policy ---------------------------------------------------------------------------

    def add_interest(self, topics: Iterable[str]) -> bool:
        """Track ``topics``; True when one is new (then an update is requested)."""
        new = set(topics) - self.interest
        if new:
            self.interest |= new
            self.update_requested = True
        return bool(new)

    def request_update(self) -> None:
        self.update_requested = True

    def next_refresh(self, now: float) -> float:
        """Trio time at which the next refresh is due (``now`` when it is due already).

        A topic that stays missing or leaderless (each answer asks for another) is asked for
        again at once the first time (a topic being auto-created has its leader a moment
        later), then ``retry.backoff.ms`` after the last refresh, as Java's
        ``Metadata.timeToNextUpdate`` — not in a busy loop."""
        if self.last_refresh is None:
            return now
        if self.update_requested:
            if self.retry_streak >= 2:
                return max(now, self.last_refresh + self.refresh_backoff)
            return now
        return self.last_refresh + self.max_age

    def request_topics(self) -> list[str] | None:
        """The topics a Metadata request names: None for all topics."""
        return None if self.all_topics else sorted(self.interest)

    # --- updates --------------------------------------------------------------------------

    def update(self, response: Any, now: float) -> None:
        """Absorb a Metadata response (any version kio reads)."""
        self.brokers = {
            int(b.node_id): BrokerNode(int(b.node_id), b.host, int(b.port), getattr(b, "rack", None))
            for b in response.brokers
        }
        self.controller_id = int(getattr(response, "controller_id", -1))
        self.cluster_id = getattr(response, "cluster_id", None)
        topics: dict[str, TopicInfo] = {} if self.all_topics else dict(self.topics)
        retry = False
        for topic in response.topics:
            name = topic.name
            if name is None:
                continue
            partitions = {
                int(p.partition_index): PartitionInfo(
                    partition=int(p.partition_index),
                    leader=int(p.leader_id),
                    leader_epoch=int(getattr(p, "leader_epoch", -1)),
                    replicas=tuple(int(n) for n in p.replica_nodes),
                    isr=tuple(int(n) for n in p.isr_nodes),
                    error_code=ErrorCode(p.error_code),
                )
                for p in topic.partitions
            }
            code = ErrorCode(topic.error_code)
            topics[name] = TopicInfo(
                name, code, partitions, getattr(topic, "topic_id", None), bool(getattr(topic, "is_internal", False))
            )
            if code.retriable or any(p.leader < 0 for p in partitions.values()):
                retry = True  # LEADER_NOT_AVAILABLE while a topic is created: ask again soon
        self.topics = topics
        self._available.clear()
        self.last_refresh = now
        self.update_requested = retry
        self.retry_streak = self.retry_streak + 1 if retry else 0
        self.version += 1

    def forget(self, topic: str) -> None:
        self.topics.pop(topic, None)
        self._available.pop(topic, None)
        self.interest.discard(topic)

    # --- questions ------------------------------------------------------------------------

    def broker(self, node_id: int) -> BrokerNode | None:
        return self.brokers.get(node_id)

    def topic(self, name: str) -> TopicInfo | None:
        return self.topics.get(name)

    def partition_count(self, topic: str) -> int | None:
        """Partitions of a topic that the last refresh found without error, else None."""
        info = self.topics.get(topic)
        if info is None or info.error_code != _NO_ERROR or not info.partitions:
            return None
        return len(info.partitions)

    def leader_for(self, tp: TopicPartition) -> int | None:
        info = self.topics.get(tp.topic)
        if info is None:
            return None
        partition = info.partitions.get(tp.partition)
        if partition is None or partition.leader < 0:
            return None
        return partition.leader

    def available_partitions(self, topic: str) -> list[int]:
        """Partitions with a leader, sorted (cached until the next update: asked per record)."""
        cached = self._available.get(topic)
        if cached is not None:
            return cached
        info = self.topics.get(topic)
        if info is None:
            return []
        found = self._available[topic] = sorted(p.partition for p in info.partitions.values() if p.leader >= 0)
        return found

    def topic_error(self, topic: str) -> ErrorCode | None:
        """The topic's error from the last refresh, if it had one."""
        info = self.topics.get(topic)
        if info is None or info.error_code == _NO_ERROR:
            return None
        return info.error_code
