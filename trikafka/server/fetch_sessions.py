"""Incremental fetch sessions (KIP-227): a sans-IO cache and the three kinds of fetch context.

Why. Without sessions a consumer of 100 partitions names all 100 in every Fetch and the broker
answers all 100, data or not. With a session the broker remembers the partitions and what it
last told the client; the client then sends only partitions whose fetch position changed, and
the broker answers only partitions with news (records, a moved high watermark or log start
offset, an error). An idle consumer's poll becomes a few dozen bytes each way.

The rules are Kafka's (``FetchSession.scala``):

* A request's ``(session_id, session_epoch)`` is its fetch metadata. Epoch 0 (INITIAL) or -1
  (FINAL) is a *full* fetch: any session it names is closed; epoch 0 then tries to create a new
  session from the request's partitions (the answer carries its id, or 0 when the cache has no
  room), epoch -1 stays sessionless. Fetch v0–v6 have no session fields: always sessionless.
* Any other epoch is *incremental*: an unknown id gets FETCH_SESSION_ID_NOT_FOUND, a wrong epoch
  INVALID_FETCH_SESSION_EPOCH, a session created with topic ids used without them (or the
  reverse) FETCH_SESSION_TOPIC_ID_ERROR. Otherwise the request's partitions are added or
  updated, ``forgotten_topics_data`` removed, the epoch advances (wrapping to 1 after
  2**31-1), and every partition of the session is read; the answer keeps only partitions with
  records, a changed high watermark or log start offset, or an error. Partitions that returned
  records move to the end of the session's order, so a big partition cannot starve the others
  of the response's ``max_bytes``.
* A session left empty by forgotten partitions is closed and the fetch answered sessionless.
* The cache holds ``max.incremental.fetch.session.cache.slots`` sessions. With no free slot a
  new session may evict: first the least recently used one if it was idle more than
  ``eviction_ms`` (Kafka's fixed 120 s); else, when at least one session is "evictable", the
  smallest by (privileged, partition count, id), provided the newcomer sorts after it (a
  privileged newcomer, or one with more partitions: Kafka compares ``(privileged, size, 0)``). A
  session becomes evictable by everyone once it is older than ``eviction_ms`` at a touch, and
  evictable by privileged newcomers (followers, ``replica_id >= 0``) at once when it is not
  itself privileged — both judged at its last use, as Kafka's cache does.

A delayed (long-poll) fetch builds its answer when it completes; an incremental context then
checks that the session's epoch is still the one it set, so two requests racing on one session
cannot both advance it (the loser gets INVALID_FETCH_SESSION_EPOCH).

This module does no I/O and reads no clock: ``now_ms`` is passed in and the session ids come
from an injectable :class:`random.Random`, so tests are deterministic.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import attrs

from trikafka.errors import ErrorCode

if TYPE_CHECKING:
    from trikafka.clock import Clock

__all__ = [
    "EVICTION_MS",
    "FINAL_EPOCH",
    "INITIAL_EPOCH",
    "CachedPartition",
    "FetchContext",
    "FetchManager",
    "FetchSession",
    "FetchSessionCache",
    "PartitionRequest",
    "next_epoch",
]

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
#: Kafka's ``min.incremental.fetch.session.eviction.ms`` (internal, fixed at 120 s).
EVICTION_MS = 120_000
_INT32_MAX = 2**31 - 1


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch``: FINAL stays FINAL; 2**31-1 wraps to 1 (0 means INITIAL)."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _INT32_MAX else epoch + 1


PartitionKey = tuple[Hashable, int]


@attrs.frozen
class PartitionRequest:
    """One partition as a Fetch request names it. ``topic`` is the name (v0–v12) or the topic
    id (v13+), as the response must echo it."""

    topic: Hashable
    partition: int
    fetch_offset: int
    max_bytes: int
    log_start_offset: int = -1
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1

    @property
    def key(self) -> PartitionKey:
        return (self.topic, self.partition)


@attrs.define
class CachedPartition:
    """A session's partition: what the client last asked, and what the broker last told it."""

    request: PartitionRequest
    high_watermark: int = -1
    log_start_offset: int = -1

    def must_respond(self, result: dict[str, Any], update: bool) -> bool:
        """Whether ``result`` (a partition's answer) carries news; with ``update`` remember
        what it says. An error resets the remembered high watermark so the partition is sent
        again once the error is gone."""
        respond = bool(result.get("records"))
        if result.get("high_watermark", -1) != self.high_watermark:
            respond = True
            if update:
                self.high_watermark = result.get("high_watermark", -1)
        if result.get("log_start_offset", -1) != self.log_start_offset:
            respond = True
            if update:
                self.log_start_offset = result.get("log_start_offset", -1)
        if result.get("preferred_read_replica", -1) != -1:
            respond = True
        if result.get("error_code", ErrorCode.none) != ErrorCode.none:
            respond = True
            if update:
                self.high_watermark = -1
        return respond


