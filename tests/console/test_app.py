"""The console's HTTP surface without a browser: headers, static files, methods, errors.

Served by the broker's own HTTP server (``metrics.port=0``) with the console mounted at
``/ui``, read with a plain HTTP/1.1 GET; the cluster-unreachable case runs the app alone
under MockClock, so the admin client's retries until its deadline take no real time.
"""

from __future__ import annotations

import logging

import trio

from tests.web.http import http_get
from trikafka import open_broker
from trikafka.client import open_admin
from trikafka.console import ConsoleApp, console_app
from trikafka.console.reader import ClusterReader


async def test_pages_headers_static_files_and_not_found():
    with trio.fail_after(30):
        async with open_broker(metrics_port=0) as broker:
            broker.http_server.mount("/ui", console_app(broker))
            host, port = broker.http_server.bound
            page = await http_get(host, port, "/ui/")
            assert page.status == 200 and page.headers["content-type"] == "text/html; charset=utf-8"
            assert "script-src 'self'" in page.headers["content-security-policy"]
            assert page.headers["x-content-type-options"] == "nosniff"
            assert f'id="cluster-id">{broker.cluster_id}<' in page.body
            assert '<link rel="stylesheet" href="/ui/static/console.css">' in page.body
            assert (await http_get(host, port, "/ui")).status == 200  # the mount itself
            css = await http_get(host, port, "/ui/static/console.css")
            assert css.status == 200 and css.headers["content-type"] == "text/css; charset=utf-8"
            assert "fetch(url" in (await http_get(host, port, "/ui/static/console.js")).body
            for path in (
                "/ui/static/../app.py",
                "/ui/static/app.py",
                "/ui/static/missing.css",
                "/ui/nope",
                "/ui/topics/a/b",
            ):
                assert (await http_get(host, port, path)).status == 404, path
            missing = await http_get(host, port, "/ui/groups/no%20such%20group")
            assert missing.status == 404 and "group &#39;no such group&#39; does not exist" in missing.body
            bad = await http_get(host, port, "/ui/records?topic=t&from=yesterday")
            assert bad.status == 400 and "from=&#39;yesterday&#39;: allowed values are offset, timestamp" in bad.body


async def test_only_get_and_head():
    with trio.fail_after(30):
        async with open_broker(metrics_port=0) as broker:
            broker.http_server.mount("/ui", console_app(broker))
            host, port = broker.http_server.bound
            stream = await trio.open_tcp_stream(host, port)
            async with stream:
                await stream.send_all(
                    b"POST /ui/topics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                )
                answer = bytearray()
                while chunk := await stream.receive_some(65536):
                    answer += chunk
            assert answer.startswith(b"HTTP/1.1 405")
            assert b"\r\nallow: GET, HEAD\r\n" in answer


async def test_a_cluster_that_does_not_answer_is_a_503_page_and_one_log_line(autojump_clock, caplog):
    async def free_port() -> int:
        listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
        port = listener.socket.getsockname()[1]
        await listener.aclose()
        return port

    port = await free_port()  # nothing listens there any more: connections are refused

    def open_reader():
        from contextlib import asynccontextmanager

        @asynccontextmanager
        async def reader():
            async with open_admin(f"127.0.0.1:{port}", default_api_timeout_ms=5000) as admin:
                yield ClusterReader(admin)

        return reader()

    app = ConsoleApp(open_reader, dict, version="test", bootstrap=lambda: f"127.0.0.1:{port}")
    with caplog.at_level(logging.WARNING, logger="trikafka.console"):
        status, body, _ = await app.dispatch("/topics", {}, "/ui")
    assert status == 503
    assert "The cluster did not answer" in body.decode()
    # the client's own deadline (default.api.timeout.ms) ends the call first, naming the address
    assert (
        f"no broker reachable at 127.0.0.1:{port} after 5.0 s (default.api.timeout.ms): connection refused<"
        in body.decode()
    )
    assert [r.getMessage().split(":")[0] for r in caplog.records if r.name == "trikafka.console"] == ["console"]


async def test_the_record_browser_reads_past_transaction_markers():
    """A Fetch that starts at a commit marker returns a control batch first: the browser
    moves past it instead of stopping there."""
    from trikafka.client import open_producer

    with trio.fail_after(30):
        async with open_broker(metrics_port=0) as broker:
            bootstrap = broker.bootstrap_servers
            async with open_admin(bootstrap) as admin:
                await admin.create_topics(["txn"])
            async with open_producer(bootstrap, transactional_id="console-t") as producer:
                for batch in range(3):
                    async with producer.transaction():
                        await producer.send("txn", value=f"v{batch}".encode(), partition=0)
            async with open_admin(bootstrap) as admin:
                reader = ClusterReader(admin)
                page = await reader.records("txn", 0, offset=1, count=5)  # offset 1: a marker
                assert [(r.offset, r.value.text) for r in page.records] == [(2, "v1"), (4, "v2")]
                assert (page.end_offset, page.next_offset) == (6, 6)


async def test_the_produce_form_refuses_another_sites_post_and_a_missing_proxy():
    import httpx

    with trio.fail_after(30):
        async with open_broker(metrics_port=0) as broker:
            app = console_app(broker, rest_proxy_url="http://127.0.0.1:9")  # nothing listens on port 9
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://console") as http:
                form = {"value": '{"a": 1}'}
                cross = await http.post("/topics/t/produce", data=form, headers={"Sec-Fetch-Site": "cross-site"})
                assert cross.status_code == 403 and "another site" in cross.text
                foreign = await http.post("/topics/t/produce", data=form, headers={"Origin": "http://evil.example"})
                assert foreign.status_code == 403
                not_json = await http.post("/topics/t/produce", data={"value": "{nope"})
                assert not_json.status_code == 400 and "value: not JSON" in not_json.text
                bad_partition = await http.post("/topics/t/produce", data={"value": "1", "partition": "x"})
                assert bad_partition.status_code == 400 and "partition &#39;x&#39;" in bad_partition.text
                unreachable = await http.post("/topics/t/produce", data=form)
                assert unreachable.status_code == 503 and "cannot reach the HTTP proxy" in unreachable.text
            without = httpx.ASGITransport(app=console_app(broker))
            async with httpx.AsyncClient(transport=without, base_url="http://console") as http:
                none = await http.post("/topics/t/produce", data=form)
                assert none.status_code == 404 and "rest.proxy.port" in none.text
                async with open_admin(broker) as admin:
                    await admin.create_topics(["plain"])
                page = await http.get("/topics/plain")
                assert page.status_code == 200 and 'id="produce"' not in page.text
