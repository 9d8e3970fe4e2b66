"""The coordinators' settings: a small frozen record per coordinator, built once by
``server/wiring.py`` from the broker's config, so nothing in ``coordinator/`` takes (or
imports) the whole ``BrokerConfig``.

No field has a default: the defaults are the config's, and a record is built from one
(``server/wiring.py``: ``group_settings(config)`` and the like). Each field carries the name of
the ``BrokerConfig`` attribute it is copied from (the Kafka key with dots as underscores:
``group_max_size`` is ``group.max.size``), so a key is found under one name from the config
file to the machine that reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import attrs

__all__ = ["GroupConfigRules", "GroupSettings", "ShareSettings", "TransactionSettings"]


@attrs.frozen(kw_only=True)
class GroupSettings:
    """The group coordinator's keys: classic groups, KIP-848 consumer groups, offsets."""

    group_min_session_timeout_ms: int
    group_max_session_timeout_ms: int
    group_max_size: int
    group_initial_rebalance_delay_ms: int
    group_consumer_session_timeout_ms: int
    group_consumer_heartbeat_interval_ms: int
    group_consumer_max_size: int
    group_consumer_assignors: tuple[str, ...]
    group_consumer_regex_refresh_interval_ms: int
    group_consumer_migration_policy: str
    offset_metadata_max_bytes: int
    offsets_retention_minutes: int
    offsets_retention_check_interval_ms: int

    @property
    def upgrade_enabled(self) -> bool:
        """``group.consumer.migration.policy`` lets a classic group become a consumer group."""
        return self.group_consumer_migration_policy in ("upgrade", "bidirectional")

    @property
    def downgrade_enabled(self) -> bool:
        """``group.consumer.migration.policy`` lets a consumer group become a classic group."""
        return self.group_consumer_migration_policy in ("downgrade", "bidirectional")


@attrs.frozen(kw_only=True)
class TransactionSettings:
    """The transaction coordinator's keys."""

    transaction_max_timeout_ms: int
    offset_metadata_max_bytes: int


class GroupConfigRules(Protocol):
    """The GROUP config keys (``share.*``, ``consumer.*``) with one broker's defaults and bounds
    (``trikafka.config.share.GroupConfigRules``): what a coordinator resolves and checks a
    group's overrides with."""

    def effective(self, overrides: Mapping[str, str]) -> dict[str, Any]:
        """Every group key → its value for a group with ``overrides`` (ints as ints)."""
        ...

    def validate(self, overrides: Mapping[str, str | None]) -> dict[str, str]:
        """A group's complete new set of overrides, checked and normalized (ConfigError)."""
        ...


@attrs.frozen(kw_only=True)
class ShareSettings:
    """The share coordinator's keys (KIP-932) and the GROUP config rules it keeps overrides by."""

    group_configs: GroupConfigRules
    group_share_max_size: int
    group_share_max_share_sessions: int
