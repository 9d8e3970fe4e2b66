"""What ``top`` shows, sans-IO: snapshots in, rates and rows out.

A :class:`Snapshot` is what one refresh learned — from the protocol (topics, end offsets,
sizes, groups, lag: any Kafka answers those) and, when the broker exposes them, from its
request metrics (per-API counts and the TotalTimeMs split, connections per listener, bytes in
and out: none of which the Kafka protocol carries). :class:`TopView` keeps the previous
snapshot and turns counters into rates over the time between the two, on whatever clock the
caller passes (trio's), so a test feeds it two snapshots and knows the answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

__all__ = ["TIME_SPLIT", "ApiTimes", "GroupRow", "Snapshot", "TopView", "TopicRow", "View"]

#: Kafka's split of TotalTimeMs, as the columns show it.
TIME_SPLIT = (
    ("queue", "RequestQueueTimeMs"),
    ("local", "LocalTimeMs"),
    ("remote", "RemoteTimeMs"),
    ("resp-queue", "ResponseQueueTimeMs"),
    ("send", "ResponseSendTimeMs"),
)


@attrs.frozen
class ApiTimes:
    """One API's request count so far and its times in ms (p50, p99 of the total; mean of each part)."""

    requests: int
    p50: float
    p99: float
    parts: Mapping[str, float]


@attrs.frozen
class TopicRow:
    name: str
    partitions: int
    size: int | None  # bytes on the leaders; None: the cluster has no DescribeLogDirs
    end_offset: int  # the sum of the partitions' high watermarks
    messages_per_s: float | None = None


@attrs.frozen
class GroupRow:
    group: str
    state: str
    members: int
    lag: int | None


@attrs.frozen
class Snapshot:
    at: float  # seconds on the caller's clock
    cluster_id: str | None
    controller: int
    brokers: int
    topics: tuple[TopicRow, ...]
    groups: tuple[GroupRow, ...]
    requests: Mapping[str, ApiTimes] | None = None  # None: the broker exposes no request metrics
    connections: Mapping[str, int] | None = None
    bytes_in: int | None = None
    bytes_out: int | None = None
    metrics_source: str = ""


@attrs.frozen
class View:
    """One refresh, ready to draw: the snapshot plus rates against the previous one."""

    snapshot: Snapshot
    requests_per_s: Mapping[str, float]
    bytes_in_per_s: float | None
    bytes_out_per_s: float | None
    topics: tuple[TopicRow, ...]

    def as_json(self) -> dict[str, Any]:
        s = self.snapshot
        return {
            "cluster_id": s.cluster_id,
            "controller": s.controller,
            "brokers": s.brokers,
            "topics": [attrs.asdict(t) for t in self.topics],
            "groups": [attrs.asdict(g) for g in s.groups],
            "requests": None
            if s.requests is None
            else {
                api: {
                    "requests": t.requests,
                    "per_s": self.requests_per_s.get(api),
                    "p50_ms": t.p50,
                    "p99_ms": t.p99,
                    **{f"{k}_ms": v for k, v in t.parts.items()},
                }
                for api, t in sorted(s.requests.items())
            },
            "connections": None if s.connections is None else dict(s.connections),
            "bytes_in_per_s": self.bytes_in_per_s,
            "bytes_out_per_s": self.bytes_out_per_s,
            "metrics_source": s.metrics_source,
        }


def _rate(new: float | None, old: float | None, seconds: float) -> float | None:
    if new is None or old is None or seconds <= 0:
        return None
    return max(0.0, (new - old) / seconds)


class TopView:
    """Feeds on snapshots; each :meth:`update` returns the :class:`View` to draw."""

    def __init__(self) -> None:
        self.previous: Snapshot | None = None

    def update(self, snapshot: Snapshot) -> View:
        before = self.previous
        self.previous = snapshot
        seconds = snapshot.at - before.at if before is not None else 0.0
        requests_per_s: dict[str, float] = {}
        if snapshot.requests is not None and before is not None and before.requests is not None:
            for api, times in snapshot.requests.items():
                old = before.requests.get(api)
                rate = _rate(times.requests, old.requests if old else 0, seconds)
                if rate is not None:
                    requests_per_s[api] = rate
        old_topics = {t.name: t for t in before.topics} if before is not None else {}
        topics = tuple(
            attrs.evolve(
                t,
                messages_per_s=_rate(t.end_offset, old_topics[t.name].end_offset, seconds)
                if t.name in old_topics
                else None,
            )
            for t in snapshot.topics
        )
        return View(
            snapshot,
            requests_per_s,
            _rate(snapshot.bytes_in, before.bytes_in if before else None, seconds),
            _rate(snapshot.bytes_out, before.bytes_out if before else None, seconds),
            topics,
        )
