"""Exponential backoff with jitter, as Kafka's clients compute it (sans-IO).

Java's ``ExponentialBackoff``: ``initial * 2**attempts``, capped at ``maximum``, times a random
factor in ``[1 - jitter, 1 + jitter]`` (jitter 0.2) so that clients that failed together do not
retry together. The random source is injectable: a seeded ``random.Random`` makes a test's
waits exact in virtual time.
"""

from __future__ import annotations

import math
import random

import attrs

__all__ = ["ExponentialBackoff"]


@attrs.frozen
class ExponentialBackoff:
    initial_ms: int
    maximum_ms: int
    jitter: float = 0.2
    rng: random.Random = attrs.field(factory=random.Random, eq=False)

    def delay_ms(self, attempts: int) -> float:
        """The wait before retry number ``attempts + 1`` (``attempts`` failures so far)."""
        if self.initial_ms <= 0:
            return 0.0
        maximum = max(self.maximum_ms, self.initial_ms)
        cap = math.log2(maximum / self.initial_ms) if maximum > self.initial_ms else 0.0
        exponent = min(float(attempts), cap)
        term = self.initial_ms * 2**exponent
        if self.jitter:
            term *= self.rng.uniform(1 - self.jitter, 1 + self.jitter)
        return min(term, maximum)

    def delay(self, attempts: int) -> float:
        """:meth:`delay_ms` in seconds, for ``trio.sleep``."""
        return self.delay_ms(attempts) / 1000
