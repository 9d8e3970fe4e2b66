"""Kafka's classic group protocol as a model, checked against the GroupCoordinator step by step.

No thread, no trio
------------------
The membership state machine (:class:`GroupMembership`) is sans-IO: it takes ``now_ms`` and
returns answers plus effects (timer requests, answers to parked requests). :class:`MachineDriver`
is the test's own shell around it — a dictionary of timers and a clock that moves only when a
rule says so. After every request it fires the timers that have come due, in deadline order,
as the Trio shell's timer queue does; a clock jump also runs one offsets-retention pass. So a
step is a plain function call: nothing races and every example replays exactly. The plain
tests at the bottom drive the Trio shell (:class:`GroupCoordinator`) on a ``MockClock``.

The model
---------
Clients behave like Kafka consumers (join; rejoin with the id MEMBER_ID_REQUIRED handed out;
sync, the leader computing a range assignment; heartbeat; rejoin on REBALANCE_IN_PROGRESS;
reset on UNKNOWN_MEMBER_ID) and also misbehave: they fall silent while the clock runs past
their session, leave in the middle of a join, commit with a stale generation. Each answer is
compared with the answer of Kafka's ``GroupCoordinator.scala`` in the state the group was in
just before the request. Timers are checked from both sides: whatever the coordinator does on
its own (remove a member, expire an offset, drop a group) Kafka's rules must allow at that
moment, and what Kafka's rules require (the rebalance completes once every member rejoined or
the rebalance timeout passed; offsets of a group Empty for the retention expire) must have
happened.

Invariants, after every step: the group state is one of Kafka's five; in Stable every partition
is assigned to exactly one member, every member holds the assignment the leader sent for the
current generation and waits for nothing; generations never decrease (per incarnation of a
group id); an accepted OffsetCommit is fetched until DeleteGroups, OffsetDelete or Kafka's
retention removes it, and nothing else is fetched; no JoinGroup or SyncGroup waits once Kafka
would have answered it; a rebalance completes once every member has rejoined or its timeout
passed, and the first one of an Empty group not before the initial delay; only members that
rejoined make a new generation.

Clock jumps and timeouts are multiples of a quarter second, so sums of jumps land exactly on
deadlines; a deadline counts as reached when ``now >= deadline``, as in Kafka.

Deviations found, and fixed
--------------------------
:data:`DEVIATIONS` lists where trikafka once answered differently from Kafka. All are fixed,
each has a plain test at the bottom of this module pinning Kafka's behaviour, and the model
no longer tolerates any of them: Kafka's answer is the only one accepted.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from typing import Any

import attrs
import trio
import trio.testing
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from trikafka.config import BrokerConfig
from trikafka.coordinator.classic.group_membership import GroupMembership
from trikafka.coordinator.classic.group_metadata import GroupMetadata
from trikafka.coordinator.classic.group_state import GroupState
from trikafka.coordinator.group_coordinator import GroupCoordinator
from trikafka.coordinator.group_metadata_manager import GroupMetadataManager
from trikafka.coordinator.group_protocol import (
    CancelTimer,
    CompleteJoin,
    CompleteSync,
    JoinGroupRequest,
    JoinGroupResult,
    Parked,
    Reply,
    ScheduleTimer,
    SyncGroupRequest,
    TimerKey,
)
from trikafka.coordinator.settings import GroupSettings
from trikafka.coordinator.timers import Waiter
from trikafka.errors import ErrorCode
from trikafka.server.wiring import group_settings

E, P, C, S = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
)
KAFKA_STATES = {"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}

GROUP = "g"  # the consumer group the clients join
SOLO = "solo"  # a group used only for offset storage (generation -1 commits)
GROUP_IDS = (GROUP, SOLO)
TOPIC, OTHER = "t", "u"  # members subscribe to TOPIC; OTHER is committed to but not subscribed
N_PARTITIONS = 5
PARTITIONS = [(TOPIC, p) for p in range(N_PARTITIONS)] + [(OTHER, 0), (OTHER, 1)]
N_CLIENTS = 4
RETENTION_S = 60.0
BASE_MS = 1_700_000_000_000
JUMPS = [0.25, 0.25, 0.5, 0.5, 1.0, 2.0, 4.0, 16.0, 60.0]  # 60 s: the offsets retention


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0: version, topics, null user data."""
    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    return out + struct.pack(">i", -1)


SUBSCRIPTION = subscription(TOPIC)
PROTOCOLS = {
    "range": [("range", SUBSCRIPTION)],
    "both": [("roundrobin", SUBSCRIPTION), ("range", SUBSCRIPTION)],
}


def range_assignment(member_ids: list[str], partitions: int = N_PARTITIONS) -> dict[str, bytes]:
    """Kafka's RangeAssignor for one topic: consumers sorted, the first ones get one extra."""
    ordered = sorted(member_ids)
    per, extra = divmod(partitions, len(ordered))
    plan = {}
    for i, member_id in enumerate(ordered):
        start = i * per + min(i, extra)
        count = per + (1 if i < extra else 0)
        plan[member_id] = json.dumps(list(range(start, start + count))).encode()
    return plan


def decode_assignment(data: bytes) -> list[int]:
    return json.loads(data) if data else []


def make_config(delay_ms: int) -> GroupSettings:
    return group_settings(BrokerConfig(
        group_initial_rebalance_delay_ms=delay_ms,
        group_min_session_timeout_ms=500,
        offsets_retention_minutes=1,
        offsets_retention_check_interval_ms=1,  # a retention pass after every clock jump
    ))


# --- Kafka's deviations, all fixed ------------------------------------------

DEVIATIONS = {
    "commit-in-completing-rebalance": (
        "OffsetCommit during CompletingRebalance answers REBALANCE_IN_PROGRESS before checking "
        "member and generation; Kafka answers UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION first "
        "(test_kafka_commit_validates_member_before_completing_rebalance)"
    ),
    "pending-member-forgotten": (
        "a completed rebalance forgets pending members (MEMBER_ID_REQUIRED ids); Kafka keeps "
        "them until their session timeout (test_kafka_pending_member_survives_a_rebalance)"
    ),
    "stable-sync-no-heartbeat": (
        "SyncGroup in Stable, and the leader's assignment reaching a waiting follower, do not "
        "push back the member's session deadline; Kafka's do (test_kafka_stable_sync_*)"
    ),
    "awaiting-sync-expires": (
        "a member waiting for its SyncGroup answer expires at its session timeout; Kafka keeps "
        "it alive while it waits (test_kafka_member_awaiting_sync_is_kept_alive)"
    ),
    "leave-unknown-group-top-level": (
        "LeaveGroup for an unknown group answers top-level UNKNOWN_MEMBER_ID; Kafka answers "
        "NONE with UNKNOWN_MEMBER_ID per member (test_kafka_leave_unknown_group)"
    ),
    "offset-delete-keeps-empty-group": (
        "OffsetDelete of an Empty group's last offsets leaves the group until the next "
        "retention pass; Kafka removes it at once (test_kafka_offset_delete_drops_empty_group)"
    ),
    "offset-delete-subscriptions": (
        "OffsetDelete during a rebalance judges subscriptions by the current members (none: "
        "everything deletable) or refuses the whole group; Kafka uses the subscriptions of the "
        "last generation (test_kafka_offset_delete_uses_last_generations_subscriptions)"
    ),
    "empty-group-forgets-protocol-type": (
        "a group that goes Empty without offsets forgets its protocol type, so offsets "
        "committed later expire per commit instead of per Empty-since "
        "(test_kafka_empty_group_keeps_protocol_type)"
    ),
}


# --- the state machine, driven by hand ------------------------------------------------


@attrs.frozen
class MemberSnap:
    assignment: bytes
    awaiting_join: bool
    awaiting_sync: bool
    session_s: float
    rebalance_s: float
    protocols: tuple[tuple[str, bytes], ...]


@attrs.frozen(eq=False)
class GroupSnap:
    obj: Any  # the GroupMetadata itself: identity tells one incarnation of a group id from the next
    state: GroupState
    generation: int
    leader: str | None
    protocol_type: str | None
    protocol_name: str | None
    members: dict[str, MemberSnap]
    pending: frozenset[str]
    described_state: str | None
    listed_state: str | None


