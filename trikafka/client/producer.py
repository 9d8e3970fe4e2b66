"""The Trio producer: ``async with open_producer(bootstrap, **config) as producer``.

``await producer.send(topic, value, key=…)`` returns the record's :class:`RecordMetadata` once
the broker has acknowledged it (``acks``); ``await producer.enqueue(…)`` returns as soon as the
record is in its partition's batch, with a :class:`RecordFuture` to await later — the shape for
throughput (many records in flight from one task). Batching, retries, idempotence and
transactions are the Java client's; see :mod:`trikafka.client.sender` and
:mod:`trikafka.client.transactions`.

Cancellation — the rule: a record is either in the producer or not. ``send``/``enqueue``
cancelled before the record was appended (waiting for metadata or buffer space) leaves nothing
behind; once appended, the record belongs to the producer and is delivered (or fails) whatever
happens to the caller — cancelling ``send`` stops the *waiting*, not the delivery. Leaving the
``async with`` normally drains: every record is acknowledged or failed before it returns. Leaving
it with an exception or a cancellation fails the records not yet sent, waits (shielded, at most
``request.timeout.ms``) for requests already on the wire, aborts an open transaction, and
re-raises. ``async with producer.transaction():`` commits on normal exit and aborts on any
exception or cancellation; cancelled at any await point, even with the producer around it,
no record is committed twice or lost once the app restarts (see :meth:`Producer.transaction`).
"""

from __future__ import annotations

import logging
import operator
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import trio

from trikafka.client.accumulator import (
    RECORD_OVERHEAD,
    PartitionQueue,
    RecordAccumulator,
    RecordFuture,
    RecordMetadata,
    new_future,
    record_size,
)
from trikafka.client.calls import call_coordinator
from trikafka.client.client import CoordinatorType, KafkaClient, open_client
from trikafka.client.cluster import TopicInfo, TopicPartition
from trikafka.client.config import ClientConfig
from trikafka.client.deadlines import bounded, bounded_call
from trikafka.client.errors import KafkaError, KafkaTimeoutError, TransactionAbortedError
from trikafka.client.group_offsets import CommitFailedError
from trikafka.client.lifetime import open_service_nursery
from trikafka.client.partitioner import StickyPartitioner, partition_for_key
from trikafka.client.sender import Sender
from trikafka.client.serialization import codec
from trikafka.client.telemetry import start_telemetry
from trikafka.client.transactions import TransactionManager
from trikafka.client.transport import Bootstrap, Connector
from trikafka.errors import ErrorCode
from trikafka.protocol.registry import ApiKey

if TYPE_CHECKING:
    from trikafka.client.group_session import ConsumerGroupMetadata

__all__ = ["Producer", "open_producer"]

log = logging.getLogger(__name__)

#: TxnOffsetCommit answers saying the consumer's membership moved on (a rebalance).
_MEMBER_GONE = frozenset({ErrorCode.illegal_generation, ErrorCode.unknown_member_id, ErrorCode.fenced_instance_id})

_time_ns = time.time_ns
_schedule_point = trio.lowlevel.cancel_shielded_checkpoint


def _as_bytes(value: Any, what: str) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise TypeError(f"{what} must be bytes, str or None, not {type(value).__name__}")


#: Record headers as users give them: ``{name: value}`` or ``[(name, value), ...]``, each value
#: bytes, str (UTF-8) or None.
Headers = Mapping[str, bytes | str | None] | Sequence[tuple[str, bytes | str | None]]


def _headers(headers: Headers | None) -> list[tuple[str, bytes | None]]:
    if not headers:
        return []
    items = headers.items() if isinstance(headers, Mapping) else headers
    return [(str(name), _as_bytes(value, f"header {name!r}")) for name, value in items]


def _checked_partition(topic: str, partition: Any, count: int) -> int:
    """The explicit ``partition`` argument, or a clear error."""
    try:
        partition = operator.index(partition)
    except TypeError:
        raise TypeError(f"partition must be an int, not {type(partition).__name__}") from None
    if not 0 <= partition < count:
        raise KafkaError(ErrorCode.unknown_topic_or_partition, f"partition {partition} of {topic!r}, which has {count}")
    result: int = partition
    return result


