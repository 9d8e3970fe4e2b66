"""KIP-848 membership for the Trio consumer (``group.protocol=consumer``).

Theory of operation. The coordinator computes the assignment (``group.remote.assignor``); the
member only heartbeats (ConsumerGroupHeartbeat, API 68) and reconciles. Each answer may carry
the member's *target* assignment (topic ids and partitions); the member revokes what it owns
outside the target, then takes what the target adds, and acknowledges each step by reporting
what it owns in its next heartbeat. The coordinator hands a partition to a new owner only once
the old one has acknowledged its revocation, so no partition is owned twice.

Where it runs, as the classic :class:`~trikafka.client.group_session.GroupSession` (whose
interface this class keeps, so :class:`ConsumerCoordinator` uses either): joining (epoch 0),
reconciling and every listener callback happen in the application's poll
(:meth:`ensure_active_group`); a background task heartbeats every ``heartbeat_interval`` the
coordinator gives, and leaves when ``max.poll.interval.ms`` passes without a poll. Fenced
(FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID), the member's partitions are *lost* (the listener's
``on_partitions_lost``) and it joins again with epoch 0 and the same member id. Leaving sends
epoch -1, or -2 for a static member (``group.instance.id``), which keeps its assignment for
``session.timeout.ms`` on the coordinator's side.

Commits use the member epoch as the generation (OffsetCommit v9+, as KIP-848 requires).
"""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import trio

from trikafka.client.client import KafkaClient
from trikafka.client.consumer_protocol import TopicPartition
from trikafka.client.errors import KafkaError
from trikafka.client.group_member import GroupMemberError, MemberState
from trikafka.client.group_offsets import CoordinatorLink, GroupOffsets
from trikafka.client.group_session import ConsumerGroupMetadata
from trikafka.client.pending import Pending
from trikafka.errors import ErrorCode
from trikafka.protocol.registry import ApiKey

__all__ = ["ConsumerGroupSession", "ConsumerMember"]

logger = logging.getLogger(__name__)

LEAVE_EPOCH = -1
LEAVE_STATIC_EPOCH = -2

#: The membership is gone: the partitions are lost, the member joins again (epoch 0).
_FENCED = frozenset({ErrorCode.fenced_member_epoch, ErrorCode.unknown_member_id})


class ConsumerMember:
    """What :class:`GroupOffsets` and the consumer read of a member: id, epoch, owned."""

    def __init__(self, group_instance_id: str | None) -> None:
        # KIP-848 (v1): the client makes its member id, once, and keeps it across rejoins.
        self.member_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        self.generation_id = 0  # the member epoch; 0: not joined
        self.group_instance_id = group_instance_id
        self.owned: set[TopicPartition] = set()
        self.state = MemberState.UNJOINED
        self.is_leader = False  # no client-side leader: the coordinator assigns


