"""One table of what the broker does not serve (``trikafka/config/served.py``): ``--help`` and
docs/features.md are written from it, and it is held to what the broker implements."""

from __future__ import annotations

import sys
from pathlib import Path

from trikafka import cli
from trikafka.config.kafka_versions import KAFKA_VERSIONS
from trikafka.config.kafka_versions_data import RELEASES
from trikafka.config.served import NOT_SERVED, not_served_summary
from trikafka.protocol.registry import IMPLEMENTED_APIS, api_name

ROOT = Path(__file__).resolve().parent.parent
NAMED = {name for _, names, _ in NOT_SERVED for name in names}


def test_the_table_is_exactly_what_kafka_has_and_trikafka_does_not():
    kafka = {api_name(key) for release in RELEASES.values() for key in release["apis"]}
    implemented = {api_name(key) for key in IMPLEMENTED_APIS}
    assert not NAMED & implemented, "served, yet listed as not served"
    assert kafka - implemented - NAMED == set(), "Kafka's, not served, and not in the table"
    assert NAMED <= kafka


def test_help_is_written_from_the_table(capsys):
    try:
        cli.parse_args(["--help"])
    except SystemExit:
        pass
    text = " ".join(capsys.readouterr().out.split())
    assert " ".join(not_served_summary().split()) in text
    assert "UpdateFeatures" not in text  # served since share groups (share.version)


def test_features_page_is_written_from_the_table_and_names_every_served_api():
    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    import generated

    page = (ROOT / "docs" / "features.md").read_text()
    assert "<!-- generated: not-served -->" in page
    built = generated.expand(page)
    assert all(name in built for name in NAMED)
    served_paragraph = page.split("Not served")[0]
    assert [api_name(key) for key in IMPLEMENTED_APIS if api_name(key) not in served_paragraph] == []


def test_commands_page_names_the_newest_profile():
    assert f"2.8 to {KAFKA_VERSIONS[-1]}" in (ROOT / "docs" / "commands.md").read_text()