@attrs.define(eq=False)
class FetchSession:
    id: int
    privileged: bool
    uses_topic_ids: bool
    creation_ms: int
    last_used_ms: int
    epoch: int
    #: Insertion-ordered: the order partitions are read in.
    partitions: dict[PartitionKey, CachedPartition] = attrs.field(factory=dict)
    #: Size and evictability as of the last touch (Kafka keeps its eviction trees so).
    cached_size: int = -1
    evictable_by_all: bool = False
    evictable_by_privileged: bool = False

    @property
    def evictable_key(self) -> tuple[bool, int, int]:
        return (self.privileged, self.cached_size, self.id)

    def update(self, wanted: Iterable[PartitionRequest], forgotten: Iterable[PartitionKey]) -> None:
        """Add or update the request's partitions, then drop the forgotten ones."""
        for item in wanted:
            cached = self.partitions.get(item.key)
            if cached is None:
                self.partitions[item.key] = CachedPartition(item)
            else:
                cached.request = item
        for key in forgotten:
            self.partitions.pop(key, None)


class FetchSessionCache:
    """At most ``max_entries`` sessions, with Kafka's eviction rules (see the module doc).

    Kafka keeps its sessions in two ordered trees so a newcomer finds its victim in O(log N):
    one by (last used, id), one by (privileged, size, id) for the evictable ones. Here each is a
    heap with lazy deletion: a touch pushes fresh entries stamped with a new number and the old
    ones are skipped when they reach the top (an entry counts only while its stamp is the
    session's current one). When the dead entries outnumber the live ones the heaps are rebuilt,
    so their size stays O(sessions) and each operation O(log N) amortised.
    """

    def __init__(self, max_entries: int, eviction_ms: int = EVICTION_MS, rng: random.Random | None = None) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self._rng = rng or random.Random()
        self._sessions: dict[int, FetchSession] = {}
        #: (last used ms, id, stamp): the least recently used at the top.
        self._by_last_used: list[tuple[int, int, int]] = []
        #: (privileged, size, id, stamp) of sessions evictable by everyone / by privileged newcomers.
        self._evictable_by_all: list[tuple[bool, int, int, int]] = []
        self._evictable_by_privileged: list[tuple[bool, int, int, int]] = []
        self._stamps: dict[int, int] = {}  # session id -> the stamp of its current entries
        self._next_stamp = 0
        self._total_partitions = 0
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self) -> Iterator[FetchSession]:
        return iter(list(self._sessions.values()))

    @property
    def total_partitions(self) -> int:
        return self._total_partitions

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def remove(self, session_id: int) -> FetchSession | None:
        session = self._sessions.pop(session_id, None)
        if session is not None:
            del self._stamps[session_id]  # its heap entries are dead from now on
            self._total_partitions -= max(session.cached_size, 0)
        return session

    def _new_session_id(self) -> int:
        while True:
            candidate = self._rng.randint(1, _INT32_MAX - 1)
            if candidate not in self._sessions:
                return candidate

    def maybe_create(
        self,
        now_ms: int,
        privileged: bool,
        uses_topic_ids: bool,
        partitions: Callable[[], dict[PartitionKey, CachedPartition]],
    ) -> int:
        """A new session's id, or 0 when there is no room and nothing may be evicted."""
        wanted = partitions()
        if len(self._sessions) >= self.max_entries and not self._try_evict(privileged, len(wanted), now_ms):
            return INVALID_SESSION_ID
        session = FetchSession(
            self._new_session_id(), privileged, uses_topic_ids, now_ms, now_ms, next_epoch(INITIAL_EPOCH), wanted
        )
        self._sessions[session.id] = session
        self.touch(session, now_ms)
        return session.id

    def _top(self, heap: list[Any]) -> tuple[Any, ...] | None:
        """The live entry at the top of ``heap`` (dead ones above it are dropped), or None."""
        stamps = self._stamps
        while heap:
            entry = heap[0]
            if stamps.get(entry[-2]) == entry[-1]:
                result: tuple[Any, ...] | None = entry
                return result
            heapq.heappop(heap)
        return None

    def _try_evict(self, privileged: bool, size: int, now_ms: int) -> bool:
        stalest = self._top(self._by_last_used)
        if stalest is None:
            return False
        if now_ms - stalest[0] > self.eviction_ms:
            self._evict(stalest[1])
            return True
        cheapest = self._top(self._evictable_by_privileged if privileged else self._evictable_by_all)
        if cheapest is None or (privileged, size, 0) < cheapest[:3]:
            return False
        self._evict(cheapest[2])
        return True

    def _evict(self, session_id: int) -> None:
        self.remove(session_id)
        self.evictions += 1

    def touch(self, session: FetchSession, now_ms: int) -> None:
        """Record a use: last-used time, size and evictability as of now."""
        cached = self._sessions.get(session.id) is session
        if cached:
            self._total_partitions += len(session.partitions) - max(session.cached_size, 0)
        session.last_used_ms = now_ms
        session.cached_size = len(session.partitions)
        old = now_ms - session.creation_ms > self.eviction_ms
        session.evictable_by_privileged = not session.privileged or old
        session.evictable_by_all = old
        if not cached:
            return  # closed or evicted meanwhile: nothing to order
        self._next_stamp += 1
        stamp = self._stamps[session.id] = self._next_stamp
        heapq.heappush(self._by_last_used, (now_ms, session.id, stamp))
        key = (session.privileged, session.cached_size, session.id, stamp)
        if session.evictable_by_all:
            heapq.heappush(self._evictable_by_all, key)
        if session.evictable_by_privileged:
            heapq.heappush(self._evictable_by_privileged, key)
        if len(self._by_last_used) > 2 * len(self._sessions) + 64:
            self._compact()

    def _compact(self) -> None:
        """Drop the dead entries of all three heaps (amortised over the touches that made them)."""
        stamps = self._stamps
        heaps: tuple[list[Any], ...] = (self._by_last_used, self._evictable_by_all, self._evictable_by_privileged)
        for heap in heaps:
            heap[:] = [entry for entry in heap if stamps.get(entry[-2]) == entry[-1]]
            heapq.heapify(heap)


