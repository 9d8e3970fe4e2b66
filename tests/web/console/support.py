"""A broker with data, the console served over HTTP, and a headless Chromium to look at it.

The broker and the HTTP server share one Trio thread (:class:`trikafka.testing.TrioThread`);
the data comes from confluent-kafka in the test's thread, as a user's programs would make it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import attrs
import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve

from trikafka.broker import open_broker
from trikafka.testing import TrioThread
from trikafka.testing.thread import test_broker_config
from trikafka.web.console import console_app

GROUP = "analytics"
#: A group id that is markup: it must show as text.
XSS_GROUP = '<b onmouseover="window.__xss=3">ops</b>'
CONSOLE_CLIENT = "lag-checker"
XSS_KEY = "<script>window.__xss=1</script>"
XSS_VALUE = '<img src=x onerror="window.__xss=2">'
EVENTS_BASE_MS = 1_700_000_000_000
OFFSETS_PARTITIONS = 3
WAIT_S = 30.0


def JSON_VALUE(i: int) -> str:  # noqa: N802 - a constant with a parameter
    return json.dumps({"order": i, "item": "widget", "qty": i * 2, "tags": ["a", "b"]}, separators=(",", ":"))


@asynccontextmanager
async def _broker_and_console() -> AsyncIterator[tuple[object, str]]:
    config = test_broker_config({"offsets.topic.num.partitions": OFFSETS_PARTITIONS})
    async with open_broker(config) as broker, trio.open_nursery() as nursery:
        http = HypercornConfig()
        http.bind = ["127.0.0.1:0"]
        http.root_path = "/ui"
        http.accesslog = None
        binds = await nursery.start(functools.partial(serve, console_app(broker), http))
        try:
            yield broker, binds[0]
        finally:
            nursery.cancel_scope.cancel()


@attrs.define
class ConsoleSite:
    thread: TrioThread
    base: str
    port: int
    cluster_id: str
    bootstrap: str
    driver: object
    consumer: object
    offsets_partitions: int = OFFSETS_PARTITIONS
    events_base_ms: int = EVENTS_BASE_MS

    def url(self, path: str) -> str:
        return f"{self.base}/ui{path}"

    def produce_more(self, topic: str, count: int) -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap})
        for i in range(count):
            producer.produce(topic, value=f"more-{i}".encode())
        assert producer.flush(WAIT_S) == 0

    @classmethod
    @contextmanager
    def started(cls) -> Iterator[ConsoleSite]:
        thread = TrioThread("console-broker")
        broker, base = thread.start(_broker_and_console)
        try:
            bootstrap = broker.bootstrap_servers()
            _make_data(bootstrap)
            consumer = _group_with_lag(bootstrap)
            try:
                driver = _chromium()
                try:
                    yield cls(thread, base, broker.port, broker.cluster_id, bootstrap, driver, consumer)
                finally:
                    driver.quit()
            finally:
                consumer.close()
        finally:
            thread.stop()


def _make_data(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([
        NewTopic("orders", 3, 1, config={"retention.ms": "86400000"}),
        NewTopic("events", 1, 1),
        NewTopic("audit", 1, 1),
    ])
    for future in futures.values():
        future.result(WAIT_S)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for partition in range(3):
        for i in range(10):
            if partition == 0 and i == 0:
                producer.produce("orders", key=XSS_KEY.encode(), value=XSS_VALUE.encode(), partition=0)
                continue
            producer.produce(
                "orders", key=f"order-{i}".encode(), value=JSON_VALUE(i).encode(), partition=partition,
                headers=[("trace", f"abc-{i}".encode())],
            )
    for i in range(10):
        producer.produce("events", value=bytes([0, i, 0xFF, 0xFE, 0x0A, 0x00]), timestamp=EVENTS_BASE_MS + i * 1000)
    assert producer.flush(WAIT_S) == 0
    # A group with committed offsets and no members: its name is markup.
    ops = Consumer({"bootstrap.servers": bootstrap, "group.id": XSS_GROUP, "enable.auto.commit": False})
    ops.commit(offsets=[TopicPartition("orders", 0, 0), TopicPartition("orders", 1, 0), TopicPartition("orders", 2, 5)], asynchronous=False)
    ops.close()


def _group_with_lag(bootstrap: str) -> object:
    """A live member of GROUP owning orders 0-2, committed at 7, 10 and 3 (lag 3, 0, 7)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": GROUP, "client.id": CONSOLE_CLIENT,
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "max.poll.interval.ms": 1_800_000, "session.timeout.ms": 60_000,
    })
    consumer.subscribe(["orders"])
    for _ in range(int(WAIT_S / 0.2)):
        consumer.poll(0.2)  # joins the group: the assignment arrives through poll
        if len(consumer.assignment()) == 3:
            break
    assert len(consumer.assignment()) == 3, f"no assignment: {consumer.assignment()}"
    consumer.commit(
        offsets=[TopicPartition("orders", 0, 7), TopicPartition("orders", 1, 10), TopicPartition("orders", 2, 3)],
        asynchronous=False,
    )
    return consumer


def _chromium() -> object:
    import os

    from selenium import webdriver

    os.environ.setdefault("SE_OFFLINE", "true")  # never let Selenium Manager download a driver
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1360,900", "--lang=en-US"):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path="/usr/bin/chromedriver"))
    driver.set_page_load_timeout(WAIT_S)
    return driver
