"""trikafka: a Kafka-wire-compatible broker on Trio."""

import sys as _sys
from typing import TYPE_CHECKING

from trikafka.lazy_exports import lazy_exports as _lazy_exports


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

#: Where each public name lives, imported on first use (PEP 562): ``import trikafka.client``
#: (a Trio application that only produces and consumes) then loads the client, not the
#: broker — a third of the import time and of the objects the cyclic GC walks.
_LAZY = {
    "Broker": "trikafka.broker",
    "BrokerStatistics": "trikafka.broker",
    "open_broker": "trikafka.broker",
    "Cluster": "trikafka.cluster",
    "open_cluster": "trikafka.cluster",
    "BrokerConfig": "trikafka.config",
    "ConfigError": "trikafka.errors",
    # From the installed metadata (pyproject.toml's version), read on first use.
    "__version__": "trikafka._version",
}


if TYPE_CHECKING:  # what type checkers and IDEs see; at run time, __getattr__ below
    from trikafka._version import __version__ as __version__
    from trikafka.broker import Broker, BrokerStatistics, open_broker
    from trikafka.cluster import Cluster, open_cluster
    from trikafka.config import BrokerConfig
    from trikafka.errors import ConfigError


__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, globals())


__all__ = [
    "Broker",
    "BrokerConfig",
    "BrokerStatistics",
    "Cluster",
    "ConfigError",
    "open_broker",
    "open_cluster",
]
