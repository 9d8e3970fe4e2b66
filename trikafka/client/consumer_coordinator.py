"""The consumer's side of its group (Java's ``ConsumerCoordinator``): what the group means for
the partitions this consumer reads.

The :class:`~trikafka.client.group_session.GroupSession` knows the protocol (join, sync,
heartbeat, leave) and nothing of positions; the :class:`~trikafka.client.consumer.Consumer`
knows positions and fetching and nothing of the protocol. This object reconciles the two, in
the application's task, at the start of every poll: it commits what is due (auto-commit), lets
the group rejoin when the subscription or the metadata asks for it, and turns the group's
verdicts into the rebalance listener's calls and the subscription state's changes — revoked
partitions are committed (auto-commit) and then dropped, with their fetched-but-unreturned
records; assigned ones start without a position, found later from the committed offset.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import trio

from trikafka.client.client import KafkaClient
from trikafka.client.config import ClientConfig
from trikafka.client.consumer_protocol import TopicPartition
from trikafka.client.consumer_state import SubscriptionMode, SubscriptionState
from trikafka.client.errors import KafkaError
from trikafka.client.group_consumer import ConsumerGroupSession
from trikafka.client.group_session import GroupSession, RebalanceListener, _call

__all__ = ["ConsumerCoordinator"]

logger = logging.getLogger(__name__)


class ConsumerCoordinator:
    """Owned by a consumer with a ``group.id``; ``drop(partitions)`` forgets the consumer's
    buffered records of partitions it no longer owns."""

    def __init__(
        self,
        client: KafkaClient,
        config: ClientConfig,
        subscriptions: SubscriptionState,
        drop: Callable[[Iterable[TopicPartition]], None],
        nursery: trio.Nursery,
    ) -> None:
        self.client = client
        self.subscriptions = subscriptions
        self._drop = drop
        self.listener: Any = RebalanceListener()
        session = ConsumerGroupSession if config["group.protocol"] == "consumer" else GroupSession
        self.group = session(
            client, config, on_revoke=self.on_revoke, on_assign=self.on_assign, on_lost=self.on_lost
        )
        self.group.nursery = nursery  # where a join outlives a poll's timeout
        nursery.start_soon(self.group.run_heartbeats, name=f"consumer-heartbeat-{config['group.id']}")
        self._auto_commit = config["enable.auto.commit"]
        self._auto_commit_interval = config["auto.commit.interval.ms"] / 1000
        self._next_auto_commit = trio.current_time() + self._auto_commit_interval
        self._metadata_seen = -1
        self._assigned_counts: dict[str, int] = {}

    def pattern_changed(self) -> None:
        """A new pattern subscription: match it against the next metadata, fetched now."""
        self._metadata_seen = -1

    async def poll(self) -> None:
        """The group's share of a poll: auto-commit when due, then (re)join if needed — the
        listener's callbacks run here, before the consumer fetches."""
        group = self.group
        group.last_poll = trio.current_time()
        await self._maybe_auto_commit()
        if not self.subscriptions.has_auto_assignment:
            return
        self._check_metadata()
        if isinstance(group, ConsumerGroupSession):  # KIP-848: the coordinator resolves a pattern
            pattern = self.subscriptions.pattern if self.subscriptions.mode is SubscriptionMode.AUTO_PATTERN else None
            group.subscribe_regex(None if pattern is None else pattern.pattern)
        elif self.subscriptions.mode is SubscriptionMode.AUTO_PATTERN and self._metadata_seen < 0:
            await self.client.refresh_metadata()
            self._check_metadata()
        await group.ensure_active_group(self.subscriptions.topics, self._partition_counts)

    async def commit(self, offsets: Mapping[TopicPartition, int] | None = None) -> None:
        if offsets is None:
            offsets = self.subscriptions.consumed_offsets()
        await self.group.offsets.commit(dict(offsets))

    async def close(self) -> None:
        """Revoke what the member owns (committing it with auto-commit) — or call it lost when
        the membership is already gone — then LeaveGroup (dynamic members)."""
        group = self.group
        if group.member.owned and group.fatal is None:
            owned = set(group.member.owned)
            if group.stable:
                await self.on_revoke(owned)
            else:
                await self.on_lost(owned)
        await group.leave()

    # --- the rebalance listener, wrapped ----------------------------------------------------

    async def on_revoke(self, partitions: set[TopicPartition]) -> None:
        if self._auto_commit:
            offsets = {tp: o for tp, o in self.subscriptions.consumed_offsets().items() if tp in partitions}
            try:
                await self.group.offsets.commit(offsets)
            except KafkaError as exc:
                logger.warning("auto-commit before revoking %s failed: %s", sorted(map(str, partitions)), exc)
        try:
            await _call(self.listener.on_partitions_revoked, partitions)
        finally:
            self.subscriptions.revoke(partitions)
            self._drop(partitions)

    async def on_assign(self, added: set[TopicPartition]) -> None:
        self.subscriptions.assign_from_group(self.group.member.owned)
        await _call(self.listener.on_partitions_assigned, added)

    async def on_lost(self, partitions: set[TopicPartition]) -> None:
        try:
            await _call(self.listener.on_partitions_lost, partitions)
        finally:
            self.subscriptions.revoke(partitions)
            self._drop(partitions)

    # --- what makes the group rebalance ----------------------------------------------------

    async def _partition_counts(self, topics: set[str]) -> dict[str, int]:
        cluster = self.client.cluster
        if cluster.add_interest(topics) or any(cluster.partition_count(t) is None for t in topics):
            await self.client.refresh_metadata()
        counts = {t: n for t in topics if (n := cluster.partition_count(t)) is not None}
        self._assigned_counts = counts
        return counts

    def _check_metadata(self) -> None:
        """On fresh metadata: re-match the pattern; the leader rejoins when a subscribed
        topic's partition count changed (Kafka's metadata-snapshot check)."""
        cluster = self.client.cluster
        if cluster.version == self._metadata_seen:
            return
        self._metadata_seen = cluster.version
        if self.subscriptions.mode is SubscriptionMode.AUTO_PATTERN:
            if self.subscriptions.match_pattern(t for t in cluster.topics if not cluster.topics[t].is_internal):
                self.group.request_rejoin()
        if self.group.member.is_leader and self._assigned_counts:
            for topic, count in self._assigned_counts.items():
                now = cluster.partition_count(topic)
                if now is not None and now != count:
                    self.group.request_rejoin()

    async def _maybe_auto_commit(self) -> None:
        if not self._auto_commit or trio.current_time() < self._next_auto_commit:
            return
        self._next_auto_commit = trio.current_time() + self._auto_commit_interval
        if not self.group.stable:
            return
        try:
            await self.group.offsets.commit(self.subscriptions.consumed_offsets())
        except KafkaError as exc:
            logger.warning("auto-commit failed: %s", exc)
