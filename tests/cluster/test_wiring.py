"""Every node of an in-process cluster is wired as a Broker is (server/wiring.py): one core of
coordinators and stores for the process, a request path of its own per node."""

from __future__ import annotations

from trikafka import open_cluster
from trikafka.errors import ErrorCode
from trikafka.server.wiring import API_FAMILIES

from .support import connected, request


async def test_every_node_serves_the_one_core_through_its_own_request_path(autojump_clock):
    async with open_cluster(brokers=3, transport="memory") as cluster:
        nodes = [cluster.broker(n) for n in (1, 2, 3)]
        core = cluster.core
        for node in nodes:
            assert node.path.context.client_quotas is core.client_quotas
            assert node.path.context.scram_credentials is core.scram_credentials
            # SASL listeners authenticate against the users AlterUserScramCredentials writes:
            # the wiring builds their security over the core's (tests/network/test_settings_records.py).
            # a node builds every family before its gates wrap the handlers (API_FAMILIES are lazy)
            built = {type(f) for f in node.path.apis._families.values()}
            assert built == {family.load() for family in API_FAMILIES}
        assert len({id(node.path.request_channel) for node in nodes}) == 3


async def test_a_client_quota_set_through_one_broker_is_the_clusters(autojump_clock):
    """Quotas are cluster metadata in Kafka: AlterClientQuotas on any broker, seen by all."""
    async with open_cluster(brokers=3, transport="memory") as cluster:
        async with connected(cluster, 1) as client:
            altered = await client.request(request(49, 1, validate_only=False, entries=[{
                "entity": [{"entity_type": "user", "entity_name": "alice"}],
                "ops": [{"key": "producer_byte_rate", "value": 1024.0, "remove": False}],
            }]))
            assert altered.entries[0].error_code == ErrorCode.none
        async with connected(cluster, 3) as client:
            described = await client.request(request(48, 1, strict=False, components=[]))
            assert described.error_code == ErrorCode.none
            [entry] = described.entries
            assert [(v.key, v.value) for v in entry.values] == [("producer_byte_rate", 1024.0)]
