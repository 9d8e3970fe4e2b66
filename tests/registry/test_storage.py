"""The registry lives in ``_schemas``: Confluent's records, kept across a restart, shared by a
cluster's brokers, and read back when another registry wrote them."""

from __future__ import annotations

import json

import httpx
import trio

from tests.registry.conftest import call_app
from trikafka.broker import open_broker
from trikafka.protocol.records import iter_batches, iter_records
from trikafka.web import schema_registry_app

USER = {"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]}
USER_V2 = {**USER, "fields": [*USER["fields"], {"name": "age", "type": "int", "default": 0}]}


def _records(log):
    data = log.read(log.log_start_offset, 1 << 20).records
    return [
        (json.loads(r.key), None if r.value is None else json.loads(r.value))
        for h in iter_batches(data, validate_records=False) for r in iter_records(data, h)
    ]


async def test_records_have_confluents_shapes(app, schemas_log):
    await call_app(app, "POST", "/subjects/s/versions", {"schema": json.dumps(USER)})
    await call_app(app, "PUT", "/config/s", {"compatibility": "FULL"})
    await call_app(app, "PUT", "/mode", {"mode": "READWRITE"})
    await call_app(app, "DELETE", "/subjects/s")
    await call_app(app, "DELETE", "/subjects/s?permanent=true")
    assert _records(schemas_log.log) == [
        ({"keytype": "SCHEMA", "subject": "s", "version": 1, "magic": 1},
         {"subject": "s", "version": 1, "id": 1, "schema": json.dumps(USER, separators=(",", ":")), "deleted": False}),
        ({"keytype": "CONFIG", "subject": "s", "magic": 0}, {"compatibilityLevel": "FULL", "subject": "s"}),
        ({"keytype": "MODE", "subject": None, "magic": 0}, {"mode": "READWRITE"}),
        ({"keytype": "DELETE_SUBJECT", "subject": "s", "magic": 0}, {"subject": "s", "version": 1}),
        ({"keytype": "SCHEMA", "subject": "s", "version": 1, "magic": 1}, None),
        ({"keytype": "CONFIG", "subject": "s", "magic": 0}, None),
    ]


async def test_restart_with_a_data_dir_keeps_everything(tmp_path):
    config = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path)}
    with trio.fail_after(30):
        async with open_broker(config) as broker:
            app = schema_registry_app(broker.core.schemas)
            await call_app(app, "POST", "/subjects/a/versions", {"schema": json.dumps(USER)})
            await call_app(app, "POST", "/subjects/a/versions", {"schema": json.dumps(USER_V2)})
            await call_app(app, "POST", "/subjects/b/versions", {"schema": json.dumps({**USER, "doc": "b"})})
            await call_app(app, "DELETE", "/subjects/a/versions/1")
            await call_app(app, "PUT", "/config", {"compatibility": "FORWARD"})
            await call_app(app, "PUT", "/config/b", {"compatibility": "NONE"})
            await call_app(app, "PUT", "/mode/b", {"mode": "READONLY"})
            before = {path: await call_app(app, "GET", path) for path in _PATHS}
        async with open_broker(config) as broker:
            app = schema_registry_app(broker.core.schemas)
            after = {path: await call_app(app, "GET", path) for path in _PATHS}
            assert after == before
            assert after["/subjects/a/versions?deleted=true"] == (200, [1, 2])
            assert after["/config/b"][1]["compatibilityLevel"] == "NONE"
            # Ids go on from where they were.
            _, new = await call_app(app, "POST", "/subjects/c/versions", {"schema": json.dumps({**USER, "doc": "c"})})
            assert new["id"] == 4


_PATHS = (
    "/subjects", "/subjects?deleted=true", "/subjects/a/versions", "/subjects/a/versions?deleted=true",
    "/subjects/a/versions/2", "/subjects/b/versions/1", "/schemas/ids/1", "/schemas/ids/2", "/schemas/ids/3",
    "/config", "/config/b", "/mode", "/mode/b",
)


def test_every_broker_of_a_cluster_answers_the_same(kafka_cluster):
    cluster = kafka_cluster(brokers=2)
    first, second = cluster.schema_registry_urls
    assert first != second
    with httpx.Client(timeout=30) as http:
        registered = http.post(f"{first}/subjects/s/versions", json={"schema": json.dumps(USER)}).json()
        http.put(f"{second}/config/s", json={"compatibility": "FULL"})
        for url in (first, second):
            assert http.get(f"{url}/subjects/s/versions/1").json()["id"] == registered["id"]
            assert http.get(f"{url}/config/s").json()["compatibilityLevel"] == "FULL"


def test_records_written_by_another_registry_are_read(kafka_broker):
    """Confluent's registry writes ``_schemas`` through a Kafka producer: so do we here, and
    the broker's registry answers from those records."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    key = {"keytype": "SCHEMA", "subject": "imported", "version": 3, "magic": 1}
    value = {"subject": "imported", "version": 3, "id": 42, "schema": json.dumps(USER), "deleted": False}
    producer.produce("_schemas", json.dumps(value).encode(), json.dumps(key).encode())
    producer.produce("_schemas", b'{"mode":"READONLY"}', b'{"keytype":"MODE","subject":"imported","magic":0}')
    producer.produce("_schemas", b"not json", b"junk")  # skipped with a log line
    assert producer.flush(30) == 0
    url = kafka_broker.schema_registry_url
    with httpx.Client(timeout=30) as http:
        assert http.get(f"{url}/schemas/ids/42").json()["schema"] == json.dumps(USER)
        assert http.get(f"{url}/subjects/imported/versions").json() == [3]
        assert http.get(f"{url}/mode/imported").json() == {"mode": "READONLY"}
        # The next id is past the highest seen.
        registered = http.post(f"{url}/subjects/other/versions", json={"schema": json.dumps(USER_V2)}).json()
        assert registered["id"] == 43
