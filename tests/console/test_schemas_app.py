"""The console's schema pages and decoded values without a browser: a broker with its Schema
Registry (``schema.registry.port=0``) and the console mounted at ``/ui`` on its HTTP server,
read with a plain HTTP/1.1 GET; and the same pages without a registry.
"""

from __future__ import annotations

import io
import json
import struct

import trio

from tests.web.http import http_get
from trikafka import open_broker
from trikafka.client import open_admin, open_producer
from trikafka.commands import RegistryClient
from trikafka.console import console_app

V1 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [{"name": "item", "type": "string"}]}
V2 = {
    "type": "record", "name": "Order", "namespace": "shop",
    "fields": [{"name": "item", "type": "string"}, {"name": "qty", "type": "int", "default": 1}],
}


def _framed(schema_id: int, schema: dict, value: dict) -> bytes:
    from fastavro import parse_schema, schemaless_writer

    out = io.BytesIO()
    out.write(b"\x00" + struct.pack(">i", schema_id))
    schemaless_writer(out, parse_schema(schema), value)
    return out.getvalue()


async def test_without_a_registry_the_schema_pages_say_so_and_values_stay_bytes():
    with trio.fail_after(30):
        async with open_broker(metrics_port=0) as broker:
            broker.http_server.mount("/ui", console_app(broker))
            host, port = broker.http_server.bound
            for path in ("/ui/schemas", "/ui/schemas/orders-value", "/ui/schemas/orders-value/1",
                         "/ui/schemas/orders-value/diff?from=1&to=2", "/ui/schemas/a/b/c"):
                page = await http_get(host, port, path)
                assert page.status == 200, (path, page.status)
                assert 'id="no-registry"' in page.body and "schema.registry.port" in page.body, path
            assert 'href="/ui/schemas"' in (await http_get(host, port, "/ui/")).body  # in the navigation
            async with open_admin(broker.bootstrap_servers) as admin:
                await admin.create_topics(["orders"])
            async with open_producer(broker.bootstrap_servers) as producer:
                await producer.send("orders", value=_framed(1, V1, {"item": "pen"}), partition=0)
            records = await http_get(host, port, "/ui/records?topic=orders")
            assert records.status == 200
            assert '<div class="blob hex">' in records.body and "blob schema" not in records.body


async def test_schema_pages_diff_and_decoded_values_with_the_registry():
    with trio.fail_after(60):
        async with open_broker(metrics_port=0, schema_registry_port=0) as broker:
            broker.http_server.mount("/ui", console_app(broker, schema_registry_url=lambda: broker.schema_registry_url))
            host, port = broker.http_server.bound
            registry = RegistryClient(broker.schema_registry_url, 10)
            first = await registry.call("POST", "/subjects/orders-value/versions", {"schema": json.dumps(V1)})
            second = await registry.call("POST", "/subjects/orders-value/versions", {"schema": json.dumps(V2)})
            await registry.call("PUT", "/config/orders-value", {"compatibility": "FULL"})

            listing = await http_get(host, port, "/ui/schemas")
            assert listing.status == 200
            assert '<a href="/ui/schemas/orders-value">orders-value</a>' in listing.body
            assert "<td>AVRO</td>" in listing.body and "<td>FULL</td>" in listing.body
            subject = await http_get(host, port, "/ui/schemas/orders-value")
            assert subject.status == 200 and 'href="/ui/schemas/orders-value/diff?from=1&amp;to=2"' in subject.body
            version = await http_get(host, port, "/ui/schemas/orders-value/2")
            assert version.status == 200 and '&#34;name&#34;: &#34;qty&#34;' in version.body
            assert (await http_get(host, port, "/ui/schemas/orders-value/latest")).status == 200
            diff = await http_get(host, port, "/ui/schemas/orders-value/diff?from=1&to=2")
            assert diff.status == 200
            assert '<span class="add">+    {</span>' in diff.body
            assert '<span class="add">+      &#34;name&#34;: &#34;qty&#34;,</span>' in diff.body

            # Refusals are pages with the registry's reason, never a 500.
            missing = await http_get(host, port, "/ui/schemas/nope")
            assert missing.status == 404 and "40401" in missing.body
            assert (await http_get(host, port, "/ui/schemas/orders-value/9")).status == 404
            bad = await http_get(host, port, "/ui/schemas/orders-value/two")
            assert bad.status == 400 and "give a version number from 1, or latest" in bad.body
            assert (await http_get(host, port, "/ui/schemas/orders-value/diff?from=1")).status == 400

            async with open_admin(broker.bootstrap_servers) as admin:
                await admin.create_topics(["orders"])
            async with open_producer(broker.bootstrap_servers) as producer:
                await producer.send("orders", value=_framed(first["id"], V1, {"item": "pen"}), partition=0)
                await producer.send("orders", value=_framed(second["id"], V2, {"item": "ink", "qty": 3}), partition=0)
                await producer.send("orders", value=b"plain text", partition=0)
                # id 999 is no schema's: bytes that only look framed, shown as they are
                await producer.send("orders", value=b"\x00\x00\x00\x03\xe7\xff", partition=0)
                # a known id, and a payload its schema cannot read
                await producer.send("orders", value=b"\x00" + struct.pack(">i", first["id"]), partition=0)
            records = (await http_get(host, port, "/ui/records?topic=orders")).body
            assert '<a href="/ui/schemas/orders-value/1">orders-value v1</a>' in records
            assert '<a href="/ui/schemas/orders-value/2">orders-value v2</a>' in records
            assert "&#34;item&#34;: &#34;ink&#34;,\n  &#34;qty&#34;: 3" in records
            assert '<div class="blob text"><span class="kind">text · 10 B</span><pre>plain text</pre>' in records
            assert '<pre>00 00 00 03 e7 ff</pre>' in records
            assert records.count("not decoded: ") == 1
            assert '<p class="problem">not decoded: EOFError' in records


