"""``python -m trikafka <command>``: kcat/rpk-like commands on the Trio client.

One module per command group (``topics``, ``produce``, ``consume``, ``groups``, ``configs``, ``client-metrics``,
``cluster``, ``top``, ``schemas``, ``rest``); each ``register``s its argparse parser and sets ``run`` (an async
function ``(args, output) -> exit code``) and, for commands that follow until interrupted,
``bounded=False``. :func:`main` is ``main(argv) -> int`` so tests drive it like a subprocess.
Without a command name ``python -m trikafka`` is the broker (:mod:`trikafka.cli`), which only
needs :data:`COMMANDS` to tell the two apart — the command modules load on first use.

Exit codes: 0 ok, 1 a Kafka error (refused, unknown topic or group, unreachable, timeout),
2 a usage error (argparse's code; a bad ``-X`` setting too), 130 interrupted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from trikafka.lazy_exports import lazy_exports as _lazy_exports

__all__ = ["COMMANDS", "CommandError", "RecordDecoder", "RegistryClient", "main", "subject_path", "watch_broker"]

#: Names other edges use (the console reads the Schema Registry as ``consume --decode`` does),
#: loaded on first use so that ``python -m trikafka`` stays quick to start.
_LAZY = {
    "CommandError": "trikafka.commands.common",
    "RecordDecoder": "trikafka.commands.registry_http",
    "RegistryClient": "trikafka.commands.registry_http",
    "subject_path": "trikafka.commands.registry_http",
}

if TYPE_CHECKING:
    from trikafka.commands.common import CommandError
    from trikafka.commands.registry_http import RecordDecoder, RegistryClient, subject_path

COMMANDS = (
    "topics", "produce", "consume", "groups", "configs", "client-metrics", "cluster", "top", "schemas", "rest",
)


def main(argv: Sequence[str]) -> int:
    from trikafka.commands.parser import main as run

    return run(argv)


async def watch_broker(broker: Any) -> None:
    """``top``'s live view of a broker in this process (``python -m trikafka --live``)."""
    from trikafka.commands.top import watch_broker as watch

    await watch(broker)


__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, globals())
