"""The Trio consumer: ``async with open_consumer(bootstrap, group_id=...) as consumer``.

Theory of operation. Everything the application sees happens in *its* task, inside a poll
(``getmany``, ``async for``): group (re)joins and the rebalance listener, initial positions
(committed offset, else ``auto.offset.reset``), auto-commit when due, and taking fetched
records. Heartbeats run in a task of the consumer's nursery (see
:mod:`trikafka.client.group_session`), and so do the requests a poll must not cut in the
middle — a JoinGroup round, the Fetch out (:mod:`trikafka.client.consumer_prefetch`: the next
one is sent while the application works) — whose answers the next poll takes.
So a listener's ``on_partitions_revoked`` always runs
*before* the next records are handed out (a fetched answer for a revoked partition is
dropped), and may await a commit or a producer flush.

Three objects, as in Java's consumer: this one (subscription API, positions, the fetched
records' buffers, polling), its :class:`~trikafka.client.consumer_coordinator.ConsumerCoordinator`
when it has a ``group.id`` (what the group means for those partitions: the listener,
auto-commit, commits, what makes it rejoin), and the coordinator's
:class:`~trikafka.client.group_session.GroupSession` (the membership protocol).

Positions: a partition's position is the offset of the next record the application gets.
Records are handed out one by one from a per-partition buffer filled by Fetch; the position
moves as each is handed out, so ``commit()`` with no arguments commits exactly what the
application has received (Kafka's "consumed offsets"). A seek drops that partition's buffer.
Control batches and aborted records (read_committed) are skipped by moving the position past
them once the buffer before them is drained.

Cancellation leaves nothing half-done: a poll cancelled while a Fetch is in flight has not
moved any position; a commit cancelled in flight may or may not have landed, which
at-least-once processing tolerates (and exactly-once uses transactions for).
"""

from __future__ import annotations

import logging
import re
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import trio

from trikafka.client.client import KafkaClient, open_client
from trikafka.client.config import ClientConfig
from trikafka.client.consumer_coordinator import ConsumerCoordinator
from trikafka.client.consumer_fetch import (
    LeaderReader,
)
from trikafka.client.consumer_prefetch import ConsumerPrefetch
from trikafka.client.consumer_protocol import TopicPartition
from trikafka.client.consumer_state import OffsetResetStrategy, SubscriptionState
from trikafka.client.deadlines import bounded_call
from trikafka.client.errors import KafkaError
from trikafka.client.fetcher import ConsumerRecord
from trikafka.client.group_consumer import ConsumerGroupSession
from trikafka.client.group_offsets import CommitFailedError
from trikafka.client.group_session import ConsumerGroupMetadata, GroupSession
from trikafka.client.lifetime import open_service_nursery
from trikafka.client.serialization import record_decoder
from trikafka.client.telemetry import start_telemetry
from trikafka.client.transport import Bootstrap, Connector
from trikafka.errors import ErrorCode

__all__ = ["Consumer", "open_consumer"]

logger = logging.getLogger(__name__)


