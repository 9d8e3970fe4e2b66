"""The Trio share consumer (KIP-932): ``async with open_share_consumer(bootstrap, group_id=...)``.

Theory of operation. A share consumer reads its topics as queues: the broker hands each record
to one member at a time, locked to it until it is acknowledged. :meth:`ShareConsumer.poll`
sends one ShareFetch to the leader of each assigned partition's broker (its share session,
``share_session.py``), carrying the acknowledgements waiting for that broker, and returns the
records acquired — each with its delivery count. With ``acknowledgement_mode="implicit"``
every record a poll returned is accepted by the next poll, ``commit()`` or the close; with
``"explicit"`` the application calls ``acknowledge(record, "accept"|"release"|"reject"|"renew")``
for each one, and they go out with the next poll or ``commit()``. Membership (heartbeats,
the assignment) runs in a task of the consumer's nursery. ``aclose()`` sends what is pending and
closes each share session (the broker releases what the member still holds), then leaves the
group. Every wait is on trio's clock: a ``MockClock`` test runs a whole queue in virtual time.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

from trikafka.client.client import KafkaClient, open_client
from trikafka.client.cluster import TopicPartition
from trikafka.client.config import ClientConfig
from trikafka.client.errors import KafkaError
from trikafka.client.fetcher import decode_partition
from trikafka.client.share_session import ACK_TYPES, NodeSession, PendingAcks, ShareMembership
from trikafka.client.transport import Bootstrap, Connector
from trikafka.errors import ErrorCode
from trikafka.protocol.registry import ApiKey

__all__ = ["ShareConsumer", "ShareRecord", "open_share_consumer"]

log = logging.getLogger(__name__)

_SESSION_LOST = (ErrorCode.share_session_not_found, ErrorCode.invalid_share_session_epoch)
_LEADER_MOVED = (ErrorCode.not_leader_or_follower, ErrorCode.unknown_topic_or_partition,
                 ErrorCode.unknown_topic_id, ErrorCode.fenced_leader_epoch)


@attrs.frozen
class ShareRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    delivery_count: int


class ShareConsumer:
    """Use through :func:`open_share_consumer`."""

    def __init__(self, client: KafkaClient, config: ClientConfig, group_id: str, mode: str, max_records: int) -> None:
        if mode not in ("implicit", "explicit"):
            raise ValueError(f"acknowledgement_mode must be 'implicit' or 'explicit', not {mode!r}")
        self.client = client
        self.config = config
        self.mode = mode
        self.max_records = max_records
        self.membership = ShareMembership(client, group_id)
        self.sessions: dict[int, NodeSession] = {}
        self.pending = PendingAcks()
        self._unacknowledged: dict[tuple[TopicPartition, int], ShareRecord] = {}
        self.closed = False

    @property
    def group_id(self) -> str:
        return self.membership.group_id

    @property
    def assignment(self) -> set[TopicPartition]:
        return set(self.membership.assignment)

    def subscribe(self, topics: str | Iterable[str]) -> None:
        self.membership.subscribe((topics,) if isinstance(topics, str) else tuple(topics))

    # --- acknowledging ----------------------------------------------------------------------

    def acknowledge(self, record: ShareRecord, kind: str = "accept") -> None:
        """Explicit mode: how the broker should treat ``record`` (sent with the next poll or
        commit). ``renew`` keeps the lock for another lock duration (ShareAcknowledge v2)."""
        if self.mode != "explicit":
            raise ValueError("acknowledge() is for acknowledgement_mode='explicit'")
        if kind not in ACK_TYPES:
            raise ValueError(f"acknowledge type must be one of {', '.join(ACK_TYPES)}, not {kind!r}")
        tp = TopicPartition(record.topic, record.partition)
        if self._unacknowledged.pop((tp, record.offset), None) is None and kind != "renew":
            raise ValueError(f"{record.topic}-{record.partition}@{record.offset} is not in flight for this consumer")
        if kind == "renew":
            self._unacknowledged[(tp, record.offset)] = record
        self.pending.add(tp, record.offset, ACK_TYPES[kind])

    def _accept_delivered(self) -> None:
        if self.mode == "implicit":
            for (tp, offset) in self._unacknowledged:
                self.pending.add(tp, offset, ACK_TYPES["accept"])
            self._unacknowledged.clear()

    # --- polling ----------------------------------------------------------------------------

    async def poll(self, timeout_ms: float = 1000) -> list[ShareRecord]:
        """Records acquired for this member, waiting up to ``timeout_ms`` for some (the
        consumer's ``getmany`` shape)."""
        if self.closed:
            raise KafkaError(ErrorCode.unknown_server_error, "the share consumer is closed", retriable=False)
        self._accept_delivered()
        deadline = trio.current_time() + timeout_ms / 1000
        while True:
            if self.membership.error is not None:
                raise self.membership.error
            if not self.membership.assignment:
                with trio.move_on_at(deadline):
                    await self.membership.assignment_changed.wait()
            records = await self._fetch_all(max(deadline - trio.current_time(), 0))
            if records or trio.current_time() >= deadline:
                return records

    async def _fetch_all(self, wait_s: float) -> list[ShareRecord]:
        by_node: dict[int, set[TopicPartition]] = {}
        for tp in self.membership.assignment | set(self.pending.by_partition):
            leader = self.client.cluster.leader_for(tp)
            if leader is None:
                self.client.request_metadata_update()
                continue
            by_node.setdefault(leader, set()).add(tp)
        for node_id, session in self.sessions.items():  # a session whose partitions all moved away
            if node_id not in by_node and session.partitions:
                by_node[node_id] = set()
        if not by_node:
            with trio.move_on_after(min(wait_s, self.config["retry.backoff.ms"] / 1000)):
                await self.membership.assignment_changed.wait()
            return []
        found: list[ShareRecord] = []
        async with trio.open_nursery() as nursery:
            for node_id, partitions in by_node.items():
                nursery.start_soon(self._fetch_node, node_id, partitions, wait_s, found)
        return found

    async def _fetch_node(
        self, node_id: int, partitions: set[TopicPartition], wait_s: float, found: list[ShareRecord]
    ) -> None:
        session = self.sessions.setdefault(node_id, NodeSession())
        assigned = {tp for tp in partitions if tp in self.membership.assignment}
        topics: dict[Any, list[dict[str, Any]]] = {}
        acked = []
        for tp in sorted(assigned | set(self.pending.by_partition) & partitions, key=lambda t: (t.topic, t.partition)):
            info = self.client.cluster.topic(tp.topic)
            if info is None or info.topic_id is None:
                continue
            batches = self.pending.take(tp) if session.epoch > 0 else []
            if batches:
                acked.append(tp)
            if session.epoch == 0 or batches or tp not in session.partitions:
                topics.setdefault(info.topic_id, []).append(
                    {"partition_index": tp.partition, "acknowledgement_batches": batches}
                )
        forgotten: dict[Any, list[int]] = {}
        for tp in session.partitions - assigned:
            info = self.client.cluster.topic(tp.topic)
            if info is not None and info.topic_id is not None:
                forgotten.setdefault(info.topic_id, []).append(tp.partition)
        response = await self.client.send(
            node_id,
            ApiKey.SHARE_FETCH,
            group_id=self.group_id,
            member_id=self.membership.member_id,
            share_session_epoch=session.epoch,
            max_wait=math.ceil(min(wait_s, self.config["fetch.max.wait.ms"] / 1000) * 1000),
            min_bytes=self.config["fetch.min.bytes"],
            max_bytes=self.config["fetch.max.bytes"],
            max_records=self.max_records,
            batch_size=self.max_records,
            topics=[{"topic_id": t, "partitions": p} for t, p in topics.items()],
            forgotten_topics_data=[{"topic_id": t, "partitions": p} for t, p in forgotten.items()],
        )
        if response.error_code in _SESSION_LOST:
            session.epoch, session.partitions = 0, set()
            return
        if response.error_code != ErrorCode.none:
            raise KafkaError(ErrorCode(response.error_code), f"ShareFetch: {response.error_message}")
        session.next_epoch()
        session.partitions = set(assigned)
        names = {t.topic_id: name for name, t in self.client.cluster.topics.items()}
        for topic in response.responses:
            for p in topic.partitions:
                tp = TopicPartition(names.get(topic.topic_id, ""), p.partition_index)
                if p.error_code in _LEADER_MOVED:
                    self.client.request_metadata_update()
                if p.acknowledge_error_code != ErrorCode.none:
                    log.warning("share group %s: acknowledgements of %s-%d failed: %s", self.group_id, tp.topic,
                                tp.partition, ErrorCode(p.acknowledge_error_code).name)
                found.extend(self._records(tp, p))

    def _records(self, tp: TopicPartition, p: Any) -> list[ShareRecord]:
        if not p.acquired_records:
            return []
        counts = {o: r.delivery_count for r in p.acquired_records for o in range(r.first_offset, r.last_offset + 1)}
        decoded = decode_partition(tp.topic, tp.partition, p.records, min(counts), check_crcs=False)
        out = []
        for r in decoded.records:
            if r.offset in counts:
                record = ShareRecord(
                    tp.topic, tp.partition, r.offset, r.timestamp, r.key, r.value, r.headers, counts[r.offset]
                )
                self._unacknowledged[(tp, r.offset)] = record
                out.append(record)
        for offset in set(counts) - {r.offset for r in out}:  # acquired but no record there: a gap
            self.pending.add(tp, offset, 0)
        return out

    def __aiter__(self) -> AsyncIterator[ShareRecord]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[ShareRecord]:
        while True:
            for record in await self.poll(self.config["fetch.max.wait.ms"]):
                yield record

    # --- committing and closing -------------------------------------------------------------

    async def commit(self) -> None:
        """Send the pending acknowledgements now (ShareAcknowledge to each broker)."""
        self._accept_delivered()
        await self._acknowledge_all(final=False)

    async def _acknowledge_all(self, final: bool) -> None:
        by_node: dict[int, dict[Any, list[dict[str, Any]]]] = {}
        for tp in list(self.pending.by_partition):
            leader, info = self.client.cluster.leader_for(tp), self.client.cluster.topic(tp.topic)
            if leader is None or info is None or self.sessions.get(leader, NodeSession()).epoch == 0:
                continue
            by_node.setdefault(leader, {}).setdefault(info.topic_id, []).append(
                {"partition_index": tp.partition, "acknowledgement_batches": self.pending.take(tp)})
        nodes = set(by_node) | ({n for n, s in self.sessions.items() if s.epoch > 0} if final else set())
        for node_id in nodes:
            session = self.sessions[node_id]
            topics = by_node.get(node_id, {})
            response = await self.client.send(
                node_id, ApiKey.SHARE_ACKNOWLEDGE, group_id=self.group_id, member_id=self.membership.member_id,
                share_session_epoch=-1 if final else session.epoch,
                topics=[{"topic_id": t, "partitions": p} for t, p in topics.items()])
            if response.error_code != ErrorCode.none:
                raise KafkaError(ErrorCode(response.error_code), f"ShareAcknowledge: {response.error_message}")
            if final:
                self.sessions.pop(node_id)
            else:
                session.next_epoch()

    async def aclose(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._accept_delivered()
        try:
            await self._acknowledge_all(final=True)
        finally:
            await self.membership.leave()


@asynccontextmanager
async def open_share_consumer(
    bootstrap: Bootstrap | None = None, *, group_id: str, acknowledgement_mode: str = "implicit",
    connector: Connector | None = None, **config: object,
) -> AsyncIterator[ShareConsumer]:
    """Open a share consumer of ``group_id``; ``bootstrap`` is ``host:port[,…]`` or a
    ``TestBroker``; ``config`` takes Kafka's consumer keys (``max.poll.records`` bounds a poll,
    ``fetch.max.wait.ms`` a ShareFetch's wait)."""
    if isinstance(bootstrap, str | list | tuple):
        config["bootstrap.servers"] = bootstrap
    config["group.id"] = group_id
    settings = ClientConfig.for_role("consumer", config)
    if bootstrap is None:
        bootstrap = settings["bootstrap.servers"]
    async with open_client(bootstrap, settings, connector) as client:
        consumer = ShareConsumer(client, settings, group_id, acknowledgement_mode, settings["max.poll.records"])
        async with trio.open_nursery() as nursery:
            nursery.start_soon(consumer.membership.run, name=f"share-heartbeat-{group_id}")
            try:
                yield consumer
            finally:
                with trio.CancelScope(shield=True) as scope:
                    scope.deadline = trio.current_time() + settings["request.timeout.ms"] / 1000
                    try:
                        await consumer.aclose()
                    except KafkaError as exc:
                        log.warning("closing the share consumer: %s", exc)
                nursery.cancel_scope.cancel()
