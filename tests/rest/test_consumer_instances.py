"""v2 consumer instances driven by httpx: the whole life cycle over a real socket, and the
expiry after consumer.instance.timeout.ms of disuse under trio's MockClock (in memory)."""

from __future__ import annotations

import base64

import httpx
import trio

from trikafka.client import open_producer
from trikafka.rest import RestProxy
from trikafka.testing import open_test_broker

V2 = "application/vnd.kafka.v2+json"
BINARY = "application/vnd.kafka.binary.v2+json"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_the_life_cycle(proxy_server):
    with httpx.Client(base_url=proxy_server.url, headers={"Content-Type": V2}, timeout=30) as http:
        produced = http.post(
            "/topics/life",
            headers={"Content-Type": BINARY},
            json={"records": [{"key": b64(b"k%d" % i), "value": b64(b"v%d" % i), "partition": 0} for i in range(5)]},
        )
        assert produced.status_code == 200, produced.text
        assert [o["offset"] for o in produced.json()["offsets"]] == [0, 1, 2, 3, 4]

        base = "/consumers/life-group/instances/one"
        created = http.post(
            "/consumers/life-group",
            json={"name": "one", "format": "binary", "auto.offset.reset": "earliest", "auto.commit.enable": "false"},
        )
        assert created.json()["base_uri"].endswith(base)
        again = http.post("/consumers/life-group", json={"name": "one"})
        assert (again.status_code, again.json()["error_code"]) == (409, 40902)

        # Assigned by hand: positions, records within max_bytes, offsets.
        partition = {"topic": "life", "partition": 0}
        assert http.post(f"{base}/assignments", json={"partitions": [partition]}).status_code == 204
        assert http.get(f"{base}/assignments").json() == {"partitions": [{"topic": "life", "partition": 0}]}
        refused = http.post(f"{base}/subscription", json={"topics": ["life"]})
        assert (refused.status_code, refused.json()["error_code"]) == (409, 40903)
        assert http.post(
            f"{base}/positions", json={"offsets": [{"topic": "life", "partition": 0, "offset": 2}]}
        ).status_code == 204
        first = http.get(f"{base}/records", params={"timeout": 5000, "max_bytes": 8}, headers={"Accept": BINARY})
        assert [(r["offset"], base64.b64decode(r["value"])) for r in first.json()] == [(2, b"v2"), (3, b"v3")]
        rest = http.get(f"{base}/records", params={"timeout": 5000}, headers={"Accept": BINARY})
        assert [r["offset"] for r in rest.json()] == [4]
        mismatch = http.get(f"{base}/records", headers={"Accept": "application/vnd.kafka.json.v2+json"})
        assert (mismatch.status_code, mismatch.json()["error_code"]) == (406, 40601)

        assert http.post(
            f"{base}/offsets", json={"offsets": [{"topic": "life", "partition": 0, "offset": 3}]}
        ).status_code == 204
        committed = http.request("GET", f"{base}/offsets", json={"partitions": [{"topic": "life", "partition": 0}]})
        assert committed.json() == {"offsets": [{"topic": "life", "partition": 0, "offset": 4, "metadata": ""}]}

        assert http.post(
            f"{base}/positions/beginning", json={"partitions": [{"topic": "life", "partition": 0}]}
        ).status_code == 204
        again = http.get(f"{base}/records", params={"timeout": 5000}, headers={"Accept": BINARY})
        assert [r["offset"] for r in again.json()] == [0, 1, 2, 3, 4]
        assert http.post(
            f"{base}/positions/end", json={"partitions": [{"topic": "life", "partition": 0}]}
        ).status_code == 204
        assert http.get(f"{base}/records", params={"timeout": 200}, headers={"Accept": BINARY}).json() == []

        # Subscribed instead: the group assigns the partition.
        assert http.delete(f"{base}/subscription").status_code == 204
        assert http.post(f"{base}/subscription", json={"topics": ["life"]}).status_code == 204
        assert http.get(f"{base}/subscription").json() == {"topics": ["life"]}
        got = http.get(f"{base}/records", params={"timeout": 10000}, headers={"Accept": BINARY})
        assert [r["offset"] for r in got.json()] == [4]  # from the committed offset

        assert http.delete(base).status_code == 204
        gone = http.get(f"{base}/records", headers={"Accept": BINARY})
        assert (gone.status_code, gone.json()["error_code"]) == (404, 40403)


