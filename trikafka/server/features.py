"""Kafka's feature levels (KIP-584, KIP-1022) as this broker finalizes them.

What trikafka implements is finalized when it starts, as a Kafka 4.4 cluster formatted with its
defaults is: ``transaction.version`` 2 (KIP-890 part 2), ``group.version`` 1 (KIP-848, when
``group.coordinator.rebalance.protocols`` lists ``consumer``) and ``share.version`` 2 (KIP-932
share groups, 1; the dead-letter queue of KIP-1191, 2). ApiVersions (v3+) advertises them.

UpdateFeatures changes ``share.version`` as ``kafka-features.sh upgrade/downgrade --feature
share.version=N`` does: 0 turns share groups off — every share-group API then answers
UNSUPPORTED_VERSION, as Kafka's ``isShareGroupProtocolEnabled`` gate does — and 1 or 2 turns
them on. The other features are what the code is; asking for another level of them is
INVALID_UPDATE_VERSION. Each change bumps the finalized-features epoch. With a data directory
the finalized levels are kept in ``<first log dir>/trikafka-features.json`` (written atomically
before UpdateFeatures is answered), so a restart finalizes them again, as Kafka's metadata log
does. With ``kafka.version`` (a version profile) the supported ranges and levels are that
release's.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trikafka.config.kafka_versions import profile
from trikafka.errors import ConfigError, ErrorCode, KafkaProtocolError
from trikafka.security.files import write_json_atomically

__all__ = ["FEATURES_FILE", "SHARE_VERSION", "Features", "UpgradeType", "require_share_groups"]

log = logging.getLogger("trikafka.server")

FEATURES_FILE = "trikafka-features.json"

SHARE_VERSION = "share.version"


class UpgradeType:
    """UpdateFeatures v1+'s upgrade types (v0: allow_downgrade → SAFE_DOWNGRADE)."""

    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3


class Features:
    """The supported ranges and finalized levels; ``epoch`` bumps on every change."""

    def __init__(self, config: Any = None) -> None:
        self.epoch = 1
        #: Where the finalized levels are kept (None: in memory only).
        log_dirs = getattr(config, "log_dirs", None)
        self.path: Path | None = Path(log_dirs[0]) / FEATURES_FILE if log_dirs else None
        release = getattr(config, "kafka_version", None)
        if release is not None:  # kafka.version: that release's features, as it finalized them
            found = profile(release, {})
            self.supported: dict[str, tuple[int, int]] = dict(found.supported_features)
            self.levels: dict[str, int] = dict(found.finalized_features)
        else:
            consumer = config is None or "consumer" in config.group_coordinator_rebalance_protocols
            #: feature → (min, max) this broker supports
            self.supported = {"transaction.version": (0, 2), SHARE_VERSION: (0, 2)}
            self.levels = {"transaction.version": 2, SHARE_VERSION: 2}
            if consumer:
                self.supported["group.version"] = (0, 1)
                self.levels["group.version"] = 1
        if self.path is not None and self.path.exists():
            self._load(self.path)

    def _load(self, path: Path) -> None:
        """The levels UpdateFeatures finalized before the restart, where still supported."""
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
            stored = {str(name): int(level) for name, level in document["levels"].items()}
            epoch = int(document.get("epoch", 1))
        except (OSError, ValueError, KeyError, AttributeError, TypeError) as exc:
            raise ConfigError(str(path), "[file]", f"unreadable feature levels: {exc}") from None
        for name, level in stored.items():
            lo, hi = self.supported.get(name, (0, -1))
            if lo <= level <= hi:
                self.levels[name] = level
            else:
                log.warning("%s: %s=%d is outside what this broker supports; kept at %d",
                            path, name, level, self.levels.get(name, 0))
        self.epoch = max(self.epoch, epoch)

    @property
    def share_groups_enabled(self) -> bool:
        """Kafka's ``ShareVersion.supportsShareGroups``: ``share.version`` 1 or more."""
        return self.levels.get(SHARE_VERSION, 0) >= 1

    def finalized(self) -> Mapping[str, int]:
        """Levels above 0 (Kafka lists no feature finalized at 0)."""
        return {name: level for name, level in self.levels.items() if level > 0}

    def check(self, name: str, level: int, upgrade_type: int) -> tuple[ErrorCode, str | None]:
        """Kafka's controller checks of one update (QuorumFeatures / FeatureControlManager)."""
        if name not in self.supported:
            return ErrorCode.invalid_update_version, f"Invalid update version {level} for feature {name}. " \
                "The controller does not support the given feature."
        lo, hi = self.supported[name]
        current = self.levels.get(name, 0)
        if upgrade_type not in (UpgradeType.UPGRADE, UpgradeType.SAFE_DOWNGRADE, UpgradeType.UNSAFE_DOWNGRADE):
            return ErrorCode.invalid_update_version, f"Unknown upgrade type {upgrade_type}."
        if not lo <= level <= hi:
            return ErrorCode.invalid_update_version, f"Invalid update version {level} for feature {name}. " \
                f"Local controller supports versions {lo}-{hi}."
        if level < current and upgrade_type == UpgradeType.UPGRADE:
            return ErrorCode.invalid_update_version, f"Invalid update version {level} for feature {name}. " \
                "Can't downgrade the version of this feature without setting the upgrade type to " \
                "either safe or unsafe downgrade."
        if level > current and upgrade_type != UpgradeType.UPGRADE:
            return ErrorCode.invalid_update_version, f"Invalid update version {level} for feature {name}. " \
                "Can't downgrade to a newer version."
        if name != SHARE_VERSION and level != current:
            return ErrorCode.invalid_update_version, f"Invalid update version {level} for feature {name}. " \
                f"trikafka implements {name} {current} and cannot change it."
        return ErrorCode.none, None

    def apply(self, updates: Mapping[str, int]) -> None:
        changed = {name: level for name, level in updates.items() if self.levels.get(name, 0) != level}
        if changed:
            self.levels.update(changed)
            self.epoch += 1
            if self.path is not None:  # on disk before UpdateFeatures is answered
                write_json_atomically(self.path, {"version": 1, "epoch": self.epoch, "levels": self.levels})


def require_share_groups(features: Features) -> None:
    """Kafka's ``isShareGroupProtocolEnabled`` gate, before any ACL check: UNSUPPORTED_VERSION."""
    if not features.share_groups_enabled:
        raise KafkaProtocolError(
            "Share groups are disabled: share.version is 0 (kafka-features.sh upgrade --feature share.version=1 "
            "turns them on).", ErrorCode.unsupported_version)
