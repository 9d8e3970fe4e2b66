"""The in-memory transport, under the name tests have always imported it by.

It lives in :mod:`trikafka.network.memory` (a transport: the in-process cluster runs on it);
this module keeps ``from trikafka.testing.memory import MemoryListener`` working.
"""

from trikafka.network.memory import MemoryListener, MemoryStream

__all__ = ["MemoryListener", "MemoryStream"]