ITEM_PROTO = 'syntax = "proto3";\npackage shop;\nmessage Item {\n  string sku = 1;\n  int32 qty = 2;\n}\n'
ITEM_JSON = {"type": "object", "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}}}


async def test_protobuf_and_json_schema_values_are_decoded_too():
    with trio.fail_after(60):
        async with open_broker(metrics_port=0, schema_registry_port=0) as broker:
            broker.http_server.mount("/ui", console_app(broker, schema_registry_url=broker.schema_registry_url))
            host, port = broker.http_server.bound
            registry = RegistryClient(broker.schema_registry_url, 10)
            proto = await registry.call(
                "POST", "/subjects/items-value/versions", {"schema": ITEM_PROTO, "schemaType": "PROTOBUF"}
            )
            as_json = await registry.call(
                "POST", "/subjects/stock-value/versions", {"schema": json.dumps(ITEM_JSON), "schemaType": "JSON"}
            )
            async with open_admin(broker.bootstrap_servers) as admin:
                await admin.create_topics(["items"])
            async with open_producer(broker.bootstrap_servers) as producer:
                # Confluent's Protobuf framing: the id, the message indexes (0: the first message), the message
                payload = b"\x0a\x03abc\x10\x05"  # sku = "abc", qty = 5
                await producer.send("items", value=b"\x00" + struct.pack(">i", proto["id"]) + b"\x00" + payload)
                document = json.dumps({"sku": "def", "qty": 7}).encode()
                await producer.send("items", value=b"\x00" + struct.pack(">i", as_json["id"]) + document)
            records = (await http_get(host, port, "/ui/records?topic=items")).body
            assert '<span class="kind">PROTOBUF · <a href="/ui/schemas/items-value/1">items-value v1</a>' in records
            assert "&#34;sku&#34;: &#34;abc&#34;,\n  &#34;qty&#34;: 5" in records
            # the id is registered under another subject than the topic's: that one is named
            assert '<span class="kind">JSON · <a href="/ui/schemas/stock-value/1">stock-value v1</a>' in records
            assert "&#34;sku&#34;: &#34;def&#34;,\n  &#34;qty&#34;: 7" in records
            schemas = (await http_get(host, port, "/ui/schemas")).body
            assert "<td>PROTOBUF</td>" in schemas and "<td>JSON</td>" in schemas
            text = (await http_get(host, port, "/ui/schemas/items-value/1")).body
            assert "message Item {" in text


async def test_a_registry_that_does_not_answer_is_a_503_page():
    async def free_port() -> int:
        listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
        port = listener.socket.getsockname()[1]
        await listener.aclose()
        return port

    gone = f"http://127.0.0.1:{await free_port()}"
    with trio.fail_after(30):
        async with open_broker(metrics_port=0) as broker:
            broker.http_server.mount("/ui", console_app(broker, schema_registry_url=gone))
            host, port = broker.http_server.bound
            page = await http_get(host, port, "/ui/schemas")
            assert page.status == 503 and f"cannot reach the schema registry at {gone}" in page.body