@attrs.frozen(eq=False)
class World:
    now: float
    groups: dict[str, GroupSnap | None]
    offsets: dict[str, dict[tuple[str, int], int]]  # OffsetFetch of all partitions
    partial: dict[str, dict[tuple[str, int], int | None]]  # OffsetFetch of listed partitions


def take_snapshot(coordinator: MachineDriver) -> World:
    groups: dict[str, GroupSnap | None] = {}
    offsets, partial = {}, {}
    listed = {g.group_id: g.state.value for g in coordinator.list_groups()}
    for gid in GROUP_IDS:
        code, fetched = coordinator.fetch_offsets(gid, None)
        assert code == ErrorCode.none
        offsets[gid] = {tp: o.offset for tp, o in fetched.items()}
        code, some = coordinator.fetch_offsets(gid, PARTITIONS)
        assert code == ErrorCode.none
        partial[gid] = {tp: (o.offset if o is not None else None) for tp, o in some.items()}
        group = coordinator.groups.get(gid)
        if group is None:
            groups[gid] = None
            continue
        described = coordinator.describe(gid)
        groups[gid] = GroupSnap(
            obj=group,
            state=group.state,
            generation=group.generation_id,
            leader=group.leader_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            members={
                m.member_id: MemberSnap(
                    m.assignment,
                    m.awaiting_join is not None,
                    m.awaiting_sync is not None,
                    m.session_timeout_ms / 1000,
                    m.rebalance_timeout_ms / 1000,
                    tuple(m.protocols),
                )
                for m in group.members.values()
            },
            pending=frozenset(group.pending_members),
            described_state=described.state.value if described is not None else None,
            listed_state=listed.get(gid),
        )
    return World(coordinator.now, groups, offsets, partial)


@attrs.define(eq=False)
class Answer:
    """A JoinGroup or SyncGroup answer as the model reads it: a dict, perhaps not there yet."""

    value: dict[str, Any] | None = None

    @property
    def done(self) -> bool:
        return self.value is not None


class MachineDriver:
    """GroupMembership and its GroupMetadataManager, with a dictionary for a timer queue.

    The API is the Trio shell's, synchronous, so the model reads like a client's view.
    """

    def __init__(self, config: GroupSettings) -> None:
        self.now = 0.0  # seconds; the machine's milliseconds are BASE_MS + now * 1000
        self.manager = GroupMetadataManager(config, None)
        self.membership = GroupMembership(config, self.manager)
        self.timers: dict[TimerKey, float] = {}
        self.parked: dict[int, Answer] = {}
        self._apply(self.membership.load(self.now_ms))

    @property
    def clock(self) -> MachineDriver:
        return self

    @property
    def coordinator(self) -> MachineDriver:
        return self

    @property
    def now_ms(self) -> float:
        return BASE_MS + self.now * 1000

    @property
    def groups(self) -> dict[str, GroupMetadata]:
        return self.manager.groups

    def _apply(self, reply: Reply[Any]) -> Any:
        value = reply.value
        answer = None
        if isinstance(value, Parked):
            answer = self.parked[value.ticket] = Answer()
        elif attrs.has(type(value)):
            answer = Answer(attrs.asdict(value))
        for effect in reply.effects:
            if isinstance(effect, ScheduleTimer):
                self.timers.pop(effect.key, None)
                self.timers[effect.key] = effect.deadline_ms
            elif isinstance(effect, CancelTimer):
                self.timers.pop(effect.key, None)
            elif isinstance(effect, CompleteJoin | CompleteSync):
                self.parked.pop(effect.ticket).value = attrs.asdict(effect.result)
        return answer if answer is not None else value

    def fire_due(self) -> None:
        """Every timer whose deadline has come, earliest first (then first scheduled)."""
        while True:
            due = [(deadline, key) for key, deadline in self.timers.items() if deadline <= self.now_ms]
            if not due:
                return
            _, key = min(due, key=lambda d: d[0])
            del self.timers[key]
            self._apply(self.membership.on_timer(key, self.now_ms))

    def jump(self, seconds: float) -> None:
        self.now += seconds
        self.fire_due()
        self.manager.expire_offsets(self.now_ms)  # the retention check, once per jump

    def step(self, fn: Callable[[], Any]) -> tuple[Any, World]:
        result = fn()
        self.fire_due()
        return result, take_snapshot(self)

    def close(self) -> None:
        pass

    # --- the shell's API, synchronous ------------------------------------------------------

    def join_group(self, *fields: Any) -> Answer:
        return self._apply(self.membership.join_group(JoinGroupRequest(*fields), self.now_ms))

    def sync_group(self, request: SyncGroupRequest) -> Answer:
        return self._apply(self.membership.sync_group(request, self.now_ms))

    def heartbeat(self, *fields: Any) -> ErrorCode:
        return self._apply(self.membership.heartbeat(*fields, self.now_ms))

    def leave_group(self, *fields: Any) -> tuple[ErrorCode, list[ErrorCode]]:
        return self._apply(self.membership.leave_group(*fields, self.now_ms))

    def commit_offsets(self, *fields: Any) -> dict[tuple[str, int], ErrorCode]:
        return self._apply(self.membership.commit_offsets(*fields, self.now_ms))

    def fetch_offsets(self, *fields: Any) -> Any:
        return self.manager.fetch_offsets(*fields)

    def delete_offsets(self, *fields: Any) -> Any:
        return self.manager.delete_offsets(*fields, self.now_ms)

    def delete_group(self, group_id: str) -> ErrorCode:
        return self.manager.delete_group(group_id, self.now_ms)

    def describe(self, group_id: str) -> GroupMetadata | None:
        return self.manager.describe(group_id)

    def list_groups(self) -> list[GroupMetadata]:
        return self.manager.list_groups()


# --- the model -----------------------------------------------------------------------------

IDLE, JOINING, JOINED, SYNCING, STABLE = "idle", "joining", "joined", "syncing", "stable"


@attrs.define(eq=False)
class Client:
    name: str
    session_ms: int
    rebalance_ms: int
    member_id: str = ""
    generation: int = -1
    phase: str = IDLE
    protocols: str = "range"
    join_result: dict[str, Any] | None = None
    assignment: list[int] | None = None
    incarnation: int = 0  # bumped on a reset: answers to older requests no longer apply
    group_obj: Any = None  # the incarnation of the group its generation belongs to

    def reset(self) -> None:
        self.member_id, self.generation, self.phase = "", -1, IDLE
        self.join_result = self.assignment = None
        self.incarnation += 1


@attrs.define(eq=False)
class Outstanding:
    """A JoinGroup or SyncGroup whose answer the coordinator still owes."""

    client: Client
    kind: str  # "join" | "sync"
    waiter: Answer
    incarnation: int
    member_id: str
    generation: int
    start_generation: int


@attrs.define(eq=False)
class GroupModel:
    """What Kafka's coordinator would know about one incarnation of a group id."""

    obj: Any = None
    # (topic, partition) → (offset, commit time)
    offsets: dict[tuple[str, int], tuple[int, float]] = attrs.Factory(dict)
    consumer: bool = False  # a member ever joined: Kafka's protocolType is set from then on
    empty_since: float | None = None
    p_since: float | None = None
    p_initial: bool = False
    p_timeout_low: float = 0.0  # the rebalance timeout, at least
    p_timeout_high: float = 0.0  # the rebalance timeout, at most
    pending: dict[str, float] = attrs.Factory(dict)  # MEMBER_ID_REQUIRED ids → expiry (Kafka's)
    alive_kafka: dict[str, float] = attrs.Factory(dict)  # last event Kafka counts as a heartbeat
    alive_trikafka: dict[str, float] = attrs.Factory(dict)  # ... that trikafka counts
    plans: dict[int, dict[str, bytes]] = attrs.Factory(dict)  # generation → leader's assignment
    generation_members: dict[int, frozenset[str]] = attrs.Factory(dict)
    generation_leader: dict[int, str] = attrs.Factory(dict)
    max_generation: int = 0
    # Kafka's subscribedTopics: computed when a generation forms (None: not known yet)
    subscribed: frozenset[str] | None = None


