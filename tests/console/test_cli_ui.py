"""``--ui``: off by default, the HTTP server's port when asked, and the console for
``--brokers N`` too (read over the protocol, so one console sees the whole cluster)."""

from __future__ import annotations

import re
import urllib.request

import pytest

from trikafka import cli
from trikafka.cli import UI_DEFAULT_PORT, build_config, parse_args
from trikafka.testing.process import BrokerProcess


def test_ui_is_off_by_default_and_brings_the_http_server_when_asked():
    assert build_config(parse_args(["--in-memory"])).metrics_port == -1
    assert build_config(parse_args(["--in-memory", "--ui"])).metrics_port == UI_DEFAULT_PORT
    # A port the user chose wins, in either spelling.
    assert build_config(parse_args(["--in-memory", "--ui", "--override", "metrics_port=0"])).metrics_port == 0


def test_ui_with_the_http_server_off_is_refused(capsys):
    assert cli.main(["--in-memory", "--ui", "--override", "metrics.port=-1"]) == 2
    [line] = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert line.startswith("trikafka: ") and "metrics.port" in line and "--ui" in line


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as answer:
        assert answer.status == 200
        return answer.read().decode()


def _cells(html: str, table_id: str) -> list[list[str]]:
    table = html.split(f'id="{table_id}"', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", table.split("<tbody>", 1)[1], re.S)
    return [
        [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)] for row in rows
    ]


@pytest.mark.compat
def test_the_console_of_an_in_process_cluster(tmp_path):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    broker = BrokerProcess(
        "--in-memory", "--brokers", "3", "--ui", "--override", "metrics.port=0",
        "--override", "schema.registry.port=0", cwd=tmp_path,
    )
    try:
        broker.wait_ready()
        base = broker.wait_for_output("  ui on ").split("ui on", 1)[1].strip() + "/"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("spread", 6, 3)])["spread"].result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for partition in range(6):
            producer.produce("spread", value=b"x" * 10, partition=partition)
        assert producer.flush(30) == 0

        overview = _get(base)
        assert [row[0] for row in _cells(overview, "brokers")] == ["1", "2", "3"]
        assert overview.count("PLAINTEXT://127.0.0.1:") == 3  # every broker's listener
        topic = _cells(_get(base + "topics/spread"), "partitions")
        assert sorted({row[1] for row in topic}) == ["1", "2", "3"]  # leaders on every broker
        assert [row[4:6] for row in topic] == [["0", "1"]] * 6  # start and end offsets
        # Produce requests reached three brokers; the console sums their counters.
        rates = {row[0]: row for row in _cells(_get(base + "rates/table"), "rates-table")}
        assert int(rates["Produce"][2]) >= 3
        # The CLI hands the console the first broker's registry, bound after the console was built.
        registry = broker.wait_for_output("  schema registry on ").split(" on ", 1)[1].strip()
        assert f"Schema Registry at <code>{registry}</code> · 0 subjects" in _get(base + "schemas")
    finally:
        assert broker.stop() == 0, broker.output
