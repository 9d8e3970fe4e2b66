"""mkdocs hook: pages generated from the code when the site is built.

* ``<!-- generated: broker-keys -->``: every broker key trikafka implements, with its default and
  meaning, from :func:`trikafka.config.config_keys` (the one config table) and the dev broker's
  own defaults (:data:`trikafka.cli.DEV_DEFAULTS`);
* ``<!-- generated: topic-keys -->``: every topic key, from :func:`trikafka.config.topics.readme_table`;
* ``<!-- generated: version-profiles -->``: per Kafka release, what a ``kafka.version`` profile
  advertises and lacks, from the profiles the broker itself builds (``server.api_table.kafka_profile``);
* ``assets/bench-latest.png``: ``make bench``'s chart, and ``assets/scale-*.png``, the scale
  section's curves, served from ``benchmarks/results/``.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

MARKERS = (
    "<!-- generated: broker-keys -->",
    "<!-- generated: topic-keys -->",
    "<!-- generated: version-profiles -->",
)


def broker_table() -> str:
    from trikafka.cli import DEV_DEFAULTS
    from trikafka.config import config_keys

    lines = ["| key | default | meaning |", "|---|---|---|"]
    for key, default, doc in config_keys():
        shown = f"`{default}`" if default != "" else "(none)"
        if key in DEV_DEFAULTS:
            shown += f" (CLI: `{DEV_DEFAULTS[key]}`)"
        lines.append(f"| `{key}` | {shown} | {' '.join(doc.split()).replace('|', '&#124;')} |")
    return "\n".join(lines) + "\n"


def topic_table() -> str:
    from trikafka.config.topics import readme_table

    return readme_table()


def profiles_table() -> str:
    from trikafka.config import BrokerConfig
    from trikafka.config.kafka_versions import KAFKA_VERSIONS
    from trikafka.server.api_table import kafka_profile

    lines = ["| release | source | APIs advertised | what trikafka lacks of it |", "|---|---|---|---|"]
    for release in KAFKA_VERSIONS:
        found = kafka_profile(BrokerConfig(kafka_version=release))
        lacks = ", ".join(found.gaps).replace("|", "&#124;") or "nothing"
        lines.append(f"| {release} | {found.source} | {len(found.apis)} | {lacks} |")
    return "\n".join(lines) + "\n"


def expand(markdown: str) -> str:
    for marker, table in zip(MARKERS, (broker_table, topic_table, profiles_table), strict=True):
        if marker in markdown:
            markdown = markdown.replace(marker, table())
    return markdown


def on_page_markdown(markdown, page, config, files):  # noqa: ARG001 — mkdocs' hook signature
    return expand(markdown)


def on_files(files, config):  # noqa: ARG001
    from mkdocs.structure.files import File

    results = ROOT / "benchmarks" / "results"
    chart = results / "latest.png"
    if chart.exists():
        files.append(File.generated(config, "assets/bench-latest.png", abs_src_path=str(chart)))
    for curve in sorted(results.glob("scale-*.png")):  # `python -m benchmarks --scale`'s curves
        files.append(File.generated(config, f"assets/{curve.name}", abs_src_path=str(curve)))
    return files
