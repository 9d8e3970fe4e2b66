"""Testing kit: an in-memory transport and a broker that runs on it."""

from trikafka.testing.broker import TestBroker, open_test_broker
from trikafka.testing.memory import MemoryListener, MemoryStream

__all__ = ["MemoryListener", "MemoryStream", "TestBroker", "open_test_broker"]
