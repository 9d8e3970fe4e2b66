"""The everyday helpers: create a topic, produce records, read back what landed.

Written once, here, over the Kafka protocol with the project's Trio client
(:mod:`trikafka.client`), so they work on any cluster: a test broker in memory, one on a
thread, a cluster, ``KafkaContainer``, a ``python -m trikafka`` process, a real Kafka cluster
given with ``--kafka-bootstrap``. Every handle exposes them the way it exposes its waits
(:mod:`trikafka.testing.surface`): coroutines in Trio and on ``.aio``, plain calls on the
thread-hosted handles, ``/topics`` routes on the HTTP control interface.

``bootstrap`` is what the Trio client accepts (:func:`trikafka.client.transport.resolve_bootstrap`):
``"host:port,..."`` or an object with ``bootstrap_servers`` — or with an in-memory
``listener`` (a ``TestBroker``), which is then dialled in memory.

Each call opens its own short-lived client and is bounded by ``timeout`` seconds on trio's
clock (the client's own timeouts are set just above it, so the bound is this one); running
out raises ``TimeoutError`` naming the topic and what was seen so far. Errors the cluster
answered (the topic exists already, a partition it does not have) are the client's typed
:class:`~trikafka.client.KafkaError`, naming the topic.
"""

from __future__ import annotations

import base64
import binascii
import operator
from collections.abc import Iterable, Mapping
from typing import Any

import attrs
import trio

from trikafka.client import NewTopic, OffsetSpec, TopicPartition, open_admin, open_consumer, open_producer

__all__ = ["Record", "TOPIC_METHODS", "create_topic", "produce", "read", "record_from_json", "record_to_json"]

#: The helpers every handle has (beside the controls and waits of ``surface.py``).
TOPIC_METHODS = ("create_topic", "produce", "read")
DEFAULT_TIMEOUT = 10.0
#: How far above ``timeout`` the client's own bounds sit, so ours is the one that fires.
_SLACK_MS = 5_000


@attrs.frozen
class Record:
    """One record as :func:`read` found it in the log."""

    topic: str
    partition: int
    offset: int
    timestamp: int  # ms since the epoch (CreateTime, or LogAppendTime when the topic says so)
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def _client_config(timeout: float) -> dict[str, Any]:
    bound = int(timeout * 1000) + _SLACK_MS
    return {"client.id": "trikafka-testing", "default.api.timeout.ms": bound, "request.timeout.ms": bound}


def _check_timeout(timeout: float) -> float:
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise ValueError(f"timeout={timeout!r} must be a positive number of seconds")
    return float(timeout)


def _count(name: str, value: Any, least: int) -> int:
    try:
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, not {type(value).__name__}") from None
    if number < least:
        raise ValueError(f"{name}={number} must be at least {least}")
    return number


async def create_topic(
    bootstrap: Any,
    name: str,
    partitions: int = 1,
    replication_factor: int = 1,
    config: Mapping[str, Any] | None = None,
    *,
    timeout: float = DEFAULT_TIMEOUT,  # noqa: ASYNC109 - one bound, as the waits take it
) -> None:
    """Create topic ``name`` (CreateTopics at the controller) and return once every
    partition has a leader in the cluster's metadata, so a producer can write at once.
    ``config``: topic configs by Kafka's names (``{"cleanup.policy": "compact"}``)."""
    timeout = _check_timeout(timeout)
    partitions = _count("partitions", partitions, 1)
    replication_factor = _count("replication_factor", replication_factor, 1)
    configs = {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in (config or {}).items()}
    seen = "no answer to CreateTopics"
    with trio.move_on_after(timeout):
        async with open_admin(bootstrap, **_client_config(timeout)) as admin:
            await admin.create_topics([NewTopic(name, partitions, replication_factor, configs)])
            seen = "created, but not every partition has a leader in the metadata yet"
            await admin.client.wait_for_topic(name, timeout + _SLACK_MS / 1000)
            return
    raise TimeoutError(f"create_topic({name!r}) not done within {timeout:g} s; {seen}")


def _as_bytes(value: Any, what: str) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise TypeError(f"{what} must be bytes, str or None, not {type(value).__name__}")


