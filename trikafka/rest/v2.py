"""The v2 API: topics, produce, brokers and consumer instances (Confluent's paths and bodies).

Every handler takes the Starlette request and answers JSON; refusals are raised as
:class:`~trikafka.rest.errors.RestError` and turned into Confluent's body by the app.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from trikafka.client import ConfigResource, KafkaError, OffsetSpec, TopicPartition
from trikafka.rest import errors
from trikafka.rest.formats import SCHEMA_FORMATS
from trikafka.rest.http import (
    accepted_format,
    answer,
    check_accept,
    check_plain_content_type,
    credentials_of,
    kafka_refusal,
    produce_format,
    read_json,
    read_model,
    validate,
)
from trikafka.rest.models import (
    AssignmentsRequest,
    CommitRequest,
    CreateConsumerRequest,
    PartitionsRequest,
    ProduceRequestV2,
    SeekRequest,
    SubscriptionRequest,
)

__all__ = ["ROUTES"]


def _proxy(request: Request) -> Any:
    return request.app.state.proxy


def _partition(request: Request) -> int:
    raw = request.path_params["partition"]
    if not raw.isdigit() or len(raw) > 10 or int(raw) > 2**31 - 1:
        raise errors.RestError(
            404, errors.PARTITION_NOT_FOUND, f"Partition not found: {raw!r} is not a partition number"
        )
    return int(raw)


# --- topics and brokers -------------------------------------------------------------------


async def list_topics(request: Request) -> Response:
    check_accept(request)
    clients = await _proxy(request).clients_for(request)
    try:
        topics = await clients.admin.list_topics(internal=True)
    except KafkaError as exc:
        raise kafka_refusal(exc) from None
    return answer(sorted(topics))


async def _topic_info(request: Request, topic: str) -> Any:
    clients = await _proxy(request).clients_for(request)
    try:
        await clients.admin.list_topics(internal=True)
    except KafkaError as exc:
        raise kafka_refusal(exc, topic) from None
    info = clients.admin.client.cluster.topics.get(topic)
    if info is None or info.error_code:
        raise errors.topic_not_found(topic)
    return clients, info


def _partition_json(p: Any) -> dict[str, Any]:
    return {
        "partition": p.partition,
        "leader": p.leader,
        "replicas": [
            {"broker": r, "leader": r == p.leader, "in_sync": r in p.isr} for r in (p.replicas or (p.leader,))
        ],
    }


async def get_topic(request: Request) -> Response:
    check_accept(request)
    topic = request.path_params["topic"]
    clients, info = await _topic_info(request, topic)
    try:
        described = await clients.admin.describe_configs([ConfigResource.topic(topic)])
    except KafkaError as exc:
        raise kafka_refusal(exc, topic) from None
    configs = {name: entry.value for name, entry in described[ConfigResource.topic(topic)].items()}
    partitions = [_partition_json(info.partitions[i]) for i in sorted(info.partitions)]
    return answer({"name": topic, "configs": configs, "partitions": partitions})


async def list_partitions(request: Request) -> Response:
    check_accept(request)
    _, info = await _topic_info(request, request.path_params["topic"])
    return answer([_partition_json(info.partitions[i]) for i in sorted(info.partitions)])


async def get_partition(request: Request) -> Response:
    check_accept(request)
    topic = request.path_params["topic"]
    partition = _partition(request)
    _, info = await _topic_info(request, topic)
    if partition not in info.partitions:
        raise errors.partition_not_found(topic, partition)
    return answer(_partition_json(info.partitions[partition]))


async def partition_offsets(request: Request) -> Response:
    check_accept(request)
    topic = request.path_params["topic"]
    partition = _partition(request)
    clients, info = await _topic_info(request, topic)
    if partition not in info.partitions:
        raise errors.partition_not_found(topic, partition)
    tp = TopicPartition(topic, partition)
    try:
        first = await clients.admin.list_offsets({tp: OffsetSpec.EARLIEST})
        last = await clients.admin.list_offsets({tp: OffsetSpec.LATEST})
    except KafkaError as exc:
        raise kafka_refusal(exc, topic) from None
    return answer({"beginning_offset": first[tp].offset, "end_offset": last[tp].offset})


async def list_brokers(request: Request) -> Response:
    check_accept(request)
    clients = await _proxy(request).clients_for(request)
    try:
        await clients.admin.list_topics()
    except KafkaError as exc:
        raise kafka_refusal(exc) from None
    return answer({"brokers": sorted(clients.admin.client.cluster.brokers)})


# --- produce ------------------------------------------------------------------------------


async def produce_to_topic(request: Request) -> Response:
    return await _produce(request, None)


async def produce_to_partition(request: Request) -> Response:
    return await _produce(request, _partition(request))


async def _produce(request: Request, partition: int | None) -> Response:
    proxy = _proxy(request)
    topic = request.path_params["topic"]
    fmt = produce_format(request)
    check_accept(request)
    body = await read_model(request, ProduceRequestV2)
    codec = proxy.codec
    key_id = value_id = None
    if fmt in SCHEMA_FORMATS:
        key_id = codec.schema_id(fmt, topic, True, body.key_schema, body.key_schema_id)
        value_id = codec.schema_id(fmt, topic, False, body.value_schema, body.value_schema_id)
    # Every record is encoded before any is sent: a bad one refuses the request, nothing written.
    encoded = [
        (
            codec.encode(fmt, r.key, key_id, f"records[{i}].key"),
            codec.encode(fmt, r.value, value_id, f"records[{i}].value"),
            partition if partition is not None else r.partition,
        )
        for i, r in enumerate(body.records)
    ]
    clients = await proxy.clients_for(request)
    count = await proxy.partition_count(clients, topic)
    for i, (_, _, p) in enumerate(encoded):
        if p is not None and p >= count:
            if partition is not None:
                raise errors.partition_not_found(topic, p)
            raise errors.RestError(
                404, errors.PARTITION_NOT_FOUND, f"records[{i}].partition: {topic!r} has no partition {p}"
            )
    futures: list[Any] = []
    for key, value, p in encoded:
        try:
            futures.append(await clients.producer.enqueue(topic, value, key=key, partition=p))
        except KafkaError as exc:
            futures.append(exc)
    offsets = []
    for future in futures:
        try:
            if isinstance(future, Exception):
                raise future
            meta = await future.wait()
            offsets.append({"partition": meta.partition, "offset": meta.offset, "error_code": None, "error": None})
        except KafkaError as exc:
            refusal = kafka_refusal(exc, topic)
            offsets.append({"partition": None, "offset": None, "error_code": refusal.error_code, "error": str(exc)})
    return answer({"offsets": offsets, "key_schema_id": key_id, "value_schema_id": value_id})


# --- consumer instances -------------------------------------------------------------------


def _instance(request: Request) -> Any:
    return _proxy(request).consumers.get(
        request.path_params["group"], request.path_params["instance"], credentials_of(request)
    )


def _flag(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.lower() == "true")


def _int_setting(value: Any, key: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, int) or (isinstance(value, str) and value.strip().isdigit()):
        return int(value)
    raise errors.invalid_consumer_config(f"{key}={value!r}: a non-negative integer is required")


async def create_consumer(request: Request) -> Response:
    proxy = _proxy(request)
    check_plain_content_type(request, empty_ok=True)
    check_accept(request)
    group = request.path_params["group"]
    body = await read_model(request, CreateConsumerRequest, required=False)
    name = body.name or f"rest-consumer-{proxy.next_instance_number()}"
    config: dict[str, Any] = dict(proxy.consumer_config(request))
    config["group.id"] = group
    config["client.id"] = f"rest-{group}-{name}"
    if body.auto_offset_reset is not None:
        config["auto.offset.reset"] = body.auto_offset_reset
    if body.auto_commit_enable is not None:
        config["enable.auto.commit"] = _flag(body.auto_commit_enable)
    fetch_min = _int_setting(body.fetch_min_bytes, "fetch.min.bytes")
    if fetch_min is not None:
        config["fetch.min.bytes"] = fetch_min
    timeout = _int_setting(body.request_timeout_ms, "consumer.request.timeout.ms")
    request_timeout_ms = proxy.consumer_request_timeout_ms if timeout is None else timeout
    try:
        await proxy.consumers.create(group, name, body.format, config, request_timeout_ms, credentials_of(request))
    except (KafkaError, ValueError) as exc:
        raise errors.invalid_consumer_config(str(exc)) from None
    base = str(request.base_url).rstrip("/")
    return answer({"instance_id": name, "base_uri": f"{base}/consumers/{group}/instances/{name}"})


async def delete_consumer(request: Request) -> Response:
    check_accept(request)
    await _proxy(request).consumers.delete(
        request.path_params["group"], request.path_params["instance"], credentials_of(request)
    )
    return answer(None, 204)


async def subscribe(request: Request) -> Response:
    check_plain_content_type(request, empty_ok=False)
    check_accept(request)
    instance = _instance(request)
    body = await read_model(request, SubscriptionRequest)
    if (body.topics is None) == (body.topic_pattern is None):
        raise errors.unprocessable("topics or topic_pattern: give exactly one")
    if body.topics is not None and not body.topics:
        raise errors.unprocessable("topics: at least one topic")
    async with instance.lock:
        if instance.assigned_by_hand:
            raise errors.illegal_state("Subscription to topics, partitions and pattern are mutually exclusive")
        try:
            if body.topics is not None:
                instance.consumer.subscribe(body.topics)
            else:
                instance.consumer.subscribe(pattern=body.topic_pattern)
        except Exception as exc:  # re.error for a bad pattern, the client's own refusals
            raise errors.unprocessable(f"cannot subscribe: {exc}") from None
    return answer(None, 204)


async def get_subscription(request: Request) -> Response:
    check_accept(request)
    instance = _instance(request)
    return answer({"topics": sorted(instance.consumer.subscription())})


async def unsubscribe(request: Request) -> Response:
    check_accept(request)
    instance = _instance(request)
    async with instance.lock:
        instance.consumer.unsubscribe()
        instance.assigned_by_hand = False
    return answer(None, 204)


async def assign(request: Request) -> Response:
    check_plain_content_type(request, empty_ok=False)
    check_accept(request)
    instance = _instance(request)
    body = await read_model(request, AssignmentsRequest)
    async with instance.lock:
        if instance.consumer.subscription() and not instance.assigned_by_hand:
            raise errors.illegal_state("Subscription to topics, partitions and pattern are mutually exclusive")
        instance.consumer.assign([TopicPartition(p.topic, p.partition) for p in body.partitions])
        instance.assigned_by_hand = True
    return answer(None, 204)


async def get_assignments(request: Request) -> Response:
    check_accept(request)
    instance = _instance(request)
    parts = sorted(instance.consumer.assignment())
    return answer({"partitions": [{"topic": tp.topic, "partition": tp.partition} for tp in parts]})


def _assigned(instance: Any, tps: list[TopicPartition]) -> None:
    assigned = instance.consumer.assignment()
    for tp in tps:
        if tp not in assigned:
            raise errors.illegal_state(f"No current assignment for partition {tp.topic}-{tp.partition}")


async def seek(request: Request) -> Response:
    check_plain_content_type(request, empty_ok=False)
    check_accept(request)
    instance = _instance(request)
    body = await read_model(request, SeekRequest)
    async with instance.lock:
        tps = [TopicPartition(o.topic, o.partition) for o in body.offsets]
        _assigned(instance, tps)
        for tp, o in zip(tps, body.offsets, strict=True):
            instance.consumer.seek(tp, o.offset)
    return answer(None, 204)


async def _seek_edge(request: Request, beginning: bool) -> Response:
    check_plain_content_type(request, empty_ok=False)
    check_accept(request)
    instance = _instance(request)
    body = await read_model(request, PartitionsRequest)
    async with instance.lock:
        tps = [TopicPartition(p.topic, p.partition) for p in body.partitions]
        _assigned(instance, tps)
        if tps:
            if beginning:
                instance.consumer.seek_to_beginning(*tps)
            else:
                instance.consumer.seek_to_end(*tps)
    return answer(None, 204)


async def seek_to_beginning(request: Request) -> Response:
    return await _seek_edge(request, True)


async def seek_to_end(request: Request) -> Response:
    return await _seek_edge(request, False)


async def commit_offsets(request: Request) -> Response:
    check_plain_content_type(request, empty_ok=True)
    check_accept(request)
    instance = _instance(request)
    body = await read_model(request, CommitRequest, required=False)
    async with instance.lock:
        offsets = None
        if body.offsets:
            # Confluent's rule: the offset given is the last record consumed; the group's
            # committed offset is the next one to read.
            offsets = {TopicPartition(o.topic, o.partition): o.offset + 1 for o in body.offsets}
        try:
            await instance.consumer.commit(offsets)
        except KafkaError as exc:
            raise kafka_refusal(exc) from None
        except Exception as exc:  # CommitFailedError: a rebalance took the partitions
            raise errors.illegal_state(str(exc)) from None
    return answer(None, 204)


async def committed_offsets(request: Request) -> Response:
    check_accept(request)
    instance = _instance(request)
    body = validate(PartitionsRequest, await read_json(request))
    tps = [TopicPartition(p.topic, p.partition) for p in body.partitions]
    async with instance.lock:
        try:
            found = await instance.consumer.committed(tps)
        except KafkaError as exc:
            raise kafka_refusal(exc) from None
    return answer(
        {
            "offsets": [
                {"topic": tp.topic, "partition": tp.partition, "offset": _or_minus_one(found.get(tp)), "metadata": ""}
                for tp in tps
            ]
        }
    )


def _or_minus_one(offset: int | None) -> int:
    return -1 if offset is None else offset


def _query_int(request: Request, name: str) -> int | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    if not raw.isdigit() or len(raw) > 12:
        raise errors.unprocessable(f"query parameter {name}={raw!r}: a non-negative integer is required")
    return int(raw)


async def records(request: Request) -> Response:
    proxy = _proxy(request)
    instance = _instance(request)
    fmt = accepted_format(request, instance.format)
    if fmt != instance.format:
        raise errors.consumer_format_mismatch(fmt, instance.format)
    timeout_ms = _query_int(request, "timeout")
    max_bytes = _query_int(request, "max_bytes")
    if timeout_ms is None:
        timeout_ms = instance.request_timeout_ms
    timeout_ms = min(timeout_ms, proxy.max_poll_timeout_ms)
    out: list[dict[str, Any]] = []
    async with instance.lock:
        try:
            batches = await instance.consumer.getmany(timeout_ms=timeout_ms)
        except KafkaError as exc:
            raise kafka_refusal(exc) from None
        size, full = 0, False
        for tp in sorted(batches):
            for record in batches[tp]:
                if full:  # what is not returned is read again next time
                    instance.consumer.seek(tp, record.offset)
                    break
                record_size = len(record.key or b"") + len(record.value or b"")
                # One record is returned whatever its size, as Confluent's proxy does.
                if max_bytes is not None and out and size + record_size > max_bytes:
                    instance.consumer.seek(tp, record.offset)
                    full = True
                    break
                size += record_size
                out.append(
                    {
                        "topic": record.topic,
                        "key": proxy.codec.decode(fmt, record.key, "key"),
                        "value": proxy.codec.decode(fmt, record.value, "value"),
                        "partition": record.partition,
                        "offset": record.offset,
                    }
                )
    return answer(out, media_type=f"application/vnd.kafka.{fmt}.v2+json")


G = "/consumers/{group}/instances/{instance}"
ROUTES = [
    Route("/topics", list_topics, methods=["GET"]),
    Route("/topics/{topic}", get_topic, methods=["GET"]),
    Route("/topics/{topic}", produce_to_topic, methods=["POST"]),
    Route("/topics/{topic}/partitions", list_partitions, methods=["GET"]),
    Route("/topics/{topic}/partitions/{partition}", get_partition, methods=["GET"]),
    Route("/topics/{topic}/partitions/{partition}", produce_to_partition, methods=["POST"]),
    Route("/topics/{topic}/partitions/{partition}/offsets", partition_offsets, methods=["GET"]),
    Route("/brokers", list_brokers, methods=["GET"]),
    Route("/consumers/{group}", create_consumer, methods=["POST"]),
    Route(G, delete_consumer, methods=["DELETE"]),
    Route(G + "/subscription", subscribe, methods=["POST"]),
    Route(G + "/subscription", get_subscription, methods=["GET"]),
    Route(G + "/subscription", unsubscribe, methods=["DELETE"]),
    Route(G + "/assignments", assign, methods=["POST"]),
    Route(G + "/assignments", get_assignments, methods=["GET"]),
    Route(G + "/positions", seek, methods=["POST"]),
    Route(G + "/positions/beginning", seek_to_beginning, methods=["POST"]),
    Route(G + "/positions/end", seek_to_end, methods=["POST"]),
    Route(G + "/offsets", commit_offsets, methods=["POST"]),
    Route(G + "/offsets", committed_offsets, methods=["GET"]),
    Route(G + "/records", records, methods=["GET"]),
]