def kafka_commit_code(group: GroupSnap | None, member_id: str, generation: int) -> ErrorCode:
    """GroupCoordinator.handleCommitOffsets / validateOffsetCommit / doCommitOffsets."""
    if group is None:
        return ErrorCode.none if generation < 0 else ErrorCode.illegal_generation
    if generation < 0 and group.state is E:
        return ErrorCode.none
    if generation >= 0 or member_id:
        if member_id not in group.members:
            return ErrorCode.unknown_member_id
        if generation != group.generation:
            return ErrorCode.illegal_generation
    elif group.state is not E:
        return ErrorCode.unknown_member_id
    if group.state is C:
        return ErrorCode.rebalance_in_progress
    return ErrorCode.none


def kafka_heartbeat_code(group: GroupSnap | None, member_id: str, generation: int) -> ErrorCode:
    """GroupCoordinator.handleHeartbeat."""
    if group is None or member_id not in group.members:
        return ErrorCode.unknown_member_id
    if generation != group.generation:
        return ErrorCode.illegal_generation
    if group.state is E:
        return ErrorCode.unknown_member_id
    if group.state is P:
        return ErrorCode.rebalance_in_progress
    return ErrorCode.none


class GroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        self._offsets_deleted_from: str | None = None
        super().__init__()
        self.loop: MachineDriver | None = None

    # --- set-up and tear-down ----------------------------------------------------------

    @initialize(
        delay_ms=st.sampled_from([0, 1500]),
        sessions=st.lists(st.sampled_from([1000, 2500]), min_size=N_CLIENTS, max_size=N_CLIENTS),
        rebalances=st.lists(st.sampled_from([2000, 4500]), min_size=N_CLIENTS, max_size=N_CLIENTS),
    )
    def start(self, delay_ms: int, sessions: list[int], rebalances: list[int]) -> None:
        self.delay_s = delay_ms / 1000
        self.loop = MachineDriver(make_config(delay_ms))
        self.clients = [Client(f"client-{i}", sessions[i], rebalances[i]) for i in range(N_CLIENTS)]
        self.outstanding: list[Outstanding] = []
        self.formed: list[int] = []  # generations whose member list arrived in this step
        self.models = {gid: GroupModel() for gid in GROUP_IDS}
        self.next_offset = 100
        self.world = self.loop.step(lambda: None)[1]

    def teardown(self) -> None:
        if self.loop is not None:
            self.loop.close()

    @property
    def coordinator(self) -> MachineDriver:
        assert self.loop is not None
        return self.loop.coordinator

    def _expect(self, what: str, actual: Any, kafka: Any) -> None:
        """``actual`` must be Kafka's answer."""
        if actual == kafka:
            return
        raise AssertionError(f"{what}: coordinator answered {actual!r}, Kafka answers {kafka!r}")

    # --- one step: run it, then check everything the step may have changed -------------

    def _step(
        self,
        fn: Callable[[], Any],
        *,
        then: Callable[[Any], None] | None = None,
        left: frozenset[str] = frozenset(),
        joined: str = "",
        deleted: str | None = None,
        jumped: bool = False,
    ) -> Any:
        """One request or clock jump; ``then`` records what the answer changes in the model
        before the checks look at the coordinator's new state."""
        assert self.loop is not None
        before = self.world
        result, after = self.loop.step(fn)
        self.world = after
        if then is not None:
            then(result)
        self._after_step(before, after, left=left, joined=joined, deleted=deleted, jumped=jumped)
        return result

    def _after_step(
        self,
        before: World,
        after: World,
        *,
        left: frozenset[str],
        joined: str,
        deleted: str | None,
        jumped: bool,
    ) -> None:
        now = after.now
        for gid in GROUP_IDS:
            self._check_group_step(
                gid, before, after, left=left, joined=joined, deleted=deleted, jumped=jumped
            )
        self._collect(after, jumped=jumped)
        for gid in GROUP_IDS:
            self._track_phases(gid, before.groups[gid], after.groups[gid], now)

    def _check_group_step(
        self,
        gid: str,
        before: World,
        after: World,
        *,
        left: frozenset[str],
        joined: str,
        deleted: str | None,
        jumped: bool,
    ) -> None:
        a, b = before.groups[gid], after.groups[gid]
        model = self.models[gid]
        now = after.now
        same = a is not None and b is not None and a.obj is b.obj
        if deleted == gid:
            model.offsets.clear()

        # Kafka's pending members lapse at their session timeout.
        for member_id, expiry in list(model.pending.items()):
            if now >= expiry:
                del model.pending[member_id]

        # Offsets: what Kafka's retention pass must and may have removed by now.
        must: set[tuple[str, int]] = set()
        may: set[tuple[str, int]] = set()
        if jumped and a is not None:
            retention_passed = {
                tp for tp, (_, at) in model.offsets.items() if now - at >= RETENTION_S
            }
            if a.state is E:
                if model.consumer:
                    assert model.empty_since is not None
                    if now - model.empty_since >= RETENTION_S:
                        must = set(model.offsets)
                else:
                    must = retention_passed
            elif a.state is S:
                # Kafka also expires a Stable consumer group's offsets of topics it does not
                # subscribe to; trikafka documents only Empty groups, so this is allowed, not
                # required.
                may = {tp for tp in retention_passed if tp[0] != TOPIC}
        observed = after.offsets[gid]
        for tp, (offset, _) in list(model.offsets.items()):
            if tp in must:
                assert tp not in observed, (
                    f"{gid} {tp}: not expired although Kafka's retention passed"
                )
                del model.offsets[tp]
            elif tp in may and tp not in observed:
                del model.offsets[tp]
            else:
                assert observed.get(tp) == offset, (
                    f"{gid} {tp}: committed offset {offset} fetched as {observed.get(tp)} "
                    f"(no delete, retention not passed)"
                )
        assert set(observed) <= set(model.offsets), f"{gid}: offsets never committed: {observed}"
        assert after.partial[gid] == {tp: observed.get(tp) for tp in PARTITIONS}

        # The group itself: created, dropped, or the same incarnation.
        if a is not None and not same:
            assert b is None, f"{gid} was dropped and re-created in one step"
            if deleted == gid:
                assert a.state is E, f"DeleteGroups removed a {a.state.value} group"
            else:
                # Kafka's retention pass drops an Empty group without offsets; the group may
                # have become Empty during this very jump (its members' sessions ran out).
                # OffsetDelete of an Empty group's last offsets drops it at once.
                assert jumped or self._offsets_deleted_from == gid, (
                    f"{gid} disappeared without DeleteGroups, OffsetDelete or a retention pass"
                )
                assert not model.offsets, f"{gid} dropped with unexpired offsets {model.offsets}"
                self._check_removals(gid, a, None, now, left=left, jumped=jumped)
            self.models[gid] = model = GroupModel()
        elif a is None and b is not None:
            assert not jumped, f"{gid} created by the clock"
            model.obj = b.obj
        assert deleted != gid or b is None, (
            f"{gid}: DeleteGroups answered NONE but it is still there"
        )
        if b is None:
            assert not observed
            return

        # Generations only grow (per incarnation: a deleted group starts again at 0).
        assert b.generation >= model.max_generation, (
            f"{gid}: generation went from {model.max_generation} to {b.generation}"
        )
        model.max_generation = b.generation
        if b.members:
            model.consumer = True

        # Members the coordinator removed: Kafka's rules must allow each removal now.
        if same:
            assert a is not None
            self._check_removals(gid, a, b, now, left=left, jumped=jumped)
        for member_id in b.members:
            if a is None or not same or member_id not in a.members:
                model.alive_kafka[member_id] = model.alive_trikafka[member_id] = now
                model.pending.pop(member_id, None)
        if b.generation != (a.generation if same and a is not None else 0):
            # A generation formed (every member subscribes to TOPIC) or the group went Empty
            # (a consumer group with no members subscribes to nothing).
            model.subscribed = frozenset() if b.state is E else frozenset([TOPIC])
            # The first rebalance of an Empty group waits group.initial.rebalance.delay.ms.
            if same and a is not None and a.state is P:
                initial, began = model.p_initial, model.p_since
            else:
                initial, began = (not same or a is None or a.state is E), now
            if initial:
                assert began is not None and now >= began + self.delay_s, (
                    f"{gid}: the first rebalance began at {began} and completed at {now}, "
                    f"before the initial delay {self.delay_s}"
                )
        if same and a is not None and b.generation != a.generation:
            # Only members that rejoined make the new generation (the others were removed).
            for member_id in b.members:
                assert (
                    member_id not in a.members
                    or a.members[member_id].awaiting_join
                    or member_id == joined
                ), f"{member_id} is in generation {b.generation} without having rejoined"
            for member_id in b.members:  # a rebalance completed: everyone's session restarts
                model.alive_kafka[member_id] = model.alive_trikafka[member_id] = now
        assert b.pending <= set(model.pending), (
            f"{gid}: coordinator has pending members Kafka would not: {b.pending - set(model.pending)}"
        )
        if jumped and same and a is not None:
            # Retention passes run at every jump (check interval 1 ms): an Empty group left
            # without offsets is gone.
            assert not (a.state is E and not model.offsets), (
                f"{gid}: Empty, no offsets, not dropped"
            )
            # A member that neither heartbeat nor waited for an answer within its session is gone.
            for member_id, m in b.members.items():
                before_m = a.members.get(member_id)
                if before_m is None or m.awaiting_join or m.awaiting_sync:
                    continue
                if before_m.awaiting_join or before_m.awaiting_sync:
                    continue  # its wait may have ended at this instant, Kafka's order decides
                last = max(model.alive_kafka[member_id], model.alive_trikafka[member_id])
                assert now < last + m.session_s, (
                    f"{gid}: {member_id} silent since {last}, session {m.session_s}, still in at {now}"
                )

    def _check_removals(
        self,
        gid: str,
        a: GroupSnap,
        b: GroupSnap | None,
        now: float,
        *,
        left: frozenset[str],
        jumped: bool,
    ) -> None:
        model = self.models[gid]
        removed = set(a.members) - set(b.members if b is not None else ())
        if not removed:
            return

        def expired(member_id: str, alive: dict[str, float]) -> bool:
            return now >= alive[member_id] + a.members[member_id].session_s

        # Removed by the rebalance timeout for not rejoining (the initial delay removes nobody).
        rebalance_timed_out = (
            a.state is P
            and not model.p_initial
            and model.p_since is not None
            and now >= model.p_since + model.p_timeout_low
        )

        justified = set()
        for member_id in removed:
            m = a.members[member_id]
            if member_id in left:
                justified.add(member_id)
            elif jumped and not m.awaiting_join:
                if (
                    not m.awaiting_sync and expired(member_id, model.alive_kafka)
                ) or rebalance_timed_out:
                    justified.add(member_id)
        for member_id in removed - justified:
            m = a.members[member_id]
            assert jumped and not m.awaiting_join, (
                f"{gid}: {member_id} removed although it was "
                f"{'waiting to join' if m.awaiting_join else 'not timed out'}"
            )
            if m.awaiting_sync and justified and expired(member_id, model.alive_kafka):
                continue  # another member expired at the same instant and ended the sync first
            raise AssertionError(
                f"{gid}: {member_id} removed at {now}; Kafka's session deadline is "
                f"{model.alive_kafka[member_id] + m.session_s}, trikafka's "
                f"{model.alive_trikafka[member_id] + m.session_s}"
            )

    def _track_phases(self, gid: str, a: GroupSnap | None, b: GroupSnap | None, now: float) -> None:
        """When the group entered PreparingRebalance and Empty, for the timing rules."""
        if b is None:
            return
        model = self.models[gid]
        fresh = a is None or a.obj is not b.obj
        moved = fresh or a.state is not b.state or a.generation != b.generation
        if b.state is P and moved:
            model.p_since = now
            model.p_initial = fresh or a.state is E
            model.p_timeout_low = max((m.rebalance_s for m in b.members.values()), default=0.0)
            high = [m.rebalance_s for m in b.members.values()]
            if a is not None and not fresh:
                high += [m.rebalance_s for m in a.members.values()]
            model.p_timeout_high = max(high, default=0.0)
        if b.state is E and moved:
            model.empty_since = now

    # --- answers that arrive later -------------------------------------------------------

    def _collect(self, after: World, *, jumped: bool) -> None:
        still = []
        for o in self.outstanding:
            if not o.waiter.done:
                still.append(o)
                continue
            value = o.waiter.value
            code = value["error_code"]
            c = o.client
            orphan = c.incarnation != o.incarnation
            group = after.groups[GROUP]
            if o.kind == "join":
                if orphan:  # the client left while its JoinGroup waited
                    assert code == ErrorCode.unknown_member_id, value
                    continue
                assert code == ErrorCode.none, f"{c.name}: JoinGroup answered {code!r} later"
                self._join_succeeded(c, value, o.start_generation)
            else:
                if orphan:
                    assert code == ErrorCode.unknown_member_id, value
                    continue
                if code == ErrorCode.none:
                    self._sync_succeeded(c, value, o.generation)
                elif code == ErrorCode.rebalance_in_progress:
                    assert group is not None
                    assert group.state is not C or group.generation != o.generation, (
                        f"{c.name}: SyncGroup answered REBALANCE_IN_PROGRESS, group still completing"
                    )
                    c.phase = IDLE
                    # Kafka's propagateAssignment restarts the session of whoever it answers.
                    model = self.models[GROUP]
                    model.alive_kafka[o.member_id] = model.alive_trikafka[o.member_id] = after.now
                else:
                    raise AssertionError(f"{c.name}: SyncGroup answered {code!r} later")
        self.outstanding = still
        # Only members that rejoined make the new generation: each got its JoinGroup answer.
        for generation in self.formed:
            for member_id in self.models[GROUP].generation_members[generation]:
                assert any(
                    c.member_id == member_id and c.generation == generation for c in self.clients
                ), f"{member_id} is in generation {generation} without having rejoined"
        self.formed.clear()

    def _join_succeeded(self, c: Client, value: dict[str, Any], start_generation: int) -> None:
        model = self.models[GROUP]
        group = self.world.groups[GROUP]
        assert group is not None
        generation = value["generation_id"]
        assert start_generation <= generation <= group.generation, (generation, group.generation)
        member_id, leader = value["member_id"], value["leader"]
        assert member_id and leader, value
        assert value["protocol_type"] == "consumer" and value["protocol_name"] in (
            "range",
            "roundrobin",
        )
        known_leader = model.generation_leader.setdefault(generation, leader)
        assert known_leader == leader, f"generation {generation} has two leaders"
        if member_id == leader:
            ids = frozenset(m["member_id"] for m in value["members"])
            assert member_id in ids and len(ids) == len(value["members"]), value["members"]
            for m in value["members"]:
                assert m["metadata"] == SUBSCRIPTION
            if generation not in model.generation_members:
                model.generation_members[generation] = ids
                self.formed.append(generation)
            assert model.generation_members[generation] == ids, (
                f"generation {generation} has two member lists"
            )
        else:
            assert value["members"] == [], "only the leader gets the member list"
        if generation in model.generation_members:
            assert member_id in model.generation_members[generation]
        c.member_id, c.generation, c.phase = member_id, generation, JOINED
        c.join_result, c.group_obj = value, group.obj

    def _sync_succeeded(self, c: Client, value: dict[str, Any], generation: int) -> None:
        model = self.models[GROUP]
        plan = model.plans.get(generation)
        assert plan is not None, f"{c.name}: an assignment for generation {generation} nobody sent"
        assert value["assignment"] == plan.get(c.member_id, b""), (c.member_id, value, plan)
        assert value["protocol_type"] == "consumer"
        c.phase, c.assignment = STABLE, decode_assignment(value["assignment"])

    # --- client actions -------------------------------------------------------------------

    def _join(self, c: Client, require_known: bool, switch: bool) -> None:
        if switch:
            c.protocols = "both" if c.protocols == "range" else "range"
        protocols = PROTOCOLS[c.protocols]
        group = self.world.groups[GROUP]
        model = self.models[GROUP]
        member_id = c.member_id
        now = self.world.now
        start_generation = group.generation if group is not None else 0

        # Kafka's answer: immediate (code) or deferred (None).
        kafka: ErrorCode | None
        if group is None:
            kafka = (
                ErrorCode.unknown_member_id
                if member_id
                else (ErrorCode.member_id_required if require_known else None)
            )
        elif not member_id:
            kafka = ErrorCode.member_id_required if require_known else None
        elif member_id in model.pending:
            kafka = None
        elif member_id not in group.members:
            kafka = ErrorCode.unknown_member_id
        else:
            member = group.members[member_id]
            matches = member.protocols == tuple(protocols)
            if group.state is P:
                kafka = None
            elif group.state is C:
                kafka = ErrorCode.none if matches else None
            elif group.state is S:
                kafka = None if member_id == group.leader or not matches else ErrorCode.none
            else:
                raise AssertionError(f"a member in an {group.state.value} group")

        coordinator = self.coordinator

        def call() -> tuple[Answer, bool, GroupState | None]:
            waiter = coordinator.join_group(
                GROUP,
                member_id,
                None,
                c.name,
                "/127.0.0.1",
                c.session_ms,
                c.rebalance_ms,
                "consumer",
                protocols,
                require_known,
            )
            g = coordinator.groups.get(GROUP)
            return waiter, waiter.done, g.state if g is not None else None

        def then(result: tuple[Answer, bool, GroupState | None]) -> None:
            waiter, done, _ = result
            if not done:
                c.phase = JOINING
                self.outstanding.append(
                    Outstanding(c, "join", waiter, c.incarnation, member_id, -1, start_generation)
                )
                if member_id and group is not None and member_id in group.members:
                    model.alive_trikafka[member_id] = now
            elif waiter.value["error_code"] == ErrorCode.member_id_required:
                model.pending[waiter.value["member_id"]] = now + c.session_ms / 1000

        waiter, done, state_after = self._step(call, then=then, joined=member_id)
        if kafka is None:
            assert not done, f"{c.name}: JoinGroup answered at once: {waiter.value}"
            assert state_after is P, f"JoinGroup that Kafka parks left the group {state_after}"
            model.pending.pop(member_id, None)
            return
        assert done, (
            f"{c.name}: Kafka answers {kafka!r} at once; the coordinator parked the JoinGroup"
        )
        value = waiter.value
        self._expect(f"{c.name} JoinGroup", value["error_code"], kafka)
        if kafka == ErrorCode.member_id_required:
            new_id = value["member_id"]
            assert new_id.startswith(c.name + "-"), new_id
            after = self.world.groups[GROUP]  # a pending member does not start a rebalance
            assert after is not None and (group is None or after.state is group.state)
            c.member_id, c.phase = new_id, IDLE
        elif kafka == ErrorCode.unknown_member_id:
            c.reset()
        else:
            assert group is not None
            assert value["generation_id"] == group.generation and value["member_id"] == member_id
            model.alive_trikafka[member_id] = now
            self._join_succeeded(c, value, group.generation)

    def _sync(self, c: Client) -> None:
        assert c.join_result is not None
        group = self.world.groups[GROUP]
        model = self.models[GROUP]
        member_id, generation = c.member_id, c.generation
        result = c.join_result
        is_leader = result["leader"] == member_id
        plan = range_assignment([m["member_id"] for m in result["members"]]) if is_leader else {}
        protocol_name = result["protocol_name"]

        if group is None or member_id not in group.members:
            kafka: ErrorCode | None = ErrorCode.unknown_member_id
        elif generation != group.generation:
            kafka = ErrorCode.illegal_generation
        elif protocol_name != group.protocol_name:
            kafka = ErrorCode.inconsistent_group_protocol
        elif group.state is P:
            kafka = ErrorCode.rebalance_in_progress
        elif group.state is S:
            kafka = ErrorCode.none
        else:
            assert group.state is C, group.state
            kafka = ErrorCode.none if member_id == group.leader else None
        coordinator = self.coordinator
        awaiting = [
            mid
            for mid, m in (group.members.items() if group is not None else ())
            if m.awaiting_sync
        ]
        state = group.state if group is not None else None

        def call() -> tuple[Answer, bool]:
            waiter = coordinator.sync_group(SyncGroupRequest(
                GROUP, generation, member_id, None, "consumer", protocol_name, list(plan.items())
            ))
            return waiter, waiter.done

        def then(result: tuple[Answer, bool]) -> None:
            waiter, done = result
            now = self.world.now
            if not done:
                c.phase = SYNCING
                self.outstanding.append(
                    Outstanding(c, "sync", waiter, c.incarnation, member_id, generation, generation)
                )
            elif waiter.value["error_code"] == ErrorCode.none and state is C:
                assert group is not None
                # The leader's assignment; Kafka restarts the session of everyone it reaches.
                model.plans[generation] = {mid: plan.get(mid, b"") for mid in group.members}
                for mid in [*awaiting, member_id]:
                    model.alive_kafka[mid] = now
            elif waiter.value["error_code"] == ErrorCode.none:
                model.alive_kafka[member_id] = now

        waiter, done = self._step(call, then=then)
        if kafka is None:
            assert not done, waiter.value
            return
        assert done, f"{c.name}: Kafka answers SyncGroup {kafka!r} at once"
        code = waiter.value["error_code"]
        self._expect(f"{c.name} SyncGroup in {state}", code, kafka)
        if code == ErrorCode.unknown_member_id:
            c.reset()
        elif code != ErrorCode.none:
            c.phase = IDLE
        else:
            if state is C:
                after = self.world.groups[GROUP]
                assert after is not None and after.state is S and after.generation == generation
            self._sync_succeeded(c, waiter.value, generation)

    def _heartbeat(self, c: Client) -> None:
        group = self.world.groups[GROUP]
        kafka = kafka_heartbeat_code(group, c.member_id, c.generation)
        coordinator = self.coordinator
        member_id, generation = c.member_id, c.generation
        code = self._step(lambda: coordinator.heartbeat(GROUP, generation, member_id, None))
        self._expect(f"{c.name} Heartbeat", code, kafka)
        model = self.models[GROUP]
        if code in (ErrorCode.none, ErrorCode.rebalance_in_progress):
            model.alive_kafka[member_id] = model.alive_trikafka[member_id] = self.world.now
        if code == ErrorCode.rebalance_in_progress and c.phase in (JOINED, STABLE):
            c.phase = IDLE
        elif code == ErrorCode.unknown_member_id:
            c.reset()
        elif code == ErrorCode.illegal_generation and c.phase in (JOINED, STABLE):
            c.phase = IDLE

    def _leave(self, c: Client) -> None:
        group = self.world.groups[GROUP]
        model = self.models[GROUP]
        member_id = c.member_id
        if group is None:
            kafka = (ErrorCode.none, [ErrorCode.unknown_member_id])
        elif member_id in model.pending or member_id in group.members:
            kafka = (ErrorCode.none, [ErrorCode.none])
        else:
            kafka = (ErrorCode.none, [ErrorCode.unknown_member_id])
        coordinator = self.coordinator

        def call() -> tuple[tuple[ErrorCode, list[ErrorCode]], GroupState | None]:
            answer = coordinator.leave_group(GROUP, [(member_id, None)])
            g = coordinator.groups.get(GROUP)
            return answer, g.state if g is not None else None

        def then(_: Any) -> None:
            c.reset()  # what it still waits for is answered to the member that left

        answer, state_after = self._step(call, then=then, left=frozenset([member_id]))
        self._expect(f"{c.name} LeaveGroup", (answer[0], list(answer[1])), kafka)
        if group is not None and member_id in group.members and group.state in (S, C):
            assert state_after is P, f"a member left a {group.state.value} group: {state_after}"
        model.pending.pop(member_id, None)

    def _commit(
        self, gid: str, member_id: str, generation: int, tps: list[tuple[str, int]], who: str
    ) -> None:
        group = self.world.groups[gid]
        kafka = kafka_commit_code(group, member_id, generation)
        offsets = {}
        for tp in tps:
            self.next_offset += 1
            offsets[tp] = (self.next_offset, -1, f"by {who}")
        coordinator = self.coordinator

        def then(codes: dict[tuple[str, int], ErrorCode]) -> None:
            if set(codes.values()) != {ErrorCode.none}:
                return
            model = self.models[gid]
            now = self.world.now
            for tp, (offset, _, _) in offsets.items():
                model.offsets[tp] = (offset, now)
            if group is not None and member_id in group.members:
                model.alive_kafka[member_id] = model.alive_trikafka[member_id] = now

        codes = self._step(
            lambda: coordinator.commit_offsets(gid, generation, member_id, None, offsets), then=then
        )
        assert set(codes) == set(offsets)
        (code,) = set(codes.values())
        state = group.state.value if group is not None else "no group"
        self._expect(
            f"{who} OffsetCommit gen {generation} to {gid} ({state})", code, kafka
        )

    # --- rules ------------------------------------------------------------------------------

    def _eligible(self, predicate: Callable[[Client], bool]) -> list[Client]:
        return [c for c in self.clients if predicate(c)] if self.loop is not None else []

    @staticmethod
    def _can_join(c: Client) -> bool:
        return c.phase in (IDLE, JOINED, STABLE)

    @staticmethod
    def _can_heartbeat(c: Client) -> bool:
        return (
            bool(c.member_id) and c.phase in (JOINED, SYNCING, STABLE, IDLE) and c.generation >= 0
        )

    @precondition(lambda self: self._eligible(GroupMachine._can_join))
    @rule(data=st.data(), require_known=st.booleans(), switch=st.integers(0, 5))
    def join(self, data: st.DataObject, require_known: bool, switch: int) -> None:
        c = data.draw(st.sampled_from(self._eligible(self._can_join)), label="client")
        self._join(c, require_known, switch == 0)

    @precondition(lambda self: self._eligible(lambda c: c.phase == JOINED))
    @rule(data=st.data())
    def sync(self, data: st.DataObject) -> None:
        c = data.draw(st.sampled_from(self._eligible(lambda c: c.phase == JOINED)), label="client")
        self._sync(c)

    @precondition(lambda self: self._eligible(GroupMachine._can_heartbeat))
    @rule(data=st.data())
    def heartbeat(self, data: st.DataObject) -> None:
        c = data.draw(st.sampled_from(self._eligible(self._can_heartbeat)), label="client")
        self._heartbeat(c)

    @precondition(lambda self: self._eligible(lambda c: bool(c.member_id)))
    @rule(data=st.data())
    def leave(self, data: st.DataObject) -> None:
        """Includes leaving with a JoinGroup or SyncGroup still waiting, as a closing consumer does."""
        c = data.draw(st.sampled_from(self._eligible(lambda c: bool(c.member_id))), label="client")
        self._leave(c)

    @precondition(lambda self: self.loop is not None)
    @rule(
        data=st.data(),
        mode=st.sampled_from(["current", "current", "stale", "no-generation"]),
        tps=st.lists(st.sampled_from(PARTITIONS), min_size=1, max_size=2, unique=True),
    )
    def commit(self, data: st.DataObject, mode: str, tps: list[tuple[str, int]]) -> None:
        c = data.draw(st.sampled_from(self.clients), label="client")
        generation = {"current": c.generation, "stale": c.generation - 1, "no-generation": -1}[mode]
        self._commit(GROUP, c.member_id, generation, tps, c.name)

    @precondition(lambda self: self.loop is not None)
    @rule(
        gid=st.sampled_from(GROUP_IDS),
        tps=st.lists(st.sampled_from(PARTITIONS), min_size=1, max_size=2, unique=True),
    )
    def standalone_commit(self, gid: str, tps: list[tuple[str, int]]) -> None:
        self._commit(gid, "", -1, tps, "standalone")

    @precondition(lambda self: self.loop is not None)
    @rule(seconds=st.sampled_from(JUMPS))
    def advance_clock(self, seconds: float) -> None:
        assert self.loop is not None
        clock = self.loop.clock
        self._step(lambda: clock.jump(seconds), jumped=True)

    @precondition(lambda self: self.loop is not None)
    @rule(rounds=st.integers(1, 4), seconds=st.sampled_from([0.25, 0.5]))
    def cooperate(self, rounds: int, seconds: float) -> None:
        """Every client does what a healthy consumer does next, then a little time passes."""
        assert self.loop is not None
        clock = self.loop.clock
        for _ in range(rounds):
            for c in self.clients:
                if c.phase == JOINED:
                    self._sync(c)
                elif c.phase == IDLE:
                    self._join(c, True, False)  # with the id it has, if any
                elif self._can_heartbeat(c):
                    self._heartbeat(c)
            self._step(lambda: clock.jump(seconds), jumped=True)

    @precondition(lambda self: self._eligible(GroupMachine._can_heartbeat))
    @rule(rounds=st.integers(1, 12))
    def stuck_consumers(self, rounds: int) -> None:
        """Members keep heartbeating but never rejoin (a consumer stuck between polls, its
        heartbeat thread alive): only the rebalance timeout gets the group going again."""
        assert self.loop is not None
        clock = self.loop.clock
        for _ in range(rounds):
            for c in self._eligible(self._can_heartbeat):
                self._heartbeat(c)
            self._step(lambda: clock.jump(0.5), jumped=True)

    @staticmethod
    def _leads(c: Client) -> bool:
        return c.join_result is not None and c.join_result["leader"] == c.member_id

    @precondition(lambda self: self._eligible(lambda c: c.phase == JOINED))
    @rule(rounds=st.integers(1, 8))
    def slow_leader(self, rounds: int) -> None:
        """The followers send SyncGroup and wait; the leader only heartbeats (a consumer slow to
        compute its assignment) while their sessions run out: Kafka keeps them alive."""
        assert self.loop is not None
        clock = self.loop.clock
        for c in self._eligible(lambda c: c.phase == JOINED and not self._leads(c)):
            self._sync(c)
        for _ in range(rounds):
            for c in self._eligible(lambda c: self._leads(c) and self._can_heartbeat(c)):
                self._heartbeat(c)
            self._step(lambda: clock.jump(0.5), jumped=True)

    @precondition(lambda self: self.loop is not None)
    @rule(gid=st.sampled_from(GROUP_IDS))
    def delete_group(self, gid: str) -> None:
        group = self.world.groups[gid]
        if group is None:
            kafka = ErrorCode.group_id_not_found
        elif group.state is not E:
            kafka = ErrorCode.non_empty_group
        else:
            kafka = ErrorCode.none
        coordinator = self.coordinator
        code = self._step(
            lambda: coordinator.delete_group(gid), deleted=gid if kafka == ErrorCode.none else None
        )
        self._expect(f"DeleteGroups {gid}", code, kafka)

    @precondition(lambda self: self.loop is not None)
    @rule(
        gid=st.sampled_from(GROUP_IDS),
        tps=st.lists(st.sampled_from(PARTITIONS), min_size=1, max_size=3, unique=True),
    )
    def delete_offsets(self, gid: str, tps: list[tuple[str, int]]) -> None:
        group = self.world.groups[gid]
        model = self.models[gid]
        coordinator = self.coordinator

        def then(answer: tuple[ErrorCode, dict[tuple[str, int], ErrorCode]]) -> None:
            for tp, tp_code in answer[1].items():
                if tp_code == ErrorCode.none:
                    model.offsets.pop(tp, None)

        self._offsets_deleted_from = gid
        try:
            answer = self._step(lambda: coordinator.delete_offsets(gid, tps), then=then)
        finally:
            self._offsets_deleted_from = None
        code, codes = answer

        def per_partition(
            topics: frozenset[str] | None,
        ) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode]]:
            """Partitions of subscribed topics are refused, None meaning "maybe all"."""
            return ErrorCode.none, {
                tp: ErrorCode.group_subscribed_to_topic
                if topics is None or tp[0] in topics
                else ErrorCode.none
                for tp in tps
            }

        if group is None:
            kafka: tuple[ErrorCode, dict[tuple[str, int], ErrorCode]] = (
                ErrorCode.group_id_not_found,
                {},
            )
        elif group.state is E:
            kafka = per_partition(frozenset())
        elif not model.consumer:
            kafka = (ErrorCode.non_empty_group, {})
        else:
            kafka = per_partition(model.subscribed)  # the last generation's subscriptions
        self._expect(
            f"OffsetDelete {gid} ({group and group.state.value})", answer, kafka
        )
        assert not set(self.world.offsets[gid]) & {
            tp for tp, x in codes.items() if x == ErrorCode.none
        }
        after = self.world.groups[gid]
        assert not (
            after is not None and after.state is E and not model.offsets and after.obj is group.obj
        ), f"OffsetDelete left {gid} Empty without offsets"

    # --- invariants ------------------------------------------------------------------------

    @invariant()
    def states_are_kafkas(self) -> None:
        if self.loop is None:
            return
        for gid, group in self.world.groups.items():
            if group is None:
                continue
            assert group.state.value in KAFKA_STATES and group.state is not GroupState.DEAD
            assert group.described_state == group.listed_state == group.state.value
            if group.state is E:
                assert not group.members and group.leader is None and group.protocol_name is None
            else:
                assert group.members or group.state is P, (
                    f"{gid}: {group.state.value} without members"
                )
            if group.state in (C, S):
                assert group.leader in group.members and group.protocol_name is not None
            if gid == SOLO:
                assert group.state is E and not group.pending

    @invariant()
    def stable_group_assigns_every_partition_once(self) -> None:
        group = self.world.groups[GROUP] if self.loop is not None else None
        if group is None or group.state is not S:
            return
        owned = [p for m in group.members.values() for p in decode_assignment(m.assignment)]
        assert sorted(owned) == list(range(N_PARTITIONS)), f"Stable with partitions {owned}"

    @invariant()
    def stable_members_hold_this_generations_assignment(self) -> None:
        group = self.world.groups[GROUP] if self.loop is not None else None
        if group is None or group.state is not S:
            return
        plan = self.models[GROUP].plans.get(group.generation)
        assert plan is not None, f"Stable at generation {group.generation} without an assignment"
        for member_id, m in group.members.items():
            assert not m.awaiting_join and not m.awaiting_sync, f"{member_id} waits in Stable"
            assert m.assignment == plan[member_id]
        for c in self.clients:
            if c.phase == STABLE and c.generation == group.generation and c.group_obj is group.obj:
                assert c.member_id in group.members
                assert c.assignment == decode_assignment(plan[c.member_id])

    @invariant()
    def generations_only_grow(self) -> None:
        if self.loop is None:
            return
        for gid, group in self.world.groups.items():
            if group is not None:
                assert group.generation == self.models[gid].max_generation

    @invariant()
    def committed_offsets_are_fetched(self) -> None:
        if self.loop is None:
            return
        for gid in GROUP_IDS:
            expected = {tp: offset for tp, (offset, _) in self.models[gid].offsets.items()}
            assert self.world.offsets[gid] == expected

    @invariant()
    def nobody_waits_for_nothing(self) -> None:
        """A JoinGroup waits only while the group prepares; a SyncGroup only for its generation's
        assignment. Otherwise Kafka has answered it."""
        group = self.world.groups[GROUP] if self.loop is not None else None
        for o in self.outstanding:
            assert not o.waiter.done  # collected after every step
            assert group is not None, f"{o.kind} of {o.client.name} waits for a group that is gone"
            if o.kind == "join":
                assert group.state is P, (
                    f"JoinGroup of {o.client.name} waits in {group.state.value}"
                )
            else:
                assert group.state is C and group.generation == o.generation, (
                    f"SyncGroup of {o.client.name} for generation {o.generation} waits in "
                    f"{group.state.value} at generation {group.generation}"
                )

    @invariant()
    def rebalances_complete_when_kafkas_would(self) -> None:
        """All members rejoined (none pending), or the rebalance timeout passed: not still Preparing."""
        group = self.world.groups[GROUP] if self.loop is not None else None
        if group is None or group.state is not P:
            return
        model = self.models[GROUP]
        if model.p_initial:
            return  # the initial delay waits for more members whatever happens
        everyone = all(m.awaiting_join for m in group.members.values()) and not group.pending
        assert not everyone, "every member has rejoined, yet the group still prepares"
        assert model.p_since is not None
        assert self.world.now < model.p_since + model.p_timeout_high, (
            f"PreparingRebalance since {model.p_since}, rebalance timeout {model.p_timeout_high}"
        )


