"""Off a terminal (a pipe, a file) the commands print plain tables: full width — a long name is
never cut — and no box drawing, so grep and awk read them; ``top -n 1`` too."""

from __future__ import annotations

import re

from tests.commands.support import confluent_produce, trikafka
from tests.commands.test_groups import _member

BOX = re.compile("[\u2500-\u257f]")  # rich's box drawing and rules
LONG = "orders-" + "very-long-topic-name-" * 6 + "end"  # > 130 characters


def test_tables_in_a_pipe_are_plain_and_whole(kafka_broker):
    b = kafka_broker.bootstrap_servers
    assert trikafka("topics", "create", LONG, "--partitions", "2", bootstrap=b).code == 0
    listed = trikafka("topics", "list", bootstrap=b)
    assert listed.code == 0, listed
    assert not BOX.search(listed.out), listed.out
    lines = listed.out.splitlines()
    assert lines[0].split()[0] == "TOPIC", lines  # the header first, at the left margin
    assert any(line.startswith(LONG + " ") for line in lines), lines
    described = trikafka("topics", "describe", LONG, bootstrap=b)
    assert not BOX.search(described.out) and LONG in described.out, described.out


def test_top_once_in_a_pipe_is_plain_and_whole(kafka_broker):
    b = kafka_broker.bootstrap_servers
    assert trikafka("topics", "create", LONG, bootstrap=b).code == 0
    confluent_produce(b, LONG, [(None, b"x", 0)])
    consumer = _member(b, "a-group-whose-name-is-also-rather-long-for-eighty-columns-" * 2, LONG, 1)
    try:
        run = trikafka("top", "-n", "1", bootstrap=b)
    finally:
        consumer.close()
    assert run.code == 0, run
    assert not BOX.search(run.out) and "…" not in run.out, run.out
    assert run.out.startswith("trikafka top · cluster ")
    assert re.search(rf"^{LONG}\s+1\s+", run.out, re.M), run.out
    assert "a-group-whose-name-is-also-rather-long-for-eighty-columns-" * 2 in run.out
    assert "Per-request metrics are not part of the Kafka protocol" in run.out  # the note, whole
