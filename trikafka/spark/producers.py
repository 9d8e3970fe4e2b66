"""The producers of the Spark sink, on confluent-kafka (librdkafka).

:class:`ConfluentWriter` (at-least-once) defaults to ``acks=all`` with idempotence, the Java
producer's defaults since Kafka 3.0, and to the ``murmur2_random`` partitioner, the Java
producer's hash, so a key lands in the same partition whichever client wrote it.

:class:`ConfluentTransactionalWriter` (``deliveryGuarantee=exactly-once``) is the same
producer with a ``transactional.id``, and an assign-less consumer of the marker group: its
``consumer_group_metadata()`` names the group the marker is committed to (a "simple" group:
generation -1, no members, which Kafka accepts in TxnOffsetCommit), and its ``committed()``
reads the marker back with ``require_stable`` (``isolation.level=read_committed``), so an
offset still inside an undecided transaction is never taken for a committed one. Only
standard Kafka requests: InitProducerId, AddPartitionsToTxn, Produce, AddOffsetsToTxn,
TxnOffsetCommit, EndTxn and OffsetFetch.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from trikafka.spark.client import KafkaClientError, KafkaProduceError

__all__ = [
    "DEFAULT_TRANSACTION_TIMEOUT_MS",
    "ConfluentTransactionalWriter",
    "ConfluentWriter",
    "kafka_error_name",
    "librdkafka_log",
]

log = logging.getLogger(__name__)
#: librdkafka's own log lines (connection trouble, shutdown notes) go to Python logging here.
librdkafka_log = logging.getLogger("trikafka.spark.librdkafka")

#: ``transaction.timeout.ms`` unless the sink's options set one: Kafka's default
#: ``transaction.max.timeout.ms`` (15 minutes), so a task may write for that long.
DEFAULT_TRANSACTION_TIMEOUT_MS = 900_000
#: Seconds InitProducerId, OffsetFetch, TxnOffsetCommit and EndTxn may take.
TRANSACTION_CALL_TIMEOUT = 60.0
#: Settings of a producer only, kept from the marker group's consumer.
_PRODUCER_ONLY = frozenset({
    "acks", "batch.num.messages", "batch.size", "compression.codec", "compression.level",
    "compression.type", "delivery.timeout.ms", "enable.idempotence", "linger.ms",
    "max.in.flight", "max.in.flight.requests.per.connection", "message.send.max.retries",
    "message.timeout.ms", "partitioner", "queue.buffering.max.kbytes",
    "queue.buffering.max.messages", "queue.buffering.max.ms", "retries",
    "transaction.timeout.ms", "transactional.id",
})


def kafka_error_name(error: Any) -> str:
    """Kafka's name for a librdkafka error (``MESSAGE_TOO_LARGE``), with librdkafka's own.

    Broker errors carry the Kafka protocol error code, so the name is the one Kafka's
    documentation and the Java client use; librdkafka-local errors (negative codes such as
    ``_MSG_TIMED_OUT``) keep librdkafka's name.
    """
    code = error.code()
    name = error.name()
    if code > 0:
        try:
            from trikafka.errors import ErrorCode

            kafka_name = ErrorCode(code).name.upper()
        except ValueError:
            kafka_name = name
        if kafka_name != name:
            return f"{kafka_name} (librdkafka {name}: {error.str()})"
    return f"{name} ({error.str()})"



class ConfluentWriter:
    """Produces with acks=all and retries; failures are counted and raised at flush."""

    #: Records between two services of delivery reports (and checks for earlier failures).
    POLL_EVERY = 1000

    def __init__(self, config: Mapping[str, str]) -> None:
        conf: dict[str, Any] = {
            "acks": "all",
            "delivery.timeout.ms": 120_000,
            "linger.ms": 5,
            "partitioner": "murmur2_random",
            "logger": librdkafka_log,
        }
        conf.update(config)
        if str(conf["acks"]) in ("all", "-1"):
            conf.setdefault("enable.idempotence", True)
        self._config = conf
        self._producer: Any = None
        self._reset()

    def _reset(self) -> None:
        self._errors: Counter[str] = Counter()
        self._first_failure = ""
        self._delivered = 0

    def _on_delivery(self, error: Any, message: Any) -> None:
        if error is None:
            self._delivered += 1
            return
        name = kafka_error_name(error)
        self._errors[name.split(" ", 1)[0]] += 1
        if not self._first_failure:
            self._first_failure = f"topic {message.topic()!r} partition {message.partition()}: {name}"

    def _check(self) -> None:
        if self._errors:
            failed = sum(self._errors.values())
            errors = dict(self._errors)
            message = (
                f"KAFKA_PRODUCE_FAILED: {failed} record(s) could not be written to Kafka "
                f"({', '.join(f'{n} x{c}' for n, c in errors.items())}); first: {self._first_failure}"
            )
            self._reset()
            raise KafkaProduceError(message, errors)

    def write(
        self,
        topics: Sequence[str],
        keys: Sequence[bytes | str | None],
        values: Sequence[bytes | str | None],
        headers: Sequence[Sequence[tuple[str, bytes | None]] | None] | None,
        partitions: Sequence[int | None] | None,
    ) -> None:
        from confluent_kafka import KafkaException, Producer

        if self._producer is None:
            self._producer = Producer(self._config)
        producer = self._producer
        on_delivery = self._on_delivery
        for i, value in enumerate(values):
            kwargs: dict[str, Any] = {"on_delivery": on_delivery}
            if headers is not None and headers[i]:
                kwargs["headers"] = list(headers[i])  # type: ignore[arg-type]  # truthy: not None
            if partitions is not None and partitions[i] is not None:
                kwargs["partition"] = partitions[i]
            while True:
                try:
                    producer.produce(topics[i], value, keys[i], **kwargs)
                    break
                except BufferError:  # the local queue is full: let deliveries drain it
                    producer.poll(0.1)
                except KafkaException as exc:  # refused before sending (e.g. too large)
                    error = exc.args[0]
                    self._errors[kafka_error_name(error).split(" ", 1)[0]] += 1
                    if not self._first_failure:
                        self._first_failure = f"topic {topics[i]!r}: {kafka_error_name(error)}"
                    break
            if i % self.POLL_EVERY == 0:
                producer.poll(0)
                self._check()

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(30)
            self._producer = None

    def abort(self) -> None:
        if self._producer is not None:
            self._producer.purge()
            self._producer.flush(30)  # serves the purged records' reports, then forgets them
        self._reset()

    def flush(self) -> int:
        if self._producer is None:
            self._check()
            return 0
        timeout = float(self._config.get("delivery.timeout.ms", 120_000)) / 1000 + 30
        left = self._producer.flush(timeout)
        if left:
            self._errors["_MSG_TIMED_OUT"] += left
            self._first_failure = self._first_failure or f"{left} record(s) still queued after {timeout:.0f} s"
        self._check()
        delivered = self._delivered
        self._reset()
        return delivered



class ConfluentTransactionalWriter(ConfluentWriter):
    """One task's transactional producer; see :class:`~trikafka.spark.client.KafkaTransactionalWriter`."""

    def __init__(self, config: Mapping[str, str], transactional_id: str) -> None:
        conf: dict[str, Any] = {"transaction.timeout.ms": DEFAULT_TRANSACTION_TIMEOUT_MS, **config}
        conf["transactional.id"] = transactional_id
        conf["enable.idempotence"] = True
        if "delivery.timeout.ms" not in conf and "message.timeout.ms" not in conf:
            # librdkafka requires a record's delivery timeout within the transaction's.
            conf["delivery.timeout.ms"] = min(120_000, int(conf["transaction.timeout.ms"]))
        super().__init__(conf)
        self.transactional_id = transactional_id
        self._marker_config: dict[str, Any] = {
            "logger": librdkafka_log,
            **{k: v for k, v in config.items() if k not in _PRODUCER_ONLY},
            "group.id": transactional_id,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
        self._consumer: Any = None
        self._in_transaction = False

    def _call(self, what: str, call: Callable[[], Any]) -> Any:
        from confluent_kafka import KafkaException

        for attempt in range(3):
            try:
                return call()
            except KafkaException as exc:
                error = exc.args[0]
                if attempt < 2 and error.retriable() and not error.fatal() and not error.txn_requires_abort():
                    log.info("%s of %s: %s (retrying)", what, self.transactional_id, kafka_error_name(error))
                    continue
                raise KafkaClientError(
                    f"{what} of transactional id {self.transactional_id!r} failed: {kafka_error_name(error)}"
                ) from None
        raise AssertionError("unreachable")

    def _marker_consumer(self) -> Any:
        if self._consumer is None:
            from confluent_kafka import Consumer

            self._consumer = Consumer(self._marker_config)
        return self._consumer

    def init(self) -> None:
        from confluent_kafka import Producer

        self._producer = Producer(self._config)
        self._call("InitProducerId", lambda: self._producer.init_transactions(TRANSACTION_CALL_TIMEOUT))

    def committed_batch(self, marker_topic: str) -> int | None:
        from confluent_kafka import TopicPartition

        consumer = self._marker_consumer()
        (found,) = self._call(
            "OffsetFetch",
            lambda: consumer.committed([TopicPartition(marker_topic, 0)], timeout=TRANSACTION_CALL_TIMEOUT),
        )
        if found.error is not None:
            raise KafkaClientError(
                f"OffsetFetch of group {self.transactional_id!r} failed: {kafka_error_name(found.error)}"
            )
        return None if found.offset is None or found.offset < 0 else found.offset - 1

    def begin(self) -> None:
        self._producer.begin_transaction()
        self._in_transaction = True

    def commit(self, batch_id: int, marker_topic: str) -> int:
        from confluent_kafka import TopicPartition

        records = self.flush()
        marker = TopicPartition(marker_topic, 0, batch_id + 1, metadata=f"spark batch {batch_id}")
        metadata = self._marker_consumer().consumer_group_metadata()
        producer = self._producer
        self._call(
            "TxnOffsetCommit",
            lambda: producer.send_offsets_to_transaction([marker], metadata, TRANSACTION_CALL_TIMEOUT),
        )
        self._call("EndTxn (commit)", lambda: producer.commit_transaction(TRANSACTION_CALL_TIMEOUT))
        self._in_transaction = False
        return records

    def abort(self) -> None:
        """Abort the open transaction if the producer still can (a fenced one cannot: the
        attempt that fenced it has aborted the transaction already)."""
        from confluent_kafka import KafkaException

        if self._producer is not None and self._in_transaction:
            self._producer.purge()
            try:
                self._producer.abort_transaction(TRANSACTION_CALL_TIMEOUT)
            except KafkaException as exc:
                log.warning("aborting the transaction of %s: %s", self.transactional_id, kafka_error_name(exc.args[0]))
        self._in_transaction = False
        self._reset()

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        self._producer = None
