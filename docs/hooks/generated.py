"""mkdocs hook: pages generated from the code when the site is built.

* ``<!-- generated: broker-keys -->``: every broker key trikafka implements, with its default and
  meaning, from :func:`trikafka.config.config_keys` (the one config table) and the dev broker's
  dev defaults (:data:`trikafka.config.dev.DEV_DEFAULTS`);
* ``<!-- generated: topic-keys -->``: every topic key, from :func:`trikafka.config.topics.readme_table`;
* ``<!-- generated: dev-defaults -->``: the dev defaults, from :data:`trikafka.config.dev.DEV_DEFAULTS`;
* ``<!-- generated: not-served -->``: what of Kafka's API trikafka does not serve, from
  :data:`trikafka.config.served.NOT_SERVED` (``--help`` reads the same table);
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
    "<!-- generated: not-served -->",
    "<!-- generated: dev-defaults -->",
)


def broker_table() -> str:
    from trikafka.config import config_keys
    from trikafka.config.dev import DEV_DEFAULTS

    lines = ["| key | default | meaning |", "|---|---|---|"]
    for key, default, doc in config_keys():
        shown = f"`{default}`" if default != "" else "(none)"
        if key in DEV_DEFAULTS:
            shown += f" (dev default: `{DEV_DEFAULTS[key][0]}`)"
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


def not_served() -> str:
    from trikafka.config.served import not_served_table

    return not_served_table()


def dev_defaults_table() -> str:
    from trikafka.config import BrokerConfig
    from trikafka.config.dev import DEV_DEFAULTS

    kafka = BrokerConfig().as_properties()
    lines = ["| key | dev default | Kafka's default | why |", "|---|---|---|---|"]
    lines += [f"| `{key}` | `{value}` | `{kafka[key]}` | {why} |" for key, (value, why) in DEV_DEFAULTS.items()]
    return "\n".join(lines) + "\n"


def expand(markdown: str) -> str:
    tables = (broker_table, topic_table, profiles_table, not_served, dev_defaults_table)
    for marker, table in zip(MARKERS, tables, strict=True):
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
