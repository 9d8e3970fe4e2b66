"""BROKER_LOGGER resources (Kafka's dynamic log levels, ``kafka-configs.sh --entity-type
broker-loggers``): DescribeConfigs lists the broker's loggers with their levels, and
IncrementalAlterConfigs SET / DELETE changes one at once.

The loggers are the ``trikafka`` loggers the process has made, and ``root``; Kafka's level names
map onto Python's (``WARN`` is ``WARNING``, ``FATAL`` is ``CRITICAL``, ``TRACE`` one step below
``DEBUG``). As in Kafka, a level set this way lives as long as the process (it is not part of
the metadata a restart keeps). Kafka's checks and messages: an unknown logger is INVALID_CONFIG
``Logger <name> does not exist!``; a level outside Kafka's six INVALID_CONFIG; DELETE of ``root``
and APPEND / SUBTRACT INVALID_REQUEST.
"""

from __future__ import annotations

import logging
from typing import Any

from trikafka.errors import ErrorCode, KafkaProtocolError

__all__ = ["BROKER_LOGGER_RESOURCE", "BROKER_LOGGER_SOURCE", "alter_loggers", "logger_entries"]

BROKER_LOGGER_RESOURCE = 8  # ConfigResource.Type.BROKER_LOGGER
BROKER_LOGGER_SOURCE = 6  # DYNAMIC_BROKER_LOGGER_CONFIG
ROOT = "root"
TRACE = logging.DEBUG - 5
#: Kafka's level names → Python's levels.
LEVELS = {"TRACE": TRACE, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
          "ERROR": logging.ERROR, "FATAL": logging.CRITICAL}
_NAMES = {level: name for name, level in LEVELS.items()}
_SET, _DELETE, _APPEND, _SUBTRACT = 0, 1, 2, 3


def _loggers() -> dict[str, logging.Logger]:
    found = {
        name: logger for name, logger in logging.root.manager.loggerDict.items()
        if isinstance(logger, logging.Logger) and (name == "trikafka" or name.startswith("trikafka."))
    }
    return {ROOT: logging.getLogger(), **dict(sorted(found.items()))}


def _level_name(logger: logging.Logger) -> str:
    level = logger.getEffectiveLevel()
    if level in _NAMES:
        return _NAMES[level]
    return next((name for name, value in sorted(LEVELS.items(), key=lambda item: item[1]) if value >= level), "FATAL")


def logger_entries(keys: Any = None) -> list[dict[str, Any]]:
    return [
        {
            "name": name, "value": _level_name(logger), "read_only": False, "config_source": BROKER_LOGGER_SOURCE,
            "is_sensitive": False, "synonyms": [], "config_type": 2, "documentation": None, "is_default": False,
        }
        for name, logger in _loggers().items()
        if keys is None or name in keys
    ]


def alter_loggers(changes: Any, validate_only: bool) -> None:
    """IncrementalAlterConfigs' changes of a BROKER_LOGGER resource: all checked, then applied."""
    loggers = _loggers()
    planned: list[tuple[logging.Logger, int]] = []
    for change in changes:
        name, op, value = change.name, change.config_operation, change.value
        if op in (_APPEND, _SUBTRACT):
            raise KafkaProtocolError(
                f"{'APPEND' if op == _APPEND else 'SUBTRACT'} operation is not allowed for the BROKER_LOGGER resource",
                ErrorCode.invalid_request,
            )
        if name not in loggers:
            raise KafkaProtocolError(f"Logger {name} does not exist!", ErrorCode.invalid_config)
        if op == _SET:
            if value not in LEVELS:
                raise KafkaProtocolError(
                    f"Cannot set the log level of {name} to {value} as it is not a supported log level. "
                    f"Valid log levels are {', '.join(sorted(LEVELS))}",
                    ErrorCode.invalid_config,
                )
            planned.append((loggers[name], LEVELS[value]))
        elif op == _DELETE:
            if name == ROOT:
                raise KafkaProtocolError(
                    "Removing the log level of the root logger is not allowed", ErrorCode.invalid_request
                )
            planned.append((loggers[name], logging.NOTSET))  # the parent's level again
        else:
            raise KafkaProtocolError(f"Unknown config operation {op}", ErrorCode.invalid_request)
    if validate_only:
        return
    for logger, level in planned:
        logger.setLevel(level)
    if planned:
        logging.getLogger("trikafka.server").info(
            "log levels changed: %s", ", ".join(f"{lg.name}={_level_name(lg)}" for lg, _ in planned))
