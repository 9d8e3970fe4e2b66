"""What the request path may ask of a partition's log, and of the set of logs it reads from.

Two kinds of log serve requests: a broker's own :class:`~trikafka.log.log.Log` (memory or
files), and an in-process cluster's :class:`~trikafka.cluster.replication.ReplicatedLog` (the
leader's log, kept in step with its followers). The ReplicaManager and the API handlers are
written against :class:`PartitionLog`, which both satisfy, and hold their logs through
:class:`PartitionLogs`, which both :class:`~trikafka.log.manager.LogManager` and the cluster's
``ClusterLogManager`` satisfy. Both are structural (``typing.Protocol``): neither log class
inherits from them, and ``tests/log/test_partition_log.py`` checks that both fit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from pathlib import Path

    from trikafka.log.config import LogConfig
    from trikafka.log.log import AppendInfo, EndOffset, FetchData
    from trikafka.log.segment import Segment
    from trikafka.log.transactions import AbortedTxn, TransactionTracker
    from trikafka.protocol.records import BatchHeader

__all__ = ["PartitionLog", "PartitionLogs"]


@runtime_checkable
class PartitionLog(Protocol):
    """One partition's log as the request path reads and appends to it."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def name(self) -> str: ...

    @property
    def config(self) -> LogConfig: ...

    @property
    def closed(self) -> bool: ...

    #: The high watermark and the last stable offset, awaitable (long polls wait on them).
    @property
    def high_watermark(self) -> EndOffset: ...

    @property
    def last_stable_offset(self) -> EndOffset: ...

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    def flush(self) -> None:
        """Make everything appended so far durable (fsync)."""

    @property
    def size_in_bytes(self) -> int: ...

    @property
    def segments(self) -> tuple[Segment, ...]: ...

    @property
    def max_timestamp(self) -> int: ...

    @property
    def offset_of_max_timestamp(self) -> int: ...

    @property
    def flush_messages_due(self) -> bool: ...

    @property
    def transactions(self) -> TransactionTracker: ...

    def append(
        self,
        batches: bytearray | bytes | memoryview,
        *,
        leader_epoch: int,
        log_append_time_ms: int | None = None,
        flush_inline: bool = True,
        validated: list[BatchHeader] | None = None,
    ) -> AppendInfo: ...

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        min_one_batch: bool = True,
        max_offset: int | None = None,
        file_slices: bool = False,
    ) -> FetchData: ...

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None: ...

    def delete_records_before(self, offset: int) -> int: ...

    def aborted_transactions(self, start: int, end: int) -> list[AbortedTxn]: ...


@runtime_checkable
class PartitionLogs(Protocol):
    """The logs one ReplicaManager reads from: a broker's LogManager, or a cluster's view of
    every broker's replicas."""

    #: Where the logs live; None for in-memory logs.
    @property
    def log_dirs(self) -> Sequence[str | Path] | None: ...

    @property
    def logs(self) -> Mapping[tuple[str, int], PartitionLog]: ...

    def get_log(self, topic: str, partition: int) -> PartitionLog | None: ...

    def create_logs(self, topic: str, partitions: Iterable[int], config: LogConfig | None = None) -> None: ...

    def update_topic_config(self, topic: str, config: LogConfig) -> None: ...

    def delete_log(self, topic: str, partition: int) -> bool: ...

    async def flush_log(self, log: PartitionLog) -> None: ...