GroupMachine.TestCase.settings = settings(
    max_examples=250,
    stateful_step_count=60,
    derandomize=True,
    database=None,
    deadline=None,
)
TestGroupCoordinatorModel = GroupMachine.TestCase


# --- plain tests: the exact semantics, one at a time ------------------------------------------


async def start(nursery: trio.Nursery, delay_ms: int = 0) -> GroupCoordinator:
    """A coordinator in pytest-trio's test nursery (cancelled when the test ends)."""
    coordinator = GroupCoordinator(
        make_config(delay_ms), None, lambda: BASE_MS + trio.current_time() * 1000
    )
    await nursery.start(coordinator.run)
    return coordinator


async def settle(clock: trio.testing.MockClock, seconds: float = 0.0) -> None:
    """Move the clock, then let every timer that came due run."""
    clock.jump(seconds)
    await trio.testing.wait_all_tasks_blocked()


def join(
    coordinator: GroupCoordinator,
    name: str,
    member_id: str = "",
    *,
    session_ms: int = 1000,
    require_known: bool = False,
) -> Waiter[JoinGroupResult]:
    return coordinator.join_group(
        JoinGroupRequest(
            GROUP, member_id, None, name, "/127.0.0.1", session_ms, 2000, "consumer",
            PROTOCOLS["range"], require_known,
        )
    )  # fmt: skip


