"""What this broker knows of the cluster: itself, its listeners, the cluster id.

Topics join in the storage layer's issue; Metadata reads everything from here.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping

import attrs

from trikafka.config import BrokerConfig, ListenerSpec
from trikafka.config.racks import rack_of
from trikafka.network.endpoints import BoundEndpoint

__all__ = ["MetadataCache", "BrokerEndpoint", "new_cluster_id"]


def new_cluster_id() -> str:
    """Kafka's format: a random UUID, URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@attrs.frozen
class BrokerEndpoint:
    node_id: int
    host: str
    port: int
    rack: str | None = None


class MetadataCache:
    def __init__(self, config: BrokerConfig, cluster_id: str) -> None:
        self.config = config
        self.cluster_id = cluster_id
        self.node_id = config.node_id
        self.controller_id = config.node_id
        self._advertised: dict[str, BrokerEndpoint] = {}

    def set_bound_endpoints(self, endpoints: Mapping[str, BoundEndpoint]) -> None:
        """Advertise ``advertised.listeners`` where given, else what was actually bound."""
        advertised: dict[str, ListenerSpec] = {
            spec.name: spec for spec in (self.config.advertised_listeners or ())
        }
        for name, bound in endpoints.items():
            spec = advertised.get(name)
            if spec is not None:
                host, port = spec.host, spec.port or bound.port
            else:
                host, port = bound.host, bound.port
                if host in ("0.0.0.0", "::", ""):
                    host = "localhost"
            self._advertised[name] = BrokerEndpoint(self.node_id, host, port, rack_of(self.config.broker_rack, 0))

    def alive_brokers(self, listener_name: str) -> list[BrokerEndpoint]:
        endpoint = self._advertised.get(listener_name)
        return [endpoint] if endpoint is not None else []
