"""Scenarios over the control interface, over real HTTP: ``POST /scenario`` on a broker process
(``python -m trikafka --control-listener``) and on a ``--brokers 3`` one, with
confluent-kafka seeing the steps."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Producer

from trikafka.testing.process import broker_process

pytestmark = pytest.mark.compat

TIMEOUT = 30


def call(url: str, method: str, path: str, body: object = None) -> tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_a_scenario_posted_as_json_runs_and_reports(tmp_path):
    with broker_process("--in-memory", "--control-listener", "127.0.0.1:0", cwd=tmp_path) as broker:
        url = broker.control_url
        assert url is not None, broker.output
        assert call(url, "GET", "/scenario") == (404, {"error": "no scenario was started here (POST /scenario)"})
        status, body = call(url, "POST", "/scenario", {"steps": [
            {"trigger": {"at": 0}, "action": {"do": "stop_broker", "broker": 2}},
        ]})  # fmt: skip
        assert status == 400 and "step 0 (at 0: stop_broker broker=2): stop_broker needs a cluster" in body["error"]
        status, body = call(url, "POST", "/scenario", {"steps": [{"trigger": {"at": "soon"}, "action": {}}]})
        assert status == 400 and "at='soon' must be a non-negative number" in body["error"]

        step = {"do": "inject_error", "api": "Produce", "error": "MESSAGE_TOO_LARGE", "count": 1}
        posted = {"steps": [{"trigger": {"after": 1, "api": "Produce"}, "action": step}]}
        status, body = call(url, "POST", "/scenario", posted)
        assert status == 201 and body["scenario"]["fired"] == [] and body["scenario"]["waiting_on"] == 0
        status, body = call(url, "GET", "/scenario/wait?timeout_ms=50")
        assert status == 408 and "0 of 1 step(s) fired; waiting on step 0 (after 1 api=Produce" in body["error"]

        producer = Producer({"bootstrap.servers": broker.address, "enable.idempotence": False, "retries": 0})
        errors = []
        for value in (b"first", b"second", b"third"):
            producer.produce("shell", value, on_delivery=lambda err, msg: errors.append(err))
            assert producer.flush(TIMEOUT) == 0
        assert [e is None for e in errors] == [True, False, True]
        assert "MSG_SIZE_TOO_LARGE" in str(errors[1])

        status, body = call(url, "GET", "/scenario/wait")
        assert status == 200 and body["scenario"]["complete"]
        fired = call(url, "GET", "/scenario")[1]["scenario"]["fired"]
        assert [f["action"] for f in fired] == ["inject_error"] and len(fired[0]["faults"]) == 1
        assert call(url, "DELETE", "/scenario") == (200, {"cancelled": True})
        assert broker.stop() == 0
    assert "scenario step 0 fired" in broker.output


def test_a_cluster_scenario_stops_and_starts_a_broker(tmp_path):
    args = ("--brokers", "3", "--in-memory", "--control-listener", "127.0.0.1:0")
    with broker_process(*args, cwd=tmp_path) as broker:
        url = broker.control_url
        assert url is not None, broker.output
        ids = [b["id"] for b in call(url, "GET", "/brokers")[1]["brokers"]]
        scenario = {"steps": [
            {"trigger": {"at": 0}, "action": {"do": "stop_broker", "broker": ids[-1]}},
            {"trigger": {"at": 0.2}, "action": {"do": "add_latency", "seconds": 0.01, "api": "Metadata",
                                                  "count": 1, "broker": ids[0]}},
            {"trigger": {"at": 0.3}, "action": {"do": "start_broker", "broker": ids[-1]}},
        ]}  # fmt: skip
        assert call(url, "POST", "/scenario", scenario)[0] == 201
        status, body = call(url, "GET", "/scenario/wait?timeout_ms=10000")
        assert status == 200, body
        assert [f["action"] for f in body["scenario"]["fired"]] == ["stop_broker", "add_latency", "start_broker"]
        assert all(b["alive"] for b in call(url, "GET", "/brokers")[1]["brokers"])
        failing = {"steps": [{"trigger": {"at": 0}, "action": {"do": "start_broker", "broker": ids[0]}}]}
        assert call(url, "POST", "/scenario", failing)[0] == 201
        status, body = call(url, "GET", "/scenario/wait")
        assert status == 409 and "it failed: step 0" in body["error"]
        assert broker.stop() == 0
    assert re.search(rf"broker {ids[-1]} stopped", broker.output)
    assert re.search(rf"broker {ids[-1]} started", broker.output)
