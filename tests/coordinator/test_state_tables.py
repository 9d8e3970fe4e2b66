"""The group state table and the shells' timer queue, on their own."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from trikafka.coordinator.classic.group_metadata import GroupMetadata
from trikafka.coordinator.classic.group_state import GroupState, IllegalStateTransition
from trikafka.coordinator.timers import TimerQueue


def test_an_illegal_transition_names_group_states_and_event() -> None:
    group = GroupMetadata("orders")  # Empty
    with pytest.raises(IllegalStateTransition) as caught:
        group.transition(GroupState.STABLE, 0.0, "the leader sent the assignment")
    message = str(caught.value)
    assert "'orders'" in message and "Empty" in message and "Stable" in message
    assert "the leader sent the assignment" in message
    assert "CompletingRebalance" in message  # what Stable may follow
    assert group.state is GroupState.EMPTY  # unchanged


async def test_timer_queue_fires_in_deadline_order_and_honours_replace_and_cancel(
    nursery: trio.Nursery, mock_clock: trio.testing.MockClock
) -> None:
    timers: TimerQueue[str] = TimerQueue()
    fired: list[tuple[str, float]] = []
    nursery.start_soon(timers.run, lambda key: fired.append((key, trio.current_time())))
    start = trio.current_time()
    timers.schedule("b", start + 2)
    timers.schedule("a", start + 1)
    timers.schedule("moved", start + 1.5)
    timers.schedule("moved", start + 3)  # replaces the earlier deadline
    timers.schedule("gone", start + 0.5)
    timers.cancel("gone")
    for _ in range(4):
        mock_clock.jump(1)
        await trio.testing.wait_all_tasks_blocked()
    assert fired == [("a", start + 1), ("b", start + 2), ("moved", start + 3)]
    assert len(timers) == 0
