"""The consumer's fetch pipeline: the next fetch is out while the application works.

Theory of operation (librdkafka's and aiokafka's prefetch, in Trio). A poll that hands out
records starts the next Fetch before it returns, in a task of the consumer's nursery
(:class:`~trikafka.client.pending.Pending`), so the broker answers — and the answer is decoded —
while the application processes the batch it just got. The next poll takes that answer (or
waits for it, up to its timeout) instead of sending a Fetch and waiting a round trip. At most
one Fetch round is out at a time (the broker's fetch sessions number them).

Each partition is fetched from where its data ends: the buffer's next offset if records are
buffered, else the position. A partition is fetched ahead only while it has fewer than
``queued.min.messages`` records buffered, and nothing is fetched ahead while the buffered
answers exceed ``queued.max.messages.kbytes`` (librdkafka's names and defaults);
``max.partition.fetch.bytes`` and ``fetch.max.bytes`` bound each answer.

An answer is taken only for what it was asked: a partition whose fetch offset is not the one
the Fetch named any more (a seek, a revocation, an assignment change, a pause — each drops the
partition's buffer) has its part of the answer dropped. Positions move only as records are
handed out, so a dropped prefetch loses nothing: it is fetched again from the position.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from typing import Any

import trio

from trikafka.client.consumer_fetch import FetchResult
from trikafka.client.consumer_positions import ConsumerPositions
from trikafka.client.consumer_protocol import TopicPartition
from trikafka.client.pending import Pending

__all__ = ["ConsumerPrefetch"]


class ConsumerPrefetch(ConsumerPositions):
    config: Any
    _nursery: trio.Nursery
    _fetch: Pending[FetchResult] | None
    _fetch_offsets: dict[TopicPartition, int]  # what the Fetch out named
    _buffered_bytes: dict[TopicPartition, int]

    def _drop_buffers(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self._buffers.pop(tp, None)
            self._buffered_bytes.pop(tp, None)

    def _next_fetch_offsets(self, *, ahead: bool) -> dict[TopicPartition, int]:
        """Partition → offset to fetch: every fetchable partition without buffered records,
        and (``ahead``) those whose buffer is short, while the buffers are within bounds."""
        subscriptions = self.subscriptions
        if ahead:
            if sum(self._buffered_bytes.values()) >= self.config["queued.max.messages.kbytes"] * 1024:
                return {}
            low = self.config["queued.min.messages"]
        out: dict[TopicPartition, int] = {}
        for tp, state in subscriptions.assignment.items():
            if state.position is None or not subscriptions.is_fetchable(tp):
                continue
            buffered = self._buffers.get(tp)
            if buffered is None:
                out[tp] = state.position
            elif ahead and len(buffered[0]) < low:
                out[tp] = buffered[1]
        return out

    def _start_fetch(self, offsets: dict[TopicPartition, int], max_wait_ms: int) -> None:
        self._fetch_offsets = offsets
        self._fetch = Pending(self._nursery, lambda: self.reader.fetch(offsets, max_wait_ms), "consumer-fetch")

    def _prefetch(self) -> None:
        """After handing records out: the next Fetch goes out while the application works."""
        if self._fetch is None and (offsets := self._next_fetch_offsets(ahead=True)):
            self._start_fetch(offsets, self.config["fetch.max.wait.ms"])

    async def _fetch_until(self, deadline: float) -> bool:
        """Take the Fetch out (or send one), waiting up to ``deadline``; False: nothing to fetch."""
        if self._fetch is None:
            offsets = self._next_fetch_offsets(ahead=False)
            if not offsets:
                return False
            # Rounded up: a fetch that may not wait while time remains would spin (time only
            # moves while something waits — always so under MockClock).
            remaining_ms = max(0, math.ceil((deadline - trio.current_time()) * 1000))
            self._start_fetch(offsets, min(self.config["fetch.max.wait.ms"], remaining_ms))
        pending = self._fetch
        assert pending is not None
        with trio.move_on_at(deadline):
            await pending.wait()  # cancelled or timed out: the Fetch goes on, the next poll takes it
        if pending.done:
            self._fetch = None
            self._absorb_fetch(pending.unwrap(), self._fetch_offsets)
        return True

    def _absorb_fetch(self, result: FetchResult, asked: dict[TopicPartition, int]) -> None:
        group = self.group
        subscriptions = self.subscriptions
        lost = group.pending_lost if group is not None else ()
        for tp, fetched in result.fetched.items():
            state = subscriptions.assignment.get(tp)
            if state is None or state.position is None or not subscriptions.is_fetchable(tp) or tp in lost:
                continue  # revoked, lost, paused or being reset while the fetch was out
            buffered = self._buffers.get(tp)
            if (buffered[1] if buffered is not None else state.position) != asked[tp]:
                continue  # seeked (or dropped and fetched again) meanwhile
            state.high_watermark = result.high_watermarks.get(tp, state.high_watermark)
            if buffered is None:
                if fetched.records:
                    self._buffers[tp] = (deque(fetched.records), fetched.next_offset)
                    self._buffered_bytes[tp] = result.sizes.get(tp, 0)
                else:
                    state.position = max(state.position, fetched.next_offset)
            elif fetched.next_offset > buffered[1]:
                buffered[0].extend(fetched.records)
                self._buffers[tp] = (buffered[0], fetched.next_offset)
                self._buffered_bytes[tp] = self._buffered_bytes.get(tp, 0) + result.sizes.get(tp, 0)
        refused = {}
        for tp, offset in result.out_of_range.items():
            state = subscriptions.assignment.get(tp)
            if state is not None and tp not in self._buffers and state.position == offset:
                refused[tp] = offset
        self._reset_out_of_range(refused)