class ConsumerGroupSession:
    def __init__(
        self,
        client: KafkaClient,
        config: Any,
        *,
        on_revoke: Callable[[set[TopicPartition]], Any],
        on_assign: Callable[[set[TopicPartition]], Any],
        on_lost: Callable[[set[TopicPartition]], Any],
    ) -> None:
        self.client = client
        self.group_id: str = config["group.id"]
        self.link = CoordinatorLink(client, self.group_id)
        self.member = ConsumerMember(config["group.instance.id"])
        self.server_assignor: str | None = config["group.remote.assignor"]
        self.rebalance_timeout_ms: int = config["max.poll.interval.ms"]
        self.max_poll_interval = config["max.poll.interval.ms"] / 1000
        self.heartbeat_interval = config["heartbeat.interval.ms"] / 1000  # until the coordinator says
        self._on_revoke, self._on_assign, self._on_lost = on_revoke, on_assign, on_lost
        self.offsets = GroupOffsets(self.link, self.member, self._handle_group_error)  # type: ignore[arg-type]  # a ConsumerMember quacks as GroupMember
        self.subscribed: list[str] = []
        #: ``subscribe(pattern=...)``: sent as SubscribedTopicRegex, resolved by the coordinator
        #: (Kafka 4); the names matched here are only for metadata. "" clears a sent regex.
        self.regex: str | None = None
        self._regex_sent = False
        self.target: list[tuple[Any, list[int]]] | None = None  # (topic id, partitions) from the coordinator
        self.pending_lost: tuple[TopicPartition, ...] = ()
        self.fatal: GroupMemberError | None = None
        self.closed = False
        self.rejoin_needed = True  # a heartbeat with fresh fields is due from the poll
        self.last_poll = trio.current_time()
        #: Set by the consumer: where a poll's heartbeat runs, so a poll's timeout never loses
        #: its answer (the new epoch): :mod:`~trikafka.client.pending`.
        self.nursery: trio.Nursery | None = None
        self._pending: Pending[None] | None = None
        self._lock = trio.Lock()  # one heartbeat in flight: epochs must not cross
        self._wake = trio.Event()

    # --- the interface GroupSession has ----------------------------------------------------

    def coordinator_dead(self) -> None:
        self.link.dead()

    def group_metadata(self) -> ConsumerGroupMetadata:
        m = self.member
        return ConsumerGroupMetadata(self.group_id, m.generation_id, m.member_id, m.group_instance_id)

    def request_rejoin(self) -> None:
        """Send the member's fields at the next poll (a new subscription or pattern match)."""
        self.rejoin_needed = True

    def subscribe_regex(self, regex: str | None) -> None:
        """The pattern subscription to send (None: topic names)."""
        if regex != self.regex:
            self.regex = regex
            self.rejoin_needed = True

    @property
    def stable(self) -> bool:
        return (
            self.member.generation_id > 0 and not self.rejoin_needed and self.fatal is None
            and self._resolve() == self.member.owned
        )

    def _handle_group_error(self, code: ErrorCode) -> None:
        """A commit answered with a stale epoch: heartbeat again to learn the current one."""
        self.rejoin_needed = True

    # --- the application's poll --------------------------------------------------------------

    async def ensure_active_group(self, topics: Iterable[str], partition_counts: Callable[[set[str]], Any]) -> bool:
        """Join if needed, then reconcile towards the target; callbacks run here."""
        if self.fatal is not None:
            raise self.fatal
        if self.pending_lost:
            lost, self.pending_lost = self.pending_lost, ()
            await self._on_lost(set(lost))
        topics = sorted(topics)
        if topics != self.subscribed or self.rejoin_needed or self.member.generation_id <= 0:
            self.subscribed = topics
            await self._heartbeat_or_backoff()
            if self.fatal is not None:
                raise self.fatal
        return await self._reconcile()

    async def _heartbeat_or_backoff(self) -> None:
        try:
            if self.nursery is None:
                await self._heartbeat()
            else:
                if self._pending is None:
                    self._pending = Pending(self.nursery, self._heartbeat, f"group-heartbeat-{self.group_id}")
                pending = self._pending
                await pending.wait()  # cancelled: the heartbeat goes on; the next poll takes its answer
                self._pending = None
                pending.unwrap()
        except KafkaError as exc:
            if not exc.retriable:
                raise
            logger.info("group %s: heartbeat failed (%s); retrying", self.group_id, exc)
            await self.client.retry_sleep(0)

    def _resolve(self) -> set[TopicPartition] | None:
        """The target by topic name; None while a topic id is not in the metadata yet."""
        if self.target is None:
            return None
        names = {info.topic_id: name for name, info in self.client.cluster.topics.items() if info.topic_id is not None}
        out: set[TopicPartition] = set()
        for topic_id, partitions in self.target:
            name = names.get(topic_id)
            if name is None:
                self.client.request_metadata_update()
                return None
            out |= {TopicPartition(name, p) for p in partitions}
        return out

    async def _reconcile(self) -> bool:
        target = self._resolve()
        if target is None:
            return False
        owned = set(self.member.owned)
        revoked, added = owned - target, target - owned
        if revoked:
            try:
                await self._on_revoke(revoked)
            finally:
                self.member.owned = owned - revoked
        if added:
            self.member.owned |= added
            await self._on_assign(added)
        if revoked or added:
            await self._heartbeat_or_backoff()  # acknowledge: the coordinator moves on
        self.member.state = MemberState.STABLE if self.member.owned == target else MemberState.PREPARING_REBALANCE
        return bool(revoked or added)

    # --- heartbeats ---------------------------------------------------------------------------

    def _owned_by_id(self) -> list[dict[str, Any]] | None:
        cluster = self.client.cluster
        by_topic: dict[Any, list[int]] = {}
        for tp in sorted(self.member.owned):
            info = cluster.topic(tp.topic)
            if info is None or info.topic_id is None:
                continue
            by_topic.setdefault(info.topic_id, []).append(tp.partition)
        return [{"topic_id": t, "partitions": p} for t, p in by_topic.items()]

    async def _heartbeat(self, *, epoch: int | None = None) -> None:
        async with self._lock:
            member = self.member
            leaving = epoch is not None
            answer = await self.link.send(
                ApiKey.CONSUMER_GROUP_HEARTBEAT,
                group_id=self.group_id,
                member_id=member.member_id,
                member_epoch=member.generation_id if epoch is None else epoch,
                instance_id=member.group_instance_id,
                rack_id=None,
                rebalance_timeout=self.rebalance_timeout_ms,
                subscribed_topic_names=None if leaving else [] if self.regex else list(self.subscribed),
                subscribed_topic_regex=None if leaving else self.regex or ("" if self._regex_sent else None),
                server_assignor=None if leaving else self.server_assignor,
                topic_partitions=None if leaving else self._owned_by_id(),
            )
            if leaving:
                return
            code = ErrorCode(answer.error_code)
            if code != ErrorCode.none:
                self._on_error(code, answer.error_message)
                return
            self.rejoin_needed = False
            self._regex_sent = bool(self.regex)
            member.generation_id = int(answer.member_epoch)
            if answer.member_id:
                member.member_id = answer.member_id
            interval = answer.heartbeat_interval  # kio reads it as a timedelta
            seconds = interval.total_seconds() if hasattr(interval, "total_seconds") else interval / 1000
            if seconds > 0:
                self.heartbeat_interval = seconds
            if answer.assignment is not None:
                self.target = [(t.topic_id, [int(p) for p in t.partitions]) for t in answer.assignment.topic_partitions]

    def _on_error(self, code: ErrorCode, message: str | None) -> None:
        text = f"group {self.group_id!r}: ConsumerGroupHeartbeat answered {code.name.upper()}" + (
            f" ({message})" if message else ""
        )
        if code in _FENCED:
            logger.info("%s; its partitions are lost, joining again", text)
            self.pending_lost += tuple(sorted(self.member.owned))
            self.member.owned = set()
            self.member.generation_id = 0
            self.target = None
            self.rejoin_needed = True
            return
        if code in (ErrorCode.not_coordinator, ErrorCode.coordinator_not_available):
            self.link.dead()
        if code.retriable:
            raise KafkaError(code, text)
        self.fatal = GroupMemberError(text, code)

    async def run_heartbeats(self) -> None:
        """The background task: heartbeat while joined; leave after max.poll.interval.ms
        without a poll (the next poll joins again, its partitions lost)."""
        attempt = 0
        while not self.closed:
            with trio.move_on_after(self.heartbeat_interval):
                await self._wake.wait()
            if self.closed or self.member.generation_id <= 0 or self.fatal is not None:
                continue
            if trio.current_time() - self.last_poll > self.max_poll_interval:
                self.pending_lost += await self.leave("consumer poll timeout has expired")
                continue
            try:
                await self._heartbeat()
                attempt = 0
            except KafkaError as exc:
                if not exc.retriable:
                    self.fatal = GroupMemberError(str(exc), exc.error_code)
                    continue
                await self.client.retry_sleep(attempt)
                attempt += 1

    async def leave(self, reason: str = "the consumer is being closed") -> tuple[TopicPartition, ...]:
        """Heartbeat with epoch -1 (-2 for a static member); returns what the member owned.
        Best effort, as LeaveGroup: the coordinator drops a silent member after its session."""
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        owned = tuple(sorted(self.member.owned))
        joined = self.member.generation_id > 0
        epoch = LEAVE_STATIC_EPOCH if self.member.group_instance_id is not None else LEAVE_EPOCH
        self.member.owned = set()
        self.target = None
        self.rejoin_needed = True
        if joined:
            try:
                with trio.move_on_after(self.client.request_timeout):
                    await self._heartbeat(epoch=epoch)
            except Exception as exc:  # best effort: a failure must not fail close()
                logger.info("group %s: leaving failed (%s; %s)", self.group_id, exc, reason)
        self.member.generation_id = 0
        return owned
