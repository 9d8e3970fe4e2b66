"""A request that waited for the send lock while the broker closed the connection fails at once
(ConnectionClosed) instead of waiting for an answer nothing will read.

Seen in tests/resilience/test_kill9_durability.py under load: producers sharing one connection
queue on its send lock; the broker is killed; the reader sees EOF and closes every pending
request — but a request that takes the lock only afterwards registered itself, wrote its frame
(a write after the peer's FIN succeeds) and waited forever."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from trikafka.client.connection import ConnectionClosed, open_connection


async def test_a_request_queued_on_the_lock_when_the_peer_closes_fails_at_once(autojump_clock):
    client_end, server_end = trio.testing.memory_stream_pair()
    request = ApiVersionsRequest(client_software_name="t", client_software_version="1")
    async with open_connection(client_end) as connection:
        outcome: list[BaseException | None] = []

        async def queued() -> None:
            try:
                await connection.request(request)
                outcome.append(None)
            except BaseException as exc:  # noqa: BLE001 - recorded for the assertion below
                outcome.append(exc)

        with trio.fail_after(30):  # virtual time: the old code waited forever at the nursery's end
            async with trio.open_nursery() as nursery:
                async with connection._send_lock:  # another request is being written
                    nursery.start_soon(queued)
                    await trio.testing.wait_all_tasks_blocked()
                    await server_end.send_eof()  # the broker goes away; its socket stays readable
                    await trio.testing.wait_all_tasks_blocked()
                    assert connection.closed  # the reader saw EOF and closed what was pending
        assert isinstance(outcome[0], ConnectionClosed), outcome


async def test_a_request_after_the_connection_closed_fails_at_once(autojump_clock):
    client_end, _server_end = trio.testing.memory_stream_pair()
    async with open_connection(client_end) as connection:
        assert not connection.closed
    with pytest.raises(ConnectionClosed):
        await connection.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"))