def commit(
    coordinator: GroupCoordinator, generation: int, member_id: str, partition: int = 0
) -> ErrorCode:
    codes = coordinator.commit_offsets(
        GROUP, generation, member_id, None, {(TOPIC, partition): (7, -1, None)}
    )
    return codes[(TOPIC, partition)]


async def stable_group(
    coordinator: GroupCoordinator, clock: trio.testing.MockClock, n: int, **kw: Any
) -> list[str]:
    """n members in a Stable group at generation 1; their ids, the leader's first."""
    waiters = [join(coordinator, f"c{i}", **kw) for i in range(n)]
    await settle(clock)
    results = [attrs.asdict(w.value) for w in waiters]
    assert all(r["error_code"] == ErrorCode.none for r in results), results
    (leader,) = [r for r in results if r["leader"] == r["member_id"]]
    followers = [r for r in results if r is not leader]
    plan = range_assignment([m["member_id"] for m in leader["members"]])
    syncs = [
        coordinator.sync_group(SyncGroupRequest(
            GROUP,
            1,
            r["member_id"],
            None,
            "consumer",
            "range",
            list(plan.items()) if r is leader else [],
        ))  # fmt: skip
        for r in [*followers, leader]
    ]
    await settle(clock)
    assert all(s.value.error_code == ErrorCode.none for s in syncs)
    assert coordinator.groups[GROUP].state is S
    return [r["member_id"] for r in [leader, *followers]]


