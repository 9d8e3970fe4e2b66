"""A real broker process for the compatibility tests: ``python -m trikafka`` on 127.0.0.1:0.

See ``trikafka.testing.process`` for how readiness is detected without sleeping. Teardown is
part of the contract: SIGTERM must stop the broker gracefully, exit code 0, within 15 s.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from trikafka.testing.process import BrokerProcess, BrokerProcessError

STOP_TIMEOUT = 15


def _ready(broker: BrokerProcess) -> BrokerProcess:
    try:
        return broker.wait_ready()
    except BrokerProcessError as exc:
        pytest.fail(str(exc))


@pytest.fixture
def start_broker_process(tmp_path: Path) -> Iterator:
    """Factory for a test's own broker process; whatever is left running is killed."""
    started: list[BrokerProcess] = []

    def start(*extra_args: str) -> BrokerProcess:
        broker = BrokerProcess("--in-memory", *extra_args, cwd=tmp_path)
        started.append(broker)
        return _ready(broker)

    yield start
    for broker in started:
        broker.kill()


@pytest.fixture(scope="session")
def broker_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker process shared by the session's compat tests."""
    broker = BrokerProcess("--in-memory", cwd=tmp_path_factory.mktemp("broker"))
    try:
        _ready(broker)
    except BaseException:
        broker.kill()
        raise
    yield broker
    code = broker.stop(STOP_TIMEOUT)
    assert code == 0, f"broker exited with {code} after SIGTERM; output:\n{broker.output}"


@pytest.fixture(scope="session")
def broker_address(broker_process: BrokerProcess) -> str:
    """``"127.0.0.1:<port>"`` of the session's broker process."""
    return broker_process.address