def _one_record(item: Any, index: int) -> tuple[bytes | None, bytes | None, Any]:
    """(key, value, headers) of ``records[index]``: a value, or a (key, value[, headers]) tuple."""
    if isinstance(item, tuple):
        if len(item) not in (2, 3):
            raise TypeError(
                f"records[{index}] is a tuple of {len(item)}: give a value, (key, value) or (key, value, headers)"
            )
        key, value, headers = item if len(item) == 3 else (*item, None)
        return _as_bytes(key, f"records[{index}]'s key"), _as_bytes(value, f"records[{index}]'s value"), headers
    return None, _as_bytes(item, f"records[{index}]"), None


async def produce(
    bootstrap: Any,
    topic: str,
    records: Iterable[Any],
    *,
    partition: int | None = None,
    timeout: float = DEFAULT_TIMEOUT,  # noqa: ASYNC109 - one bound, as the waits take it
) -> list[int]:
    """Write ``records`` to ``topic`` and return the offset of each, in order, once the
    cluster acknowledged them (``acks=all``). A record is a value (bytes, str or None), a
    ``(key, value)`` tuple or a ``(key, value, headers)`` tuple (headers: a mapping or
    ``(name, value)`` pairs). Keys choose partitions as Kafka's default partitioner does;
    ``partition`` sends every record to that one."""
    timeout = _check_timeout(timeout)
    if isinstance(records, str | bytes | bytearray | Mapping):
        raise TypeError(
            f"records must be a list of records, not {type(records).__name__} (one record: produce(topic, [value]))"
        )
    items = [_one_record(item, i) for i, item in enumerate(records)]
    acknowledged: list[int] = []
    with trio.move_on_after(timeout):
        config = _client_config(timeout)
        bound = config.pop("default.api.timeout.ms")  # a producer's is max.block.ms
        config.update({"linger.ms": 0, "delivery.timeout.ms": bound, "max.block.ms": bound})
        async with open_producer(bootstrap, **config) as producer:
            futures = [
                await producer.enqueue(topic, value, key=key, headers=headers, partition=partition)
                for key, value, headers in items
            ]
            for future in futures:
                acknowledged.append((await future.wait()).offset)
        return acknowledged
    raise TimeoutError(
        f"produce({topic!r}, {len(items)} record(s)) not done within {timeout:g} s; {len(acknowledged)} acknowledged"
    )


async def read(
    bootstrap: Any,
    topic: str,
    partition: int | None = None,
    from_offset: int = 0,
    max_records: int | None = None,
    timeout: float = DEFAULT_TIMEOUT,  # noqa: ASYNC109 - one bound, as the waits take it
) -> list[Record]:
    """The records of ``topic`` (of its ``partition``, or of every partition) from offset
    ``from_offset`` of each, ordered by partition then offset.

    Without ``max_records``: every record up to the high watermark each partition had when
    the call began. With it: the first ``max_records``, waiting (up to ``timeout``) for that
    many to land. No consumer group is joined and nothing is committed."""
    timeout = _check_timeout(timeout)
    from_offset = _count("from_offset", from_offset, 0)
    if max_records is not None:
        max_records = _count("max_records", max_records, 1)
    seen: dict[str, Any] = {"topic": f"no metadata of topic {topic!r} yet (does it exist?)"}
    got: dict[TopicPartition, list[Record]] = {}
    with trio.move_on_after(timeout):
        config = _client_config(timeout)
        async with open_admin(bootstrap, **config) as admin:
            count = await admin.client.wait_for_topic(topic, timeout + _SLACK_MS / 1000)
            seen["topic"] = f"topic {topic!r} has {count} partition(s)"
            if partition is not None and not 0 <= _count("partition", partition, 0) < count:
                raise ValueError(f"read({topic!r}, partition={partition}): the topic has partitions 0..{count - 1}")
            tps = [TopicPartition(topic, p) for p in ([partition] if partition is not None else range(count))]
            ends = {tp: o.offset for tp, o in (await admin.list_offsets({tp: OffsetSpec.LATEST for tp in tps})).items()}
            starts = {
                tp: o.offset for tp, o in (await admin.list_offsets(dict.fromkeys(tps, OffsetSpec.EARLIEST))).items()
            }
        seen["ends"] = ends
        got = {tp: [] for tp in tps}
        config.update({"auto.offset.reset": "earliest", "enable.auto.commit": False})
        async with open_consumer(bootstrap, **config) as consumer:
            consumer.assign(tps)
            for tp in tps:
                # Within the log, so no fetch is out of range (an offset past the end waits
                # for records from where the log ends; those before from_offset are dropped).
                consumer.seek(tp, min(max(from_offset, starts[tp]), ends[tp]))
            while True:
                if max_records is not None and sum(map(len, got.values())) >= max_records:
                    break
                if max_records is None:
                    positions = {tp: await consumer.position(tp) for tp in tps}
                    if all(positions[tp] >= ends[tp] for tp in tps):
                        break
                batches = await consumer.getmany(timeout_ms=100)
                for tp, batch in batches.items():
                    got[tp].extend(
                        Record(r.topic, r.partition, r.offset, r.timestamp, r.key, r.value, tuple(r.headers))
                        for r in batch
                        if r.offset >= from_offset and (max_records is not None or r.offset < ends[tp])
                    )
        records = [r for tp in tps for r in got[tp]]
        return records if max_records is None else records[:max_records]
    read_so_far = (
        ", ".join(
            f"partition {tp.partition}: {len(got[tp])} read, high watermark {seen['ends'].get(tp, '?')}" for tp in got
        )
        if "ends" in seen
        else seen["topic"]
    )
    wanted = "every record up to the high watermark" if max_records is None else f"{max_records} record(s)"
    shown = f"partition={partition}, " if partition is not None else ""
    raise TimeoutError(
        f"read({topic!r}, {shown}from_offset={from_offset}) did not get {wanted} within {timeout:g} s; {read_so_far}"
    )