class Consumer(ConsumerPrefetch):
    """Use through :func:`open_consumer`; its nursery bounds the heartbeat task."""

    def __init__(
        self, client: KafkaClient, config: ClientConfig, nursery: trio.Nursery,
        key_deserializer: Callable[..., object] | None = None,
        value_deserializer: Callable[..., object] | None = None,
    ) -> None:
        self.client = client
        self._decode = record_decoder(key_deserializer, value_deserializer)
        self.config = config
        self.subscriptions = SubscriptionState(OffsetResetStrategy(config["auto.offset.reset"]))
        self.reader = LeaderReader(client, config)
        self._buffers: dict[TopicPartition, tuple[deque[ConsumerRecord], int]] = {}
        self._buffered_bytes: dict[TopicPartition, int] = {}
        self._nursery = nursery
        self._fetch = None  # the Fetch out (consumer_prefetch.py), if any
        self._fetch_offsets: dict[TopicPartition, int] = {}
        #: The group's side (rebalance listener, auto-commit, commits); None without group.id.
        self.coordinator: ConsumerCoordinator | None = None
        self.group: GroupSession | ConsumerGroupSession | None = None
        if config["group.id"] is not None:
            self.coordinator = ConsumerCoordinator(client, config, self.subscriptions, self._drop_buffers, nursery)
            self.group = self.coordinator.group
        self.closed = False
        self._polling = False
        self._last_poll_start = 0.0  # for KIP-714's poll.idle.ratio.avg

    @property
    def connected(self) -> bool:
        """True while a connection to some broker of the cluster is open; False while none
        could be reached (the client then logs one WARNING naming the bootstrap servers and
        why, once no broker was reached for ``default.api.timeout.ms``: ``getmany`` returns ``{}`` meanwhile)."""
        return self.client.connected

    @property
    def listener(self) -> object:
        """The rebalance listener (set by ``subscribe(listener=...)``)."""
        return self._need_group("a rebalance listener").listener

    @listener.setter
    def listener(self, listener: object) -> None:
        self._need_group("a rebalance listener").listener = listener

    # --- subscription ---------------------------------------------------------------------

    def _need_group(self, what: str) -> ConsumerCoordinator:
        if self.coordinator is None:
            raise ValueError(f"{what} needs a group.id")
        return self.coordinator

    def subscribe(
        self,
        topics: str | Iterable[str] | re.Pattern[str] | None = None,
        *,
        pattern: str | re.Pattern[str] | None = None,
        listener: object = None,
    ) -> None:
        """Subscribe to topics, or to every topic matching ``pattern`` (a regex, checked on
        each metadata refresh). ``listener``: a :class:`RebalanceListener`-shaped object."""
        coordinator = self._need_group("subscribe()")
        if isinstance(topics, re.Pattern):
            topics, pattern = None, topics
        if (topics is None) == (pattern is None):
            raise ValueError("subscribe() takes topics or a pattern (exactly one)")
        if listener is not None:
            coordinator.listener = listener
        if pattern is not None:
            self.subscriptions.subscribe_pattern(pattern)
            self.client.cluster.all_topics = True
            self.client.request_metadata_update()  # wakes the refresher: the pattern is matched now
            coordinator.pattern_changed()
        else:
            names = [topics] if isinstance(topics, str) else list(topics)  # type: ignore[arg-type]  # not None: checked above
            self.subscriptions.subscribe(names)
            self.client.cluster.add_interest(names)
        coordinator.group.request_rejoin()

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read these partitions, without group membership (commits still go to group.id)."""
        partitions = list(partitions)
        self.subscriptions.assign_from_user(partitions)
        self.client.cluster.add_interest({tp.topic for tp in partitions})
        self._drop_buffers([tp for tp in self._buffers if tp not in self.subscriptions.assignment])

    def unsubscribe(self) -> None:
        self.subscriptions.unsubscribe()
        self._drop_buffers(list(self._buffers))
        if self.group is not None:
            self.group.request_rejoin()

    def assignment(self) -> set[TopicPartition]:
        return self.subscriptions.assigned()

    def subscription(self) -> set[str]:
        return set(self.subscriptions.topics)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """For ``producer.send_offsets_to_transaction`` (fences zombie members, KIP-447)."""
        return self._need_group("group_metadata()").group.group_metadata()

    # --- positions ------------------------------------------------------------------------

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.subscriptions.seek(tp, offset)
        self._drop_buffers([tp])

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        for tp in partitions or tuple(self.subscriptions.assignment):
            self.subscriptions.request_reset(tp, OffsetResetStrategy.EARLIEST)
            self._drop_buffers([tp])

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        for tp in partitions or tuple(self.subscriptions.assignment):
            self.subscriptions.request_reset(tp, OffsetResetStrategy.LATEST)
            self._drop_buffers([tp])

    @bounded_call("default.api.timeout.ms")
    async def position(self, tp: TopicPartition) -> int:
        """The offset of the next record this consumer will return for ``tp``."""
        self.subscriptions.position(tp)  # raises if not assigned
        await self._update_positions()
        position = self.subscriptions.position(tp)
        assert position is not None
        return position

    @bounded_call("default.api.timeout.ms")
    async def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        return await self._need_group("committed()").group.offsets.committed(partitions)

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop returning (and fetching) these partitions; their fetched records are dropped
        (fetched again from the position on resume)."""
        self.subscriptions.pause(partitions)
        self._drop_buffers(partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self.subscriptions.resume(partitions)

    def paused(self) -> set[TopicPartition]:
        return self.subscriptions.paused()

    # --- polling -----------------------------------------------------------------------------

    async def _poll_once(self, deadline: float, max_records: int) -> dict[TopicPartition, list[ConsumerRecord]]:
        if self.closed:
            raise trio.ClosedResourceError("the consumer is closed")
        if self._polling:
            # Like two tasks receiving on one stream (Java: "KafkaConsumer is not safe for
            # multi-threaded access"): two polls would run two joins of one member.
            raise trio.BusyResourceError("another task is already polling this consumer")
        self._polling = True
        try:
            return await self._poll_once_unguarded(deadline, max_records)
        finally:
            self._polling = False

    async def _poll_once_unguarded(
        self, deadline: float, max_records: int
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        if self.coordinator is not None:
            await self.coordinator.poll()
        await self._update_positions()
        drained = self._drain(max_records)
        if not drained:
            if not await self._fetch_until(deadline):
                with trio.move_on_at(deadline):
                    await self._wait_for_change()
                return {}
            drained = self._drain(max_records)
        if drained:
            self._prefetch()  # the next Fetch goes out while the application works on these
        return drained

    async def _wait_for_change(self) -> None:
        """Nothing to fetch (all paused, or no assignment yet): wait a heartbeat's time so
        a rebalance or a resume is noticed by the next round."""
        await trio.sleep(self.config["retry.backoff.ms"] / 1000)

    async def getmany(
        self, timeout_ms: float = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records by partition, waiting up to ``timeout_ms`` for at least one (aiokafka's
        shape; Java's ``poll``). Bounded by ``max_records`` (default ``max.poll.records``).

        Returns at ``timeout_ms`` (at least ``retry.backoff.ms``) whatever the cluster does: a
        join, a position look-up or a fetch still out then is cancelled (nothing moved) and
        ``{}`` returned; the next call takes it up again. A JoinGroup the coordinator holds
        (a rebalance waiting for other members) is not cancelled: it goes on in the
        background (:mod:`~trikafka.client.pending`) and the next call waits on it. Errors the cluster *answered* (a
        missing topic) are raised."""
        limit = max_records or self.config["max.poll.records"]
        now = trio.current_time()
        deadline = now + timeout_ms / 1000
        since_last, self._last_poll_start = now - (self._last_poll_start or now), now
        records: dict[TopicPartition, list[ConsumerRecord]] = {}
        # The hard stop: the timeout, but never less than one retry.backoff.ms, so that a
        # poll with timeout 0 still completes the round trips a live cluster answers at once
        # (an auto-commit, a fetch with max_wait 0) instead of being cancelled at its first await.
        with trio.move_on_at(max(deadline, now + self.config["retry.backoff.ms"] / 1000)):
            try:
                while True:
                    records = await self._poll_once(deadline, limit)
                    if records or trio.current_time() >= deadline:
                        if not records:
                            await trio.lowlevel.checkpoint()
                        return records
            finally:
                if self.client.telemetry is not None:
                    self._poll_telemetry(now, since_last, records)
        return {}

    def _poll_telemetry(self, started: float, since_last: float, records: dict[Any, list[Any]]) -> None:
        """KIP-714's poll.idle.ratio.avg (Java's KafkaConsumerMetrics: the time in this poll
        over it plus the time since the previous poll began) and records consumed."""
        telemetry = self.client.telemetry
        in_poll = trio.current_time() - started
        if in_poll + since_last > 0:
            telemetry.record("poll.idle.ratio", in_poll / (in_poll + since_last))
        telemetry.count("fetch.manager.records.consumed", sum(len(batch) for batch in records.values()))

    def __aiter__(self) -> AsyncIterator[ConsumerRecord]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[ConsumerRecord]:
        while not self.closed:
            records = await self._poll_once(trio.current_time() + 3600, 1)
            for batch in records.values():
                for record in batch:
                    yield record

    # --- commits -----------------------------------------------------------------------------

    @bounded_call("default.api.timeout.ms")
    async def commit(self, offsets: Mapping[TopicPartition, int] | None = None) -> None:
        """Commit ``offsets`` (partition → next offset to read), or every position. Raises
        :class:`CommitFailedError` when a rebalance took the partitions away."""
        await self._need_group("commit()").commit(offsets)

    @bounded_call("default.api.timeout.ms")
    async def aclose(self) -> None:
        """Commit (auto-commit), revoke, LeaveGroup (dynamic members). Idempotent."""
        if self.closed:
            return
        try:
            if self.coordinator is not None:
                await self.coordinator.close()
        finally:
            self.closed = True
            if self.group is not None:
                self.group.closed = True


@asynccontextmanager
async def open_consumer(
    bootstrap: Bootstrap | None = None, *, connector: Connector | None = None,
    key_deserializer: Callable[..., object] | None = None, value_deserializer: Callable[..., object] | None = None,
    **config: object,
) -> AsyncIterator[Consumer]:
    """Open a consumer; ``bootstrap`` as for :func:`~trikafka.client.open_producer`; ``config``
    takes Kafka's consumer keys in either spelling (``group_id=``, ``**{"group.id": …}``).
    ``key_deserializer``/``value_deserializer``: callables ``(bytes)`` or ``(bytes, ctx)``
    (see :mod:`trikafka.client.serialization`)."""
    record_decoder(key_deserializer, value_deserializer)  # a wrong one: refused before connecting
    if isinstance(bootstrap, str | list | tuple):
        config["bootstrap.servers"] = bootstrap
    settings = ClientConfig.for_role("consumer", config)
    if bootstrap is None:
        bootstrap = settings["bootstrap.servers"]
        if bootstrap is None:
            raise KafkaError(ErrorCode.invalid_config, "open_consumer needs bootstrap servers", retriable=False)
    async with open_client(bootstrap, settings, connector) as client:
        async with open_service_nursery("the consumer") as nursery:
            consumer = Consumer(client, settings, nursery, key_deserializer, value_deserializer)
            telemetry = start_telemetry(client, settings, nursery)
            if telemetry is not None:
                telemetry.gauge("coordinator.assigned.partitions", lambda: len(consumer.assignment()))
            try:
                yield consumer
            finally:
                with trio.CancelScope(shield=True):
                    try:  # bounded by default.api.timeout.ms, as Java's close()
                        await consumer.aclose()
                    except (KafkaError, CommitFailedError) as exc:
                        logger.warning("closing the consumer: %s", exc)
                    if telemetry is not None:
                        await telemetry.close()
                nursery.cancel_scope.cancel()
