"""The consumer's positions (a base of :class:`~trikafka.client.consumer.Consumer`).

A partition's position is the offset of the next record the application gets. Missing
positions are looked up before a fetch (:meth:`ConsumerPositions._update_positions`: the
committed offset, else ``auto.offset.reset``); fetched records wait in per-partition buffers
and the position moves as each is handed out (:meth:`_drain`); a position the broker refuses
as out of range is reset by ``auto.offset.reset`` (:meth:`_reset_out_of_range`). Kept apart so
the consumer class stays one screenful per responsibility.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from trikafka.client.consumer_fetch import (
    LeaderReader,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
)
from trikafka.client.consumer_protocol import TopicPartition
from trikafka.client.consumer_state import OffsetResetStrategy, SubscriptionState
from trikafka.client.fetcher import ConsumerRecord
from trikafka.client.group_session import GroupSession
from trikafka.client.serialization import RecordDeserializationError

if TYPE_CHECKING:
    from trikafka.client.group_consumer import ConsumerGroupSession

__all__ = ["ConsumerPositions"]

logger = logging.getLogger("trikafka.client.consumer")


class ConsumerPositions:
    subscriptions: SubscriptionState
    reader: LeaderReader
    group: GroupSession | ConsumerGroupSession | None
    _buffers: dict[TopicPartition, tuple[deque[ConsumerRecord], int]]
    _buffered_bytes: dict[TopicPartition, int]
    _decode: Callable[[ConsumerRecord], ConsumerRecord] | None  # the deserializers, if any

    async def _update_positions(self) -> None:
        missing = self.subscriptions.missing_positions()
        if not missing:
            return
        resets: dict[TopicPartition, OffsetResetStrategy] = {}
        need_committed = [tp for tp in missing if self.subscriptions.assignment[tp].reset is None]
        committed: Mapping[TopicPartition, int | None] = {}
        if need_committed and self.group is not None:
            committed = await self.group.offsets.committed(need_committed)
        for tp in missing:
            state = self.subscriptions.assignment.get(tp)
            if state is None or state.position is not None:
                continue  # revoked or seeked meanwhile
            if state.reset is not None:
                resets[tp] = state.reset
            elif committed.get(tp) is not None:
                state.position = committed[tp]
            else:
                resets[tp] = self.subscriptions.default_reset
        refused = [tp for tp, strategy in resets.items() if strategy is OffsetResetStrategy.NONE]
        if refused:
            raise NoOffsetForPartitionError(refused)
        if resets:
            offsets = await self.reader.list_offsets(resets)
            for tp, offset in offsets.items():
                state = self.subscriptions.assignment.get(tp)
                if state is not None and state.position is None:
                    state.position = offset
                    state.reset = None

    def _drain(self, limit: int) -> dict[TopicPartition, list[ConsumerRecord]]:
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        decode = self._decode
        taken = 0
        for tp in list(self._buffers):
            if taken >= limit:
                break
            if not self.subscriptions.is_fetchable(tp):
                continue
            records, next_offset = self._buffers[tp]
            state = self.subscriptions.assignment[tp]
            batch: list[ConsumerRecord] = []
            while records and taken < limit:
                record = records.popleft()
                if record.offset < state.position:  # type: ignore[operator]  # a fetched partition has one
                    continue
                if decode is not None:
                    try:
                        record = decode(raw := record)
                    except RecordDeserializationError:
                        records.appendleft(raw)  # the position stays on it (serialization.py)
                        if batch:
                            out[tp] = batch
                        if out:
                            return out  # the records before it first; the next poll raises
                        raise
                batch.append(record)
                taken += 1
                state.position = record.offset + 1
            if not records:
                del self._buffers[tp]
                self._buffered_bytes.pop(tp, None)
                state.position = max(state.position or 0, next_offset)
            if batch:
                out[tp] = batch
        return out

    def _reset_out_of_range(self, refused: Mapping[TopicPartition, int]) -> None:
        if not refused:
            return
        if self.subscriptions.default_reset is OffsetResetStrategy.NONE:
            raise OffsetOutOfRangeError(refused)
        for tp in refused:
            if tp in self.subscriptions.assignment:
                logger.info(
                    "%s: position %d out of range; resetting to %s",
                    tp,
                    refused[tp],
                    self.subscriptions.default_reset.value,
                )
                self.subscriptions.request_reset(tp, self.subscriptions.default_reset)