async def test_range_assignment_reaches_every_member(
    nursery: trio.Nursery, mock_clock: trio.testing.MockClock
) -> None:
    coordinator = await start(nursery)
    ids = await stable_group(coordinator, mock_clock, 3)
    group = coordinator.groups[GROUP]
    owned = sorted(p for m in ids for p in decode_assignment(group.members[m].assignment))
    assert owned == list(range(N_PARTITIONS))
    assert group.generation_id == 1


async def test_session_expiry_rebalances_the_rest(
    nursery: trio.Nursery, mock_clock: trio.testing.MockClock
) -> None:
    coordinator = await start(nursery)
    leader, follower = await stable_group(coordinator, mock_clock, 2)
    await settle(mock_clock, 0.75)
    assert coordinator.heartbeat(GROUP, 1, follower, None) == ErrorCode.none
    await settle(mock_clock, 0.25)  # the leader's 1 s session has passed, to the millisecond
    assert leader not in coordinator.groups[GROUP].members
    assert coordinator.groups[GROUP].state is P
    assert coordinator.heartbeat(GROUP, 1, follower, None) == ErrorCode.rebalance_in_progress
    assert coordinator.heartbeat(GROUP, 1, leader, None) == ErrorCode.unknown_member_id


async def test_commit_checks_member_and_generation(
    nursery: trio.Nursery, mock_clock: trio.testing.MockClock
) -> None:
    coordinator = await start(nursery)
    _, follower = await stable_group(coordinator, mock_clock, 2)
    assert commit(coordinator, 1, follower) == ErrorCode.none
    assert commit(coordinator, 0, follower) == ErrorCode.illegal_generation
    assert commit(coordinator, 1, "stranger") == ErrorCode.unknown_member_id
    assert commit(coordinator, -1, "") == ErrorCode.unknown_member_id  # not while it has members
    assert coordinator.fetch_offsets(GROUP, [(TOPIC, 0)])[1][(TOPIC, 0)].offset == 7


