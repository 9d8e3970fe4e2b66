"""Storage: partition logs of record batches, their segments, indexes, recovery and retention.

See :mod:`trikafka.log.log` for the interface, :mod:`trikafka.log.file` for the on-disk layout
and crash recovery, and :mod:`trikafka.log.manager` for the periodic work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trikafka.lazy_exports import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from trikafka.log.config import LogConfig
    from trikafka.log.file import FileLog
    from trikafka.log.log import AppendInfo, FetchData, FlushJob, Log
    from trikafka.log.manager import LogManager
    from trikafka.log.memory import MemoryLog

__all__ = [
    "AppendInfo",
    "FetchData",
    "FileLog",
    "FlushJob",
    "Log",
    "LogConfig",
    "LogManager",
    "MemoryLog",
]

#: name → its module: imported when the name is first looked up (PEP 562), so that importing
#: one module of the package (``trikafka.log.manager`` for an in-memory broker) does not import
#: the file log.
_LAZY = {
    "AppendInfo": "trikafka.log.log",
    "FetchData": "trikafka.log.log",
    "FileLog": "trikafka.log.file",
    "FlushJob": "trikafka.log.log",
    "Log": "trikafka.log.log",
    "LogConfig": "trikafka.log.config",
    "LogManager": "trikafka.log.manager",
    "MemoryLog": "trikafka.log.memory",
}


__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, globals())
