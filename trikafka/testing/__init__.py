"""Testing kit: an in-memory transport and a broker on it, a broker on a background Trio
thread for synchronous and asyncio suites, clusters, the HTTP control interface and the
pytest plugin's building blocks (the plugin itself is ``trikafka.testing.pytest_plugin``)."""

from trikafka.server.awaitable import GroupSnapshot
from trikafka.server.faults import Fault, Faults
from trikafka.server.recorder import RecordedRequest
from trikafka.server.share_awaitable import (
    ShareGroupSnapshot,
    SharePartitionSnapshot,
    ShareRecordSnapshot,
)
from trikafka.testing.broker import TestBroker, open_test_broker
from trikafka.testing.cluster import ClusterHandle, ClusterUnavailableError, start_cluster
from trikafka.testing.control import ControlServer
from trikafka.testing.memory import MemoryListener, MemoryStream
from trikafka.testing.targets import BrokerTarget, broker_targets
from trikafka.testing.thread import BrokerHandle, ThreadedBroker, TrioThread

__all__ = [
    "BrokerHandle",
    "BrokerTarget",
    "ClusterHandle",
    "ClusterUnavailableError",
    "ControlServer",
    "Fault",
    "Faults",
    "GroupSnapshot",
    "MemoryListener",
    "MemoryStream",
    "RecordedRequest",
    "ShareGroupSnapshot",
    "SharePartitionSnapshot",
    "ShareRecordSnapshot",
    "TestBroker",
    "ThreadedBroker",
    "TrioThread",
    "broker_targets",
    "open_test_broker",
    "start_cluster",
]
