"""Storage: partition logs of record batches, their segments, indexes, recovery and retention.

See :mod:`trikafka.log.log` for the interface, :mod:`trikafka.log.file` for the on-disk layout
and crash recovery, and :mod:`trikafka.log.manager` for the periodic work.
"""

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
