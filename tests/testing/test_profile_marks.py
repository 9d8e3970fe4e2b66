"""``@pytest.mark.trikafka(kafka_version=..., racks=...)``: what the mark becomes, and a typo refused."""

from __future__ import annotations

from typing import Any

import pytest

from trikafka.testing.pytest_plugin import marked_config


class Node:
    def __init__(self, *marks: Any) -> None:
        self.marks = [m.mark for m in marks]

    def iter_markers(self, name: str) -> Any:
        return iter(reversed(self.marks))  # closest first, as pytest's


def test_the_mark_sets_kafka_version_and_racks_with_the_closest_winning() -> None:
    node = Node(pytest.mark.trikafka(kafka_version="2.8", config={"num.partitions": 3}),
                pytest.mark.trikafka(kafka_version="3.9", racks=["a", "b"]))
    assert marked_config(node) == {"num.partitions": 3, "kafka.version": "3.9", "broker.rack": "a,b"}


def test_an_unknown_mark_argument_is_refused_by_name() -> None:
    with pytest.raises(pytest.UsageError, match="kafka_versions"):
        marked_config(Node(pytest.mark.trikafka(kafka_versions="3.9")))


@pytest.mark.trikafka(kafka_version="3.0")
async def test_trikafka_broker_speaks_as_the_marked_release(trikafka_broker: Any) -> None:
    from trikafka.server.api_table import supported_apis

    assert trikafka_broker.broker.config.kafka_version == "3.0"
    assert supported_apis(trikafka_broker.broker.config)[1] == (4, 12)  # Fetch: Kafka 3.0 served v0-12
