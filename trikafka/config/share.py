"""Share groups' configs (KIP-932): the broker's ``group.share.*`` keys and the per-group
``share.*`` keys of GROUP config resources, with Kafka's names, defaults and bounds.

A group config (IncrementalAlterConfigs on a GROUP resource) overrides the broker's default
for that one group; the ones with a broker min/max (session timeout, heartbeat interval,
record lock duration) must lie between them, as Kafka's ``GroupConfig.validate`` checks.
``share.auto.offset.reset`` is ``latest``, ``earliest`` or ``by_duration:<ISO-8601 duration>``
(``by_duration:PT1H``: the first record of the last hour). The consumer-group keys Kafka has
as group configs (``consumer.session.timeout.ms``, ``consumer.heartbeat.interval.ms``) are here
too, bounded by the broker's ``group.consumer.min/max.*``; the KIP-848 coordinator reads them.
Kafka's keys of what trikafka does not build (``consumer.assignment.interval.ms``, the
``*.assignor.offload.enable`` keys, ``share.renew.acknowledge.enable``, every ``streams.*`` key:
trikafka has no streams groups) are refused with INVALID_CONFIG saying so, never stored and
ignored.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from trikafka.config.fields import int_bounds, int_field
from trikafka.config.topics import INT32_MAX
from trikafka.errors import ConfigError

__all__ = [
    "GROUP_CONFIG_KEYS",
    "GroupConfigRules",
    "GroupConfigSpec",
    "NOT_BUILT_GROUP_KEYS",
    "ShareGroupKeys",
    "check_share_group_keys",
    "effective_group_configs",
    "parse_duration_ms",
    "validate_group_configs",
]


def check_share_group_keys(config: Any, attribute: attrs.Attribute, value: Any) -> None:
    """Kafka's GroupCoordinatorConfig rules across the ``group.share.*`` keys."""
    for name in ("heartbeat.interval.ms", "session.timeout.ms", "record.lock.duration.ms"):
        attr = name.replace(".", "_")
        lo, default, hi = (getattr(config, f"group_share_min_{attr}"), getattr(config, f"group_share_{attr}"),
                           getattr(config, f"group_share_max_{attr}"))
        if not lo <= default <= hi:
            raise ConfigError(f"group.share.{name}", default,
                              f"a value between group.share.min.{name} ({lo}) and group.share.max.{name} ({hi})")
    if config.group_share_heartbeat_interval_ms >= config.group_share_session_timeout_ms:
        raise ConfigError("group.share.heartbeat.interval.ms", config.group_share_heartbeat_interval_ms,
                          f"less than group.share.session.timeout.ms ({config.group_share_session_timeout_ms})")



