"""The Trio shell around :class:`~trikafka.client.group_member.GroupMember`: membership
with the group coordinator — join, sync, heartbeat, leave. Offsets (commit, committed) are
:mod:`trikafka.client.group_offsets`, which this session owns as ``offsets``.

Theory of operation (the Java consumer's split, kept because it is what makes the rebalance
listener safe): joining happens *inside the application's poll* (``ensure_active_group``), so
``on_partitions_revoked/assigned/lost`` run in the application's task, between two fetches,
and may await (commit, flush a producer). Heartbeats run in their own task
(:meth:`run_heartbeats`) so a member that processes slowly stays in the group; that task only
*notices* what happened (a rebalance started, the member was fenced, the coordinator moved,
``max.poll.interval.ms`` passed without a poll) and leaves the consequence to the next poll.

Timers, all on trio's clock: ``heartbeat.interval.ms`` between heartbeats;
``session.timeout.ms`` without a successful heartbeat and the coordinator is presumed dead
(looked up again); ``max.poll.interval.ms`` without a poll and a dynamic member leaves the
group (a static one just stops heartbeating, as Java's does), so its partitions go to members
that make progress; ``retry.backoff.ms`` between retries.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import attrs
import trio

from trikafka.client.assignors import assignor_for
from trikafka.client.client import KafkaClient
from trikafka.client.connection import ResponseDecodeError
from trikafka.client.consumer_protocol import TopicPartition
from trikafka.client.errors import KafkaError
from trikafka.client.group_member import Action, GroupMember, GroupMemberError, MemberState, Step
from trikafka.client.group_offsets import CoordinatorLink, GroupOffsets
from trikafka.client.pending import Pending
from trikafka.errors import ErrorCode
from trikafka.protocol.registry import ApiKey

__all__ = ["ConsumerGroupMetadata", "GroupSession", "RebalanceListener"]

logger = logging.getLogger(__name__)


@attrs.frozen
class ConsumerGroupMetadata:
    """What a transactional producer sends with the consumer's offsets (KIP-447), so the
    coordinator can fence a zombie member: Java's ``ConsumerGroupMetadata``."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class RebalanceListener:
    """Override any of the three; each may be a plain or an ``async`` method."""

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> Awaitable[None] | None:
        return None

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> Awaitable[None] | None:
        return None

    def on_partitions_lost(self, partitions: set[TopicPartition]) -> Awaitable[None] | None:
        # Kafka's default: lost partitions are treated as revoked.
        return self.on_partitions_revoked(partitions)


async def _call(method: Callable[[set[TopicPartition]], Any], partitions: Iterable[TopicPartition]) -> None:
    result = method(set(partitions))
    if inspect.isawaitable(result):
        await result


async def partition_counts_unset(topics: set[str]) -> dict[str, int]:
    raise RuntimeError("ensure_active_group sets the partition count source")


