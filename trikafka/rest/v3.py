"""The v3 API: clusters, brokers, topics and their configs, partitions, consumer groups and lag,
and produce (``POST …/topics/{t}/records``), in Confluent's resource shapes (``kind``,
``metadata.self``, ``related`` links).

A produce body is one record object, or several JSON objects one after another in one
request (Confluent's streaming mode): each is answered, in order, by one JSON object on its
own line, once the request body has ended; one record answers with its own status.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from trikafka.client import (
    AlterConfigOp,
    ConfigResource,
    KafkaError,
    NewTopic,
    OffsetSpec,
    OpType,
    TopicPartition,
)
from trikafka.rest import errors
from trikafka.rest.http import (
    V3_JSON,
    answer,
    check_accept,
    check_plain_content_type,
    kafka_refusal,
    read_model,
    v3_cluster,
)
from trikafka.rest.models import AlterConfigsRequest, CreateTopicRequest, UpdateConfigRequest
from trikafka.rest.records import produce_records

__all__ = ["ROUTES"]


def _proxy(request: Request) -> Any:
    return request.app.state.proxy


def _ok(content: Any, status: int = 200) -> Response:
    return answer(content, status, V3_JSON)


def _base(request: Request) -> str:
    return str(request.base_url).rstrip("/") + "/v3"


def _related(url: str) -> dict[str, str]:
    return {"related": url}


def _list(kind: str, self_url: str, data: list[Any]) -> dict[str, Any]:
    return {"kind": kind, "metadata": {"self": self_url, "next": None}, "data": data}


def _cluster_json(request: Request, clients: Any, cluster_id: str) -> dict[str, Any]:
    url = f"{_base(request)}/clusters/{cluster_id}"
    controller = clients.admin.client.cluster.controller_id
    return {
        "kind": "KafkaCluster",
        "metadata": {"self": url, "resource_name": f"crn:///kafka={cluster_id}"},
        "cluster_id": cluster_id,
        "controller": _related(f"{url}/brokers/{controller}") if controller >= 0 else None,
        "acls": _related(f"{url}/acls"),
        "brokers": _related(f"{url}/brokers"),
        "broker_configs": _related(f"{url}/broker-configs"),
        "consumer_groups": _related(f"{url}/consumer-groups"),
        "topics": _related(f"{url}/topics"),
        "partition_reassignments": _related(f"{url}/topics/-/partitions/-/reassignment"),
    }


async def list_clusters(request: Request) -> Response:
    check_accept(request, V3_JSON)
    clients, cluster_id = await v3_cluster(request)
    return _ok(_list("KafkaClusterList", f"{_base(request)}/clusters", [_cluster_json(request, clients, cluster_id)]))


async def get_cluster(request: Request) -> Response:
    check_accept(request, V3_JSON)
    clients, cluster_id = await v3_cluster(request)
    return _ok(_cluster_json(request, clients, cluster_id))


def _broker_json(request: Request, cluster_id: str, node: Any) -> dict[str, Any]:
    url = f"{_base(request)}/clusters/{cluster_id}/brokers/{node.node_id}"
    return {
        "kind": "KafkaBroker",
        "metadata": {"self": url, "resource_name": f"crn:///kafka={cluster_id}/broker={node.node_id}"},
        "cluster_id": cluster_id,
        "broker_id": node.node_id,
        "host": node.host,
        "port": node.port,
        "rack": node.rack,
        "configs": _related(f"{url}/configs"),
        "partition_replicas": _related(f"{url}/partition-replicas"),
    }


async def list_brokers(request: Request) -> Response:
    check_accept(request, V3_JSON)
    clients, cluster_id = await v3_cluster(request)
    nodes = [clients.admin.client.cluster.brokers[b] for b in sorted(clients.admin.client.cluster.brokers)]
    url = f"{_base(request)}/clusters/{cluster_id}/brokers"
    return _ok(_list("KafkaBrokerList", url, [_broker_json(request, cluster_id, n) for n in nodes]))


async def get_broker(request: Request) -> Response:
    check_accept(request, V3_JSON)
    clients, cluster_id = await v3_cluster(request)
    raw = request.path_params["broker_id"]
    node = clients.admin.client.cluster.brokers.get(int(raw)) if raw.isdigit() and len(raw) < 10 else None
    if node is None:
        raise errors.RestError(404, 404, f"Broker {raw!r} not found")
    return _ok(_broker_json(request, cluster_id, node))


# --- topics -------------------------------------------------------------------------------


def _topic_json(request: Request, cluster_id: str, info: Any) -> dict[str, Any]:
    url = f"{_base(request)}/clusters/{cluster_id}/topics/{info.name}"
    replication = max((len(p.replicas) for p in info.partitions.values()), default=0)
    return {
        "kind": "KafkaTopic",
        "metadata": {"self": url, "resource_name": f"crn:///kafka={cluster_id}/topic={info.name}"},
        "cluster_id": cluster_id,
        "topic_name": info.name,
        "is_internal": bool(info.is_internal),
        "replication_factor": replication,
        "partitions_count": len(info.partitions),
        "partitions": _related(f"{url}/partitions"),
        "configs": _related(f"{url}/configs"),
        "partition_reassignments": _related(f"{url}/partitions/-/reassignment"),
        "authorized_operations": [],
    }


def _topic(clients: Any, topic: str) -> Any:
    info = clients.admin.client.cluster.topics.get(topic)
    if info is None or info.error_code:
        raise errors.topic_not_found(topic)
    return info


async def list_topics(request: Request) -> Response:
    check_accept(request, V3_JSON)
    clients, cluster_id = await v3_cluster(request)
    topics = clients.admin.client.cluster.topics
    data = [_topic_json(request, cluster_id, topics[n]) for n in sorted(topics) if not topics[n].error_code]
    return _ok(_list("KafkaTopicList", f"{_base(request)}/clusters/{cluster_id}/topics", data))


async def get_topic(request: Request) -> Response:
    check_accept(request, V3_JSON)
    clients, cluster_id = await v3_cluster(request)
    return _ok(_topic_json(request, cluster_id, _topic(clients, request.path_params["topic"])))


async def create_topic(request: Request) -> Response:
    check_plain_content_type(request, empty_ok=False)
    check_accept(request, V3_JSON)
    body = await read_model(request, CreateTopicRequest)
    clients, cluster_id = await v3_cluster(request)
    configs = {c.name: c.value for c in body.configs if c.value is not None}
    new = NewTopic(body.topic_name, body.partitions_count or -1, body.replication_factor or -1, configs)
    try:
        await clients.admin.create_topics([new])
        await clients.admin.list_topics(internal=True)
    except KafkaError as exc:
        refusal = kafka_refusal(exc, body.topic_name)
        if getattr(exc, "error_code", None) == 36:  # TOPIC_ALREADY_EXISTS: Confluent's 40002
            refusal = errors.RestError(400, 40002, f"Topic '{body.topic_name}' already exists.")
        raise refusal from None
    return _ok(_topic_json(request, cluster_id, _topic(clients, body.topic_name)), 201)


async def delete_topic(request: Request) -> Response:
    check_accept(request, V3_JSON)
    clients, _ = await v3_cluster(request)
    topic = request.path_params["topic"]
    _topic(clients, topic)
    try:
        await clients.admin.delete_topics([topic])
    except KafkaError as exc:
        raise kafka_refusal(exc, topic) from None
    return _ok(None, 204)


# --- topic configs ------------------------------------------------------------------------

_SOURCES = {
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
}


def _config_json(request: Request, cluster_id: str, topic: str, entry: Any) -> dict[str, Any]:
    url = f"{_base(request)}/clusters/{cluster_id}/topics/{topic}/configs/{entry.name}"
    return {
        "kind": "KafkaTopicConfig",
        "metadata": {"self": url, "resource_name": f"crn:///kafka={cluster_id}/topic={topic}/config={entry.name}"},
        "cluster_id": cluster_id,
        "topic_name": topic,
        "name": entry.name,
        "value": None if entry.sensitive else entry.value,
        "is_default": entry.is_default,
        "is_read_only": entry.read_only,
        "is_sensitive": entry.sensitive,
        "source": _SOURCES.get(entry.source, "UNKNOWN"),
        "synonyms": [],
    }


async def _configs(request: Request) -> tuple[Any, str, str, dict[str, Any]]:
    clients, cluster_id = await v3_cluster(request)
    topic = request.path_params["topic"]
    _topic(clients, topic)
    try:
        described = await clients.admin.describe_configs([ConfigResource.topic(topic)])
    except KafkaError as exc:
        raise kafka_refusal(exc, topic) from None
    return clients, cluster_id, topic, dict(described[ConfigResource.topic(topic)])


async def list_topic_configs(request: Request) -> Response:
    check_accept(request, V3_JSON)
    _, cluster_id, topic, entries = await _configs(request)
    data = [_config_json(request, cluster_id, topic, entries[n]) for n in sorted(entries)]
    return _ok(_list("KafkaTopicConfigList", f"{_base(request)}/clusters/{cluster_id}/topics/{topic}/configs", data))


async def get_topic_config(request: Request) -> Response:
    check_accept(request, V3_JSON)
    _, cluster_id, topic, entries = await _configs(request)
    name = request.path_params["name"]
    if name not in entries:
        raise errors.RestError(404, 404, f"Config {name!r} not found for topic {topic!r}")
    return _ok(_config_json(request, cluster_id, topic, entries[name]))


async def _alter(request: Request, ops: Iterable[AlterConfigOp]) -> None:
    clients, _, topic, entries = await _configs(request)
    ops = list(ops)
    for op in ops:
        if op.name not in entries:
            raise errors.RestError(404, 404, f"Config {op.name!r} not found for topic {topic!r}")
    try:
        await clients.admin.incremental_alter_configs({ConfigResource.topic(topic): ops})
    except KafkaError as exc:
        raise kafka_refusal(exc, topic) from None


async def update_topic_config(request: Request) -> Response:
    check_plain_content_type(request, empty_ok=False)
    check_accept(request, V3_JSON)
    body = await read_model(request, UpdateConfigRequest)
    if body.value is None:
        raise errors.unprocessable("value: a string is required")
    await _alter(request, [AlterConfigOp(request.path_params["name"], body.value)])
    return _ok(None, 204)


async def reset_topic_config(request: Request) -> Response:
    check_accept(request, V3_JSON)
    await _alter(request, [AlterConfigOp(request.path_params["name"], None, OpType.DELETE)])
    return _ok(None, 204)


async def alter_topic_configs(request: Request) -> Response:
    check_plain_content_type(request, empty_ok=False)
    check_accept(request, V3_JSON)
    body = await read_model(request, AlterConfigsRequest)
    ops = []
    for i, entry in enumerate(body.data):
        delete = (entry.operation or "SET").upper() == "DELETE"
        if not delete and entry.value is None:
            raise errors.unprocessable(f"data.{i}.value: a string is required to SET {entry.name!r}")
        ops.append(AlterConfigOp(entry.name, None if delete else entry.value, OpType.DELETE if delete else OpType.SET))
    await _alter(request, ops)
    return _ok(None, 204)


# --- partitions ---------------------------------------------------------------------------


def _partition_json(request: Request, cluster_id: str, topic: str, p: Any) -> dict[str, Any]:
    url = f"{_base(request)}/clusters/{cluster_id}/topics/{topic}/partitions/{p.partition}"
    return {
        "kind": "KafkaPartition",
        "metadata": {"self": url, "resource_name": f"crn:///kafka={cluster_id}/topic={topic}/partition={p.partition}"},
        "cluster_id": cluster_id,
        "topic_name": topic,
        "partition_id": p.partition,
        "leader": _related(f"{url}/replicas/{p.leader}") if p.leader >= 0 else None,
        "replicas": _related(f"{url}/replicas"),
        "reassignment": _related(f"{url}/reassignment"),
    }


async def list_partitions(request: Request) -> Response:
    check_accept(request, V3_JSON)
    clients, cluster_id = await v3_cluster(request)
    topic = request.path_params["topic"]
    info = _topic(clients, topic)
    data = [_partition_json(request, cluster_id, topic, info.partitions[i]) for i in sorted(info.partitions)]
    url = f"{_base(request)}/clusters/{cluster_id}/topics/{topic}/partitions"
    return _ok(_list("KafkaPartitionList", url, data))


async def get_partition(request: Request) -> Response:
    check_accept(request, V3_JSON)
    clients, cluster_id = await v3_cluster(request)
    topic = request.path_params["topic"]
    info = _topic(clients, topic)
    raw = request.path_params["partition_id"]
    if not raw.isdigit() or len(raw) > 10 or int(raw) not in info.partitions:
        raise errors.RestError(
            404, errors.PARTITION_NOT_FOUND, f"Partition not found: {topic!r} has no partition {raw!r}"
        )
    return _ok(_partition_json(request, cluster_id, topic, info.partitions[int(raw)]))


# --- consumer groups ----------------------------------------------------------------------


def _group_json(request: Request, cluster_id: str, group: Any) -> dict[str, Any]:
    url = f"{_base(request)}/clusters/{cluster_id}/consumer-groups/{group.group_id}"
    return {
        "kind": "KafkaConsumerGroup",
        "metadata": {"self": url, "resource_name": f"crn:///kafka={cluster_id}/consumer-group={group.group_id}"},
        "cluster_id": cluster_id,
        "consumer_group_id": group.group_id,
        "is_simple": group.protocol_type == "" and not group.members,
        "partition_assignor": group.protocol,
        "state": (group.state or "UNKNOWN").upper().replace("PREPARINGREBALANCE", "PREPARING_REBALANCE").replace(
            "COMPLETINGREBALANCE", "COMPLETING_REBALANCE"
        ),
        "type": group.type.upper(),
        "coordinator": _related(f"{_base(request)}/clusters/{cluster_id}/brokers/-"),
        "consumers": _related(f"{url}/consumers"),
        "lag_summary": _related(f"{url}/lag-summary"),
    }


async def _groups(request: Request, group_ids: list[str] | None = None) -> tuple[Any, str, dict[str, Any]]:
    clients, cluster_id = await v3_cluster(request)
    try:
        if group_ids is None:
            group_ids = [g.group_id for g in await clients.admin.list_groups() if g.type != "share"]
        described = await clients.admin.describe_groups(group_ids) if group_ids else {}
    except KafkaError as exc:
        raise kafka_refusal(exc) from None
    return clients, cluster_id, described


async def list_groups(request: Request) -> Response:
    check_accept(request, V3_JSON)
    _, cluster_id, described = await _groups(request)
    data = [_group_json(request, cluster_id, described[g]) for g in sorted(described)]
    return _ok(_list("KafkaConsumerGroupList", f"{_base(request)}/clusters/{cluster_id}/consumer-groups", data))


async def _one_group(request: Request) -> tuple[Any, str, Any]:
    group_id = request.path_params["group"]
    clients, cluster_id, described = await _groups(request, [group_id])
    group = described.get(group_id)
    if group is None or group.state in ("Dead", "DEAD"):
        raise errors.consumer_group_not_found(group_id)
    return clients, cluster_id, group


async def get_group(request: Request) -> Response:
    check_accept(request, V3_JSON)
    _, cluster_id, group = await _one_group(request)
    return _ok(_group_json(request, cluster_id, group))


def _consumer_json(request: Request, cluster_id: str, group_id: str, member: Any) -> dict[str, Any]:
    url = f"{_base(request)}/clusters/{cluster_id}/consumer-groups/{group_id}/consumers/{member.member_id}"
    return {
        "kind": "KafkaConsumer",
        "metadata": {"self": url, "resource_name": f"crn:///kafka={cluster_id}/consumer-group={group_id}/consumer={member.member_id}"},
        "cluster_id": cluster_id,
        "consumer_group_id": group_id,
        "consumer_id": member.member_id,
        "instance_id": member.group_instance_id,
        "client_id": member.client_id,
        "assignments": _related(f"{url}/assignments"),
    }


async def list_group_consumers(request: Request) -> Response:
    check_accept(request, V3_JSON)
    _, cluster_id, group = await _one_group(request)
    data = [_consumer_json(request, cluster_id, group.group_id, m) for m in group.members]
    url = f"{_base(request)}/clusters/{cluster_id}/consumer-groups/{group.group_id}/consumers"
    return _ok(_list("KafkaConsumerList", url, data))


async def _lags(request: Request) -> tuple[str, Any, list[dict[str, Any]]]:
    clients, cluster_id, group = await _one_group(request)
    try:
        committed = await clients.admin.list_group_offsets(group.group_id)
        ends = await clients.admin.list_offsets({tp: OffsetSpec.LATEST for tp in committed}) if committed else {}
    except KafkaError as exc:
        raise kafka_refusal(exc) from None
    owners: dict[TopicPartition, Any] = {}
    for member in group.members:
        for tp in member.partitions:
            owners[TopicPartition(tp.topic, tp.partition)] = member
    lags = []
    for tp in sorted(committed):
        end = ends[tp].offset if tp in ends else committed[tp]
        owner = owners.get(tp)
        url = (
            f"{_base(request)}/clusters/{cluster_id}/consumer-groups/{group.group_id}"
            f"/lags/{tp.topic}/partitions/{tp.partition}"
        )
        lags.append(
            {
                "kind": "KafkaConsumerLag",
                "metadata": {"self": url, "resource_name": None},
                "cluster_id": cluster_id,
                "consumer_group_id": group.group_id,
                "topic_name": tp.topic,
                "partition_id": tp.partition,
                "current_offset": committed[tp],
                "log_end_offset": end,
                "lag": max(end - committed[tp], 0),
                "consumer_id": owner.member_id if owner else "",
                "instance_id": owner.group_instance_id if owner else None,
                "client_id": owner.client_id if owner else "",
            }
        )
    return cluster_id, group, lags


async def list_lags(request: Request) -> Response:
    check_accept(request, V3_JSON)
    cluster_id, group, lags = await _lags(request)
    url = f"{_base(request)}/clusters/{cluster_id}/consumer-groups/{group.group_id}/lags"
    return _ok(_list("KafkaConsumerLagList", url, lags))


async def lag_summary(request: Request) -> Response:
    check_accept(request, V3_JSON)
    cluster_id, group, lags = await _lags(request)
    url = f"{_base(request)}/clusters/{cluster_id}/consumer-groups/{group.group_id}/lag-summary"
    top = max(lags, key=lambda lag: lag["lag"], default=None)
    return _ok(
        {
            "kind": "KafkaConsumerGroupLagSummary",
            "metadata": {"self": url, "resource_name": None},
            "cluster_id": cluster_id,
            "consumer_group_id": group.group_id,
            "max_lag_consumer_id": top["consumer_id"] if top else "",
            "max_lag_instance_id": top["instance_id"] if top else None,
            "max_lag_client_id": top["client_id"] if top else "",
            "max_lag_topic_name": top["topic_name"] if top else "",
            "max_lag_partition_id": top["partition_id"] if top else 0,
            "max_lag": top["lag"] if top else 0,
            "total_lag": sum(lag["lag"] for lag in lags),
            "max_lag_consumer": None,
            "max_lag_partition": None,
        }
    )


C = "/v3/clusters/{cluster_id}"
T = C + "/topics/{topic}"
GR = C + "/consumer-groups/{group}"
ROUTES = [
    Route("/v3/clusters", list_clusters, methods=["GET"]),
    Route(C, get_cluster, methods=["GET"]),
    Route(C + "/brokers", list_brokers, methods=["GET"]),
    Route(C + "/brokers/{broker_id}", get_broker, methods=["GET"]),
    Route(C + "/topics", list_topics, methods=["GET"]),
    Route(C + "/topics", create_topic, methods=["POST"]),
    Route(T, get_topic, methods=["GET"]),
    Route(T, delete_topic, methods=["DELETE"]),
    Route(T + "/configs", list_topic_configs, methods=["GET"]),
    Route(T + "/configs:alter", alter_topic_configs, methods=["POST"]),
    Route(T + "/configs/{name}", get_topic_config, methods=["GET"]),
    Route(T + "/configs/{name}", update_topic_config, methods=["PUT"]),
    Route(T + "/configs/{name}", reset_topic_config, methods=["DELETE"]),
    Route(T + "/partitions", list_partitions, methods=["GET"]),
    Route(T + "/partitions/{partition_id}", get_partition, methods=["GET"]),
    Route(T + "/records", produce_records, methods=["POST"]),
    Route(C + "/consumer-groups", list_groups, methods=["GET"]),
    Route(GR, get_group, methods=["GET"]),
    Route(GR + "/consumers", list_group_consumers, methods=["GET"]),
    Route(GR + "/lags", list_lags, methods=["GET"]),
    Route(GR + "/lag-summary", lag_summary, methods=["GET"]),
]