def test_a_generated_name_and_json_records(proxy_server):
    with httpx.Client(base_url=proxy_server.url, headers={"Content-Type": V2}, timeout=30) as http:
        http.post("/topics/named-a", headers={"Content-Type": "application/vnd.kafka.json.v2+json"},
                  json={"records": [{"key": "k", "value": [1, 2]}]})
        created = http.post("/consumers/named-group", json={"format": "json", "auto.offset.reset": "earliest"})
        instance = created.json()["instance_id"]
        assert instance.startswith("rest-consumer-")
        base = f"/consumers/named-group/instances/{instance}"
        assert http.post(f"{base}/subscription", json={"topics": ["named-a"]}).status_code == 204
        got = http.get(f"{base}/records", params={"timeout": 10000},
                       headers={"Accept": "application/vnd.kafka.json.v2+json"})
        assert [(r["key"], r["value"]) for r in got.json()] == [("k", [1, 2])]
        assert http.delete(base).status_code == 204


def test_a_topic_pattern(proxy_server):
    with httpx.Client(base_url=proxy_server.url, headers={"Content-Type": V2}, timeout=30) as http:
        http.post("/topics/pattern-a", headers={"Content-Type": "application/vnd.kafka.json.v2+json"},
                  json={"records": [{"value": [1, 2]}]})
        http.post("/consumers/pattern-group", json={"name": "p", "format": "json", "auto.offset.reset": "earliest"})
        base = "/consumers/pattern-group/instances/p"
        assert http.post(f"{base}/subscription", json={"topic_pattern": "pattern-.*"}).status_code == 204
        got = http.get(f"{base}/records", params={"timeout": 10000},
                       headers={"Accept": "application/vnd.kafka.json.v2+json"})
        assert [r["value"] for r in got.json()] == [[1, 2]]
        assert http.get(f"{base}/subscription").json() == {"topics": ["pattern-a"]}
        assert http.delete(base).status_code == 204


async def test_an_unused_instance_expires(autojump_clock):
    """consumer.instance.timeout.ms of disuse closes it: 40403 after; each request renews."""
    async with open_test_broker() as broker, trio.open_nursery() as nursery:
        proxy = RestProxy(broker, consumer_instance_timeout_ms=300_000)
        await nursery.start(proxy.run)
        async with open_producer(broker) as producer:
            await producer.send("expiring", b"v")
        transport = httpx.ASGITransport(app=proxy.app)
        headers = {"Content-Type": V2}
        async with httpx.AsyncClient(transport=transport, base_url="http://proxy", headers=headers) as http:
            created = await http.post("/consumers/g", json={"name": "i", "auto.offset.reset": "earliest"})
            assert created.status_code == 200, created.text
            base = "/consumers/g/instances/i"
            await trio.sleep(299)
            assert (await http.post(f"{base}/subscription", json={"topics": ["expiring"]})).status_code == 204
            await trio.sleep(299)  # 598 s since creation, 299 since the last use: alive
            records = await http.get(f"{base}/records", params={"timeout": 5000}, headers={"Accept": BINARY})
            assert [base64.b64decode(r["value"]) for r in records.json()] == [b"v"]
            assert ("g", "i") in proxy.consumers.instances
            await trio.sleep(301)
            assert ("g", "i") not in proxy.consumers.instances
            gone = await http.get(f"{base}/records", headers={"Accept": BINARY})
            assert (gone.status_code, gone.json()["error_code"]) == (404, 40403)
        nursery.cancel_scope.cancel()
