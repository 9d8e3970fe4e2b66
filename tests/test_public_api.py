"""Public names come only through ``trikafka``, ``trikafka.testing`` and ``trikafka.client``."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys

import pytest

PUBLIC_PACKAGES = ["trikafka", "trikafka.testing", "trikafka.client"]

#: What users are promised today; more may be added, none of these may go.
PROMISED = {
    "trikafka": {"open_broker", "Broker", "BrokerConfig", "ConfigError"},
    "trikafka.testing": {
        "MemoryListener",
        "open_test_broker",
        "ThreadedBroker",
        "start_cluster",
        "ClusterUnavailableError",
        "ControlServer",
        "RecordedRequest",
    },
    "trikafka.client": {"open_connection", "KafkaConnection", "open_producer", "open_admin"},
}


@pytest.mark.parametrize("package", PUBLIC_PACKAGES)
def test_all_names_resolve(package):
    module = importlib.import_module(package)
    assert isinstance(module.__all__, list | tuple)
    assert len(set(module.__all__)) == len(module.__all__), "a name is listed twice"
    for name in module.__all__:
        assert isinstance(name, str)
        assert hasattr(module, name), f"{package}.__all__ lists {name!r}, which is missing"


@pytest.mark.parametrize("package", PUBLIC_PACKAGES)
def test_promised_names_are_exported(package):
    module = importlib.import_module(package)
    assert PROMISED[package] <= set(module.__all__)


@pytest.mark.parametrize("package", PUBLIC_PACKAGES)
def test_star_import_gives_exactly_all(package):
    namespace: dict[str, object] = {}
    exec(f"from {package} import *", namespace)
    namespace.pop("__builtins__")
    assert set(namespace) == set(importlib.import_module(package).__all__)


def test_the_top_level_names_are_the_real_things():
    import trikafka
    from trikafka.broker import Broker, open_broker
    from trikafka.config import BrokerConfig
    from trikafka.errors import ConfigError

    assert trikafka.Broker is Broker
    assert trikafka.BrokerConfig is BrokerConfig
    assert trikafka.open_broker is open_broker
    assert trikafka.ConfigError is ConfigError
    assert inspect.isclass(trikafka.Broker)
    assert callable(trikafka.open_broker)
    assert isinstance(trikafka.__version__, str)


def test_testing_kit_names_are_the_real_things():
    import trikafka.testing
    from trikafka.testing.broker import open_test_broker
    from trikafka.testing.memory import MemoryListener

    assert trikafka.testing.MemoryListener is MemoryListener
    assert trikafka.testing.open_test_broker is open_test_broker


def test_public_names_are_public():
    for package in PUBLIC_PACKAGES:
        module = importlib.import_module(package)
        assert not [name for name in module.__all__ if name.startswith("_")], package


def test_client_names_are_the_real_things():
    import trikafka.client
    from trikafka.client.admin import open_admin
    from trikafka.client.producer import open_producer

    assert trikafka.client.open_producer is open_producer
    assert trikafka.client.open_admin is open_admin


def test_the_client_does_not_load_the_broker():
    """``trikafka``'s own names are imported on first use: a Trio application that only
    produces and consumes loads the client (~0.2 s, ~36,000 objects for the GC to walk),
    not the broker as well (~0.4 s, ~45,000)."""
    import trikafka

    assert set(trikafka._LAZY) - {"__version__"} == set(trikafka.__all__)  # the version: on first use too
    code = (
        "import sys, trikafka.client\n"
        "assert 'trikafka.broker' not in sys.modules, 'the client loaded the broker'\n"
        "from trikafka import open_broker\n"
        "assert 'trikafka.broker' in sys.modules and callable(open_broker)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
