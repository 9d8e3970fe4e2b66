"""The web console in a real headless Chromium, against a broker with real data.

The broker is ``python -m trikafka --ui`` (the console mounted at ``/ui`` on the broker's HTTP
server); confluent-kafka produces the data and keeps a consumer group with committed offsets;
Selenium drives Debian's ``chromium`` with ``chromium-driver``. Each test reads what a person
would read — texts in table cells, a JSON value pretty-printed, a binary value as hex, lag
numbers — and saves a screenshot of its page to ``artifacts/screenshots/``
(``TRIKAFKA_SCREENSHOTS`` to put them elsewhere), which CI keeps.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.support.ui import WebDriverWait

from .support import (
    CONSOLE_CLIENT,
    GROUP,
    JSON_VALUE,
    PAYMENT_V1,
    XSS_GROUP,
    XSS_KEY,
    XSS_VALUE,
    ConsoleSite,
)

pytestmark = pytest.mark.compat

SCREENSHOTS = Path(os.environ.get("TRIKAFKA_SCREENSHOTS", Path(__file__).parents[3] / "artifacts" / "screenshots"))


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    missing = [name for name in ("chromium", "chromedriver") if shutil.which(name) is None]
    assert not missing, f"{missing} not found: apt-get install chromium chromium-driver (make system-deps)"
    with ConsoleSite.started(tmp_path_factory.mktemp("console")) as site:
        yield site


@pytest.fixture
def browser(site, request):
    """The page as left by the test, screenshotted under the test's name."""
    yield site.driver
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    site.driver.save_screenshot(str(SCREENSHOTS / f"{request.node.name.removeprefix('test_')}.png"))


def cells(driver, table_id: str) -> list[list[str]]:
    """Each row's cell texts as rendered, read in one script call: the live table is replaced
    every second, so elements found one by one could go stale between two reads."""
    return driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]))"
        ".map(row => Array.from(row.cells).map(cell => cell.innerText.trim()))",
        f"#{table_id} tbody tr",
    )


def row_of(driver, table_id: str, first: str) -> list[str]:
    found = [row for row in cells(driver, table_id) if row and (row[0] == first or row[0].startswith(first + " "))]
    assert found, f"no row {first!r} in #{table_id}: {cells(driver, table_id)}"
    return found[0]


def follow(driver, element) -> None:
    """Click a link or submit button and wait for the next page (a click returns before the
    browser has navigated: reading at once could read the old page)."""
    driver.execute_script("window.__before_click = true")
    element.click()
    WebDriverWait(driver, 20).until(
        lambda d: d.execute_script("return window.__before_click === undefined && document.readyState === 'complete'")
    )


def test_overview(site, browser):
    browser.get(site.url("/"))
    text = lambda element_id: browser.find_element("id", element_id).text  # noqa: E731
    assert text("cluster-id") == site.cluster_id
    assert text("version").startswith("trikafka ")
    # orders, events, audit, payments and the registry's _schemas
    assert (text("broker-count"), text("topic-count"), text("group-count")) == ("1", "5", "2")
    assert text("partition-count") == str(3 + 1 + 1 + 1 + 1 + site.offsets_partitions)  # + __consumer_offsets
    assert row_of(browser, "brokers", "1")[1:3] == ["127.0.0.1", str(site.port)]
    assert f"PLAINTEXT://127.0.0.1:{site.port}" in text("listeners")


def test_topics(site, browser):
    browser.get(site.url("/topics"))
    orders = row_of(browser, "topics", "orders")
    assert orders[1:4] == ["3", "1", "30"]
    assert orders[4].endswith(("B", "KiB"))  # a size, from DescribeLogDirs
    assert row_of(browser, "topics", "events")[1:4] == ["1", "1", "10"]
    assert "internal" in row_of(browser, "topics", "__consumer_offsets")[0]


def test_topic_partitions_and_configs(site, browser):
    browser.get(site.url("/topics"))
    follow(browser, browser.find_element("link text", "orders"))
    assert browser.find_element("tag name", "h1").text == "Topic orders"
    partitions = cells(browser, "partitions")
    assert [row[:6] for row in partitions] == [
        [str(p), "1", "1", "1", "0", "10"] for p in range(3)
    ]
    retention = row_of(browser, "configs", "retention.ms")
    assert retention[1:] == ["86400000", "set"]
    assert row_of(browser, "configs", "cleanup.policy")[1:] == ["delete", "default"]


