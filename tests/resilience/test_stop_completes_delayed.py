"""A stop answers delayed operations at once instead of waiting out shutdown.grace.ms.

The issue: an 8 s long-poll Fetch made the client see a closed connection after the 5 s
grace period. Now the stop completes every delayed operation with what it has.
"""

from __future__ import annotations

import trio
import trio.testing

from trikafka.errors import ErrorCode
from trikafka.testing import open_test_broker

from ..server.test_topics_and_data import create_topic, fetch_request, request


def _join(group: str):
    return request(  # v3: no member id round trip (KIP-394), so the join waits at once
        11,
        3,
        group_id=group,
        session_timeout=30_000,
        rebalance_timeout=60_000,
        member_id="",
        group_instance_id=None,
        protocol_type="consumer",
        protocols=[{"name": "range", "metadata": b""}],
    )


async def test_a_stop_answers_long_polls_and_joins_at_once(autojump_clock):
    answers: dict[str, object] = {}
    async with open_test_broker(shutdown_grace_ms=60_000, group_initial_rebalance_delay_ms=30_000) as tb:
        async with tb.client() as client, tb.client() as joiner:
            await create_topic(client, "quiet")

            async def long_poll() -> None:
                answers["fetch"] = await client.request(fetch_request(12, "quiet", None, 0, 0, max_wait=50_000))
                answers["fetch_at"] = trio.current_time()

            async def join() -> None:
                answers["join"] = await joiner.request(_join("g"))
                answers["join_at"] = trio.current_time()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(long_poll)
                nursery.start_soon(join)
                await trio.testing.wait_all_tasks_blocked()
                assert tb.broker.path.purgatory.statistics().delayed == 2
                stop_at = trio.current_time()
                tb.broker.stop()
            await tb.broker.stopped.wait()
            stopped_at = trio.current_time()
    fetched = answers["fetch"].responses[0].partitions[0]
    assert fetched.error_code == ErrorCode.none and not fetched.records  # what it had: nothing
    assert answers["join"].error_code == ErrorCode.not_coordinator
    # Virtual time: nothing waited for max.wait.ms, the rebalance delay or the grace period.
    assert answers["fetch_at"] == stop_at and answers["join_at"] == stop_at
    assert stopped_at - stop_at < 1
