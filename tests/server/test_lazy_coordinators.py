"""The coordinators of a broker without a data directory are built on first use (issue 38);
with one they are built at start, so the state they recover is there before the first answer.

A broker's start-up does not pay for the group, transaction and share coordinators it may
never use (``BrokerCore.coordinators``); what a client sees must not change: the first
request that reaches them waits until they are built and started, and a restarted broker
answers from the offsets and transactions it stored. That the broker process does not import
them is checked in tests/test_startup_imports.py.
"""

from __future__ import annotations

from trikafka.errors import ErrorCode
from trikafka.testing import open_test_broker

from ..coordinator.test_groups import commit, create_topic, fetch
from .test_transactions import Producer


async def _commit(client, group: str, offsets: dict[int, int]) -> dict[int, int]:
    codes = await commit(client, group, -1, "", {("t", p): o for p, o in offsets.items()})
    return {p: code for (_, p), code in codes.items()}


async def _fetch(client, group: str) -> dict[int, int]:
    return {p: o for (_, p), o in (await fetch(client, group)).items()}


async def test_in_memory_the_coordinators_wait_for_their_first_request(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        core = tb.broker.core
        await create_topic(client, "t", 2)
        assert core._coordinators is None  # Metadata and CreateTopics need none
        # The first transactional InitProducerId builds and starts them, then is answered as
        # by a broker that had them from the start (never COORDINATOR_LOAD_IN_PROGRESS).
        response = await Producer(client, "tx-1").init()
        assert response.error_code == ErrorCode.none
        assert core._coordinators is not None
        assert await _commit(client, "g", {0: 5, 1: 7}) == {0: ErrorCode.none, 1: ErrorCode.none}
        assert await _fetch(client, "g") == {0: 5, 1: 7}


async def test_in_memory_a_group_request_first_builds_them(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        await create_topic(client, "t", 1)
        assert await _commit(client, "g", {0: 3}) == {0: ErrorCode.none}
        assert await _fetch(client, "g") == {0: 3}
        assert tb.broker.group_coordinator is tb.broker.core.groups


async def test_with_a_data_dir_they_are_built_and_recovered_at_start(autojump_clock, tmp_path):
    config = {"log_dirs": str(tmp_path)}
    async with open_test_broker(**config) as tb, tb.client() as client:
        assert tb.broker.core._coordinators is not None  # before any request
        await create_topic(client, "t", 2)
        assert await _commit(client, "g", {0: 11, 1: 22}) == {0: ErrorCode.none, 1: ErrorCode.none}
        assert (await Producer(client, "tx-1").init()).error_code == ErrorCode.none
    async with open_test_broker(**config) as tb, tb.client() as client:
        assert tb.broker.core._coordinators is not None
        # The first request after the restart already sees the stored offsets and producer.
        assert await _fetch(client, "g") == {0: 11, 1: 22}
        assert "tx-1" in tb.broker.core.transactions.txns