class _TopicRoute:
    """What :meth:`Producer.enqueue` needs of a topic, made once per metadata of that topic
    rather than per record: its partition count, the partitions with a leader (for the sticky
    partitioner), and each partition's accumulator queue (looked up on first use).

    Valid while the cluster's ``topics[topic]`` is the very :class:`TopicInfo` it was made
    from: every refresh that reports the topic puts a new one there (partitions added, the
    topic deleted and created again, an error) and a deletion removes it, so one identity
    check per record is all the invalidation there is.
    """

    __slots__ = ("available", "count", "info", "queues")

    def __init__(self, info: TopicInfo | None, count: int, available: list[int]) -> None:
        self.info = info
        self.count = count
        self.available = available
        self.queues: list[PartitionQueue | None] = [None] * count


class Producer:
    def __init__(
        self, client: KafkaClient, config: ClientConfig, key_serializer: Callable[..., object] | None = None,
        value_serializer: Callable[..., object] | None = None,
    ) -> None:
        self.client = client
        self._key_codec = codec(key_serializer, "key_serializer")
        self._value_codec = codec(value_serializer, "value_serializer")
        self.config = config
        self.txn = TransactionManager(config["transactional.id"], config["enable.idempotence"])
        self.accumulator = RecordAccumulator(config["batch.size"], config["linger.ms"], config["delivery.timeout.ms"])
        self.sender = Sender(client, self.accumulator, self.txn, config)
        self.partitioner = StickyPartitioner(config["batch.size"])
        self.max_request_size = config["max.request.size"]
        self.buffer_memory = config["buffer.memory"]
        self.closed = False
        self._cluster = client.cluster
        self._transactional = self.txn.transactional
        self._routes: dict[str, _TopicRoute] = {}
        self._txn_started = False  # partitions or offsets were added: EndTxn is needed

    # --- sending --------------------------------------------------------------------------

    async def send(
        self,
        topic: str,
        value: object = None,
        *,
        key: object = None,
        headers: Headers | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
    ) -> RecordMetadata:
        """Send one record and return where it was written, once acknowledged."""
        future = await self.enqueue(topic, value, key=key, headers=headers, partition=partition, timestamp=timestamp)
        return await future.wait()

    async def enqueue(
        self,
        topic: str,
        value: object = None,
        *,
        key: object = None,
        headers: Headers | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
    ) -> RecordFuture:
        """Append one record to its batch; await the returned future for its metadata.

        This runs once per record, so it reads nothing it can keep: the topic's partition
        count, leaders and queues come from its :class:`_TopicRoute` while the metadata stays
        the same. The record's CreateTime is still taken per record (Kafka's rule when the
        caller gives none).
        """
        if self.closed:
            raise KafkaError(ErrorCode.unknown_server_error, "the producer is closed", retriable=False)
        txn = self.txn
        state = txn.state
        if state != "IN_TRANSACTION" and (self._transactional or state == "FATAL_ERROR"):
            txn.check_can_send()
        if self._key_codec is not None:  # serialized first: the key's bytes choose the partition
            key = self._key_codec(key, topic, "key", headers)
        if self._value_codec is not None:
            value = self._value_codec(value, topic, "value", headers)
        key_bytes = key if key is None or type(key) is bytes else _as_bytes(key, "key")
        value_bytes = value if value is None or type(value) is bytes else _as_bytes(value, "value")
        record_headers = _headers(headers) if headers else ()
        size = (len(key_bytes) if key_bytes else 0) + (len(value_bytes) if value_bytes else 0)
        if size + 61 > self.max_request_size:
            raise KafkaError(
                ErrorCode.message_too_large, f"a {size}-byte record is over max.request.size ({self.max_request_size})"
            )
        route = self._routes.get(topic)
        if route is None or route.info is not self._cluster.topics.get(topic):
            route = await self._route(topic)
        if partition is not None:
            if type(partition) is not int or not 0 <= partition < route.count:
                partition = _checked_partition(topic, partition, route.count)
        elif key_bytes is not None:
            partition = partition_for_key(key_bytes, route.count)
        else:
            partition = self.partitioner.partition(topic, size, route.available, route.count)
        accumulator = self.accumulator
        if accumulator.queued_bytes >= self.buffer_memory:
            await self._wait_for_room()
            txn.check_can_send()  # a transaction may have ended while we waited
        if timestamp is not None:
            timestamp = int(timestamp)
        queue = route.queues[partition]
        if queue is None:
            queue = route.queues[partition] = accumulator.queue(TopicPartition(topic, partition))
        size += record_size(None, None, record_headers) if record_headers else RECORD_OVERHEAD
        if queue:
            # RecordAccumulator.append's common case inline (a call less per record): the
            # record fits the partition's open batch. Keep the two in step. new_future takes
            # the CreateTime when the caller gives none (Kafka's rule: per record).
            batch = queue[-1]
            if not batch.attempts and batch.encoded is None and batch.size + size <= accumulator.batch_size:
                future = new_future(
                    batch, batch.records, batch.futures, key_bytes, value_bytes, record_headers, timestamp
                )
                batch.size += size
                accumulator.queued_bytes += size
                if batch.size >= accumulator.batch_size:
                    accumulator.wake()
                    await _schedule_point()
                return future
        stamp = _time_ns() // 1_000_000 if timestamp is None else timestamp
        future = accumulator.append(queue, (key_bytes, value_bytes, record_headers, stamp), size)
        if len(queue) > 1:
            # A batch is full: the sender takes it now, while the caller goes on appending,
            # rather than after the caller's next checkpoint (a loop of enqueues may have none).
            # Not a cancel point: the record is the producer's already.
            await _schedule_point()
        return future

    async def _wait_for_room(self) -> None:
        """Buffer full: wait (at most ``max.block.ms``, as Java's send()) for batches to finish."""
        limit = self.config["max.block.ms"] / 1000
        with trio.move_on_after(limit) as scope:
            while self.accumulator.queued_bytes >= self.buffer_memory:
                await self.sender.wait_progress()
        if scope.cancelled_caught:
            raise KafkaTimeoutError(
                f"Producer.send(): {self.accumulator.queued_bytes} bytes still queued, over buffer.memory "
                f"({self.buffer_memory}), after {limit:.1f} s (max.block.ms); last seen: "
                f"{self.client.seen.last or 'nothing wrong'}"
            )

    async def _route(self, topic: str) -> _TopicRoute:
        """The topic's route from the current metadata, waiting for the topic if it is not
        known (yet, or any more); kept while that metadata stays."""
        cluster = self._cluster
        count = cluster.partition_count(topic)
        if count is None:
            count = await self.client.wait_for_topic(topic)
        info = cluster.topics.get(topic)
        route = _TopicRoute(info, count, cluster.available_partitions(topic))
        if info is not None and len(info.partitions) == count:
            self._routes[topic] = route
        return route

    async def flush(self) -> None:
        """Send everything queued now, without waiting for linger.ms, and wait for the outcomes
        (errors stay with each record's future)."""
        waiting = list(self.accumulator.incomplete)
        self.accumulator.flushing += 1
        self.sender.wake()
        try:
            for batch in waiting:
                await batch.done.wait()
        finally:
            self.accumulator.flushing -= 1

    @property
    def connected(self) -> bool:
        """True while a connection to some broker of the cluster is open; False while none
        could be reached (the client then logs one WARNING naming the bootstrap servers and
        why, once no broker was reached for ``max.block.ms``)."""
        return self.client.connected

    def partitions_for(self, topic: str) -> list[int]:
        info = self.client.cluster.topic(topic)
        return sorted(info.partitions) if info else []

    # --- transactions ---------------------------------------------------------------------

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Producer]:
        """Begin; commit on normal exit; abort on an exception or cancellation (re-raised).

        Cancelled in the body or while the commit flushes, the transaction aborts; EndTxn
        itself runs shielded. If the producer's whole lifetime is cancelled mid-commit, its
        connections go with it and the coordinator settles the transaction (the next
        InitProducerId of the same transactional.id, or transaction.timeout.ms) — exactly
        once either way (tests/client/test_exactly_once.py).
        """
        await self.begin_transaction()
        try:
            yield self
            await self.commit_transaction()
        except BaseException as exc:
            if self.txn.state in ("IN_TRANSACTION", "ABORTABLE_ERROR"):  # not after a fatal error
                with trio.CancelScope(shield=True):
                    with trio.move_on_after(self.config["request.timeout.ms"] / 1000):
                        try:
                            await self.abort_transaction()
                        except KafkaError as abort_error:  # the body's exception is the one to see
                            log.warning("aborting transaction %s failed: %s", self.txn.transactional_id, abort_error)
            if isinstance(exc, KafkaError):
                # A commit that failed because we were being cancelled (the client's
                # connections went with its nursery): the cancellation is the news.
                await trio.lowlevel.checkpoint_if_cancelled()
            raise

    async def begin_transaction(self) -> None:
        self.txn.begin()
        self._txn_started = False

    @bounded_call("max.block.ms")
    async def commit_transaction(self) -> None:
        """Flush, then EndTxn(commit). A failed send makes this raise; abort afterwards."""
        await self.flush()
        if self.txn.state == "ABORTABLE_ERROR":
            raise TransactionAbortedError(
                ErrorCode.unknown_server_error, f"a send failed, the transaction must abort: {self.txn.error}"
            )
        self.txn.transition("COMMITTING_TRANSACTION", "commit")
        with trio.CancelScope(shield=True):  # half a commit is worse than a late one
            await self._end_transaction(commit=True)

    @bounded_call("max.block.ms")
    async def abort_transaction(self) -> None:
        """Drop unsent records, wait for those in flight, then EndTxn(abort)."""
        self.txn.transition("ABORTING_TRANSACTION", "abort")
        if self.sender.fail_queued(
            TransactionAbortedError(ErrorCode.unknown_server_error, "the transaction was aborted")
        ):
            self.sender.reinit_producer = True  # sequences of dropped batches left a gap
        while self.accumulator.incomplete:
            await self.sender.wait_progress()
        await self._end_transaction(commit=False)

    async def _end_transaction(self, *, commit: bool) -> None:
        if self.txn.partitions or self._txn_started:
            try:
                await call_coordinator(
                    self.client, self.txn.transactional_id,  # type: ignore[arg-type]  # transactional producers only: the id is set
                    CoordinatorType.TRANSACTION, ApiKey.END_TXN,
                    lambda r: [r.error_code], what="EndTxn", deadline=self._deadline(),
                    transactional_id=self.txn.transactional_id, producer_id=self.txn.producer_id,
                    producer_epoch=self.txn.epoch, committed=commit,
                )
            except KafkaError as exc:
                self.txn.fail(exc)
                raise
        self.txn.finished()
        if self.sender.reinit_producer:
            await self.sender.init_producer_id()

    @bounded_call("max.block.ms")
    async def send_offsets_to_transaction(
        self, offsets: Mapping[TopicPartition, object], group: str | ConsumerGroupMetadata
    ) -> None:
        """Commit consumer offsets as part of the transaction (AddOffsetsToTxn, then
        TxnOffsetCommit to the group coordinator). ``group`` is a group id or the consumer's
        group metadata (``group_id``, ``generation_id``, ``member_id``, ``group_instance_id``).
        Offsets are the *next* offset to read, as Kafka commits them; a value may be an int,
        ``(offset, metadata)`` or an object with ``offset``/``metadata``."""
        self.txn.check_can_send()
        group_id = group if isinstance(group, str) else group.group_id
        ids = dict(
            transactional_id=self.txn.transactional_id, producer_id=self.txn.producer_id, producer_epoch=self.txn.epoch
        )
        txn_id = self.txn.transactional_id
        try:
            await call_coordinator(
                self.client, txn_id, CoordinatorType.TRANSACTION,  # type: ignore[arg-type]  # transactional producers only: the id is set
                ApiKey.ADD_OFFSETS_TO_TXN,
                lambda r: [r.error_code], what="AddOffsetsToTxn", deadline=self._deadline(), group_id=group_id, **ids,
            )
            self._txn_started = True
            await call_coordinator(
                self.client,
                group_id,
                CoordinatorType.GROUP,
                ApiKey.TXN_OFFSET_COMMIT,
                lambda r: [p.error_code for t in r.topics for p in t.partitions],
                what="TxnOffsetCommit",
                deadline=self._deadline(),
                group_id=group_id,
                generation_id=getattr(group, "generation_id", -1),
                member_id=getattr(group, "member_id", ""),
                group_instance_id=getattr(group, "group_instance_id", None),
                topics=_offset_topics(offsets),
                **ids,
            )
        except KafkaError as exc:
            self.txn.fail(exc)
            if exc.error_code in _MEMBER_GONE:  # Java: CommitFailedException; the transaction is abortable
                raise CommitFailedError(
                    exc.error_code, f"{exc}: the group rebalanced; abort the transaction and poll again"
                ) from exc
            raise

    def _deadline(self) -> float:
        """Blocking transactional calls give up after max.block.ms, as Java's do."""
        result: float = trio.current_time() + self.config["max.block.ms"] / 1000
        return result

    # --- closing --------------------------------------------------------------------------

    async def _close(self, failed: bool) -> None:
        self.closed = True
        if failed:
            self.sender.fail_queued(
                KafkaError(ErrorCode.unknown_server_error, "the producer closed with an error", retriable=False)
            )
            with trio.move_on_after(self.config["request.timeout.ms"] / 1000):
                while self.accumulator.incomplete:
                    await self.sender.wait_progress()
        else:
            await self.flush()
        if self.txn.state in ("IN_TRANSACTION", "ABORTABLE_ERROR"):
            with trio.move_on_after(self.config["request.timeout.ms"] / 1000):
                await self.abort_transaction()


