"""Below ``server/wiring.py`` the request path gets small frozen settings records, never the
whole ``BrokerConfig`` (DESIGN §2), and the SCRAM users are built once, by the wiring."""

from __future__ import annotations

import ast
from pathlib import Path

import attrs
import pytest

import trikafka
from trikafka.config import BrokerConfig
from trikafka.network.processor import ProcessorSettings
from trikafka.server.wiring import socket_server_settings

PACKAGE = Path(trikafka.__file__).parent


def _names(path: Path) -> set[str]:
    """Every name a module mentions: imported, annotated, called."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.rsplit(".", 1)[-1])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "BrokerConfig" in node.value:
            names.add("BrokerConfig")  # a string annotation
    return names


def test_no_network_module_takes_the_broker_config():
    assert "BrokerConfig" in _names(PACKAGE / "server" / "wiring.py")  # the walk sees it
    takes = sorted(p.name for p in (PACKAGE / "network").glob("*.py") if "BrokerConfig" in _names(p))
    assert takes == []


def test_the_request_path_builds_scram_credentials_in_one_place():
    """The wiring builds the broker's SCRAM users once; every SASL listener and the SCRAM
    APIs read that one store (the socket server no longer builds a second as a fallback)."""
    builders = []
    for path in [*(PACKAGE / "network").rglob("*.py"), *(PACKAGE / "server").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "from_config"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "ScramCredentials"
            ):
                builders.append(path.relative_to(PACKAGE).as_posix())
    assert builders == ["server/wiring.py"]


def test_the_wiring_reads_each_key_into_its_record():
    config = BrokerConfig.coerce(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
            "num.network.threads": "2",
            "socket.request.max.bytes": "1000",
            "connections.max.idle.ms": "2000",
            "socket.send.buffer.bytes": "3000",
            "socket.receive.buffer.bytes": "-1",
            "shutdown.grace.ms": "5",
        }
    )
    settings = socket_server_settings(config)
    assert [spec.name for spec in settings.listeners] == ["PLAINTEXT", "INTERNAL"]
    assert settings.num_network_threads == 2
    assert settings.processor == ProcessorSettings(
        max_request_size=1000,
        connections_max_idle_ms=2000,
        send_buffer_bytes=3000,
        receive_buffer_bytes=-1,
        shutdown_grace_ms=5,
    )
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        settings.processor.shutdown_grace_ms = 0  # type: ignore[misc]  # frozen: the point of the test
