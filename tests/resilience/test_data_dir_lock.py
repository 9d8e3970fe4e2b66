"""One broker per log directory: the second refuses, naming the directory and the holder."""

from __future__ import annotations

import os

import pytest

from trikafka.log.lock import LOCK_FILE, LogDirLockedError
from trikafka.log.manager import LogManager
from trikafka.testing.process import BrokerProcess, broker_process


def test_a_second_manager_on_the_same_dir_refuses(tmp_path):
    first = LogManager([tmp_path / "a", tmp_path / "b"])
    with pytest.raises(LogDirLockedError) as refused:
        LogManager([tmp_path / "c", tmp_path / "b"])
    message = str(refused.value)
    assert str(tmp_path / "b") in message
    assert f"pid {os.getpid()}" in message
    # The refused manager let go of the directory it did lock.
    LogManager([tmp_path / "c"]).close()
    first.close()
    again = LogManager([tmp_path / "a", tmp_path / "b"])  # a clean stop released both
    again.close()
    assert (tmp_path / "a" / LOCK_FILE).exists()


def test_a_lost_holder_releases_the_dir(tmp_path):
    """The lock lives with the descriptor: a broker that died (here: was dropped) leaves a
    file behind but no lock, so a restart after kill -9 is never blocked."""
    crashed = LogManager([tmp_path])
    crashed._release_locks()  # what the kernel does when the process dies
    LogManager([tmp_path]).close()


def test_a_second_broker_process_refuses_to_start(tmp_path):
    data = tmp_path / "data"
    with broker_process("--data-dir", str(data), cwd=tmp_path) as first:
        second = BrokerProcess("--data-dir", str(data), cwd=tmp_path)
        code = second.process.wait(60)
        second.kill()
        assert code == 1, second.output
        assert f"log dir {data} is in use by another broker (pid {first.process.pid}" in second.output
        assert "Traceback" not in second.output
        assert first.process.poll() is None
