"""A broker with data, the console served over HTTP, and a headless Chromium to look at it.

The broker is a process started as a user starts it (``python -m trikafka --ui``, the HTTP
server and the Schema Registry on free ports), the data comes from confluent-kafka, as a
user's programs make it: Avro records go through its ``SchemaRegistryClient`` and
``AvroSerializer``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs

from trikafka.testing.process import BrokerProcess

GROUP = "analytics"
#: A group id that is markup: it must show as text.
XSS_GROUP = '<b onmouseover="window.__xss=3">ops</b>'
CONSOLE_CLIENT = "lag-checker"
XSS_KEY = "<script>window.__xss=1</script>"
XSS_VALUE = '<img src=x onerror="window.__xss=2">'
EVENTS_BASE_MS = 1_700_000_000_000
OFFSETS_PARTITIONS = 3
WAIT_S = 30.0
#: Two versions of the ``payments-value`` subject (v2 adds a field with a default: BACKWARD).
PAYMENT_V1 = {
    "type": "record", "name": "Payment", "namespace": "shop",
    "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "double"}],
}
PAYMENT_V2 = {
    "type": "record", "name": "Payment", "namespace": "shop",
    "fields": [
        {"name": "id", "type": "string"}, {"name": "amount", "type": "double"},
        {"name": "currency", "type": "string", "default": "EUR"},
    ],
}


def JSON_VALUE(i: int) -> str:  # noqa: N802 - a constant with a parameter
    return json.dumps({"order": i, "item": "widget", "qty": i * 2, "tags": ["a", "b"]}, separators=(",", ":"))


@attrs.define
class ConsoleSite:
    broker: BrokerProcess
    base: str
    port: int
    cluster_id: str
    bootstrap: str
    registry: str
    driver: object
    consumer: object
    #: The HTTP proxy's URL (``--rest-proxy-port 0``): the topic page's produce form uses it.
    rest_proxy: str = ""
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
    def started(cls, workdir: Path) -> Iterator[ConsoleSite]:
        broker = BrokerProcess(
            "--in-memory", "--ui", "--client-telemetry", "--override", "metrics.port=0",
            "--control-listener", "127.0.0.1:0",  # waits on the broker (the client-metrics page)
            "--override", f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}",
            # a share group's member gets its partition within a heartbeat (the share-group page)
            "--override", "group.share.heartbeat.interval.ms=500",
            "--override", "group.share.min.heartbeat.interval.ms=500",
            "--override", "group.share.assignment.interval.ms=0",
            "--override", "schema.registry.port=0", "--rest-proxy-port", "0", cwd=workdir,
        )
        try:
            broker.wait_ready()
            base = broker.wait_for_output("  ui on ").split("ui on", 1)[1].strip().removesuffix("/ui")
            registry = broker.wait_for_output("  schema registry on ").split(" on ", 1)[1].strip()
            rest_proxy = broker.wait_for_output("  rest proxy on ").split(" on ", 1)[1].strip()
            assert broker.port is not None and broker.cluster_id is not None
            _make_data(broker.bootstrap)
            _make_payments(broker.bootstrap, registry)
            consumer = _group_with_lag(broker.bootstrap)
            try:
                driver = _chromium()
                try:
                    yield cls(
                        broker, base, broker.port, broker.cluster_id, broker.bootstrap, registry, driver, consumer,
                        rest_proxy,
                    )
                finally:
                    driver.quit()
            finally:
                consumer.close()
        finally:
            assert broker.stop() == 0, broker.output


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
    ops.commit(
        offsets=[TopicPartition("orders", 0, 0), TopicPartition("orders", 1, 0), TopicPartition("orders", 2, 5)],
        asynchronous=False,
    )
    ops.close()


def _make_payments(bootstrap: str, registry: str) -> None:
    """``payments``: one record written with PAYMENT_V1, one with PAYMENT_V2 (each serializer
    registers its schema under ``payments-value``)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("payments", 1, 1)])["payments"].result(WAIT_S)
    client = SchemaRegistryClient({"url": registry})
    context = SerializationContext("payments", MessageField.VALUE)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    v1 = AvroSerializer(client, json.dumps(PAYMENT_V1))
    producer.produce("payments", value=v1({"id": "p-1", "amount": 12.5}, context))
    v2 = AvroSerializer(client, json.dumps(PAYMENT_V2))
    producer.produce("payments", value=v2({"id": "p-2", "amount": 3.0, "currency": "GBP"}, context))
    assert producer.flush(WAIT_S) == 0


def _group_with_lag(bootstrap: str) -> object:
    """A live member of GROUP owning orders 0-2, committed at 7, 10 and 3 (lag 3, 0, 7)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": GROUP, "client.id": CONSOLE_CLIENT,
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "max.poll.interval.ms": 1_800_000, "session.timeout.ms": 60_000,
    })
    consumer.subscribe(["orders"])
    deadline = time.monotonic() + WAIT_S
    while len(consumer.assignment()) < 3 and time.monotonic() < deadline:
        consumer.poll(0.2)  # joins the group: the assignment arrives through poll
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
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1360,900",
        "--lang=en-US",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path="/usr/bin/chromedriver"))
    driver.set_page_load_timeout(WAIT_S)
    return driver
