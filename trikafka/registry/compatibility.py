"""Compatibility levels and modes, and the check of a new schema against a subject's versions.

Confluent's levels: NONE; BACKWARD (the new schema reads data of the latest version) and
BACKWARD_TRANSITIVE (of every version); FORWARD (the latest reads the new's data) and
FORWARD_TRANSITIVE; FULL (both ways, the latest) and FULL_TRANSITIVE. BACKWARD is the
default. What "reads" means is the schema type's own rule (avro.py, json_schema.py,
protobuf.py). A schema of another type than the version it is checked against is
incompatible with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trikafka.registry.errors import invalid_compatibility_level, invalid_mode
from trikafka.registry.schemas import check_pair

__all__ = ["DEFAULT_LEVEL", "DEFAULT_MODE", "LEVELS", "MODES", "check_compatibility", "level_of", "mode_of"]

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")
MODES = ("READWRITE", "READONLY", "IMPORT")
DEFAULT_LEVEL = "BACKWARD"
DEFAULT_MODE = "READWRITE"


def level_of(value: Any) -> str:
    """A level named in a request (any case), or 42203."""
    if isinstance(value, str) and value.upper() in LEVELS:
        return value.upper()
    raise invalid_compatibility_level(value)


def mode_of(value: Any) -> str:
    if isinstance(value, str) and value.upper() in MODES:
        return value.upper()
    raise invalid_mode(value)


def check_compatibility(
    level: str, new: tuple[str, Any], previous: Sequence[tuple[int, str, Any]]
) -> list[str]:
    """Reasons ``new`` (type, parsed) breaks ``level`` against ``previous`` ((version, type,
    parsed), oldest first); empty when compatible."""
    if level == "NONE" or not previous:
        return []
    targets = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    new_type, new_parsed = new
    reasons: list[str] = []
    for version, old_type, old_parsed in reversed(targets):
        if old_type != new_type:
            reasons.append(
                "{errorType:'SCHEMA_TYPE_CHANGED', "
                f"description:'version {version} is {old_type}, the new schema {new_type}'}}"
            )
            continue
        found: list[str] = []
        if level.startswith(("BACKWARD", "FULL")):
            found += check_pair(new_type, new_parsed, old_parsed)
        if level.startswith(("FORWARD", "FULL")):
            found += check_pair(new_type, old_parsed, new_parsed)
        reasons += [f"{reason} (version {version})" for reason in found]
    return reasons
