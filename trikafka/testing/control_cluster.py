"""The control interface's cluster routes: what ``trikafka.cluster.controls`` does in process,
over HTTP for a ``python -m trikafka --brokers N --control-listener ...`` process::

    GET    /brokers                                  every broker: id, alive, address, rtt_ms
    POST   /brokers/<id>/stop                        stop a broker (its partitions lead elsewhere)
    POST   /brokers/<id>/start                       start it again, on the same address
    POST   /brokers/<id>/rtt    {"rtt_ms": 200}      every request to it handled 200 ms later (0: off)
    GET    /partitions/<topic>/<p>                   leader, replicas, isr, leader_epoch
    POST   /partitions/<topic>/<p>/leader {"to": 2}  move the leader (a live in-sync replica)
    POST   /partitions/<topic>/<p>/isr/shrink {"to": [1, 2]}   the ISR becomes these
    POST   /partitions/<topic>/<p>/isr/expand {"to": [3]}      these catch up and rejoin
                                                     (no body: every live replica)
    POST   /coordinators {"key": "g", "to": 2, "key_type": "group"|"transaction"}
                                                     move a group's (transactional id's, or
                                                     by default both) coordinator

A single broker (no ``--brokers``) answers 404 naming the flag. Refusals of the cluster
(a stopped broker stopped again, a leader that is not in the ISR) answer 400 with its reason.
"""

from __future__ import annotations

from typing import Any

from trikafka.testing.surface import controls

__all__ = ["RouteError", "cluster_route"]


class RouteError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise RouteError(400, f"{name}={value!r} is not an int")
    try:
        return int(value)
    except ValueError:
        raise RouteError(400, f"{name}={value!r} is not an int") from None


def _ids(value: Any, name: str) -> list[int]:
    if not isinstance(value, list):
        raise RouteError(400, f"{name}={value!r} must be a list of broker ids")
    return [_int(v, name) for v in value]


def _broker(cluster: Any, node_id: int) -> dict[str, Any]:
    alive = node_id in cluster.state.alive
    node = cluster.nodes.get(node_id)
    rtt = 0.0
    if node is not None:
        rtt = next(
            (
                f.delay
                for f in controls(node).active_faults()
                if f.kind == "latency" and f.api is None and f.remaining is None
            ),
            0.0,
        )
    address = cluster.bootstrap_servers.split(",")[list(cluster.state.node_ids).index(node_id)]
    return {"id": node_id, "alive": alive, "address": address, "rtt_ms": rtt * 1000}


def _partition(cluster: Any, topic: str, partition: int) -> dict[str, Any]:
    if cluster.state.get(topic, partition) is None:
        raise RouteError(404, f"no partition {topic}-{partition} in the cluster")
    lead = cluster.state.leadership(topic, partition)
    return {
        "topic": topic,
        "partition": partition,
        "leader": lead.leader,
        "leader_epoch": getattr(lead, "leader_epoch", None),
        "replicas": list(lead.replicas),
        "isr": list(lead.isr),
    }


async def cluster_route(cluster: Any, method: str, parts: list[str], payload: dict[str, Any]) -> tuple[int, Any] | None:
    """The answer to a cluster route, or None when ``parts`` names none."""
    if parts[0] not in ("brokers", "partitions", "coordinators"):
        return None
    if cluster is None or not hasattr(cluster, "stop_broker"):
        raise RouteError(404, f"/{parts[0]} needs a cluster: start the broker with --brokers N")
    try:
        return await _route(cluster, method, parts, payload)
    except ValueError as exc:  # the cluster's refusals
        raise RouteError(400, str(exc)) from None
    except KeyError as exc:
        raise RouteError(404, str(exc).strip("'\"")) from None


async def _route(cluster: Any, method: str, parts: list[str], payload: dict[str, Any]) -> tuple[int, Any] | None:
    head = parts[0]
    if head == "brokers":
        if len(parts) == 1 and method == "GET":
            return 200, {"brokers": [_broker(cluster, i) for i in cluster.state.node_ids]}
        if len(parts) != 3 or method != "POST":
            return None
        node_id = _int(parts[1], "broker id")
        if node_id not in cluster.state.node_ids:
            raise RouteError(404, f"no broker {node_id}; brokers: {list(cluster.state.node_ids)}")
        if parts[2] == "stop":
            await cluster.stop_broker(node_id)
        elif parts[2] == "start":
            await cluster.start_broker(node_id)
        elif parts[2] == "rtt":
            rtt_ms = payload.get("rtt_ms")
            if isinstance(rtt_ms, bool) or not isinstance(rtt_ms, int | float) or rtt_ms < 0:
                raise RouteError(400, f"rtt_ms={rtt_ms!r} must be a non-negative number of milliseconds")
            controls(cluster.nodes[node_id]).set_round_trip_time(rtt_ms / 1000)
        else:
            return None
        return 200, {"broker": _broker(cluster, node_id)}
    if head == "coordinators" and len(parts) == 1 and method == "POST":
        key = payload.get("key")
        if not isinstance(key, str) or not key:
            raise RouteError(400, "missing 'key' (a group id or transactional id)")
        key_type = payload.get("key_type")
        cluster.move_coordinator(key, _int(payload.get("to"), "to"), key_type=key_type)
        kinds = {"group": [0], "transaction": [1]}.get(str(key_type), [0, 1])  # FindCoordinator's key types
        moved = [cluster.state.coordinator_partition(kind, key) for kind in kinds]
        return 200, {"moved": key, "to": payload["to"], "partitions": [_partition(cluster, *tp) for tp in moved]}
    if head != "partitions" or len(parts) < 3:
        return None
    topic, partition, rest = parts[1], _int(parts[2], "partition"), parts[3:]
    if not rest and method == "GET":
        return 200, _partition(cluster, topic, partition)
    if method != "POST":
        return None
    _partition(cluster, topic, partition)  # 404 for an unknown partition
    if rest == ["leader"]:
        cluster.move_leader(topic, partition, _int(payload.get("to"), "to"))
    elif rest == ["isr", "shrink"]:
        cluster.shrink_isr(topic, partition, _ids(payload.get("to"), "to"))
    elif rest == ["isr", "expand"]:
        to = payload.get("to")
        cluster.expand_isr(topic, partition, None if to is None else _ids(to, "to"))
    else:
        return None
    return 200, _partition(cluster, topic, partition)
