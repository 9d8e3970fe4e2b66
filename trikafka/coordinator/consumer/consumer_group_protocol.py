"""The values the consumer-group machine takes and gives (KIP-848), next to the classic
ones in :mod:`~trikafka.coordinator.group_protocol`.

A heartbeat is one :class:`ConsumerGroupHeartbeat` in and one :class:`HeartbeatResult` out,
plus effects: the same :class:`~trikafka.coordinator.group_protocol.ScheduleTimer` /
``CancelTimer`` values the classic machine uses, keyed by :class:`ConsumerTimerKey` (a
member's session; a member's revocation deadline, its rebalance timeout).
"""

from __future__ import annotations

import attrs

from trikafka.coordinator.consumer.consumer_group import Assignment
from trikafka.errors import ErrorCode

__all__ = [
    "ConsumerGroupHeartbeat",
    "ConsumerTimerKey",
    "HeartbeatResult",
    "JOIN",
    "REBALANCE",
    "REGEX",
    "SESSION",
    "SYNC",
]

SESSION = "consumer-session"
REBALANCE = "consumer-rebalance"
#: a classic member of a consumer group: told to rejoin, it must within its rebalance timeout
JOIN = "consumer-join"
#: a classic member of a consumer group: joined, it must send SyncGroup within its rebalance timeout
SYNC = "consumer-sync"
#: a group's regular expressions are resolved in the background (member id ""; see consumer_regex)
REGEX = "consumer-regex"


@attrs.frozen
class ConsumerGroupHeartbeat:
    """One ConsumerGroupHeartbeat, topic ids already resolved to names. ``None`` fields did
    not change since the member's last heartbeat (Kafka's convention)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None
    client_id: str = ""
    client_host: str = ""


@attrs.frozen
class HeartbeatResult:
    """ConsumerGroupHeartbeatResponse's fields; ``assignment`` None: not sent this time."""

    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


@attrs.frozen
class ConsumerTimerKey:
    kind: str  # SESSION, REBALANCE, JOIN, SYNC or REGEX
    group_id: str
    member_id: str