@attrs.frozen(kw_only=True)
class ShareGroupKeys:
    """The broker's ``group.share.*`` keys (KIP-932, Kafka's names, defaults and bounds): a base
    of :class:`trikafka.config.BrokerConfig`, which holds every other key."""

    group_share_session_timeout_ms: int = int_field(
        "group.share.session.timeout.ms",
        45000,
        "A share-group member missing heartbeats this long is removed.",
        1,
        INT32_MAX,
    )
    group_share_min_session_timeout_ms: int = int_field(
        "group.share.min.session.timeout.ms", 45000, "Lower bound of share.session.timeout.ms.", 1, INT32_MAX
    )
    group_share_max_session_timeout_ms: int = int_field(
        "group.share.max.session.timeout.ms", 60000, "Upper bound of share.session.timeout.ms.", 1, INT32_MAX
    )
    group_share_heartbeat_interval_ms: int = int_field(
        "group.share.heartbeat.interval.ms", 5000, "Heartbeat interval given to share-group members.", 1, INT32_MAX
    )
    group_share_min_heartbeat_interval_ms: int = int_field(
        "group.share.min.heartbeat.interval.ms", 5000, "Lower bound of share.heartbeat.interval.ms.", 1, INT32_MAX
    )
    group_share_max_heartbeat_interval_ms: int = int_field(
        "group.share.max.heartbeat.interval.ms", 15000, "Upper bound of share.heartbeat.interval.ms.", 1, INT32_MAX
    )
    group_share_record_lock_duration_ms: int = int_field(
        "group.share.record.lock.duration.ms",
        30000,
        "How long a record acquired by a share consumer stays locked to it.",
        1,
        INT32_MAX,
    )
    group_share_min_record_lock_duration_ms: int = int_field(
        "group.share.min.record.lock.duration.ms", 15000, "Lower bound of share.record.lock.duration.ms.", 1, INT32_MAX
    )
    group_share_max_record_lock_duration_ms: int = attrs.field(
        default=60000,
        validator=[int_bounds(1, INT32_MAX)[1], check_share_group_keys],
        metadata={
            "key": "group.share.max.record.lock.duration.ms",
            "parse": int_bounds(1, INT32_MAX)[0],
            "doc": "Upper bound of share.record.lock.duration.ms.",
        },
    )
    group_share_delivery_count_limit: int = int_field(
        "group.share.delivery.count.limit", 5, "Deliveries after which an unaccepted record is archived.", 2, 10
    )
    group_share_partition_max_record_locks: int = int_field(
        "group.share.partition.max.record.locks", 2000, "In-flight records per share partition.", 100, 10000
    )
    group_share_max_size: int = int_field("group.share.max.size", 200, "Members one share group may have.", 10, 1000)
    group_share_assignment_interval_ms: int = int_field(
        "group.share.assignment.interval.ms",
        1000,
        "Least time between two target assignments of a share group (Kafka 4.3).",
        0,
        INT32_MAX,
    )
    group_share_max_share_sessions: int = int_field(
        "group.share.max.share.sessions", 2000, "Share sessions this broker keeps open.", 1, INT32_MAX
    )


_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", re.IGNORECASE)


