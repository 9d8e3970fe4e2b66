"""The broker's HTTP server: routing by prefix, mounting, lifetime bound to the broker."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from trikafka import open_broker
from trikafka.config import BrokerConfig
from trikafka.errors import ConfigError
from trikafka.web import HttpServer, Router
from trikafka.web.server import route_for

from .http import http_get


def test_route_for_takes_the_longest_prefix_on_a_path_boundary():
    routes = {"/ui": 1, "/ui/api": 2, "/metrics": 3}
    assert route_for(routes, "/ui") == "/ui"
    assert route_for(routes, "/ui/topics") == "/ui"
    assert route_for(routes, "/ui/api/x") == "/ui/api"
    assert route_for(routes, "/uix") is None
    assert route_for(routes, "/metrics") == "/metrics"
    assert route_for(routes, "/") is None
    assert route_for({"/": 0, "/ui": 1}, "/other") == "/"


def test_a_prefix_must_start_and_not_end_with_a_slash():
    router = Router()
    for bad in ("ui", "/ui/", ""):
        with pytest.raises(ValueError, match="mount prefix"):
            router.mount(bad, lambda *a: None)


def test_metrics_port_is_validated_like_every_key():
    assert BrokerConfig().metrics_port == -1  # off
    assert BrokerConfig().metrics_host == "127.0.0.1"
    with pytest.raises(ConfigError) as err:
        BrokerConfig.from_mapping({"metrics.port": "70000"})
    assert "metrics.port" in str(err.value) and "70000" in str(err.value) and "65535" in str(err.value)
    with pytest.raises(ConfigError, match="metrics.host"):
        BrokerConfig.from_mapping({"metrics.host": "http://x/"})
    with pytest.raises(ConfigError, match="did you mean 'metrics.port'"):
        BrokerConfig.from_mapping({"metrics.prot": "1"})


async def echo_app(scope, receive, send):
    """Answers with what it was given: the path and the root_path."""
    await receive()
    body = f"{scope['path']} {scope['root_path']}".encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": body})


async def test_mounted_apps_get_their_prefix_as_root_path():
    with trio.fail_after(20):
        async with open_broker(metrics_port=0) as broker:
            broker.http_server.mount("/ui", echo_app)  # after start: the router looks up per request
            host, port = broker.http_server.bound
            assert (await http_get(host, port, "/ui/topics/t1")).body == "/ui/topics/t1 /ui"
            assert (await http_get(host, port, "/ui")).body == "/ui /ui"
            missing = await http_get(host, port, "/uix")
            assert missing.status == 404
            index = await http_get(host, port, "/")
            assert index.status == 200 and "/metrics" in index.body and "/ui" in index.body
            scrape = await http_get(host, port, "/metrics")
            assert scrape.status == 200 and scrape.headers["content-type"].startswith("text/plain")


async def test_the_server_is_off_by_default_and_stops_with_the_broker():
    with trio.fail_after(20):
        async with open_broker() as broker:
            assert broker.http_server.bound is None  # metrics.port -1: never started
        async with open_broker(metrics_port=0) as broker:
            host, port = broker.http_server.bound
            assert (await http_get(host, port, "/metrics")).status == 200
        await broker.stopped.wait()
        with pytest.raises(OSError):  # the listening socket is closed with the broker
            await trio.open_tcp_stream(host, port)


async def test_a_server_of_its_own_runs_until_stopped():
    with trio.fail_after(20):
        server = HttpServer("127.0.0.1", 0, {"/echo": echo_app})
        async with trio.open_nursery() as nursery:
            host, port = await nursery.start(server.run)
            assert server.url == f"http://127.0.0.1:{port}"
            assert (await http_get(host, port, "/echo/a")).body == "/echo/a /echo"
            server.stop()
        with pytest.raises(OSError):
            await trio.open_tcp_stream(host, port)


async def test_a_port_in_use_fails_the_start_with_os_error():
    with trio.fail_after(20):
        taken = HttpServer("127.0.0.1", 0)
        async with trio.open_nursery() as nursery:
            _, port = await nursery.start(taken.run)
            with pytest.raises(BaseExceptionGroup) as failed:  # out of the broker's nursery
                async with open_broker(metrics_port=port):
                    pass
            assert failed.group_contains(OSError, match="in use")
            taken.stop()


def test_a_taken_port_is_one_line_and_exit_1(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "trikafka",
                "--in-memory",
                "--listeners",
                "PLAINTEXT://127.0.0.1:0",
                "--override",
                f"metrics.port={port}",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].startswith("trikafka: cannot start: [Errno 98]")
    assert "Traceback" not in result.stderr
