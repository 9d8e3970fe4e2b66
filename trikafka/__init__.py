"""trikafka: a Kafka-wire-compatible broker on Trio."""

import sys as _sys


def _import_kio_quietly() -> None:
    """Import kio without the hypothesis strategies it registers when hypothesis is installed.

    kio imports ``hypothesis.strategies`` at import time only to register test strategies for
    its primitive types; with the test extras installed that cost ~380 ms of start-up (it
    pulls in pytest through trio.testing) that a broker never uses. When hypothesis is already
    imported (a test run) nothing changes, and hypothesis stays importable afterwards.
    """
    if "kio" in _sys.modules or "hypothesis" in _sys.modules:
        return
    _sys.modules["hypothesis"] = None  # type: ignore[assignment]  # makes kio's import fail fast
    try:
        import kio.static.primitive  # noqa: F401
    finally:
        del _sys.modules["hypothesis"]


_import_kio_quietly()

from trikafka.broker import Broker, BrokerStatistics, open_broker  # noqa: E402
from trikafka.cluster import Cluster, open_cluster  # noqa: E402
from trikafka.config import BrokerConfig  # noqa: E402
from trikafka.errors import ConfigError  # noqa: E402

__all__ = [
    "Broker",
    "BrokerConfig",
    "BrokerStatistics",
    "Cluster",
    "ConfigError",
    "open_broker",
    "open_cluster",
]
__version__ = "0.1.0"
