"""Requests per second per API, from the broker's request counters (sans-IO).

The broker counts requests per API (``RequestMetrics.requests``, Kafka's RequestsPerSec
meter without the meter) and the console only samples those counters: a rate is the
difference of two samples divided by the time between them. No background task is needed:
each page view and each refresh of the live table takes a sample, and the rate is measured
from the oldest sample still inside ``window`` seconds (or, when none is, the newest one
before it) — so a table refreshed every second shows a rate over the last few seconds, and
the first view after a quiet hour shows the average over that hour rather than nothing.

Times are passed in (trio's clock in the app), so tests feed any times they like.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping

import attrs

__all__ = ["ApiCounters", "ApiRate", "RateSampler"]


@attrs.frozen
class ApiCounters:
    """One API's counters at one moment, summed over the brokers served here."""

    requests: int
    p50_ms: float  # TotalTimeMs percentiles since start (the worst broker's)
    p99_ms: float


@attrs.frozen
class ApiRate:
    api: str
    per_second: float | None  # None until two samples exist
    requests: int
    p50_ms: float
    p99_ms: float


class RateSampler:
    def __init__(self, window: float = 5.0) -> None:
        self.window = window
        self._samples: deque[tuple[float, Mapping[str, ApiCounters]]] = deque()

    def sample(self, now: float, counters: Mapping[str, ApiCounters]) -> tuple[ApiRate, ...]:
        """Record ``counters`` taken at ``now`` and return every API's rate, busiest first."""
        samples = self._samples
        if samples and now < samples[-1][0]:
            raise ValueError(f"sample at {now} is older than the last one at {samples[-1][0]}")
        samples.append((now, dict(counters)))
        # Keep one sample at or before the window's start as the baseline, drop older ones.
        while len(samples) > 2 and samples[1][0] <= now - self.window:
            samples.popleft()
        base_time, base = samples[0]
        elapsed = now - base_time
        rates = []
        for api, current in counters.items():
            per_second = None
            if elapsed > 0:
                before = base.get(api)
                per_second = (current.requests - (before.requests if before else 0)) / elapsed
            rates.append(ApiRate(api, per_second, current.requests, current.p50_ms, current.p99_ms))
        return tuple(sorted(rates, key=lambda r: (-(r.per_second or 0.0), -r.requests, r.api)))
