"""RequestQueue: the bounded hand-off between connections and the handler pool.

It replaced ``trio.open_memory_channel(queued.max.requests)``; these are the channel's
promises it must keep (order, capacity and backpressure, the close that ends the handlers,
cancellation) plus its own: a request for a waiting handler goes straight to it.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

from trikafka.network.request_queue import RequestQueue


async def test_items_come_out_in_order_and_the_capacity_pushes_back():
    queue: RequestQueue[int] = RequestQueue(2)
    assert queue.put_nowait(1) and queue.put_nowait(2)
    assert not queue.put_nowait(3)  # full
    put_done = trio.Event()

    async def put_third() -> None:
        await queue.put(3)
        put_done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(put_third)
        await trio.testing.wait_all_tasks_blocked()
        assert queue.waiting_putters == 1 and not put_done.is_set()
        assert await queue.get() == 1  # room: the waiting put's item joins the queue
        await put_done.wait()
        assert len(queue) == 2
        assert [await queue.get(), await queue.get()] == [2, 3]


async def test_a_waiting_consumer_gets_the_item_directly():
    queue: RequestQueue[str] = RequestQueue(1)
    got: list[str] = []

    async def consume() -> None:
        got.append(await queue.get())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consume)
        await trio.testing.wait_all_tasks_blocked()
        assert queue.waiting_getters == 1
        assert queue.put_nowait("a")
        assert len(queue) == 0  # handed over, never queued
    assert got == ["a"]


async def test_close_drains_then_ends_the_consumers_and_fails_waiting_producers():
    queue: RequestQueue[int] = RequestQueue(1)
    queue.put_nowait(1)
    failed: list[type] = []

    async def blocked_put() -> None:
        try:
            await queue.put(2)
        except trio.ClosedResourceError:
            failed.append(trio.ClosedResourceError)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(blocked_put)
        await trio.testing.wait_all_tasks_blocked()
        queue.close()
    assert failed == [trio.ClosedResourceError]
    assert [item async for item in queue] == [1]  # what was queued is still handled
    with pytest.raises(trio.ClosedResourceError):
        queue.put_nowait(3)


async def test_close_ends_a_waiting_consumer():
    queue: RequestQueue[int] = RequestQueue(4)
    seen: list[int] = []

    async def handler() -> None:
        async for item in queue:
            seen.append(item)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(handler)
        await trio.testing.wait_all_tasks_blocked()
        queue.put_nowait(7)
        await trio.testing.wait_all_tasks_blocked()
        queue.close()
    assert seen == [7]


async def _cancelled_while_waiting(wait) -> None:
    """Run ``wait()`` until it blocks, then cancel it (no clock involved)."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait)
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()


async def test_cancelled_waiters_leave_no_trace():
    queue: RequestQueue[int] = RequestQueue(1)
    await _cancelled_while_waiting(queue.get)
    assert queue.waiting_getters == 0
    queue.put_nowait(1)
    await _cancelled_while_waiting(lambda: queue.put(2))
    assert queue.waiting_putters == 0
    assert await queue.get() == 1
    assert len(queue) == 0
    assert queue.put_nowait(3)  # no cancelled getter is handed the item
    assert len(queue) == 1


def test_a_capacity_below_one_is_refused():
    with pytest.raises(ValueError, match="at least 1, not 0"):
        RequestQueue(0)


async def test_a_reserved_turn_is_not_handed_items_until_released():
    """An inline answer takes an idle handler's turn: that handler gets nothing meanwhile,
    and what was queued meanwhile goes to it on release — with a waiting producer's item
    moving into the room it leaves."""
    queue: RequestQueue[int] = RequestQueue(1)
    assert not queue.reserve()  # nobody idle: no turn to take
    got: list[int] = []

    async def consume() -> None:
        got.append(await queue.get())
        got.append(await queue.get())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consume)
        await trio.testing.wait_all_tasks_blocked()
        assert queue.reserve()
        assert not queue.reserve()  # one consumer, one turn
        assert queue.put_nowait(1)
        nursery.start_soon(queue.put, 2)
        await trio.testing.wait_all_tasks_blocked()
        assert len(queue) == 1 and queue.waiting_putters == 1 and got == []
        queue.release()
        await trio.testing.wait_all_tasks_blocked()
        assert got == [1, 2]
        assert len(queue) == 0 and queue.waiting_putters == 0


async def test_a_closed_queue_lends_no_turn():
    queue: RequestQueue[int] = RequestQueue(1)
    queue.put_nowait(1)

    async def drain() -> None:
        async for _ in queue:
            pass

    async with trio.open_nursery() as nursery:
        nursery.start_soon(drain)
        await trio.testing.wait_all_tasks_blocked()
        assert queue.waiting_getters == 1
        queue.close()  # the consumer ends: there is no turn left to lend
        assert not queue.reserve()