def test_records_json_pretty_printed_and_user_data_escaped(site, browser):
    browser.get(site.url("/records?topic=orders&partition=0&count=5"))
    values = browser.find_elements("css selector", "#records td.value pre")
    assert len(values) == 5
    assert values[1].text == json.dumps(json.loads(JSON_VALUE(1)), indent=2)
    assert (
        browser.find_element("css selector", "#records tr[data-offset='1'] td.value .kind").text
        == f"JSON · {len(JSON_VALUE(1))} B"
    )
    header = browser.find_element("css selector", "#records tr[data-offset='1'] td.headers").text
    assert header.split("\n")[0] == "trace" and "abc-1" in header
    # Offset 0 carries markup in its key and value: shown as text, never run.
    first = browser.find_element("css selector", "#records tr[data-offset='0']")
    assert first.find_element("css selector", "td.key pre").text == XSS_KEY
    assert first.find_element("css selector", "td.value pre").text == XSS_VALUE
    assert browser.execute_script("return window.__xss === undefined && document.images.length === 0")
    follow(browser, browser.find_element("id", "next"))
    assert browser.find_element("css selector", "#records tbody tr").get_attribute("data-offset") == "5"


def test_records_binary_as_hex_from_a_timestamp(site, browser):
    browser.get(site.url("/records"))
    browser.find_element("css selector", "#topic option[value='events']").click()
    browser.find_element("css selector", "#from option[value='timestamp']").click()
    browser.find_element("id", "timestamp").send_keys(str(site.events_base_ms + 6_500))
    count = browser.find_element("id", "count")
    count.clear()
    count.send_keys("3")
    follow(browser, browser.find_element("css selector", "form.browse button"))
    rows = browser.find_elements("css selector", "#records tbody tr")
    assert [r.get_attribute("data-offset") for r in rows] == ["7", "8", "9"]
    assert "3 records from offset 7" in browser.find_element("id", "summary").text
    value = rows[0].find_element("css selector", "td.value")
    assert value.find_element("css selector", ".kind").text == "HEX · 6 B"
    assert value.find_element("css selector", "pre").text == "00 07 ff fe 0a 00"
    assert rows[0].find_element("css selector", "td.time").text == "2023-11-14 22:13:27.000Z"


def test_groups_list(site, browser):
    browser.get(site.url("/groups"))
    assert row_of(browser, "groups", GROUP)[1:] == ["classic", "Stable", "consumer", "1", "10"]
    assert row_of(browser, "groups", XSS_GROUP)[1:] == ["classic", "Empty", "—", "0", "25"]
    assert browser.execute_script("return document.querySelectorAll('#groups b').length") == 0
    follow(browser, browser.find_element("link text", XSS_GROUP))  # its '/' stays in one segment
    assert browser.find_element("tag name", "h1").text == f"Group {XSS_GROUP}"
    assert browser.find_element("id", "total-lag").text == "25"
    assert [row[:5] for row in cells(browser, "offsets")] == [
        ["orders", "0", "0", "10", "10"], ["orders", "1", "0", "10", "10"], ["orders", "2", "5", "10", "5"],
    ]
    assert browser.execute_script("return window.__xss === undefined")


def test_group_members_assignment_and_lag(site, browser):
    browser.get(site.url("/groups"))
    follow(browser, browser.find_element("link text", GROUP))
    assert browser.find_element("id", "state").text == "Stable"
    assert browser.find_element("id", "total-lag").text == "10"
    [member] = cells(browser, "members")
    assert member[0] == CONSOLE_CLIENT and member[1].endswith("127.0.0.1")
    assert member[3] == "orders: 0, 1, 2"
    offsets = [row[:5] for row in cells(browser, "offsets")]
    assert offsets == [
        ["orders", "0", "7", "10", "3"],
        ["orders", "1", "10", "10", "0"],
        ["orders", "2", "3", "10", "7"],
    ]


def test_live_request_rates_refresh_without_reloading(site, browser):
    browser.get(site.url("/rates"))
    produce = row_of(browser, "rates-table", "Produce")
    before = int(produce[2].replace(",", ""))
    browser.execute_script("window.__same_page = true")
    site.produce_more("audit", 5)
    def produce_total(driver):
        total = int(row_of(driver, "rates-table", "Produce")[2].replace(",", ""))
        return total if total > before else False

    try:
        after = WebDriverWait(browser, 20).until(produce_total)
    except TimeoutException:
        pytest.fail(f"the Produce count stayed at {before}: {cells(browser, 'rates-table')}")
    assert after > before
    assert browser.execute_script("return window.__same_page === true")  # no reload
    assert int(browser.find_element("id", "rates").get_attribute("data-updated")) >= 1
    headings = [th.text for th in browser.find_elements("css selector", "#rates-table th")]
    assert headings == ["API", "Requests/s", "Requests", "p50 ms", "p99 ms"]