async def test_offsets_of_an_empty_group_expire_after_the_retention(
    nursery: trio.Nursery, mock_clock: trio.testing.MockClock
) -> None:
    coordinator = await start(nursery)
    leader, _ = await stable_group(coordinator, mock_clock, 2)
    assert commit(coordinator, 1, leader, partition=1) == ErrorCode.none
    await settle(mock_clock, 30)  # both sessions lapse: the group is Empty from now
    assert coordinator.groups[GROUP].state is E
    await settle(mock_clock, RETENTION_S - 0.25)
    assert coordinator.fetch_offsets(GROUP, None)[1][(TOPIC, 1)].offset == 7
    await settle(mock_clock, 0.25)
    assert coordinator.fetch_offsets(GROUP, None)[1] == {}
    assert GROUP not in coordinator.groups  # Empty without offsets: gone


# --- Kafka's behaviour where trikafka differed (see DEVIATIONS) -------------------------------
# Each test sets the scene with plain assertions, and its last assertion is Kafka's answer.


def deviation(name: str) -> Callable[[Any], Any]:
    """Names the (fixed) deviation a test pins down; the test must pass."""
    assert name in DEVIATIONS

    def mark(test: Any) -> Any:
        return test

    return mark


@deviation("commit-in-completing-rebalance")
async def test_kafka_commit_validates_member_before_completing_rebalance(
    nursery: trio.Nursery, mock_clock: trio.testing.MockClock
) -> None:
    coordinator = await start(nursery)
    (old,) = await stable_group(coordinator, mock_clock, 1)
    join(coordinator, "late")  # a second member: the old one does not rejoin in time
    await settle(mock_clock, 2)
    group = coordinator.groups[GROUP]
    assert group.state is C and group.generation_id == 2 and old not in group.members
    (late,) = group.members
    assert commit(coordinator, 2, late) == ErrorCode.rebalance_in_progress  # as Kafka
    assert (commit(coordinator, 1, late), commit(coordinator, 2, old)) == (
        ErrorCode.illegal_generation,
        ErrorCode.unknown_member_id,
    )