class FetchContext:
    """What one Fetch reads, and how its answer is shaped. ``partitions`` are read in order;
    :meth:`respond` turns the partitions' answers into (error, session id, answers)."""

    def __init__(self, partitions: list[PartitionRequest]) -> None:
        self.partitions = partitions

    def respond(self, results: list[dict[str, Any]]) -> tuple[ErrorCode, int, list[dict[str, Any]]]:
        return ErrorCode.none, INVALID_SESSION_ID, results


class _SessionError(FetchContext):
    def __init__(self, error: ErrorCode) -> None:
        super().__init__([])
        self.error = error

    def respond(self, results: list[dict[str, Any]]) -> tuple[ErrorCode, int, list[dict[str, Any]]]:
        return self.error, INVALID_SESSION_ID, []


class _Full(FetchContext):
    def __init__(
        self, manager: FetchManager, partitions: list[PartitionRequest], privileged: bool, uses_topic_ids: bool
    ) -> None:
        super().__init__(partitions)
        self._manager = manager
        self._privileged = privileged
        self._uses_topic_ids = uses_topic_ids

    def respond(self, results: list[dict[str, Any]]) -> tuple[ErrorCode, int, list[dict[str, Any]]]:
        def cached() -> dict[PartitionKey, CachedPartition]:
            by_key = {}
            for item, result in zip(self.partitions, results, strict=True):
                entry = CachedPartition(item)
                entry.must_respond(result, update=True)
                by_key[item.key] = entry
            return by_key

        manager = self._manager
        session_id = manager.cache.maybe_create(manager.now_ms(), self._privileged, self._uses_topic_ids, cached)
        return ErrorCode.none, session_id, results


class _Incremental(FetchContext):
    def __init__(self, session: FetchSession) -> None:
        super().__init__([cached.request for cached in session.partitions.values()])
        self.session = session
        self._epoch = session.epoch  # what this request set; checked again at answer time

    def respond(self, results: list[dict[str, Any]]) -> tuple[ErrorCode, int, list[dict[str, Any]]]:
        session = self.session
        if session.epoch != self._epoch:
            return ErrorCode.invalid_fetch_session_epoch, INVALID_SESSION_ID, []
        kept = []
        for item, result in zip(self.partitions, results, strict=True):
            cached = session.partitions.get(item.key)
            if cached is None:
                continue
            if cached.must_respond(result, update=True):
                kept.append(result)
                if result.get("records"):  # to the back of the line: fairness across polls
                    session.partitions[item.key] = session.partitions.pop(item.key)
        return ErrorCode.none, session.id, kept


class FetchManager:
    """Builds each Fetch's context from its session fields (Kafka's ``FetchManager``)."""

    def __init__(self, cache: FetchSessionCache, now_ms: Clock) -> None:
        self.cache = cache
        self._now_ms = now_ms

    def now_ms(self) -> int:
        return int(self._now_ms())

    def new_context(
        self,
        session_id: int,
        epoch: int,
        partitions: list[PartitionRequest],
        forgotten: list[PartitionKey],
        *,
        privileged: bool = False,
        uses_topic_ids: bool = False,
    ) -> FetchContext:
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.cache.remove(session_id)  # a full fetch closes the session it names
            if epoch == FINAL_EPOCH:
                return FetchContext(partitions)
            return _Full(self, partitions, privileged, uses_topic_ids)
        session = self.cache.get(session_id)
        if session is None:
            return _SessionError(ErrorCode.fetch_session_id_not_found)
        if session.epoch != epoch:
            return _SessionError(ErrorCode.invalid_fetch_session_epoch)
        if session.uses_topic_ids != uses_topic_ids:
            return _SessionError(ErrorCode.fetch_session_topic_id_error)
        session.update(partitions, forgotten)
        if not session.partitions:
            self.cache.remove(session.id)
            return FetchContext(partitions)
        self.cache.touch(session, self.now_ms())
        session.epoch = next_epoch(session.epoch)
        return _Incremental(session)
