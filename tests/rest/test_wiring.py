"""How the proxy is served: rest.proxy.port on the broker's HTTP server, the CLI flag, the
port's answer before the proxy is mounted, and a taken port named by its key."""

from __future__ import annotations

import socket

import httpx
import pytest
import trio
import trio.lowlevel

from trikafka.broker import Broker, open_broker
from trikafka.cli import parse_args, resolve_config
from trikafka.config import BrokerConfig
from trikafka.rest import serve_rest_proxy
from trikafka.testing.thread import test_broker_config


def test_the_flag_sets_the_key_and_the_default_is_off():
    config, _ = resolve_config(parse_args(["--rest-proxy-port", "8082", "--in-memory"]))
    assert config.rest_proxy_port == 8082
    assert BrokerConfig().rest_proxy_port == -1
    assert BrokerConfig().consumer_instance_timeout_ms == 300_000
    with pytest.raises(ValueError, match="rest.proxy.port"):
        BrokerConfig.from_mapping({"rest.proxy.port": "70000"})


async def _get(url: str) -> httpx.Response:
    async with httpx.AsyncClient() as http:
        return await http.get(url)


async def test_the_port_answers_503_until_the_proxy_is_mounted():
    async with open_broker(test_broker_config({"rest.proxy.port": 0})) as broker:
        assert broker.rest_proxy_url is not None
        answer = await _get(f"{broker.rest_proxy_url}/topics")
        assert answer.status_code == 503
        assert answer.json()["error_code"] == 50301
        assert "serve_rest_proxy" in answer.json()["message"]


async def test_no_port_without_the_key():
    async with open_broker(test_broker_config({})) as broker:
        assert broker.rest_proxy_url is None


async def test_a_taken_port_names_the_key():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(BaseExceptionGroup) as failed:  # out of the broker's nursery
            async with open_broker(test_broker_config({"rest.proxy.port": port})):
                await trio.lowlevel.checkpoint()
        assert failed.group_contains(OSError, match=r"in use: 127\.0\.0\.1:\d+ \(the HTTP server, rest\.proxy\.port\)")


async def test_a_graceful_stop_closes_consumer_instances_first():
    """The broker's stop awaits the proxy: its consumers leave their groups while it serves."""
    v2 = {"Content-Type": "application/vnd.kafka.v2+json"}
    with trio.fail_after(30):
        async with trio.open_nursery() as outer:
            broker = await outer.start(Broker(test_broker_config({"rest.proxy.port": 0})).run)
            async with trio.open_nursery() as nursery:
                proxy = serve_rest_proxy(broker)
                await nursery.start(proxy.run)
                async with httpx.AsyncClient(base_url=broker.rest_proxy_url, timeout=20) as http:
                    await http.post("/topics/t", headers={"Content-Type": "application/vnd.kafka.json.v2+json"},
                                    json={"records": [{"value": 1}]})
                    await http.post("/consumers/g", headers=v2, json={"name": "c", "auto.offset.reset": "earliest"})
                    await http.post("/consumers/g/instances/c/subscription", headers=v2, json={"topics": ["t"]})
                    got = await http.get("/consumers/g/instances/c/records", params={"timeout": 10000})
                    assert len(got.json()) == 1
                assert len(broker.group_snapshot("g").members) == 1
                broker.stop()
                await broker.stopped.wait()  # the proxy's run has returned too
                assert proxy.consumers.instances == {}
                assert broker.group_snapshot("g").members == ()