# --- JSON, for the HTTP control interface --------------------------------------------------

_ENCODINGS = ("utf-8", "base64")


def _decode(value: Any, encoding: str, what: str) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a string or null, not {type(value).__name__}")
    if encoding == "base64":
        try:
            return base64.b64decode(value, validate=True)
        except binascii.Error:
            raise ValueError(f"{what} is not base64") from None
    return value.encode()


def _encode(value: bytes | None, encoding: str, what: str) -> str | None:
    if value is None:
        return None
    if encoding == "base64":
        return base64.b64encode(value).decode()
    try:
        return value.decode()
    except UnicodeDecodeError:
        raise ValueError(f"{what} is not UTF-8 text: ask with encoding=base64") from None


def check_encoding(encoding: Any) -> str:
    if encoding not in _ENCODINGS:
        raise ValueError(f"encoding={encoding!r} is not one of {', '.join(_ENCODINGS)}")
    result: str = encoding
    return result


def record_from_json(item: Any, index: int, encoding: str = "utf-8") -> tuple[bytes | None, bytes | None, Any]:
    """``records[index]`` of a JSON body: a value (string or null), or an object with
    ``key``, ``value`` and ``headers`` (an object, or ``[name, value]`` pairs)."""
    if not isinstance(item, dict):
        return None, _decode(item, encoding, f"records[{index}]"), None
    unknown = set(item) - {"key", "value", "headers"}
    if unknown:
        raise ValueError(f"records[{index}] has {', '.join(sorted(unknown))}: a record has key, value and headers")
    headers = item.get("headers") or {}
    pairs = headers.items() if isinstance(headers, dict) else headers
    try:
        decoded = [(str(n), _decode(v, encoding, f"records[{index}]'s header {n!r}")) for n, v in pairs]
    except (TypeError, ValueError) as exc:
        raise ValueError(f"records[{index}]'s headers: {exc}") from None
    return (
        _decode(item.get("key"), encoding, f"records[{index}]'s key"),
        _decode(item.get("value"), encoding, f"records[{index}]'s value"),
        decoded,
    )


def record_to_json(record: Record, encoding: str = "utf-8") -> dict[str, Any]:
    where = f"the record at {record.topic}-{record.partition}@{record.offset}"
    return {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "key": _encode(record.key, encoding, f"the key of {where}"),
        "value": _encode(record.value, encoding, f"the value of {where}"),
        "headers": [[name, _encode(v, encoding, f"header {name!r} of {where}")] for name, v in record.headers],
    }


__all__ += ["check_encoding"]
