"""Awaitable share-group state for tests: a share group's state and members, a share
partition's records with their states and delivery counts, and waits on both.

Level-triggered like the rest of ``awaitable.py``: each wait checks at once and again at every
``StateChanges`` bump — the share coordinator bumps it on every change, its timers' (expired
locks, expired members) included, so a wait on a lock expiring in virtual time returns when
the ``MockClock`` gets there.
"""

from __future__ import annotations

from typing import Any

import attrs

__all__ = ["SHARE_GROUP_STATES", "SHARE_RECORD_STATES", "ShareAwaitableState", "ShareGroupSnapshot",
           "SharePartitionSnapshot", "ShareRecordSnapshot"]

SHARE_GROUP_STATES = ("Empty", "Stable", "Dead")
SHARE_RECORD_STATES = ("Available", "Acquired", "Acknowledged", "Archived")


@attrs.frozen
class ShareGroupSnapshot:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    members: tuple[str, ...]


@attrs.frozen
class ShareRecordSnapshot:
    offset: int
    state: str
    delivery_count: int
    member_id: str | None


@attrs.frozen
class SharePartitionSnapshot:
    """A share partition: its start (SPSO) and end offsets and the records in flight.
    ``totals`` counts the records acknowledged and archived since the broker started (those
    below the SPSO are no longer in ``records``)."""

    group_id: str
    topic: str
    partition: int
    start_offset: int
    end_offset: int
    records: tuple[ShareRecordSnapshot, ...]
    totals: dict[str, int]

    def count(self, state: str) -> int:
        """Records in ``state``: in flight now, or for Acknowledged/Archived, ever."""
        if state in self.totals:
            return self.totals[state]
        return sum(1 for r in self.records if r.state == state)


def _check(what: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{what} {value!r} is not one of Kafka's: {', '.join(allowed)}")


class ShareAwaitableState:
    """Mixed into ``AwaitableState``: needs ``core`` (a BrokerCore) and ``state_changes``."""

    core: Any
    state_changes: Any

    def share_group_snapshot(self, group_id: str) -> ShareGroupSnapshot | None:
        group = self.core.shares.groups.get(group_id)
        if group is None:
            return None
        return ShareGroupSnapshot(group_id, group.state, group.group_epoch, group.assignment_epoch,
                                  tuple(group.members))

    def share_partition_snapshot(self, group_id: str, topic: str, partition: int) -> SharePartitionSnapshot | None:
        sp = self.core.shares.partitions.get((group_id, topic, partition))
        if sp is None:
            return None
        records = tuple(ShareRecordSnapshot(o, r.state.value, r.delivery_count, r.member_id)
                        for o, r in sorted(sp.in_flight.items()))
        return SharePartitionSnapshot(group_id, topic, partition, sp.start_offset, sp.end_offset, records,
                                      dict(sp.totals))

    async def wait_for_share_group_state(
        self, group_id: str, state: str, *, members: int | None = None
    ) -> ShareGroupSnapshot:
        """Until the share group is in ``state`` ("Stable", "Empty"; a missing group is
        "Dead") with ``members`` members when given."""
        _check("share group state", state, SHARE_GROUP_STATES)
        found: list[ShareGroupSnapshot] = []

        def ready() -> bool:
            snapshot = self.share_group_snapshot(group_id) or ShareGroupSnapshot(group_id, "Dead", 0, 0, ())
            if snapshot.state == state and (members is None or len(snapshot.members) == members):
                found[:] = [snapshot]
                return True
            return False

        await self.state_changes.wait_until(ready)
        return found[0]

    async def wait_for_share_records(self, group_id: str, topic: str, partition: int, *,
                                     state: str = "Acknowledged", at_least: int) -> SharePartitionSnapshot:
        """Until the share partition counts ``at_least`` records in ``state`` (see
        :meth:`SharePartitionSnapshot.count`)."""
        _check("share record state", state, SHARE_RECORD_STATES)
        found: list[SharePartitionSnapshot] = []

        def ready() -> bool:
            snapshot = self.share_partition_snapshot(group_id, topic, partition)
            if snapshot is not None and snapshot.count(state) >= at_least:
                found[:] = [snapshot]
                return True
            return False

        await self.state_changes.wait_until(ready)
        return found[0]
