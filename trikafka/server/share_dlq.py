"""The share groups' dead-letter queue (KIP-1191, Kafka 4.4).

A record a share group archives because a member REJECTed it or its delivery count reached
``share.delivery.count.limit`` is written to the group's ``errors.deadletterqueue.topic.name``
(when set), on partition ``source partition % DLQ partitions``, with Kafka's context headers:
``__dlq.errors.topic``, ``__dlq.errors.partition``, ``__dlq.errors.offset``,
``__dlq.errors.group``, ``__dlq.errors.delivery.count`` and ``__dlq.errors.message`` (all
UTF-8 text). With ``errors.deadletterqueue.copy.record.enable=true`` the record's key, value
and timestamp are copied too; otherwise the dead letter holds the headers alone.

The share partition decides (synchronously, in a handler or a lock timer); the writes happen
in this task, in the order decided, through the replica manager's append path (so consumers
of the DLQ topic are woken like any produce). As in Kafka the write is not atomic with the
state change. A DLQ topic that does not exist gets one warning per group and topic and no
write: trikafka does not auto-create it, and does not check the DLQ topic's
``errors.deadletterqueue.group.enable`` (Kafka does).
"""

from __future__ import annotations

import logging
import math
from typing import Any

import trio

from trikafka.clock import Clock
from trikafka.coordinator.share.partition import SharePartition
from trikafka.log.slices import materialize
from trikafka.protocol.compression import decompress
from trikafka.protocol.records import (
    BATCH_HEADER_SIZE,
    Compression,
    build_batch,
    iter_batches,
    parse_batch_header,
    record_tuples,
)

__all__ = ["DeadLetterWriter"]

log = logging.getLogger("trikafka.server.share")

MESSAGES = {"REJECTED": "Offset rejected by client.",
            "DELIVERY_COUNT_EXCEEDED": "Offset delivery count exceeded the threshold."}


class DeadLetterWriter:
    def __init__(self, replicas: Any, now_ms: Clock) -> None:
        self.replicas = replicas
        self.now_ms = now_ms
        self.shares: Any = None
        self._send, self._receive = trio.open_memory_channel[tuple[SharePartition, int, int, str, dict[str, Any]]](
            math.inf
        )
        self._warned: set[tuple[str, str]] = set()
        self.written = 0

    def archived(self, sp: SharePartition, archived: list[tuple[int, int, str]]) -> None:
        """The share coordinator's callback: queue each archived record for its DLQ."""
        configs = self.shares.configs(sp.group_id)
        if not configs["errors.deadletterqueue.topic.name"]:
            return
        for offset, count, reason in archived:
            self._send.send_nowait((sp, offset, count, reason, configs))

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        async for sp, offset, count, reason, configs in self._receive:
            try:
                await self._write(sp, offset, count, reason, configs)
            except Exception:
                log.exception("dead letter for %s %s-%d@%d not written", sp.group_id, sp.topic, sp.partition, offset)

    async def _write(self, sp: SharePartition, offset: int, count: int, reason: str, configs: dict[str, Any]) -> None:
        name = configs["errors.deadletterqueue.topic.name"]
        target = self.replicas.topics.get(name)
        if target is None:
            if (sp.group_id, name) not in self._warned:
                self._warned.add((sp.group_id, name))
                log.warning("share group %s: dead-letter topic %s does not exist; archived records are not copied",
                            sp.group_id, name)
            return
        headers = [
            ("__dlq.errors.topic", sp.topic.encode()),
            ("__dlq.errors.partition", str(sp.partition).encode()),
            ("__dlq.errors.offset", str(offset).encode()),
            ("__dlq.errors.group", sp.group_id.encode()),
            ("__dlq.errors.delivery.count", str(count).encode()),
            ("__dlq.errors.message", MESSAGES.get(reason, reason).encode()),
        ]
        now = int(self.now_ms())
        key = value = None
        timestamp = now
        if configs["errors.deadletterqueue.copy.record.enable"] == "true":
            found = self._source_record(sp.topic, sp.partition, offset)
            if found is not None:
                key, value, timestamp = found
        batch = build_batch([(key, value, headers, timestamp)])
        await self.replicas.append_records(target, sp.partition % target.partitions, batch, now)
        self.written += 1

    def _source_record(self, topic: str, partition: int, offset: int) -> tuple[bytes | None, bytes | None, int] | None:
        if topic not in self.replicas.topics:
            return None
        source = self.replicas.get_log(topic, partition)
        if not source.log_start_offset <= offset < source.log_end_offset:
            return None
        data = b"".join(materialize(c) for c in source.read(offset, 1 << 20).chunks)
        for header in iter_batches(data, validate_records=False):
            view, plain = memoryview(data), header
            if header.compression != Compression.NONE:
                inner = decompress(header.compression, view[header.position + BATCH_HEADER_SIZE:header.end])
                rebuilt = bytearray(view[header.position:header.position + BATCH_HEADER_SIZE]) + inner
                rebuilt[8:12] = (len(rebuilt) - 12).to_bytes(4, "big")
                rebuilt[21:23] = (header.attributes & ~0x07).to_bytes(2, "big")
                view = memoryview(bytes(rebuilt))
                plain = parse_batch_header(view, 0)  # no CRC: this copy never leaves
            for record in record_tuples(view, plain):
                if record[0] == offset:
                    return record[2], record[3], record[1]
        return None
