"""The group coordinator: Kafka's classic consumer-group protocol on trio's clock.

Theory of operation
-------------------
Every API call is a synchronous method: it checks the request against the group's state,
changes the state, and either answers at once or hands back a :class:`Waiter` that the
coordinator fills later. The API layer parks a waiting request in the purgatory, so request
handlers never wait on other clients. Trio runs one task at a time, so a method that does
not await cannot interleave with another: no locks.

Timers are tasks in the coordinator's nursery, all on trio's clock, so MockClock tests drive
them:

* **Delayed join** — one task per rebalance. A group that was Empty waits
  ``group.initial.rebalance.delay.ms`` and again for as long as new members keep arriving,
  up to the rebalance timeout (Kafka's InitialDelayedJoin); otherwise the join completes as
  soon as every known member has rejoined, or at the rebalance timeout, when members that
  did not rejoin are removed.
* **Heartbeat expiry** — one task per member, sleeping until its deadline; a heartbeat (or
  any request from the member) pushes the deadline back. A member waiting for its JoinGroup
  answer is kept alive, as in Kafka. Expiry removes the member and rebalances the rest.
* **Pending members** — a JoinGroup without a member id (v4+) gets MEMBER_ID_REQUIRED and a
  new id; that id must come back within the session timeout.
* **Offsets retention** — periodically, offsets of groups that have been Empty for
  ``offsets.retention.minutes`` expire (standalone consumers' offsets: per commit time).

Static members (``group.instance.id``) that rejoin with a new member id while the group is
Stable, with the same protocols, take over the old member's place and assignment without a
rebalance; the old member id is fenced (FENCED_INSTANCE_ID).

Committed offsets and each generation's membership go to ``__consumer_offsets`` through the
:class:`~trikafka.coordinator.offsets.OffsetStore` and are replayed on start, so a broker
restart loses neither offsets nor the groups' assignments.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import trio

from trikafka.config import BrokerConfig
from trikafka.coordinator.group_metadata import (
    GroupMetadata,
    MemberMetadata,
    OffsetAndMetadata,
    Waiter,
)
from trikafka.coordinator.group_state import GroupState
from trikafka.coordinator.offsets import OffsetStore, group_key, offset_key
from trikafka.errors import ErrorCode, KafkaProtocolError

__all__ = ["GroupCoordinator", "JoinResult", "UNKNOWN_MEMBER_ID"]

log = logging.getLogger("trikafka.coordinator")

UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1

JoinResult = dict[str, Any]
E, P, C, S, D = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.DEAD,
)


def _join_error(code: ErrorCode, member_id: str = UNKNOWN_MEMBER_ID) -> JoinResult:
    return {
        "error_code": code,
        "generation_id": NO_GENERATION,
        "protocol_type": None,
        "protocol_name": None,
        "leader": "",
        "member_id": member_id,
        "members": [],
        "skip_assignment": False,
    }


def _done(value: Any) -> Waiter:
    waiter = Waiter()
    waiter.set(value)
    return waiter


class GroupCoordinator:
    def __init__(
        self,
        config: BrokerConfig,
        store: OffsetStore | None,
        now_ms: Callable[[], float],
    ) -> None:
        self.config = config
        self.store = store
        self.now_ms = now_ms
        self.groups: dict[str, GroupMetadata] = {}
        self.loading = True
        self._nursery: trio.Nursery | None = None
        self._joins_running: set[str] = set()

    # --- lifecycle ---------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._load()
            self.loading = False
            nursery.start_soon(self._expire_offsets_periodically, name="group-metadata-manager")
            task_status.started()

    def _load(self) -> None:
        if self.store is None:
            return
        offsets = 0
        for key, value in self.store.replay():
            kind, group_id = key[0], key[1]
            if kind == "offset":
                group = self.groups.setdefault(group_id, GroupMetadata(group_id))
                tp = (key[2], key[3])
                if value is None:
                    group.offsets.pop(tp, None)
                else:
                    group.offsets[tp] = OffsetAndMetadata(
                        value["offset"], value["leader_epoch"], value["metadata"], value["timestamp"]
                    )
                    offsets += 1
            elif kind == "group":
                if value is None:
                    self.groups.pop(group_id, None)
                    continue
                group = self.groups.setdefault(group_id, GroupMetadata(group_id))
                group.generation_id = value["generation"]
                group.protocol_type = value["protocol_type"]
                group.protocol_name = value["protocol"]
                group.leader_id = value["leader"]
                group.members = {}
                group.static_members = {}
                for data in value["members"]:
                    member = MemberMetadata.from_json(data)
                    group.members[member.member_id] = member
                    if member.group_instance_id is not None:
                        group.static_members[member.group_instance_id] = member.member_id
                group.state = S if group.members else E
                group.subscribed = group.subscribed_topics() if group.members else set()
        now = trio.current_time()
        for group in self.groups.values():
            group.state_since_ms = self.now_ms()
            for member in group.members.values():
                member.heartbeat_deadline = now + member.session_timeout_ms / 1000
                self._watch(group, member)
        if self.groups:
            log.info("loaded %d group(s) and %d committed offset(s)", len(self.groups), offsets)

    def _spawn(self, fn: Callable[..., Any], *args: Any, name: str) -> None:
        assert self._nursery is not None, "the coordinator is not running"
        self._nursery.start_soon(_survive_storage_errors, fn, args, name=name)

    # --- persistence -------------------------------------------------------------------

    def _store_group(self, group: GroupMetadata) -> None:
        if self.store is None:
            return
        if group.state is D:
            self.store.write(group.group_id, [(group_key(group.group_id), None)])
            return
        self.store.write(
            group.group_id,
            [
                (
                    group_key(group.group_id),
                    {
                        "generation": group.generation_id,
                        "protocol_type": group.protocol_type,
                        "protocol": group.protocol_name,
                        "leader": group.leader_id,
                        "members": [m.to_json() for m in group.members.values()],
                    },
                )
            ],
        )

    # --- JoinGroup ---------------------------------------------------------------------

    def join_group(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        require_known_member_id: bool,
    ) -> Waiter:
        if self.loading:
            return _done(_join_error(ErrorCode.coordinator_load_in_progress, member_id))
        if not group_id:
            return _done(_join_error(ErrorCode.invalid_group_id, member_id))
        if not (
            self.config.group_min_session_timeout_ms
            <= session_timeout_ms
            <= self.config.group_max_session_timeout_ms
        ):
            return _done(_join_error(ErrorCode.invalid_session_timeout, member_id))
        group = self.groups.get(group_id)
        if group is None:
            if member_id != UNKNOWN_MEMBER_ID:
                return _done(_join_error(ErrorCode.unknown_member_id, member_id))
            group = self.groups[group_id] = GroupMetadata(group_id, state_since_ms=self.now_ms())
        if group.is_(D):
            return _done(_join_error(ErrorCode.coordinator_not_available, member_id))
        if not group.supports(protocol_type, (name for name, _ in protocols)):
            return _done(_join_error(ErrorCode.inconsistent_group_protocol, member_id))
        args = (client_id, client_host, session_timeout_ms, rebalance_timeout_ms, protocol_type, protocols)
        if member_id == UNKNOWN_MEMBER_ID:
            return self._join_unknown(group, group_instance_id, require_known_member_id, *args)
        return self._join_known(group, member_id, group_instance_id, *args)

    def _full(self, group: GroupMetadata) -> bool:
        return len(group.members) + len(group.pending_members) >= self.config.group_max_size

    def _join_unknown(
        self,
        group: GroupMetadata,
        instance_id: str | None,
        require_known_member_id: bool,
        client_id: str,
        client_host: str,
        session_ms: int,
        rebalance_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ) -> Waiter:
        new_id = f"{instance_id or client_id}-{uuid.uuid4()}"
        if instance_id is not None and instance_id in group.static_members:
            return self._rejoin_static(
                group, instance_id, new_id, session_ms, rebalance_ms, protocols
            )
        if self._full(group):
            return _done(_join_error(ErrorCode.group_max_size_reached))
        if require_known_member_id and instance_id is None:
            expiry = trio.current_time() + session_ms / 1000
            group.pending_members[new_id] = expiry
            self._spawn(self._expire_pending, group, new_id, name=f"pending-member:{new_id}")
            return _done(_join_error(ErrorCode.member_id_required, new_id))
        return self._add_and_rebalance(
            group, new_id, instance_id, client_id, client_host, session_ms, rebalance_ms, protocol_type, protocols
        )

    def _add_and_rebalance(self, group: GroupMetadata, *member_fields: Any) -> Waiter:
        member = MemberMetadata(*member_fields)
        member.awaiting_join = Waiter()
        member.heartbeat_deadline = trio.current_time() + member.session_timeout_ms / 1000
        group.add(member)
        group.new_member_added = True
        self._watch(group, member)
        self._maybe_prepare_rebalance(group, f"{member.member_id} joined")
        return member.awaiting_join

    def _join_known(
        self,
        group: GroupMetadata,
        member_id: str,
        instance_id: str | None,
        client_id: str,
        client_host: str,
        session_ms: int,
        rebalance_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ) -> Waiter:
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            if self._full(group):
                return _done(_join_error(ErrorCode.group_max_size_reached, member_id))
            return self._add_and_rebalance(
                group, member_id, instance_id, client_id, client_host, session_ms, rebalance_ms, protocol_type, protocols
            )
        error = self._check_member(group, member_id, instance_id)
        if error is not None:
            return _done(_join_error(error, member_id))
        member = group.members[member_id]
        member.heartbeat_deadline = trio.current_time() + session_ms / 1000
        member.session_timeout_ms, member.rebalance_timeout_ms = session_ms, rebalance_ms
        if group.is_(P):
            member.protocols = protocols
            if member.awaiting_join is not None:
                member.awaiting_join.set(_join_error(ErrorCode.rebalance_in_progress, member_id))
            member.awaiting_join = Waiter()
            group.notify()
            return member.awaiting_join
        if group.is_(C):
            if member.matches(protocols):
                return _done(self._join_result(group, member))
            member.protocols = protocols
            member.awaiting_join = Waiter()
            self._prepare_rebalance(group, f"{member_id} changed protocols")
            return member.awaiting_join
        if group.is_(S):
            if member_id == group.leader_id or not member.matches(protocols):
                member.protocols = protocols
                member.awaiting_join = Waiter()
                self._prepare_rebalance(group, f"{member_id} rejoined")
                return member.awaiting_join
            return _done(self._join_result(group, member))
        return _done(_join_error(ErrorCode.unknown_member_id, member_id))  # Empty

    def _rejoin_static(
        self,
        group: GroupMetadata,
        instance_id: str,
        new_id: str,
        session_ms: int,
        rebalance_ms: int,
        protocols: list[tuple[str, bytes]],
    ) -> Waiter:
        old_id = group.static_members[instance_id]
        old = group.members[old_id]
        for waiter in (old.awaiting_join, old.awaiting_sync):
            if waiter is not None:
                waiter.set(_join_error(ErrorCode.fenced_instance_id, old_id))
        old.awaiting_join = old.awaiting_sync = None
        member = group.replace_static_member(instance_id, old_id, new_id)
        member.session_timeout_ms, member.rebalance_timeout_ms = session_ms, rebalance_ms
        member.heartbeat_deadline = trio.current_time() + session_ms / 1000
        log.info("static member %s of %s rejoined as %s", instance_id, group.group_id, new_id)
        if group.is_(S) and member.matches(protocols):
            # Same place, same assignment, same generation: no rebalance (KIP-345).
            self._store_group(group)
            result = self._join_result(group, member)
            if member.member_id == group.leader_id:
                result["skip_assignment"] = True
            return _done(result)
        member.protocols = protocols
        member.awaiting_join = Waiter()
        self._maybe_prepare_rebalance(group, f"static member {instance_id} rejoined")
        if group.is_(P):
            group.notify()
        return member.awaiting_join

    def _join_result(self, group: GroupMetadata, member: MemberMetadata) -> JoinResult:
        leader = member.member_id == group.leader_id
        return {
            "error_code": ErrorCode.none,
            "generation_id": group.generation_id,
            "protocol_type": group.protocol_type,
            "protocol_name": group.protocol_name,
            "leader": group.leader_id or "",
            "member_id": member.member_id,
            "skip_assignment": False,
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "metadata": m.metadata_for(group.protocol_name),
                }
                for m in group.members.values()
            ]
            if leader and group.protocol_name is not None
            else [],
        }

    # --- rebalancing -------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_(E, S, C):
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_(C):
            # Followers waiting for an assignment of a generation that will not be.
            for member in group.members.values():
                if member.awaiting_sync is not None:
                    member.awaiting_sync.set({"error_code": ErrorCode.rebalance_in_progress})
                    member.awaiting_sync = None
        initial = group.is_(E)
        group.transition(P, self.now_ms())
        log.info("group %s rebalancing (generation %d): %s", group.group_id, group.generation_id, reason)
        if group.group_id not in self._joins_running:
            self._joins_running.add(group.group_id)
            timeout_ms = group.rebalance_timeout_ms  # fixed now, as Kafka's DelayedJoin is
            self._spawn(
                self._delayed_join, group, initial, timeout_ms,
                name=f"delayed-join:{group.group_id}",
            )

    async def _delayed_join(self, group: GroupMetadata, initial: bool, timeout_ms: int) -> None:
        try:
            if initial:
                delay = self.config.group_initial_rebalance_delay_ms
                remaining = max(timeout_ms - delay, 0)
                group.new_member_added = False
                while True:
                    await trio.sleep(delay / 1000)
                    if group.new_member_added and remaining > 0:
                        group.new_member_added = False
                        delay = min(self.config.group_initial_rebalance_delay_ms, remaining)
                        remaining = max(remaining - self.config.group_initial_rebalance_delay_ms, 0)
                        continue
                    break
            else:
                with trio.move_on_after(timeout_ms / 1000):
                    while group.is_(P) and not group.all_joined:
                        await group.changed.wait()
        finally:
            self._joins_running.discard(group.group_id)
        if group.is_(P):
            self._complete_join(group)

    def _complete_join(self, group: GroupMetadata) -> None:
        for member in [m for m in group.members.values() if m.awaiting_join is None]:
            log.info("removing %s from %s: it did not rejoin in time", member.member_id, group.group_id)
            group.remove(member.member_id)
        # Pending members (MEMBER_ID_REQUIRED) stay until their own session timeout.
        group.generation_id += 1
        if not group.members:
            group.protocol_name = None  # the protocol type stays, as in Kafka
            group.subscribed = set()
            group.transition(E, self.now_ms())
            self._store_group(group)
            log.info("group %s is empty at generation %d", group.group_id, group.generation_id)
            return
        group.protocol_name = group.select_protocol()
        group.subscribed = group.subscribed_topics()  # what OffsetDelete checks until next time
        group.transition(C, self.now_ms())
        now = trio.current_time()
        for member in group.members.values():
            member.heartbeat_deadline = now + member.session_timeout_ms / 1000
            waiter, member.awaiting_join = member.awaiting_join, None
            if waiter is not None:
                waiter.set(self._join_result(group, member))
        log.info(
            "group %s formed generation %d with %d member(s), protocol %s",
            group.group_id,
            group.generation_id,
            len(group.members),
            group.protocol_name,
        )

    # --- member timers -----------------------------------------------------------------

    def _watch(self, group: GroupMetadata, member: MemberMetadata) -> None:
        self._spawn(self._expire_member, group, member, name=f"heartbeat:{member.member_id}")

    async def _expire_member(self, group: GroupMetadata, member: MemberMetadata) -> None:
        while True:
            await trio.sleep_until(member.heartbeat_deadline)
            if group.members.get(member.member_id) is not member:
                return
            now = trio.current_time()
            if now < member.heartbeat_deadline:
                continue
            if member.awaiting_join is not None:
                # Waiting for its JoinGroup answer: the rebalance timeout governs it. (Kafka
                # also spares a member waiting for its SyncGroup answer; not yet done here.)
                member.heartbeat_deadline = now + member.session_timeout_ms / 1000
                continue
            log.info("member %s of %s expired (session timeout)", member.member_id, group.group_id)
            self._remove_member(group, member, "session timeout")
            return

    async def _expire_pending(self, group: GroupMetadata, member_id: str) -> None:
        expiry = group.pending_members.get(member_id)
        if expiry is None:
            return
        await trio.sleep_until(expiry)
        if group.pending_members.pop(member_id, None) is not None:
            group.notify()

    def _remove_member(self, group: GroupMetadata, member: MemberMetadata, reason: str) -> None:
        for waiter in (member.awaiting_join, member.awaiting_sync):
            if waiter is not None:
                waiter.set(_join_error(ErrorCode.unknown_member_id, member.member_id))
        group.remove(member.member_id)
        if group.is_(S, C):
            self._prepare_rebalance(group, f"{member.member_id} left ({reason})")
        elif group.is_(P):
            group.notify()  # maybe everyone left has now rejoined

    # --- SyncGroup, Heartbeat, LeaveGroup ----------------------------------------------

    def _check_member(
        self, group: GroupMetadata, member_id: str, instance_id: str | None
    ) -> ErrorCode | None:
        if instance_id is not None:
            known = group.static_members.get(instance_id)
            if known is not None and known != member_id:
                return ErrorCode.fenced_instance_id
        if member_id not in group.members:
            return ErrorCode.unknown_member_id
        return None

    def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: Iterable[tuple[str, bytes]],
    ) -> Waiter:
        if self.loading:
            return _done({"error_code": ErrorCode.coordinator_load_in_progress})
        group = self.groups.get(group_id)
        if group is None or group.is_(D):
            code = ErrorCode.unknown_member_id if group is None else ErrorCode.coordinator_not_available
            return _done({"error_code": code})
        error = self._check_member(group, member_id, instance_id)
        if error is not None:
            return _done({"error_code": error})
        if generation_id != group.generation_id:
            return _done({"error_code": ErrorCode.illegal_generation})
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return _done({"error_code": ErrorCode.inconsistent_group_protocol})
        member = group.members[member_id]
        if group.is_(E):
            return _done({"error_code": ErrorCode.unknown_member_id})
        if group.is_(P):
            return _done({"error_code": ErrorCode.rebalance_in_progress})
        if group.is_(S):
            self._heard_from(member)
            return _done(self._sync_result(group, member))
        member.awaiting_sync = Waiter()
        waiter = member.awaiting_sync
        if member_id == group.leader_id:
            given = dict(assignments)
            for m in group.members.values():
                m.assignment = given.get(m.member_id, b"")
            group.transition(S, self.now_ms())
            self._store_group(group)
            for m in group.members.values():
                if m.awaiting_sync is not None:
                    m.awaiting_sync.set(self._sync_result(group, m))
                    m.awaiting_sync = None
                    self._heard_from(m)
            log.info("group %s is stable at generation %d", group_id, group.generation_id)
        return waiter

    @staticmethod
    def _heard_from(member: MemberMetadata) -> None:
        member.heartbeat_deadline = trio.current_time() + member.session_timeout_ms / 1000

    @staticmethod
    def _sync_result(group: GroupMetadata, member: MemberMetadata) -> dict[str, Any]:
        return {
            "error_code": ErrorCode.none,
            "protocol_type": group.protocol_type,
            "protocol_name": group.protocol_name,
            "assignment": member.assignment,
        }

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, instance_id: str | None
    ) -> ErrorCode:
        if self.loading:
            return ErrorCode.coordinator_load_in_progress
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        if group.is_(D):
            return ErrorCode.coordinator_not_available
        error = self._check_member(group, member_id, instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        if group.is_(E):
            return ErrorCode.unknown_member_id
        member = group.members[member_id]
        member.heartbeat_deadline = trio.current_time() + member.session_timeout_ms / 1000
        if group.is_(P):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave_group(
        self, group_id: str, members: list[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        if self.loading:
            return ErrorCode.coordinator_load_in_progress, []
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.none, [ErrorCode.unknown_member_id for _ in members]
        if group.is_(D):
            return ErrorCode.coordinator_not_available, []
        codes = []
        for member_id, instance_id in members:
            if member_id == UNKNOWN_MEMBER_ID and instance_id is not None:
                member_id = group.static_members.get(instance_id, "")
                if not member_id:
                    codes.append(ErrorCode.unknown_member_id)
                    continue
            if member_id in group.pending_members:
                del group.pending_members[member_id]
                group.notify()
                codes.append(ErrorCode.none)
                continue
            error = self._check_member(group, member_id, instance_id)
            if error is not None:
                codes.append(error)
                continue
            log.info("member %s left %s", member_id, group_id)
            self._remove_member(group, group.members[member_id], "LeaveGroup")
            codes.append(ErrorCode.none)
        return ErrorCode.none, codes

    # --- offsets -----------------------------------------------------------------------

    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        instance_id: str | None,
        offsets: dict[tuple[str, int], tuple[int, int, str | None]],
    ) -> dict[tuple[str, int], ErrorCode]:
        def everyone(code: ErrorCode) -> dict[tuple[str, int], ErrorCode]:
            return {tp: code for tp in offsets}

        if self.loading:
            return everyone(ErrorCode.coordinator_load_in_progress)
        if not group_id:
            return everyone(ErrorCode.invalid_group_id)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return everyone(ErrorCode.illegal_generation)
            group = self.groups[group_id] = GroupMetadata(group_id, state_since_ms=self.now_ms())
        if group.is_(D):
            return everyone(ErrorCode.coordinator_not_available)
        if not (generation_id < 0 and group.is_(E)):
            error = self._check_member(group, member_id, instance_id)
            if error is not None:
                return everyone(error)
            if generation_id != group.generation_id:
                return everyone(ErrorCode.illegal_generation)
            if group.is_(C):
                return everyone(ErrorCode.rebalance_in_progress)
            member = group.members[member_id]
            member.heartbeat_deadline = trio.current_time() + member.session_timeout_ms / 1000
        result: dict[tuple[str, int], ErrorCode] = {}
        now = self.now_ms()
        records = []
        for tp, (offset, leader_epoch, metadata) in offsets.items():
            if metadata is not None and len(metadata.encode()) > self.config.offset_metadata_max_bytes:
                result[tp] = ErrorCode.offset_metadata_too_large
                continue
            group.offsets[tp] = OffsetAndMetadata(offset, leader_epoch, metadata, now)
            records.append(
                (
                    offset_key(group_id, *tp),
                    {"offset": offset, "leader_epoch": leader_epoch, "metadata": metadata, "timestamp": now},
                )
            )
            result[tp] = ErrorCode.none
        if self.store is not None:
            self.store.write(group_id, records)
        return result

    def commit_transactional_offsets(
        self, group_id: str, offsets: dict[tuple[str, int], tuple[int, int, str | None]]
    ) -> None:
        """A committed transaction's offsets (TxnOffsetCommit, then EndTxn commit): stored like
        any commit; the member checks were made when they were sent."""
        group = self.groups.get(group_id)
        if group is None or group.is_(D):
            group = self.groups[group_id] = GroupMetadata(group_id, state_since_ms=self.now_ms())
        now = self.now_ms()
        records = []
        for tp, (offset, leader_epoch, metadata) in offsets.items():
            group.offsets[tp] = OffsetAndMetadata(offset, leader_epoch, metadata, now)
            records.append(
                (
                    offset_key(group_id, *tp),
                    {"offset": offset, "leader_epoch": leader_epoch, "metadata": metadata, "timestamp": now},
                )
            )
        if self.store is not None:
            self.store.write(group_id, records)

    def check_transactional_member(
        self, group_id: str, generation_id: int, member_id: str, instance_id: str | None
    ) -> ErrorCode | None:
        """TxnOffsetCommit v3+ (KIP-447) names the member and generation: check them as an
        OffsetCommit would; a generation of -1 (a producer outside any group) skips this."""
        if generation_id < 0:
            return None
        group = self.groups.get(group_id)
        if group is None or group.is_(D):
            return ErrorCode.illegal_generation
        error = self._check_member(group, member_id, instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        return None

    def fetch_offsets(
        self, group_id: str, partitions: list[tuple[str, int]] | None
    ) -> tuple[ErrorCode, dict[tuple[str, int], OffsetAndMetadata | None]]:
        if self.loading:
            return ErrorCode.coordinator_load_in_progress, {}
        group = self.groups.get(group_id)
        stored = group.offsets if group is not None and not group.is_(D) else {}
        if partitions is None:
            return ErrorCode.none, dict(sorted(stored.items()))
        return ErrorCode.none, {tp: stored.get(tp) for tp in partitions}

    def delete_offsets(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode]]:
        group = self.groups.get(group_id)
        if group is None or group.is_(D):
            return ErrorCode.group_id_not_found, {}
        # Kafka: an Empty group's offsets all go; a consumer group keeps those of topics its
        # last generation subscribed to (all of them while that is unknown); any other
        # group with members refuses.
        subscribed: set[str] | None = set()
        if not group.is_(E):
            if group.protocol_type != "consumer":
                return ErrorCode.non_empty_group, {}
            subscribed = group.subscribed
        result = {}
        records = []
        for tp in partitions:
            if subscribed is None or tp[0] in subscribed:
                result[tp] = ErrorCode.group_subscribed_to_topic
                continue
            if group.offsets.pop(tp, None) is not None:
                records.append((offset_key(group_id, *tp), None))
            result[tp] = ErrorCode.none
        if self.store is not None:
            self.store.write(group_id, records)
        if group.is_(E) and not group.offsets and not group.members:
            self._drop(group)  # nothing left to keep, as Kafka
        return ErrorCode.none, result

    # --- groups ------------------------------------------------------------------------

    def describe(self, group_id: str) -> GroupMetadata | None:
        group = self.groups.get(group_id)
        return None if group is None or group.is_(D) else group

    def list_groups(self, states: set[str] | None = None) -> list[GroupMetadata]:
        return [
            g
            for g in self.groups.values()
            if not g.is_(D) and (not states or g.state.value.lower() in states)
        ]

    def delete_group(self, group_id: str) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None or group.is_(D):
            return ErrorCode.group_id_not_found
        if not group.is_(E):
            return ErrorCode.non_empty_group
        self._drop(group)
        return ErrorCode.none

    def _drop(self, group: GroupMetadata) -> None:
        records = [(offset_key(group.group_id, *tp), None) for tp in group.offsets]
        group.offsets.clear()
        group.transition(D, self.now_ms())
        del self.groups[group.group_id]
        if self.store is not None:
            self.store.write(group.group_id, [*records, (group_key(group.group_id), None)])

    def expire_offsets(self) -> int:
        """Remove offsets past offsets.retention.minutes; returns how many."""
        retention = self.config.offsets_retention_minutes * 60_000
        now = self.now_ms()
        removed = 0
        for group in list(self.groups.values()):
            if not group.is_(E):
                continue
            if group.protocol_type is not None:
                expired = list(group.offsets) if now - group.state_since_ms >= retention else []
            else:
                expired = [tp for tp, o in group.offsets.items() if now - o.commit_timestamp_ms >= retention]
            if expired and self.store is not None:
                self.store.write(group.group_id, [(offset_key(group.group_id, *tp), None) for tp in expired])
            for tp in expired:
                del group.offsets[tp]
            removed += len(expired)
            if not group.offsets and not group.members:
                self._drop(group)
        if removed:
            log.info("expired %d committed offset(s)", removed)
        return removed

    async def _expire_offsets_periodically(self) -> None:
        while True:
            await trio.sleep(self.config.offsets_retention_check_interval_ms / 1000)
            await _survive_storage_errors(_as_async(self.expire_offsets), ())


async def _survive_storage_errors(fn: Callable[..., Any], args: tuple) -> None:
    """A timer task whose write to ``__consumer_offsets`` fails (a full disk: the log answers
    KAFKA_STORAGE_ERROR) logs one line; it must not take the coordinator, and with it the
    broker, down."""
    try:
        await fn(*args)
    except (OSError, KafkaProtocolError) as exc:
        log.error("group coordinator: %s failed: %s", getattr(fn, "__name__", fn), exc)


def _as_async(fn: Callable[[], Any]) -> Callable[[], Any]:
    async def call() -> Any:
        return fn()

    call.__name__ = fn.__name__
    return call