class GroupSession:
    """One consumer's membership: owned by the consumer, which starts :meth:`run_heartbeats`
    in its nursery and calls the rest from the application's task."""

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
        self.session_timeout_ms: int = config["session.timeout.ms"]
        self.rebalance_timeout_ms: int = config["max.poll.interval.ms"]
        self.heartbeat_interval = config["heartbeat.interval.ms"] / 1000
        self.max_poll_interval = config["max.poll.interval.ms"] / 1000
        self.member = GroupMember(
            self.group_id,
            [assignor_for(name) for name in config["partition.assignment.strategy"]],
            group_instance_id=config["group.instance.id"],
        )
        self._on_revoke, self._on_assign, self._on_lost = on_revoke, on_assign, on_lost
        self.rejoin_needed = True
        self.pending_lost: tuple[TopicPartition, ...] = ()
        self.fatal: GroupMemberError | None = None
        self.last_poll = trio.current_time()
        self.last_heartbeat_ok = trio.current_time()
        # Whether the heartbeat task should heartbeat (stable, not left); it waits on
        # ``_changed``, which :meth:`_notify` sets and replaces. Never replace an event a task
        # may already wait on: a task waiting on the old object would never wake.
        self._heartbeating = False
        self._changed = trio.Event()
        self.closed = False
        self._partition_counts: Callable[[set[str]], Any] = partition_counts_unset
        #: Set by the consumer: where a JoinGroup + SyncGroup round runs, so a poll's timeout
        #: never cuts one in the middle (the coordinator holds a JoinGroup until the group's
        #: members have joined): the poll returns, the round goes on, the next poll takes it up.
        self.nursery: trio.Nursery | None = None
        self._round: Pending[Step] | None = None
        self._next_heartbeat = trio.current_time()
        #: Commits and committed offsets, with this member's generation.
        self.offsets = GroupOffsets(self.link, self.member, self._handle_group_error)

    def coordinator_dead(self) -> None:
        self.link.dead()

    async def _send(self, api_key: int, **fields: Any) -> Any:
        return await self.link.send(api_key, **fields)

    async def _exchange(self, api_key: int, **fields: Any) -> Any:
        """A JoinGroup or SyncGroup (in a round's task: bounded by ``request.timeout.ms``)."""
        await self.client.connection(await self.link.coordinator())
        return await self._send(api_key, **fields)

    async def _join_round(self) -> Step:
        """One JoinGroup + SyncGroup round, in the nursery's task (:mod:`~trikafka.client.pending`):
        a poll cancelled here leaves it running, and the next poll waits on the same round."""
        if self.nursery is None:
            return await self._join_once()
        if self._round is None:
            self._round = Pending(self.nursery, self._background_round, f"group-join-{self.group_id}")
        pending = self._round
        await pending.wait()
        self._round = None
        return pending.unwrap()

    async def _background_round(self) -> Step:
        step = await self._join_once()
        if step.action is Action.STABLE and self.member.state is MemberState.STABLE:
            # Heartbeats start when the round completes (Java's heartbeat thread does), not
            # when the next poll applies it: an application that polls later stays in the group.
            self.last_heartbeat_ok = self._next_heartbeat = trio.current_time()
            self._heartbeating = True
            self._notify()
        return step

    def group_metadata(self) -> ConsumerGroupMetadata:
        return ConsumerGroupMetadata(
            self.group_id, self.member.generation_id, self.member.member_id, self.member.group_instance_id
        )

    # --- joining (the application's task) -----------------------------------------------

    def request_rejoin(self) -> None:
        self.rejoin_needed = True

    @property
    def stable(self) -> bool:
        # A round done in the background is not applied (listener, positions) until a poll takes it.
        return self.member.state is MemberState.STABLE and not self.rejoin_needed and self._round is None

    async def ensure_active_group(self, topics: Iterable[str], partition_counts: Callable[[set[str]], Any]) -> bool:
        """Join (or rejoin) until the member is stable; returns True when a rebalance ran.

        ``partition_counts(topics)`` is awaited by the leader for every topic some member
        subscribes to. Listener callbacks run here, in the caller's task.
        """
        if self.fatal is not None:
            raise self.fatal
        if self.pending_lost:
            lost, self.pending_lost = self.pending_lost, ()
            await self._on_lost(set(lost))
        if self.stable:
            return False
        self._partition_counts = partition_counts
        topics = sorted(topics)
        attempt = 0
        if self._round is None:  # else: the round a cancelled poll left running
            self._heartbeating = False
            self.rejoin_needed = False
            step = self.member.prepare_join(topics)
            if step.revoked:
                await self._on_revoke(set(step.revoked))
        while True:
            step = await self._join_round()
            if step.action is Action.STABLE:
                await self._apply(step)
                if self.member.needs_rejoin_after_sync(step) and self.member.state is MemberState.STABLE:
                    self.member.prepare_join(topics)
                    continue
                if self.member.state is MemberState.STABLE and not self.rejoin_needed:
                    self.last_heartbeat_ok = trio.current_time()
                    self._heartbeating = True
                    # Still inside the application's poll: a join that waited for slow
                    # members (up to the rebalance timeout) must not count as no poll.
                    self.last_poll = self._next_heartbeat = trio.current_time()
                    self._notify()
                    return True
                self.rejoin_needed = False
                self.member.prepare_join(topics)
                continue
            if step.lost:
                await self._on_lost(set(step.lost))
            if step.action is Action.FATAL:
                assert step.error is not None
                self.fatal = step.error
                raise step.error
            if step.action is Action.FIND_COORDINATOR:
                self.coordinator_dead()
                await self.client.retry_sleep(attempt)
                attempt += 1
            elif step.action is Action.BACKOFF_REJOIN:
                await self.client.retry_sleep(attempt)
                attempt += 1
            if self.member.state is not MemberState.PREPARING_REBALANCE:
                self.member.prepare_join(topics)

    async def _join_once(self) -> Step:
        """One JoinGroup + SyncGroup round; transport errors become a backoff step."""
        member = self.member
        try:
            fields = member.join_group_fields()
            answer = await self._exchange(
                ApiKey.JOIN_GROUP,
                session_timeout=self.session_timeout_ms,
                rebalance_timeout=self.rebalance_timeout_ms,
                group_id=fields["group_id"],
                member_id=fields["member_id"],
                group_instance_id=fields["group_instance_id"],
                protocol_type=fields["protocol_type"],
                protocols=[{"name": name, "metadata": meta} for name, meta in fields["protocols"]],
                reason=None,
            )
            step = member.on_join_group_response(
                ErrorCode(answer.error_code),
                member_id=answer.member_id,
                generation_id=int(answer.generation_id),
                protocol_name=answer.protocol_name,
                leader=answer.leader,
                members=[(m.member_id, getattr(m, "group_instance_id", None), m.metadata) for m in answer.members],
            )
            if step.action is not Action.SYNC:
                return step
            assignments: Mapping[str, bytes] = {}
            if member.is_leader:
                counts = await self._partition_counts(member.subscribed_topics_of_group())
                assignments = member.assign(counts)
            sync = member.sync_group_fields(assignments)
            try:
                answer = await self._exchange(
                    ApiKey.SYNC_GROUP,
                    **{k: v for k, v in sync.items() if k != "assignments"},
                    assignments=[{"member_id": m, "assignment": a} for m, a in sync["assignments"]],
                )
            except ResponseDecodeError as exc:
                # librdkafka's mock cluster answers a follower whose SyncGroup comes after the
                # leader's with an error and a null assignment, which the schema does not
                # allow. Whatever the error was, the member did not get an assignment: rejoin.
                logger.warning("group %s: %s; rejoining", self.group_id, exc)
                member.state = MemberState.PREPARING_REBALANCE
                return Step(Action.BACKOFF_REJOIN)
            return member.on_sync_group_response(ErrorCode(answer.error_code), answer.assignment)
        except KafkaError as exc:
            if not exc.retriable:
                raise
            logger.info("group %s: join interrupted (%s); retrying", self.group_id, exc)
            if member.state is MemberState.COMPLETING_REBALANCE:
                member.state = MemberState.PREPARING_REBALANCE
            return Step(Action.FIND_COORDINATOR)

    async def _apply(self, step: Step) -> None:
        if step.revoked:
            await self._on_revoke(set(step.revoked))
        await self._on_assign(set(step.assigned))

    # --- heartbeats (their own task) ------------------------------------------------------

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def run_heartbeats(self) -> None:
        """Heartbeat while stable; notice fencing, rebalances, dead coordinators, stuck polls.

        The task wakes at whichever comes first: the next heartbeat, or the moment
        ``max.poll.interval.ms`` has passed since the last poll (Java's heartbeat thread
        checks its poll timer every ``retry.backoff.ms``; waking at the deadline is the same
        moment without the polling). A poll meanwhile moves the deadline: the task just
        goes back to sleep.
        """
        while not self.closed:
            while not self._heartbeating:
                await self._changed.wait()
            now = trio.current_time()
            if now >= self.last_poll + self.max_poll_interval:
                logger.warning(
                    "group %s: no poll for %.0f ms >= max.poll.interval.ms; leaving the group",
                    self.group_id, (now - self.last_poll) * 1000,
                )
                self._heartbeating = False  # before the await: the next poll may rejoin meanwhile
                self.pending_lost += await self.leave("consumer poll timeout has expired")
                continue
            if now >= self._next_heartbeat:
                if now - self.last_heartbeat_ok > self.session_timeout_ms / 1000:
                    self.coordinator_dead()  # Java: the coordinator is presumed dead; find it again
                    self.last_heartbeat_ok = now
                await self._heartbeat_once()
                self._next_heartbeat = trio.current_time() + self.heartbeat_interval
            with trio.move_on_at(min(self._next_heartbeat, self.last_poll + self.max_poll_interval)):
                await self._changed.wait()

    async def _heartbeat_once(self) -> None:
        generation = self.member.generation_id
        try:
            answer = await self._send(ApiKey.HEARTBEAT, **self.member.heartbeat_fields())
        except KafkaError as exc:
            logger.info("group %s: heartbeat failed (%s)", self.group_id, exc)
            return
        if self.member.generation_id != generation or self.member.state is not MemberState.STABLE:
            return  # a rejoin started meanwhile: this answer is about the old generation
        self._handle_group_error(ErrorCode(answer.error_code))

    def _handle_group_error(self, code: ErrorCode) -> None:
        """Heartbeat and commit answers: remember what the next poll must do."""
        if code == ErrorCode.none:
            self.last_heartbeat_ok = trio.current_time()
            return
        step = self.member.on_heartbeat_response(code)
        if step.lost:
            self.pending_lost += step.lost
        if step.action is Action.FATAL:
            self.fatal = step.error
        elif step.action is Action.FIND_COORDINATOR:
            self.coordinator_dead()
        elif step.action is Action.REJOIN:
            self.rejoin_needed = True
            self._heartbeating = False

    # --- leaving ------------------------------------------------------------------------------

    async def leave(self, reason: str = "the consumer is being closed") -> tuple[TopicPartition, ...]:
        """LeaveGroup (dynamic members only), then forget membership; returns what the member
        owned. Never raises: leaving is best effort — the coordinator drops a silent member
        after session.timeout.ms anyway."""
        if self._round is not None:
            self._round.cancel()
            self._round = None
        fields = self.member.leave_group_fields()
        owned = self.member.left()
        self.rejoin_needed = True
        if fields is None:
            return owned
        try:
            with trio.move_on_after(self.client.request_timeout):
                await self._send(
                    ApiKey.LEAVE_GROUP,
                    group_id=fields["group_id"],
                    member_id=fields["member_id"],
                    members=[{"member_id": fields["member_id"], "group_instance_id": None, "reason": reason}],
                )
        except Exception as exc:  # best effort: an unreadable answer must not fail close()
            logger.info("group %s: LeaveGroup failed (%s)", self.group_id, exc)
        return owned