def parse_duration_ms(text: str) -> int:
    """An ISO-8601 duration as Java's ``Duration.parse`` reads it (``P1D``, ``PT1H30M``) → ms."""
    match = _DURATION.fullmatch(text.strip())
    if match is None or text.strip().upper() in ("P", "PT") or text.strip().upper().endswith("T"):
        raise ValueError(text)
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return int(((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000)


def _reset(value: str) -> str:
    lowered = value.strip().lower()
    if lowered in ("latest", "earliest"):
        return lowered
    if lowered.startswith("by_duration:"):
        duration = value.strip()[len("by_duration:"):]
        try:
            if parse_duration_ms(duration) < 0:
                raise ValueError(duration)
        except ValueError:
            raise ValueError("by_duration: needs an ISO-8601 duration such as PT1H or P1D") from None
        return "by_duration:" + duration
    raise ValueError("allowed values are latest, earliest and by_duration:<ISO-8601 duration>")


def _isolation(value: str) -> str:
    lowered = value.strip().lower()
    if lowered not in ("read_uncommitted", "read_committed"):
        raise ValueError("allowed values are read_uncommitted and read_committed")
    return lowered


def _boolean(value: str) -> str:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError("allowed values are true and false")
    return lowered


def _dlq_topic(value: str) -> str:
    name = value.strip()
    if name.startswith("__"):
        raise ValueError("an internal topic (a name starting with __) cannot be a dead-letter queue")
    return name


@attrs.frozen
class GroupConfigSpec:
    key: str
    kind: str  # as DescribeConfigs types it: int, string, boolean
    default: Callable[[Any], Any]  # BrokerConfig → the default
    bounds: Callable[[Any], tuple[int, int]] | None = None  # BrokerConfig → (min, max)
    parse: Callable[[str], str] | None = None
    doc: str = ""
    broker_key: str | None = None  # the broker-level synonym (Kafka's ALL_GROUP_CONFIG_SYNONYMS)
    bound_keys: tuple[str, str] | None = None  # the broker keys of its min and max


def _int_spec(
    key: str, broker: str, doc: str, bounded: bool = True, lo: int = 1, hi: int = 2**31 - 1
) -> GroupConfigSpec:
    attr = broker.replace(".", "_")
    kind = "group_share_" if attr.startswith("group_share_") else "group_consumer_"

    def bounds(config: Any) -> tuple[int, int]:
        if bounded:
            low, high = attr.replace(kind, kind + "min_"), attr.replace(kind, kind + "max_")
            return getattr(config, low), getattr(config, high)
        return lo, hi

    prefix = kind.replace("_", ".")
    names = (broker.replace(prefix, prefix + "min."), broker.replace(prefix, prefix + "max.")) if bounded else None
    return GroupConfigSpec(key, "int", lambda c: getattr(c, attr), bounds, None, doc, broker, names)


#: The per-group keys (Kafka's GroupConfig) trikafka honours, in DescribeConfigs order.
GROUP_CONFIG_KEYS: dict[str, GroupConfigSpec] = {
    s.key: s
    for s in (
        _int_spec(
            "consumer.heartbeat.interval.ms",
            "group.consumer.heartbeat.interval.ms",
            "Heartbeat interval given to the consumer group's members (KIP-848).",
        ),
        _int_spec(
            "consumer.session.timeout.ms",
            "group.consumer.session.timeout.ms",
            "A consumer-group member (KIP-848) missing heartbeats this long is removed.",
        ),
        _int_spec("share.session.timeout.ms", "group.share.session.timeout.ms", "Share-group member session timeout."),
        _int_spec(
            "share.heartbeat.interval.ms",
            "group.share.heartbeat.interval.ms",
            "Heartbeat interval given to the share group's members.",
        ),
        _int_spec(
            "share.record.lock.duration.ms",
            "group.share.record.lock.duration.ms",
            "How long an acquired record stays locked to its member.",
        ),
        _int_spec(
            "share.delivery.count.limit",
            "group.share.delivery.count.limit",
            "Deliveries after which an unaccepted record is archived.",
            False,
            2,
            10,
        ),
        _int_spec(
            "share.partition.max.record.locks",
            "group.share.partition.max.record.locks",
            "In-flight records per share partition.",
            False,
            100,
            10000,
        ),
        _int_spec(
            "share.assignment.interval.ms",
            "group.share.assignment.interval.ms",
            "Least time between two target assignments.",
            False,
            0,
        ),
        GroupConfigSpec(
            "share.auto.offset.reset",
            "string",
            lambda c: "latest",
            None,
            _reset,
            "Where a share partition with no state starts: latest, earliest, by_duration:<ISO-8601>.",
        ),
        GroupConfigSpec(
            "share.isolation.level",
            "string",
            lambda c: "read_uncommitted",
            None,
            _isolation,
            "read_committed delivers only committed transactional records.",
        ),
        GroupConfigSpec(
            "errors.deadletterqueue.topic.name",
            "string",
            lambda c: "",
            None,
            _dlq_topic,
            "Topic archived records are written to (KIP-1191); empty: none.",
        ),
        GroupConfigSpec(
            "errors.deadletterqueue.copy.record.enable",
            "boolean",
            lambda c: "false",
            None,
            _boolean,
            "Copy the archived record's key and value into the dead-letter record.",
        ),
    )
}


_STREAMS = "streams groups (KIP-1071) are not served by trikafka, so no group of that kind can exist"
#: Kafka 4.4's group configs trikafka does not build: key → why (refused, never stored).
NOT_BUILT_GROUP_KEYS: dict[str, str] = {
    "consumer.assignment.interval.ms": "not built: trikafka computes a consumer group's target assignment at once",
    "consumer.assignor.offload.enable": "not built: trikafka runs the assignors inline",
    "share.assignor.offload.enable": "not built: trikafka runs the assignor inline",
    "share.renew.acknowledge.enable": "not built: RENEW is always allowed at ShareAcknowledge/ShareFetch v2",
    **{f"streams.{name}": _STREAMS for name in (
        "session.timeout.ms", "heartbeat.interval.ms", "num.standby.replicas", "initial.rebalance.delay.ms",
        "assignment.interval.ms", "assignor.offload.enable", "task.offset.interval.ms", "num.warmup.replicas",
        "acceptable.recovery.lag")},
}


@attrs.frozen
class GroupConfigRules:
    """The GROUP config keys with one broker's defaults and bounds: what the share coordinator
    (``coordinator/settings.py``) resolves and checks a group's overrides with, built once by
    the wiring, without the whole config."""

    defaults: Mapping[str, Any]
    bounds: Mapping[str, tuple[int, int]]

    @classmethod
    def of(cls, broker: Any) -> GroupConfigRules:
        """The rules under ``broker`` (a BrokerConfig)."""
        return cls(
            {key: spec.default(broker) for key, spec in GROUP_CONFIG_KEYS.items()},
            {key: spec.bounds(broker) for key, spec in GROUP_CONFIG_KEYS.items() if spec.bounds is not None},
        )

    def effective(self, overrides: Mapping[str, str]) -> dict[str, Any]:
        """Every group key → its value for a group with ``overrides`` (ints as ints)."""
        out: dict[str, Any] = {}
        for key, spec in GROUP_CONFIG_KEYS.items():
            raw = overrides.get(key)
            value = raw if raw is not None else self.defaults[key]
            out[key] = int(value) if spec.kind == "int" else value
        return out

    def validate(self, overrides: Mapping[str, str | None]) -> dict[str, str]:
        """A group's complete new set of overrides, checked and normalized; ConfigError names
        the key, the value and what is allowed."""
        out: dict[str, str] = {}
        for key, value in overrides.items():
            if value is None:
                continue
            spec = GROUP_CONFIG_KEYS.get(key)
            if spec is None and key in NOT_BUILT_GROUP_KEYS:
                why = NOT_BUILT_GROUP_KEYS[key]
                raise ConfigError(key, value, f"a group config of Kafka's that trikafka refuses: {why}")
            if spec is None:
                known = ", ".join(GROUP_CONFIG_KEYS)
                raise ConfigError(key, value, f"an unknown group config (trikafka knows {known})")
            if spec.kind == "int":
                lo, hi = self.bounds.get(key, (0, 2**31 - 1))
                try:
                    number = int(value.strip())
                except ValueError:
                    raise ConfigError(key, value, f"an integer in [{lo}, {hi}] is required") from None
                if not lo <= number <= hi:
                    between = f" (between {spec.bound_keys[0]} and {spec.bound_keys[1]})" if spec.bound_keys else ""
                    raise ConfigError(key, value, f"an integer in [{lo}, {hi}] is required{between}")
                out[key] = str(number)
            else:
                try:
                    out[key] = spec.parse(value) if spec.parse else value
                except ValueError as exc:
                    raise ConfigError(key, value, str(exc)) from None
        self._check_intervals(out)
        return out

    def _check_intervals(self, out: Mapping[str, str]) -> None:
        """Kafka's GroupConfig rule: a session timeout above the heartbeat interval, each key
        taking the group's value or the broker's default."""
        for kind in ("consumer", "share"):
            if f"{kind}.session.timeout.ms" not in out and f"{kind}.heartbeat.interval.ms" not in out:
                continue
            effective = self.effective(out)
            session, interval = effective[f"{kind}.session.timeout.ms"], effective[f"{kind}.heartbeat.interval.ms"]
            if session <= interval:
                raise ConfigError(f"{kind}.session.timeout.ms", str(session),
                                  f"greater than {kind}.heartbeat.interval.ms ({interval})")


def validate_group_configs(overrides: Mapping[str, str | None], broker: Any) -> dict[str, str]:
    """:meth:`GroupConfigRules.validate` under ``broker``'s defaults and bounds."""
    return GroupConfigRules.of(broker).validate(overrides)


def effective_group_configs(overrides: Mapping[str, str], broker: Any) -> dict[str, Any]:
    """:meth:`GroupConfigRules.effective` under ``broker``'s defaults."""
    return GroupConfigRules.of(broker).effective(overrides)