def test_records_decoded_by_their_writer_schema(site, browser):
    """AvroSerializer's records (magic 0, the schema id, Avro): each value shown as JSON, read
    by the schema it was written with, under its subject, version and id."""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    client = SchemaRegistryClient({"url": site.registry})
    ids = [client.get_version("payments-value", v).schema_id for v in (1, 2)]
    browser.get(site.url("/records?topic=payments"))
    rows = browser.find_elements("css selector", "#records tbody tr")
    assert [r.get_attribute("data-offset") for r in rows] == ["0", "1"]
    for row, version, schema_id, value in zip(
        rows, (1, 2), ids, ({"id": "p-1", "amount": 12.5}, {"id": "p-2", "amount": 3.0, "currency": "GBP"}), strict=True
    ):
        cell = row.find_element("css selector", "td.value")
        assert json.loads(cell.find_element("css selector", "pre").text) == value
        assert cell.find_element("css selector", ".kind").text.startswith(
            f"AVRO · payments-value v{version} · ID {schema_id} · "  # the subject is a link: not upper-cased
        )
    follow(browser, rows[1].find_element("link text", "payments-value v2"))
    assert browser.find_element("tag name", "h1").text == "payments-value version 2"


def test_schema_pages_and_the_diff_of_two_versions(site, browser):
    browser.get(site.url("/"))
    follow(browser, browser.find_element("link text", "Schemas"))  # in the navigation
    subject = row_of(browser, "subjects", "payments-value")
    assert subject[1] == "2" and subject[3:] == ["AVRO", "2", "BACKWARD"]
    follow(browser, browser.find_element("link text", "payments-value"))
    versions = cells(browser, "versions")
    assert [row[0] for row in versions] == ["1", "2"] and versions[1][4] == "v1 → v2"
    follow(browser, browser.find_element("link text", "1"))
    assert json.loads(browser.find_element("id", "schema-text").text) == PAYMENT_V1
    browser.get(site.url("/schemas/payments-value"))
    follow(browser, browser.find_element("css selector", "#diff-form button"))
    assert browser.find_element("tag name", "h1").text == "payments-value: version 1 → 2"
    added = [e.text for e in browser.find_elements("css selector", "#diff .add")]
    removed = [e.text for e in browser.find_elements("css selector", "#diff .remove")]
    files = [e.text for e in browser.find_elements("css selector", "#diff .file")]
    assert [f.split(" (")[0] for f in files] == ["--- payments-value version 1", "+++ payments-value version 2"]
    assert '+      "name": "currency",' in added and '+      "default": "EUR"' in added
    assert removed == []  # v2 only adds a field
    browser.get(site.url("/schemas/no-such-subject"))
    assert "40401" in browser.find_element("id", "error").text


def test_missing_things_and_bad_input_are_pages_not_tracebacks(site, browser):
    browser.get(site.url("/topics/no-such-topic"))
    assert browser.find_element("id", "error").text == "topic 'no-such-topic' does not exist"
    browser.get(site.url("/records?topic=orders&partition=9"))
    assert "has no partition 9 (it has 3)" in browser.find_element("id", "error").text
    browser.get(site.url("/records?topic=orders&count=100000"))
    assert browser.find_element("id", "error").text == "count=100000: allowed values are 1 to 500"


