"""The dev broker process: ``schema.registry.port`` in the start-up block, data kept in a data
directory across a restart, and every broker of ``--brokers N`` serving the registry."""

from __future__ import annotations

import json
import re

import httpx

from trikafka.testing.process import broker_process

USER = {"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]}
_URL = re.compile(r"schema registry on (http://127\.0\.0\.1:\d+)")


def _urls(output: str) -> list[str]:
    return _URL.findall(output)


def test_the_start_up_block_shows_the_registry_and_data_survives(tmp_path):
    with broker_process("--data-dir", str(tmp_path), "--override", "schema.registry.port=0") as broker:
        broker.wait_for_output("data: ")
        (url,) = _urls(broker.output)
        assert "schema.registry.port=0" in broker.output
        with httpx.Client(timeout=30) as http:
            assert http.post(f"{url}/subjects/u/versions", json={"schema": json.dumps(USER)}).json()["id"] == 1
            assert http.put(f"{url}/config/u", json={"compatibility": "FULL"}).status_code == 200
    with broker_process("--data-dir", str(tmp_path), "--override", "schema.registry.port=0") as broker:
        broker.wait_for_output("data: ")
        (url,) = _urls(broker.output)
        with httpx.Client(timeout=30) as http:
            assert http.get(f"{url}/subjects/u/versions/1").json()["schema"] == json.dumps(USER, separators=(",", ":"))
            assert http.get(f"{url}/config/u").json()["compatibilityLevel"] == "FULL"


def test_every_broker_of_brokers_n_serves_it():
    with broker_process("--in-memory", "--brokers", "2", "--override", "schema.registry.port=0") as broker:
        broker.wait_for_output("schema registry on", count=2)
        first, second = _urls(broker.output)
        assert first != second
        with httpx.Client(timeout=30) as http:
            registered = http.post(f"{first}/subjects/u/versions", json={"schema": json.dumps(USER)}).json()
            assert http.get(f"{second}/schemas/ids/{registered['id']}").status_code == 200
