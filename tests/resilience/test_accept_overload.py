"""The accept loop survives running out of descriptors (trio's ``serve_listeners`` rule)."""

from __future__ import annotations

import errno
import logging
import os

import pytest
import trio

from trikafka.metrics import BrokerMetrics
from trikafka.network.acceptor import OVERLOAD_SLEEP, Acceptor
from trikafka.network.quotas import ConnectionQuotas
from trikafka.testing import MemoryListener


class ExhaustedListener(trio.abc.Listener):
    """A listener whose next ``failures`` accepts fail with ``code``, as accept(2) does when
    the process is out of descriptors (the pending connection stays in the backlog)."""

    def __init__(self, inner: MemoryListener, code: int, failures: int) -> None:
        self.inner = inner
        self.code = code
        self.failures = failures

    async def accept(self) -> trio.abc.Stream:
        if self.failures:
            self.failures -= 1
            await trio.lowlevel.checkpoint()
            raise OSError(self.code, os.strerror(self.code))
        return await self.inner.accept()

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.mark.parametrize("code", [errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS])
async def test_accept_backs_off_and_recovers(code, autojump_clock, caplog):
    inner = MemoryListener()
    listener = ExhaustedListener(inner, code, failures=25)
    send, receive = trio.open_memory_channel(1)

    class _Processor:  # the hand-off end only: what the acceptor uses of a Processor
        new_connections_send = send

    acceptor = Acceptor("PLAINTEXT", listener, [_Processor()], ConnectionQuotas(100, 100, {}), BrokerMetrics())
    with caplog.at_level(logging.WARNING, logger="trikafka.network"):
        async with trio.open_nursery() as nursery:
            await nursery.start(acceptor.run)
            start = trio.current_time()
            client = await inner.connect("127.0.0.1")
            handed = await receive.receive()
            waited = trio.current_time() - start
            nursery.cancel_scope.cancel()
    assert handed is not None and client is not None
    assert acceptor.overload_retries == 25
    assert waited == pytest.approx(25 * OVERLOAD_SLEEP)  # virtual time: a sleep per retry
    failed = [r for r in caplog.records if "accept failed" in r.getMessage()]
    assert len(failed) == 1 and not failed[0].exc_info  # one line for the whole episode
    assert any("accepting again" in r.getMessage() for r in caplog.records)


async def test_other_accept_errors_still_raise(autojump_clock):
    listener = ExhaustedListener(MemoryListener(), errno.EBADF, failures=1)
    acceptor = Acceptor("PLAINTEXT", listener, [], ConnectionQuotas(100, 100, {}), BrokerMetrics())
    with pytest.raises(OSError, match="Bad file descriptor"):
        await acceptor.run()
