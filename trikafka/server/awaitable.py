"""Awaitable broker state: wait for a high watermark, a group state, a commit, a transaction.

Tests of Kafka code keep asking "has it happened yet?" — the consumer group is Stable, the
offset is committed, the transaction completed. Polling for it is slow and flaky; these waits
are level-triggered instead (STYLE 9): each checks its condition at once and again at every
change, and returns the moment it holds.

* Partition offsets are already ``trio_util.AsyncValue`` s on each log (high watermark, last
  stable offset): the wait is ``wait_value`` on them.
* Groups, committed offsets and transactions change inside the coordinators, which have no
  AsyncValues of their own. :class:`StateChanges` is one broker-wide version counter, bumped
  after every response the broker sends (every group, offset and transaction change is
  followed by a response: the request's own, or a delayed JoinGroup/SyncGroup answer); a wait
  re-checks its predicate at each bump. The bump costs an increment when nobody waits.
  Known gap: a change made by a coordinator *timer* with no response after it (a member's
  session expiring while no other member talks, a transaction aborted by its timeout) is
  seen at the next response the broker sends, not before.

Every wait is bounded by the caller (``trio.fail_after``), never by a timer in here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import trio
from trio_util import AsyncValue

from trikafka.server.client_metrics_awaitable import ClientMetricsAwaitableState
from trikafka.server.share_awaitable import ShareAwaitableState

__all__ = ["AwaitableState", "GroupSnapshot", "StateChanges", "GROUP_STATES", "TRANSACTION_STATES"]

#: Classic groups' states, then KIP-848 consumer groups' own (Assigning, Reconciling).
GROUP_STATES = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Assigning", "Reconciling")
TRANSACTION_STATES = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
)


class StateChanges:
    """A version counter bumped after each response; waits re-check at each bump."""

    __slots__ = ("version", "_value", "_watchers")

    def __init__(self) -> None:
        self.version = 0
        self._value: AsyncValue[int] = AsyncValue(0)
        self._watchers = 0

    def bump(self) -> None:
        self.version += 1
        if self._watchers:
            self._value.value = self.version

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Return once ``predicate()`` is true: now, or after some later bump."""
        if predicate():
            await trio.lowlevel.checkpoint()  # a checkpoint, as the wait below would be
            return
        self._watchers += 1
        try:
            await self._value.wait_value(lambda _version: predicate())
        finally:
            self._watchers -= 1


@attrs.frozen
class GroupSnapshot:
    """A consumer group as a wait found it."""

    group_id: str
    state: str
    generation_id: int
    members: tuple[str, ...]
    leader_id: str | None
    protocol_name: str | None