@deviation("pending-member-forgotten")
async def test_kafka_pending_member_survives_a_rebalance(
    nursery: trio.Nursery, mock_clock: trio.testing.MockClock
) -> None:
    coordinator = await start(nursery, delay_ms=1500)
    a = join(coordinator, "a", require_known=True).value.member_id
    join(coordinator, "a", a, require_known=True)
    b = join(coordinator, "b", session_ms=2500, require_known=True).value
    assert b.error_code == ErrorCode.member_id_required
    await settle(mock_clock)
    await settle(mock_clock, 1.5)  # the initial delay ends: generation 1, "a" alone
    assert coordinator.groups[GROUP].state is C
    # Kafka: "b" is a pending member until its 2.5 s session passes, so it is let in.
    again = join(coordinator, "b", b.member_id, session_ms=2500, require_known=True)
    assert not again.done


@deviation("stable-sync-no-heartbeat")
async def test_kafka_stable_sync_pushes_back_the_session(
    nursery: trio.Nursery, mock_clock: trio.testing.MockClock
) -> None:
    coordinator = await start(nursery)
    leader, follower = await stable_group(coordinator, mock_clock, 2)
    await settle(mock_clock, 0.5)
    assert coordinator.heartbeat(GROUP, 1, leader, None) == ErrorCode.none
    sync = coordinator.sync_group(SyncGroupRequest(GROUP, 1, follower, None, "consumer", "range", []))
    assert sync.value.error_code == ErrorCode.none
    await settle(mock_clock, 0.5)  # 1 s after the rebalance, 0.5 s after the follower's sync
    assert follower in coordinator.groups[GROUP].members


@deviation("awaiting-sync-expires")
async def test_kafka_member_awaiting_sync_is_kept_alive(
    nursery: trio.Nursery, mock_clock: trio.testing.MockClock
) -> None:
    coordinator = await start(nursery)
    leader = join(coordinator, "a", session_ms=2500)  # the first member leads
    follower = join(coordinator, "b", session_ms=1000)
    await settle(mock_clock)
    assert leader.value.leader == leader.value.member_id
    follower_id = follower.value.member_id
    waiting = coordinator.sync_group(SyncGroupRequest(GROUP, 1, follower_id, None, "consumer", "range", []))
    await settle(mock_clock, 0.75)
    assert coordinator.heartbeat(GROUP, 1, leader.value.member_id, None) == ErrorCode.none
    await settle(mock_clock, 2)  # the follower's session passes while it waits for the leader
    assert (waiting.done, follower_id in coordinator.groups[GROUP].members) == (False, True)


@deviation("leave-unknown-group-top-level")
async def test_kafka_leave_unknown_group(
    nursery: trio.Nursery, mock_clock: trio.testing.MockClock
) -> None:
    coordinator = await start(nursery)
    assert coordinator.leave_group("nobody", [("m", None)]) == (
        ErrorCode.none,
        [ErrorCode.unknown_member_id],
    )


@deviation("offset-delete-keeps-empty-group")
async def test_kafka_offset_delete_drops_empty_group(
    nursery: trio.Nursery, mock_clock: trio.testing.MockClock
) -> None:
    coordinator = await start(nursery)
    tp = (TOPIC, 0)
    assert coordinator.commit_offsets(SOLO, -1, "", None, {tp: (1, -1, None)}) == {
        tp: ErrorCode.none
    }
    assert coordinator.delete_offsets(SOLO, [tp]) == (ErrorCode.none, {tp: ErrorCode.none})
    assert coordinator.describe(SOLO) is None  # Kafka: Empty and no offsets left, so Dead


@deviation("empty-group-forgets-protocol-type")
async def test_kafka_empty_group_keeps_protocol_type(
    nursery: trio.Nursery, mock_clock: trio.testing.MockClock
) -> None:
    coordinator = await start(nursery)
    (member,) = await stable_group(coordinator, mock_clock, 1)
    coordinator.leave_group(GROUP, [(member, None)])
    await settle(mock_clock)
    assert coordinator.groups[GROUP].state is E  # no offsets were committed
    assert coordinator.groups[GROUP].protocol_type == "consumer"


@deviation("offset-delete-subscriptions")
async def test_kafka_offset_delete_uses_last_generations_subscriptions(
    nursery: trio.Nursery, mock_clock: trio.testing.MockClock
) -> None:
    coordinator = await start(nursery)
    a, b = await stable_group(coordinator, mock_clock, 2)
    assert commit(coordinator, 1, a) == ErrorCode.none
    assert (
        join(coordinator, "c", require_known=True).value.error_code
        == ErrorCode.member_id_required
    )
    coordinator.leave_group(GROUP, [(a, None)])  # rebalance timeout 2 s, from b's settings
    await settle(mock_clock)
    coordinator.leave_group(GROUP, [(b, None)])  # no members left, one pending: still Preparing
    await settle(mock_clock)
    assert coordinator.groups[GROUP].state is P and not coordinator.groups[GROUP].members
    # Kafka: generation 1 subscribed to the topic, so its offsets may not be deleted.
    assert coordinator.delete_offsets(GROUP, [(TOPIC, 0)]) == (
        ErrorCode.none,
        {(TOPIC, 0): ErrorCode.group_subscribed_to_topic},
    )
