"""The consumer's reads from partition leaders: Fetch and ListOffsets (a thin Trio shell).

One Fetch per leader per round, sent concurrently, in an incremental fetch session per broker
(KIP-227, :mod:`~trikafka.client.fetch_session`): only partitions whose position moved are
named, and the broker answers only partitions with news. The
answers go through :func:`~trikafka.client.fetcher.decode_partition`; partition errors are
the Java consumer's: NOT_LEADER_OR_FOLLOWER and friends refresh metadata and retry,
OFFSET_OUT_OF_RANGE resets the position by ``auto.offset.reset`` (``none`` raises
:class:`OffsetOutOfRangeError` naming the partitions), anything else non-retriable is raised.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import attrs
import trio

from trikafka.client.client import KafkaClient
from trikafka.client.consumer_protocol import TopicPartition
from trikafka.client.consumer_state import OffsetResetStrategy
from trikafka.client.errors import (
    STALE_METADATA,
    KafkaError,
    UnknownTopicOrPartitionError,
    error_for,
)
from trikafka.client.fetch_session import FetchSessionHandler
from trikafka.client.fetcher import FetchedPartition, decode_partition
from trikafka.client.lifetime import open_service_nursery
from trikafka.errors import ErrorCode
from trikafka.protocol.registry import ApiKey

__all__ = ["FetchResult", "LeaderReader", "NoOffsetForPartitionError", "OffsetOutOfRangeError"]

logger = logging.getLogger(__name__)
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1


class OffsetOutOfRangeError(KafkaError):
    """The position is outside the log and ``auto.offset.reset`` is ``none``."""

    def __init__(self, partitions: Mapping[TopicPartition, int]) -> None:
        listed = ", ".join(f"{tp} at {offset}" for tp, offset in sorted(partitions.items()))
        super().__init__(ErrorCode.offset_out_of_range, f"positions out of range: {listed}")
        self.partitions = dict(partitions)


class NoOffsetForPartitionError(KafkaError):
    """No committed offset and ``auto.offset.reset`` is ``none``."""

    def __init__(self, partitions: Iterable[TopicPartition]) -> None:
        listed = ", ".join(str(tp) for tp in sorted(partitions))
        super().__init__(
            ErrorCode.offset_out_of_range,
            f"no committed offset for {listed} and auto.offset.reset is none",
            retriable=False,
        )
        self.partitions = set(partitions)


@attrs.frozen
class FetchResult:
    fetched: dict[TopicPartition, FetchedPartition]
    high_watermarks: dict[TopicPartition, int]
    out_of_range: dict[TopicPartition, int]  # partition → the position the broker refused
    sizes: dict[TopicPartition, int] = attrs.field(factory=dict)  # the record bytes each answered


async def send(client: KafkaClient, node_id: int, api_key: int, **fields: Any) -> Any:
    """``client.send``; when the client is closing because our scope is cancelled, the
    ``Cancelled`` wins over the "client is closed" error a not-yet-cancelled task would see."""
    try:
        return await client.send(node_id, api_key, **fields)
    except KafkaError:
        if client.closed:
            await trio.lowlevel.checkpoint()
        raise


class LeaderReader:
    def __init__(self, client: KafkaClient, config: Any) -> None:
        self.client = client
        self.read_committed = config["isolation.level"] == "read_committed"
        self.min_bytes = config["fetch.min.bytes"]
        self.max_bytes = config["fetch.max.bytes"]
        self.partition_max_bytes = config["max.partition.fetch.bytes"]
        self.check_crcs = True
        self.sessions: dict[int, FetchSessionHandler] = {}  # KIP-227, per broker

    async def _leaders(self, partitions: Iterable[TopicPartition]) -> dict[int, list[TopicPartition]]:
        """Partitions grouped by leader; unknown leaders trigger a metadata refresh."""
        by_leader: dict[int, list[TopicPartition]] = {}
        missing = False
        for tp in partitions:
            leader = self.client.cluster.leader_for(tp)
            if leader is None:
                missing = True
                continue
            by_leader.setdefault(leader, []).append(tp)
        if missing:
            self.client.cluster.add_interest({tp.topic for tp in partitions})
            self.client.cluster.request_update()
        return by_leader

    async def fetch(self, positions: Mapping[TopicPartition, int], max_wait_ms: int) -> FetchResult:
        """One Fetch round to every leader of ``positions`` (partition → fetch offset)."""
        result = FetchResult({}, {}, {})
        by_leader = await self._leaders(positions)
        if not by_leader:
            if positions:
                await self.client.refresh_metadata()
            return result

        async def one(node_id: int, tps: list[TopicPartition]) -> None:
            session = self.sessions.setdefault(node_id, FetchSessionHandler())
            session_id, epoch, named, forgotten = session.build({tp: positions[tp] for tp in tps})
            topics: dict[str, list[dict[Any, Any]]] = {}
            for tp in named:
                topics.setdefault(tp.topic, []).append(
                    {
                        "partition": tp.partition,
                        "fetch_offset": positions[tp],
                        "partition_max_bytes": self.partition_max_bytes,
                        "current_leader_epoch": -1,
                        "log_start_offset": -1,
                        "last_fetched_epoch": -1,
                    }
                )
            forget: dict[str, list[int]] = {}
            for tp in forgotten:
                forget.setdefault(tp.topic, []).append(tp.partition)
            answer = None
            try:
                answer = await send(
                    self.client,
                    node_id,
                    ApiKey.FETCH,
                    replica_id=-1,
                    max_wait=max_wait_ms,
                    min_bytes=self.min_bytes,
                    max_bytes=self.max_bytes,
                    isolation_level=1 if self.read_committed else 0,
                    session_id=session_id,
                    session_epoch=epoch,
                    topics=[{"topic": t, "partitions": p} for t, p in topics.items()],
                    forgotten_topics_data=[{"topic": t, "partitions": p} for t, p in forget.items()],
                    rack_id="",
                )
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                logger.info("fetch from broker %d failed (%s); retrying", node_id, exc)
                return
            finally:
                if answer is None:  # failed or cancelled after sending: the epochs may differ
                    session.reset()
            if not session.handle_response(getattr(answer, "error_code", 0), getattr(answer, "session_id", 0)):
                logger.info(
                    "fetch session with broker %d reset (%s)", node_id, ErrorCode(answer.error_code).name.upper()
                )
                return
            self._absorb(answer, positions, result)

        async with open_service_nursery("the consumer's fetch") as nursery:
            for node_id, tps in by_leader.items():
                nursery.start_soon(one, node_id, tps)
        return result

    def _absorb(self, answer: Any, positions: Mapping[TopicPartition, int], result: FetchResult) -> None:
        top = ErrorCode(getattr(answer, "error_code", 0))
        if top != ErrorCode.none:
            raise error_for(top, "Fetch")
        for topic in answer.responses:
            for p in topic.partitions:
                tp = TopicPartition(topic.topic, int(p.partition_index))
                if tp not in positions:
                    continue
                code = ErrorCode(p.error_code)
                if code == ErrorCode.none:
                    aborted = [(int(a.producer_id), int(a.first_offset)) for a in (p.aborted_transactions or ())]
                    result.fetched[tp] = decode_partition(
                        tp.topic, tp.partition, p.records, positions[tp],
                        read_committed=self.read_committed, aborted_transactions=aborted,
                        check_crcs=self.check_crcs,
                    )
                    result.high_watermarks[tp] = int(p.high_watermark)
                    result.sizes[tp] = len(p.records or b"")
                elif code == ErrorCode.offset_out_of_range:
                    result.out_of_range[tp] = positions[tp]
                elif code in STALE_METADATA or code.retriable:
                    self.client.cluster.request_update()
                else:
                    raise error_for(code, f"Fetch of {tp}")

    async def list_offsets(
        self, partitions: Mapping[TopicPartition, OffsetResetStrategy], *, attempts: int = 10
    ) -> dict[TopicPartition, int]:
        """Offsets for ``earliest``/``latest`` (the latter is the last stable offset for
        read_committed, as the broker answers it)."""
        wanted = dict(partitions)
        found: dict[TopicPartition, int] = {}
        for attempt in range(attempts):
            if not wanted:
                break
            by_leader = await self._leaders(wanted)
            if not by_leader:
                await self.client.refresh_metadata()
                continue
            for node_id, tps in by_leader.items():
                topics: dict[str, list[dict[Any, Any]]] = {}
                for tp in tps:
                    timestamp = EARLIEST_TIMESTAMP if wanted[tp] is OffsetResetStrategy.EARLIEST else LATEST_TIMESTAMP
                    topics.setdefault(tp.topic, []).append(
                        {"partition_index": tp.partition, "timestamp": timestamp, "current_leader_epoch": -1}
                    )
                try:
                    answer = await send(
                        self.client, node_id, ApiKey.LIST_OFFSETS, replica_id=-1,
                        isolation_level=1 if self.read_committed else 0,
                        topics=[{"name": t, "partitions": p} for t, p in topics.items()],
                    )
                except KafkaError as exc:
                    if not exc.retriable:
                        raise
                    continue
                for topic in answer.topics:
                    for p in topic.partitions:
                        tp = TopicPartition(topic.name, int(p.partition_index))
                        code = ErrorCode(p.error_code)
                        if code == ErrorCode.none and tp in wanted:
                            found[tp] = int(p.offset)
                            del wanted[tp]
                        elif code != ErrorCode.none and not code.retriable:
                            raise error_for(code, f"ListOffsets of {tp}")
                        else:
                            self.client.cluster.request_update()
            if wanted:
                await self.client.retry_sleep(attempt)
        if wanted:
            cluster = self.client.cluster
            missing = sorted(
                {tp.topic for tp in wanted if cluster.topic_error(tp.topic) == ErrorCode.unknown_topic_or_partition}
            )
            if missing:
                raise UnknownTopicOrPartitionError(
                    f"no offsets for {sorted(map(str, wanted))}: the cluster has no topic "
                    f"{', '.join(map(repr, missing))}"
                )
            raise KafkaError(
                ErrorCode.leader_not_available, f"no offsets for {sorted(map(str, wanted))}: no leader known"
            )
        return found
