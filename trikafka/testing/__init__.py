"""Testing kit: an in-memory transport and a broker on it, a broker on a background Trio
thread for synchronous and asyncio suites, clusters, the HTTP control interface and the
pytest plugin's building blocks (the plugin itself is ``trikafka.testing.pytest_plugin``).

Every name is imported on first use (PEP 562): the pytest plugin lives in this package, and
pytest imports it in every run where trikafka is installed, so ``import trikafka.testing``
must not load the broker, the client or trio before a test asks for one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trikafka.lazy_exports import lazy_exports as _lazy_exports

#: Where each public name lives.
_LAZY = {
    "ClientMetricsSnapshot": "trikafka.server.client_metrics",
    "GroupSnapshot": "trikafka.server.awaitable",
    "ShareGroupSnapshot": "trikafka.server.share_awaitable",
    "SharePartitionSnapshot": "trikafka.server.share_awaitable",
    "ShareRecordSnapshot": "trikafka.server.share_awaitable",
    "Fault": "trikafka.testing.faults",
    "Faults": "trikafka.testing.faults",
    "RecordedRequest": "trikafka.testing.recorder",
    "Record": "trikafka.testing.topics",
    "TestBroker": "trikafka.testing.broker",
    "open_test_broker": "trikafka.testing.broker",
    "ClusterHandle": "trikafka.testing.cluster",
    "ClusterUnavailableError": "trikafka.testing.cluster",
    "start_cluster": "trikafka.testing.cluster",
    "ControlServer": "trikafka.testing.control",
    "KafkaContainer": "trikafka.testing.container",
    "MemoryListener": "trikafka.testing.memory",
    "MemoryStream": "trikafka.testing.memory",
    "BrokerTarget": "trikafka.testing.targets",
    "broker_targets": "trikafka.testing.targets",
    "BrokerHandle": "trikafka.testing.thread",
    "ThreadedBroker": "trikafka.testing.thread",
    "BrokerControls": "trikafka.testing.surface",
    "FaultSet": "trikafka.testing.surface",
    "controls": "trikafka.testing.surface",
    "TrioThread": "trikafka.testing.thread",
    "Scenario": "trikafka.testing.scenario",
    "ScenarioError": "trikafka.testing.scenario",
    "Step": "trikafka.testing.scenario",
    "ScenarioRun": "trikafka.testing.scenario_run",
}

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time, __getattr__ below
    from trikafka.server.awaitable import GroupSnapshot
    from trikafka.server.client_metrics import ClientMetricsSnapshot
    from trikafka.server.share_awaitable import (
        ShareGroupSnapshot,
        SharePartitionSnapshot,
        ShareRecordSnapshot,
    )
    from trikafka.testing.broker import TestBroker, open_test_broker
    from trikafka.testing.cluster import ClusterHandle, ClusterUnavailableError, start_cluster
    from trikafka.testing.container import KafkaContainer
    from trikafka.testing.control import ControlServer
    from trikafka.testing.faults import Fault, Faults
    from trikafka.testing.memory import MemoryListener, MemoryStream
    from trikafka.testing.recorder import RecordedRequest
    from trikafka.testing.scenario import Scenario, ScenarioError, Step
    from trikafka.testing.scenario_run import ScenarioRun
    from trikafka.testing.surface import BrokerControls, FaultSet, controls
    from trikafka.testing.targets import BrokerTarget, broker_targets
    from trikafka.testing.thread import BrokerHandle, ThreadedBroker, TrioThread
    from trikafka.testing.topics import Record


__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, globals())


__all__ = [
    "BrokerControls",
    "BrokerHandle",
    "BrokerTarget",
    "ClientMetricsSnapshot",
    "ClusterHandle",
    "ClusterUnavailableError",
    "ControlServer",
    "Fault",
    "FaultSet",
    "Faults",
    "GroupSnapshot",
    "KafkaContainer",
    "MemoryListener",
    "MemoryStream",
    "Record",
    "RecordedRequest",
    "Scenario",
    "ScenarioError",
    "ScenarioRun",
    "ShareGroupSnapshot",
    "SharePartitionSnapshot",
    "ShareRecordSnapshot",
    "Step",
    "TestBroker",
    "ThreadedBroker",
    "TrioThread",
    "broker_targets",
    "controls",
    "open_test_broker",
    "start_cluster",
]
