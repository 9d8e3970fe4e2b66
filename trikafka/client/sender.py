"""The producer's sender task (Java's ``Sender``): ready batches → Produce requests → outcomes.

One loop, on trio's clock: fail batches past ``delivery.timeout.ms``; ask the accumulator
which partitions are ready; make sure there is a producer id (idempotence) and that new
partitions were added to the transaction (AddPartitionsToTxn, before their first batch); group
the ready batches by leader and send one Produce per broker, at most
``max.in.flight.requests.per.connection`` unanswered per broker, each in its own task. Then
sleep until the next linger deadline or retry time, or until woken (a batch filled, a request
finished, a flush began).

Outcome of each batch, as Java's client decides it: success completes its records; a
retriable error (NOT_LEADER_OR_FOLLOWER, a lost connection, a timeout …) puts it back at the
head of its partition after ``retry.backoff.ms`` (doubling) unless ``retries`` or
``delivery.timeout.ms`` ran out — stale-metadata errors also refresh metadata; an idempotent
resend reuses the batch's bytes and sequence number, so a broker that already wrote it answers
with the first offsets instead of writing it twice; DUPLICATE_SEQUENCE_NUMBER counts as
success; anything else fails the batch's records with a typed error. A failed batch that held
sequence numbers leaves a gap the broker would refuse every later batch for, so the producer
then takes a new producer id before its next send (Java bumps the epoch, KIP-360; a
transactional producer does it when the transaction ends).
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Iterable
from typing import Any

import trio

from trikafka.client.accumulator import ProducerBatch, RecordAccumulator
from trikafka.client.calls import call_any_node, call_coordinator
from trikafka.client.client import CoordinatorType, KafkaClient
from trikafka.client.config import ClientConfig
from trikafka.client.deadlines import seconds
from trikafka.client.errors import KafkaError, KafkaTimeoutError, error_for
from trikafka.client.transactions import TransactionManager
from trikafka.errors import ErrorCode
from trikafka.protocol.compression import CODECS
from trikafka.protocol.registry import ApiKey

__all__ = ["Sender"]

log = logging.getLogger(__name__)


def _millis(value: Any) -> int:
    """A kio timestamp (datetime or None) as epoch milliseconds, -1 for none."""
    if value is None:
        return -1
    if isinstance(value, int):
        return value
    return int(value.timestamp() * 1000)


class Sender:
    def __init__(
        self, client: KafkaClient, accumulator: RecordAccumulator, txn: TransactionManager, config: ClientConfig
    ) -> None:
        self.client = client
        self.accumulator = accumulator
        accumulator.wake = self.wake  # a new batch to linger on, or a full one
        self.txn = txn
        self.acks = config["acks"]
        self.codec = CODECS[config["compression.type"]]
        self.request_timeout_ms = config["request.timeout.ms"]
        self.retries = config["retries"]
        self.max_in_flight = config["max.in.flight.requests.per.connection"]
        self.max_request_size = config["max.request.size"]
        self.transaction_timeout_ms = config["transaction.timeout.ms"]
        self.max_block_ms = config["max.block.ms"]
        self.in_flight: collections.Counter[int] = collections.Counter()
        self.wakeup = trio.Event()
        self.progress = trio.Event()  # set whenever a batch finishes; flush and buffer waits
        self.reinit_producer = False
        self.delivery_timeout_ms = config["delivery.timeout.ms"]
        self._failing_nodes: set[int] = set()  # brokers whose produce failed since their last success

    def wake(self) -> None:
        self.wakeup.set()

    async def wait_progress(self) -> None:
        await self.progress.wait()

    # --- the loop -------------------------------------------------------------------------

    async def run(self) -> None:
        async with trio.open_nursery() as requests:
            while True:
                self.wakeup = trio.Event()
                now = trio.current_time()
                for batch in self.accumulator.expired(now):
                    self._fail(batch, self._expired_error(batch))
                ready, next_check = self.accumulator.ready(now)
                sent = False
                if ready:
                    reinit = self.reinit_producer and not self.txn.transactional  # a txn re-inits at its end
                    if self.txn.idempotent and (not self.txn.has_producer_id or reinit):
                        if not await self._init_producer_id_or_fail():
                            continue
                    sent = await self._send_ready(requests, ready)
                    if not sent:  # no leader known, or every broker at its in-flight limit
                        next_check = min(next_check, now + self.client.retry_backoff.delay(0))
                if sent:
                    await trio.lowlevel.checkpoint()
                    continue
                with trio.move_on_at(next_check):
                    await self.wakeup.wait()

    async def _send_ready(self, requests: trio.Nursery, ready: list[Any]) -> bool:
        by_node: dict[int, list[Any]] = collections.defaultdict(list)
        for tp in ready:
            leader = self.client.cluster.leader_for(tp)
            if leader is None:
                self.client.request_metadata_update()
                continue
            by_node[leader].append(tp)
        sent = False
        for node_id, tps in by_node.items():
            if self.in_flight[node_id] >= self.max_in_flight:
                continue
            if self.txn.transactional and not await self._add_partitions(tps):
                continue
            batches: list[ProducerBatch] = []
            size = 0
            for tp in tps:
                queue = self.accumulator.queues[tp]
                if not queue or tp in self.accumulator.in_flight:
                    continue  # aborted or taken while AddPartitionsToTxn was awaited
                if batches and size + queue[0].size > self.max_request_size:
                    break
                batch = self.accumulator.drain(tp)
                size += batch.size
                if self.txn.idempotent and batch.base_sequence < 0:
                    batch.base_sequence = self.txn.next_sequence(tp, len(batch.records))
                batches.append(batch)
            if not batches:
                continue
            self.in_flight[node_id] += 1
            requests.start_soon(self._produce, node_id, batches)
            sent = True
        return sent

    # --- produce --------------------------------------------------------------------------

    async def _produce(self, node_id: int, batches: list[ProducerBatch]) -> None:
        try:
            topics: dict[str, list[Any]] = collections.defaultdict(list)
            for batch in batches:
                data = batch.encode(self.txn.producer_id, self.txn.epoch, self.txn.transactional, self.codec)
                topics[batch.tp.topic].append({"index": batch.tp.partition, "records": data})
            fields = dict(
                transactional_id=self.txn.transactional_id,
                acks=self.acks,
                timeout=self.request_timeout_ms,
                topic_data=[{"name": t, "partition_data": p} for t, p in topics.items()],
            )
            if self.acks == 0:
                await self.client.send_no_response(node_id, ApiKey.PRODUCE, **fields)
                for batch in batches:
                    self._complete(batch, -1, -1)
                return
            telemetry = self.client.telemetry
            if telemetry is not None:  # KIP-714's record.queue.time: appended until sent
                now = trio.current_time()
                for batch in batches:
                    telemetry.record("record.queue.time", (now - batch.created) * 1000)
            answer = await self.client.send(node_id, ApiKey.PRODUCE, **fields)
        except KafkaError as exc:
            for batch in batches:
                self._retry_or_fail(batch, exc, node_id)
            return
        finally:
            self.in_flight[node_id] -= 1
            self.wake()
        results = {
            (topic.name, int(p.index)): p for topic in answer.responses for p in topic.partition_responses
        }
        for batch in batches:
            result = results.get((batch.tp.topic, batch.tp.partition))
            if result is None:
                self._fail(
                    batch, KafkaError(ErrorCode.unknown_server_error, f"{batch.tp}: no answer in Produce response")
                )
            elif result.error_code in (ErrorCode.none, ErrorCode.duplicate_sequence_number):
                duplicate = result.error_code == ErrorCode.duplicate_sequence_number
                self._complete(
                    batch,
                    -1 if duplicate else int(result.base_offset),
                    _millis(getattr(result, "log_append_time", None)),
                )
                if node_id in self._failing_nodes:
                    self._failing_nodes.discard(node_id)
                    log.info("produce to broker %d succeeds again", node_id)
            else:
                message = getattr(result, "error_message", None) or ""
                error = error_for(
                    result.error_code, f"produce to {batch.tp.topic}-{batch.tp.partition} {message}".rstrip()
                )
                if error.stale_metadata:
                    self.client.request_metadata_update()
                self._retry_or_fail(batch, error, node_id)

    def _retry_or_fail(self, batch: ProducerBatch, error: KafkaError, node_id: int) -> None:
        now = trio.current_time()
        batch.last_error = error
        if error.retriable and batch.attempts < self.retries and now < batch.deadline:
            # One WARNING per broker per outage; each retry at DEBUG.
            level = logging.DEBUG if node_id in self._failing_nodes else logging.WARNING
            self._failing_nodes.add(node_id)
            log.log(
                level, "produce to %s-%d failed (%s); retry %d%s", batch.tp.topic, batch.tp.partition, error,
                batch.attempts + 1, "" if level == logging.DEBUG else " (further retries logged at DEBUG)",
            )
            self.accumulator.reenqueue(batch, now + self.client.retry_backoff.delay(batch.attempts))
            self.wake()
        else:
            self._fail(batch, error)

    def _expired_error(self, batch: ProducerBatch) -> KafkaTimeoutError:
        """A batch past delivery.timeout.ms: the error says the last thing that went wrong with
        it (its last failed attempt, else what the client saw last: a broker it cannot reach,
        a topic without a leader), and carries that error as its ``__cause__``."""
        last = batch.last_error
        seen = str(last) if last is not None else self.client.seen.last
        error = KafkaTimeoutError(
            f"{batch.tp.topic}-{batch.tp.partition}: {len(batch.records)} record(s) not delivered within "
            f"{seconds(self.delivery_timeout_ms / 1000)} (delivery.timeout.ms)"
            + (f"; last error: {seen}" if seen else "")
        )
        error.__cause__ = last
        return error

    def _complete(self, batch: ProducerBatch, base_offset: int, log_append_time: int) -> None:
        self.accumulator.done(batch)
        batch.complete(base_offset, log_append_time)
        self._progressed()

    def _fail(self, batch: ProducerBatch, error: BaseException) -> None:
        if batch.base_sequence >= 0:
            # Its sequence numbers are now a gap the broker would refuse the next batch for
            # (OUT_OF_ORDER_SEQUENCE_NUMBER): start again with a new producer id (KIP-360).
            self.reinit_producer = True
        self.accumulator.done(batch)
        batch.fail(error)
        self.txn.fail(error)
        self._progressed()

    def _progressed(self) -> None:
        self.progress.set()
        self.progress = trio.Event()

    def fail_queued(self, error: BaseException) -> bool:
        """Fail every batch not yet in flight; True when one of them held a sequence number."""
        dropped = self.accumulator.abort_all()
        for batch in dropped:
            self.accumulator.done(batch)
            batch.fail(error)
        if dropped:
            self._progressed()
        return any(batch.base_sequence >= 0 for batch in dropped)

    def fail_unfinished(self, error: BaseException) -> None:
        """Fail every batch not yet done, in flight or not (the producer has stopped)."""
        unfinished = list(self.accumulator.incomplete)
        for batch in unfinished:
            self.accumulator.done(batch)
            batch.fail(error)
        if unfinished:
            self._progressed()

    # --- producer id and transaction partitions -------------------------------------------

    async def _init_producer_id_or_fail(self) -> bool:
        try:
            await self.init_producer_id()
        except KafkaError as exc:
            self.txn.fail(exc)
            self.fail_queued(exc)
            return False
        return True

    async def init_producer_id(self) -> None:
        """InitProducerId: to the transaction coordinator, or any broker when not transactional."""
        fields = dict(
            transactional_id=self.txn.transactional_id,
            transaction_timeout=self.transaction_timeout_ms,
            producer_id=-1,
            producer_epoch=-1,
        )
        what = "InitProducerId"
        if self.txn.transactional:
            answer = await call_coordinator(
                self.client, self.txn.transactional_id, CoordinatorType.TRANSACTION,  # type: ignore[arg-type]  # transactional producers only: the id is set
                ApiKey.INIT_PRODUCER_ID, lambda r: [r.error_code], what=what, **fields,
            )
        else:
            answer = await call_any_node(
                self.client, ApiKey.INIT_PRODUCER_ID, lambda r: [r.error_code], what=what, **fields
            )
        self.txn.set_producer(int(answer.producer_id), int(answer.producer_epoch))
        self.reinit_producer = False
        for queue in self.accumulator.queues.values():
            for batch in queue:  # numbered under the old id: number them again when sent
                batch.base_sequence = -1
                batch.encoded = None

    async def _add_partitions(self, tps: list[Any]) -> bool:
        """AddPartitionsToTxn for partitions new to the transaction; False if it failed."""
        new = self.txn.new_partitions(tps)
        if not new:
            return True
        by_topic: dict[str, list[int]] = collections.defaultdict(list)
        for tp in new:
            by_topic[tp.topic].append(tp.partition)
        topics = [{"name": t, "partitions": p} for t, p in by_topic.items()]
        ids = dict(
            transactional_id=self.txn.transactional_id, producer_id=self.txn.producer_id, producer_epoch=self.txn.epoch
        )
        try:
            await call_coordinator(
                self.client, self.txn.transactional_id, CoordinatorType.TRANSACTION,  # type: ignore[arg-type]  # transactional producers only: the id is set
                ApiKey.ADD_PARTITIONS_TO_TXN, _add_partitions_errors, what="AddPartitionsToTxn",
                deadline=trio.current_time() + self.max_block_ms / 1000,
                **ids, topics=topics, **{f"v3_and_below_{k}": v for k, v in ids.items()},
                v3_and_below_topics=topics,
            )
        except KafkaError as exc:
            self.txn.fail(exc)
            self.fail_queued(exc)
            return False
        self.txn.partitions.update(new)
        return True


def _add_partitions_errors(answer: Any) -> list[Any]:
    results: Iterable[Any] = getattr(answer, "results_by_topic_v3_and_below", ()) or getattr(answer, "results", ())
    return [p.partition_error_code for t in results for p in t.results_by_partition]
