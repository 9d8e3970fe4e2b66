"""Kafka's sampled rate (``metrics.stats.Rate`` over a ``WindowedSum``), sans I/O.

Why a copy of Kafka's arithmetic rather than any moving average: the throttle time a client
sees is computed from this rate and from the window it was measured over, and the point of
a test broker is that a client's back-off logic sees the numbers a real broker would give.

Theory of operation. Values are summed into ``samples + 1`` samples of ``window_ms`` each
(``quota.window.num`` and ``quota.window.size.seconds``); a sample is complete once
``window_ms`` has passed since it started, and the next record then recycles the oldest.
A sample with no event for ``samples * window_ms`` is obsolete and reset before any
measurement. The rate is the sum over the samples divided by the time they span, where a
span shorter than ``samples - 1`` full windows is padded up to that: a first burst is
measured as if the windows before it had been empty, so one large request is not yet a
violation (Kafka's ``Rate.windowSize``).

Time is integer milliseconds passed in by the caller (trio's clock in the broker; any
number in a test).
"""

from __future__ import annotations

import math

__all__ = ["SampledRate", "throttle_time_ms"]


class _Sample:
    __slots__ = ("event_count", "last_event_ms", "start_ms", "value")

    def __init__(self, now_ms: int) -> None:
        self.reset(now_ms)

    def reset(self, now_ms: int) -> None:
        self.value = 0.0
        self.event_count = 0
        self.start_ms = now_ms
        self.last_event_ms = now_ms


class SampledRate:
    """A rate per second of the values recorded, over ``samples`` windows of ``window_ms``."""

    __slots__ = ("_current", "_samples", "samples", "window_ms")

    def __init__(self, samples: int, window_ms: int) -> None:
        if samples < 1 or window_ms < 1:
            raise ValueError(f"a rate needs samples >= 1 and window_ms >= 1, not {samples}, {window_ms}")
        self.samples = samples
        self.window_ms = window_ms
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.event_count += 1
        sample.last_event_ms = now_ms

    def measure(self, now_ms: int) -> float:
        """Per second: the windows' sum over the time they span (see the module doc)."""
        self._purge_obsolete(now_ms)
        total = sum(sample.value for sample in self._samples)
        return total / (self.window_size(now_ms) / 1000)

    def window_size(self, now_ms: int) -> int:
        """Milliseconds the rate is measured over at ``now_ms`` (Kafka's ``Rate.windowSize``)."""
        self._purge_obsolete(now_ms)
        elapsed = now_ms - self._oldest(now_ms).start_ms
        full_windows = elapsed // self.window_ms
        min_full_windows = self.samples - 1
        if full_windows < min_full_windows:
            elapsed += (min_full_windows - full_windows) * self.window_ms
        return elapsed

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: int) -> _Sample:
        # One sample more than ``samples``: the oldest may still overlap the measured span.
        self._current = (self._current + 1) % (self.samples + 1)
        if self._current >= len(self._samples):
            sample = _Sample(now_ms)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now_ms)
        return sample

    def _oldest(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return min(self._samples, key=lambda sample: sample.start_ms)

    def _purge_obsolete(self, now_ms: int) -> None:
        expire_age = self.samples * self.window_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire_age:
                sample.reset(now_ms)


def throttle_time_ms(observed: float, bound: float, window_ms: int) -> int:
    """Kafka's throttle time: the delay X that brings the observed rate O down to the quota
    T over the window W, ``O * W / (W + X) = T``, so ``X = (O - T) / T * W``, rounded as
    Java's ``Math.round`` (half up)."""
    return math.floor((observed - bound) / bound * window_ms + 0.5)