def _offset_topics(offsets: Mapping[TopicPartition, Any]) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp, value in offsets.items():
        if isinstance(value, int):
            offset, metadata = value, ""
        elif isinstance(value, Sequence):
            offset, metadata = value[0], value[1]
        else:
            offset, metadata = value.offset, getattr(value, "metadata", "")
        by_topic.setdefault(tp.topic, []).append(
            {
                "partition_index": tp.partition,
                "committed_offset": offset,
                "committed_leader_epoch": -1,
                "committed_metadata": metadata or "",
            }
        )
    return [{"name": topic, "partitions": partitions} for topic, partitions in by_topic.items()]


@asynccontextmanager
async def open_producer(
    bootstrap: Bootstrap | None = None, *, connector: Connector | None = None,
    key_serializer: Callable[..., object] | None = None, value_serializer: Callable[..., object] | None = None,
    **config: object,
) -> AsyncIterator[Producer]:
    """A running producer. ``bootstrap``: ``"host:port,…"``, a list of them, or anything with
    a ``bootstrap_servers`` string (a ``Broker``, a ``Cluster``, ``kafka_broker``; a
    ``TestBroker`` is reached in memory); ``config``: Kafka producer keys in either spelling.
    ``key_serializer``/``value_serializer``: callables ``(value)`` or ``(value, ctx)`` (see
    :mod:`trikafka.client.serialization`)."""
    codec(key_serializer, "key_serializer")  # a wrong one: refused before connecting
    codec(value_serializer, "value_serializer")
    if isinstance(bootstrap, str | list | tuple):
        config["bootstrap.servers"] = bootstrap
    settings = ClientConfig.for_role("producer", config)
    if bootstrap is None:
        bootstrap = settings["bootstrap.servers"]
        if bootstrap is None:
            raise KafkaError(ErrorCode.invalid_config, "open_producer needs bootstrap servers", retriable=False)
    async with open_client(bootstrap, settings, connector) as client:
        producer = Producer(client, settings, key_serializer, value_serializer)
        try:
            async with open_service_nursery("the producer") as nursery:
                nursery.start_soon(producer.sender.run)
                telemetry = start_telemetry(client, settings, nursery)
                try:
                    if producer.txn.transactional:
                        with bounded(client, "open_producer(): initTransactions", "max.block.ms"):
                            await producer.sender.init_producer_id()  # Java's initTransactions()
                    yield producer
                except BaseException:
                    with trio.CancelScope(shield=True):
                        await producer._close(failed=True)
                    raise
                else:
                    await producer._close(failed=False)
                    if telemetry is not None:
                        await telemetry.close()  # the terminating push, while the client is still open
                finally:
                    nursery.cancel_scope.cancel()
        finally:
            # Records whose request was still unanswered when the producer stopped (a close
            # cut short by request.timeout.ms or a cancellation) fail rather than wait for ever.
            producer.sender.fail_unfinished(
                KafkaError(
                    ErrorCode.request_timed_out, "the producer closed before the broker answered", retriable=False
                )
            )
