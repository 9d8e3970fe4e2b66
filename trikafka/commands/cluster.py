"""``cluster``: the cluster id, the controller and every broker (Metadata), as rpk cluster info."""

from __future__ import annotations

import argparse
from typing import Any

from trikafka.client import open_admin
from trikafka.commands.common import EXIT_OK, Output, add_connection_flags, client_settings

__all__ = ["register"]


async def _cluster(args: argparse.Namespace, out: Output) -> int:
    async with open_admin(**client_settings(args, "admin")) as admin:
        topics = await admin.list_topics(internal=True)
        cluster = admin.client.cluster
        brokers = sorted(cluster.brokers.values(), key=lambda b: b.node_id)
        controller, cluster_id = cluster.controller_id, cluster.cluster_id
        leaders: dict[int, int] = {}
        for info in cluster.topics.values():
            for p in info.partitions.values():
                leaders[p.leader] = leaders.get(p.leader, 0) + 1
    result: dict[str, Any] = {
        "cluster_id": cluster_id,
        "controller": controller,
        "brokers": [
            {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack, "leaders": leaders.get(b.node_id, 0)}
            for b in brokers
        ],
        # Counted as the console counts them: topics are yours, internal ones (__consumer_offsets,
        # __transaction_state) beside them; partitions are every partition, internal included.
        "topics": sum(not cluster.topics[name].is_internal for name in topics),
        "internal_topics": sum(cluster.topics[name].is_internal for name in topics),
        "partitions": sum(topics.values()),
    }
    if out.as_json:
        out.json(result)
        return EXIT_OK
    out.line(
        f"Cluster: {cluster_id}  Controller: {controller}  Topics: {result['topics']} + "
        f"{result['internal_topics']} internal  "
        f"Partitions: {result['partitions']}"
    )
    out.table(
        None,
        ["BROKER", "HOST", "PORT", "RACK", "LEADERS", ""],
        [
            (
                b["node_id"],
                b["host"],
                b["port"],
                b["rack"] or "",
                b["leaders"],
                "controller" if b["node_id"] == controller else "",
            )
            for b in result["brokers"]
        ],
    )
    return EXIT_OK


def register(commands: Any) -> None:
    parser = commands.add_parser("cluster", help="cluster id, controller, brokers")
    add_connection_flags(parser)
    parser.set_defaults(run=_cluster)
