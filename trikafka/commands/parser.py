"""The commands' argument parser and their entry point (see :mod:`trikafka.commands`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from trikafka.commands import client_metrics, cluster, configs, consume, groups, produce, rest, schemas, top, topics
from trikafka.commands.common import EXIT_USAGE, run_command

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m trikafka",
        description="Commands for any Kafka cluster (with no command, `python -m trikafka` runs the broker).",
        epilog="exit codes: 0 ok, 1 Kafka error (unknown topic, refused, unreachable, timeout), 2 usage error",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (topics, produce, consume, groups, configs, client_metrics, cluster, top, schemas, rest):
        module.register(commands)
    return parser


def main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)  # argparse exits 2 on a usage error
    if args.timeout <= 0:
        print("trikafka: --timeout must be above 0", file=sys.stderr)
        return EXIT_USAGE
    return run_command(args, args.run, bounded=getattr(args, "bounded", True))
