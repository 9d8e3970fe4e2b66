"""The README's console screenshot: a ``--ui`` broker holding a little data, in headless Chromium.

    python tools/console_screenshot.py        # writes docs/assets/console.png

Needs Debian's chromium and chromium-driver (``make system-deps``), selenium and confluent-kafka
(the test extra).
"""

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from confluent_kafka import Consumer, Producer  # noqa: E402 (after the sys.path line)
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402 (after the sys.path line)
from selenium import webdriver  # noqa: E402 (after the sys.path line)

from trikafka.testing.process import BrokerProcess  # noqa: E402 (after the sys.path line)

broker = BrokerProcess("--in-memory", "--ui", "--override", "metrics.port=0", cwd=tempfile.mkdtemp())
try:
    broker.wait_ready()
    web = broker.wait_for_output("metrics on").split("metrics on", 1)[1].strip().removesuffix("/metrics")
    b = broker.address
    admin = AdminClient({"bootstrap.servers": b})
    for f in admin.create_topics(
        [NewTopic("orders", 6, 1), NewTopic("payments", 3, 1), NewTopic("audit", 1, 1)]
    ).values():
        f.result(30)
    p = Producer({"bootstrap.servers": b, "linger.ms": 5})
    for i in range(3000):
        p.produce(
            "orders",
            key=f"customer-{i % 40}",
            value=f'{{"order": {i}, "amount": {i % 90}.{i % 100:02d}, "currency": "EUR"}}'.encode(),
            headers=[("source", b"web")],
        )
        if i % 3 == 0:
            p.produce("payments", key=str(i), value=b'{"paid": true}')
        if i % 10 == 0:
            p.produce("audit", value=b"login")
    p.flush(30)
    c = Consumer(
        {"bootstrap.servers": b, "group.id": "billing", "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    c.subscribe(["orders"])
    n = 0
    while n < 1800:
        m = c.poll(1)
        if m is not None and m.error() is None:
            n += 1
    c.commit(asynchronous=False)
    c2 = Consumer(
        {
            "bootstrap.servers": b,
            "group.id": "fraud-check",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "group.protocol": "consumer",
        }
    )
    c2.subscribe(["payments"])
    n = 0
    while n < 600:
        m = c2.poll(1)
        if m is not None and m.error() is None:
            n += 1
    c2.commit(asynchronous=False)
    options = webdriver.ChromeOptions()
    for a in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,800",
        "--lang=en-US",
        "--hide-scrollbars",
    ):
        options.add_argument(a)
    d = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path="/usr/bin/chromedriver"))
    try:
        d.get(web + "/ui/topics/orders")
        time.sleep(1.0)  # the page's script fills in sizes
        d.save_screenshot(str(ROOT / "docs" / "assets" / "console.png"))
    finally:
        d.quit()
    c.close()
    c2.close()
finally:
    broker.stop(15)