def test_share_group_list_members_and_share_partitions(site, browser):
    """A ShareConsumer (KIP-932) holding records: the groups page lists its share group, and
    the group's page shows its member, assignment and each share partition's start offset,
    end offset and lag, as ``groups describe`` does. Last: the share group joins the list."""
    from confluent_kafka import AcknowledgeType

    from tests.share.test_share_consumer import consumer, new_topic, poll_until, produce, set_group_configs

    topic, group = new_topic(site.bootstrap), "queue-workers"
    set_group_configs(site.bootstrap, group, {"share.auto.offset.reset": "earliest"})
    produce(site.bootstrap, topic, range(10))
    worker = consumer(site.bootstrap, group, topic, explicit=True, max_records=4, name="share-worker")
    try:
        got = poll_until(worker, lambda got: {m.offset() for m in got} >= {0, 1, 2, 3}, "offsets 0-3")
        for m in got:
            worker.acknowledge(m, AcknowledgeType.ACCEPT if m.offset() < 4 else AcknowledgeType.RELEASE)
        worker.commit_sync(30)
        # 0-3 accepted: the start offset is 4 and six records are left of ten.
        browser.get(site.url("/groups"))
        assert row_of(browser, "groups", group)[1:] == ["share", "Stable", "share", "1", "6"]
        follow(browser, browser.find_element("link text", group))
        assert browser.find_element("tag name", "h1").text == f"Group {group}"
        assert browser.find_element("id", "group-type").text == "share"
        assert browser.find_element("id", "state").text == "Stable"
        assert browser.find_element("id", "assignor").text == "simple"
        assert browser.find_element("id", "total-lag").text == "6"
        [member] = cells(browser, "members")
        assert member[0] == "share-worker" and member[3] == f"{topic}: 0"
        assert cells(browser, "share-offsets") == [[topic, "0", "4", "10", "6", "share-worker"]]
    finally:
        worker.close()


def test_client_metrics_page_shows_what_a_producer_pushed(site, browser):
    """A client-metrics subscription (the ``client-metrics`` command) and a confluent-kafka
    producer that pushes its metrics (KIP-714): once the broker has them (a wait on the
    control interface, not a sleep), the Clients page lists the producer and its metrics."""
    import json as json_
    import urllib.request

    from confluent_kafka import Producer

    from tests.commands.support import trikafka

    run = trikafka("client-metrics", "alter", "--name", "console-producers", "--metrics",
                   "org.apache.kafka.producer.", "--interval", "500", bootstrap=site.bootstrap)
    assert run.code == 0, run
    producer = Producer({"bootstrap.servers": site.bootstrap, "client.id": "console-pusher"})
    producer.produce("console-telemetry", b"x")
    assert producer.flush(30) == 0
    wait = (f"{site.broker.control_url}/wait/client-metric?name=org.apache.kafka.producer."
            "&client_id=console-pusher&timeout_ms=20000")
    with urllib.request.urlopen(wait, timeout=30) as reply:
        reached = json_.loads(reply.read())["reached"]
    with urllib.request.urlopen(f"{site.broker.control_url}/client-metrics", timeout=30) as reply:
        listed = {c["client_id"]: c for c in json_.loads(reply.read())["clients"]}
    assert listed["console-pusher"]["client_instance_id"] == reached["client_instance_id"]
    browser.get(site.url("/clients"))
    row = row_of(browser, "clients", "console-pusher")
    assert row[1].startswith("confluent-kafka-python") and row[3] == reached["client_instance_id"]
    assert row[4] == "org.apache.kafka.producer."
    table = browser.find_element("css selector", f"table[data-instance='{reached['client_instance_id']}']")
    names = [r.find_elements("tag name", "td")[0].text for r in table.find_elements("css selector", "tbody tr")]
    assert "org.apache.kafka.producer.record.queue.time.avg" in names
    producer.flush(5)


def test_the_topic_page_produces_a_json_record_through_the_proxy(site, browser):
    site.produce_more("forms", 1)
    browser.get(site.url("/topics/forms"))
    browser.find_element("id", "produce-key").send_keys('"order-7"')
    browser.find_element("id", "produce-value").send_keys('{"id": 7, "item": "lamp"}')
    follow(browser, browser.find_element("id", "produce-submit"))
    assert browser.find_element("id", "produced").text == (
        "Produced to partition 0 at offset 1 through the HTTP proxy."
    )
    assert browser.find_element("tag name", "h1").text == "Topic forms"
    browser.get(site.url("/records?topic=forms&partition=0&offset=1"))
    row = browser.find_element("css selector", "#records tr[data-offset='1']")
    assert row.find_element("css selector", "td.key pre").text == '"order-7"'
    assert json.loads(row.find_element("css selector", "td.value pre").text) == {"id": 7, "item": "lamp"}

    browser.get(site.url("/topics/forms"))
    browser.find_element("id", "produce-value").send_keys("{not json")
    follow(browser, browser.find_element("id", "produce-submit"))
    assert browser.find_element("tag name", "h1").text == "Not produced"
    assert "value: not JSON" in browser.find_element("tag name", "main").text