def _check_choice(what: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{what} {value!r} is not one of Kafka's: {', '.join(allowed)}")


class AwaitableState(ShareAwaitableState, ClientMetricsAwaitableState):
    """The ``wait_for_*`` methods of a broker (mixed into :class:`~trikafka.broker.Broker`).

    Reads only what the broker's parts answer to their APIs: a partition's log, the group
    coordinator's ``describe``/``fetch_offsets``, the transaction coordinator's ``describe``.
    An in-process cluster whose brokers share a replica manager and coordinators mixes it in
    too: ``cluster.state_changes = StateChanges()`` and every broker's
    ``ApiContext(state_changes=cluster.state_changes)``, so a response from any broker wakes
    the waits.
    """

    replica_manager: Any
    group_coordinator: Any
    transaction_coordinator: Any
    path: Any  # the RequestPath (server/wiring.py), whose ApiContext bumps state_changes

    @property
    def state_changes(self) -> StateChanges:
        """The broker's (its ApiContext's); a cluster sets one that all its brokers bump."""
        own = self.__dict__.get("_state_changes")
        result: StateChanges = own if own is not None else self.path.context.state_changes
        return result

    @state_changes.setter
    def state_changes(self, value: StateChanges) -> None:
        self.__dict__["_state_changes"] = value

    def partition_log(self, topic: str, partition: int) -> Any:
        replicas = self.replica_manager
        info = replicas.topics.get(topic)
        if info is None or not 0 <= partition < info.partitions:
            return None
        return replicas.get_log(topic, partition)

    async def _log(self, topic: str, partition: int) -> Any:
        await self.state_changes.wait_until(lambda: self.partition_log(topic, partition) is not None)
        return self.partition_log(topic, partition)

    async def wait_for_high_watermark(self, topic: str, partition: int, *, at_least: int) -> int:
        """Wait until the partition exists and its high watermark is ≥ ``at_least``."""
        log = await self._log(topic, partition)
        result: int = await log.high_watermark.wait_value(lambda hw: hw >= at_least)
        return result

    async def wait_for_last_stable_offset(self, topic: str, partition: int, *, at_least: int) -> int:
        """Wait until the partition's last stable offset (read_committed's end) is ≥ ``at_least``."""
        log = await self._log(topic, partition)
        result: int = await log.last_stable_offset.wait_value(lambda lso: lso >= at_least)
        return result

    def group_snapshot(self, group_id: str) -> GroupSnapshot | None:
        """A classic group, or a consumer group (KIP-848: its group epoch as the generation,
        its assignor as the protocol, no leader)."""
        consumer_group = self.group_coordinator.consumer_group(group_id)
        if consumer_group is not None:
            return GroupSnapshot(
                group_id=group_id,
                state=consumer_group.state.value,
                generation_id=consumer_group.group_epoch,
                members=tuple(consumer_group.members),
                leader_id=None,
                protocol_name=consumer_group.preferred_assignor(self.group_coordinator.settings.group_consumer_assignors[0]),
            )
        group = self.group_coordinator.describe(group_id)
        if group is None:
            return None
        return GroupSnapshot(
            group_id=group_id,
            state=group.state.value,
            generation_id=group.generation_id,
            members=tuple(group.members),
            leader_id=group.leader_id,
            protocol_name=group.protocol_name,
        )

    async def wait_for_group_state(self, group_id: str, state: str, *, members: int | None = None) -> GroupSnapshot:
        """Wait until the group is in ``state`` (Kafka's name: "Stable", "Empty", ...) with
        ``members`` members when given. A group that does not exist counts as "Dead"."""
        _check_choice("group state", state, GROUP_STATES)
        found: list[GroupSnapshot] = []

        def ready() -> bool:
            snapshot = self.group_snapshot(group_id) or GroupSnapshot(group_id, "Dead", 0, (), None, None)
            if snapshot.state == state and (members is None or len(snapshot.members) == members):
                found[:] = [snapshot]
                return True
            return False

        await self.state_changes.wait_until(ready)
        return found[0]

    def committed(self, group_id: str, topic: str, partition: int) -> int | None:
        """The group's committed offset for the partition, or None."""
        _code, offsets = self.group_coordinator.fetch_offsets(group_id, [(topic, partition)])
        stored = offsets.get((topic, partition))
        return None if stored is None else stored.offset

    async def wait_for_committed(self, group_id: str, topic: str, partition: int, *, at_least: int) -> int:
        """Wait until the group has committed an offset ≥ ``at_least`` for the partition."""
        found: list[int] = []

        def ready() -> bool:
            offset = self.committed(group_id, topic, partition)
            if offset is not None and offset >= at_least:
                found[:] = [offset]
                return True
            return False

        await self.state_changes.wait_until(ready)
        return found[0]

    def transaction_state(self, transactional_id: str) -> str | None:
        txn = self.transaction_coordinator.describe(transactional_id)
        return None if txn is None else txn.state.value

    async def wait_for_transaction_state(self, transactional_id: str, state: str) -> str:
        """Wait until the transactional id's transaction is in ``state`` (Kafka's names:
        "Ongoing", "PrepareCommit", "CompleteCommit", "CompleteAbort", ...)."""
        _check_choice("transaction state", state, TRANSACTION_STATES)
        await self.state_changes.wait_until(lambda: self.transaction_state(transactional_id) == state)
        return state
