"""The dev defaults: where a broker started for development departs from Kafka's defaults.

One table for every entry point that starts a broker for a developer — ``python -m trikafka``,
``open_broker()``, ``open_cluster()``, the pytest fixtures, ``KafkaContainer`` — so none of them
can be guessed wrong. Each applies only to a key the caller did not set; ``kafka_defaults=True``
(``--kafka-defaults`` on the command line, ``@pytest.mark.trikafka(kafka_defaults=True)``)
leaves every key at Kafka's own default. A ``BrokerConfig`` built by the caller is taken as it
is: it already says every value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["DEV_DEFAULTS", "DEV_REASON", "with_dev_defaults"]

#: Why a key has its dev value, as the CLI banner and ``--list-config`` say it.
DEV_REASON = "dev default"

#: key → (value, why): where a development broker departs from Kafka's defaults.
DEV_DEFAULTS: Mapping[str, tuple[str, str]] = {
    "group.initial.rebalance.delay.ms": (
        "0",
        "a lone consumer's group forms at once (Kafka's 3000 ms suits big groups joining together)",
    ),
    # Share groups: librdkafka's share-consumer tests run against Kafka configured with a 1 s
    # minimum lock (their CI's only broker setting), and set 3 s locks on their groups.
    "group.share.min.record.lock.duration.ms": (
        "1000",
        "a test may give its share group a lock of 1 s or more (Kafka's floor is 15 s)",
    ),
    "group.share.assignment.interval.ms": (
        "0",
        "a share group is assigned anew as soon as a member joins or leaves (Kafka waits 1000 ms between "
        "target assignments)",
    ),
    # The OS's socket buffers (Linux autotunes them up to net.ipv4.tcp_rmem/tcp_wmem's max):
    # Kafka's fixed 100 KB suits thousands of connections, but makes a 1 MB produce arrive in
    # ~10 reads. Produce 10 KB over loopback: 413-421 -> 457-781 MB/s, CPU/GB 1.45-1.6 -> 1.2-1.3 s.
    "socket.receive.buffer.bytes": ("-1", "the OS's autotuned socket buffer (Kafka's is a fixed 100 KB)"),
    "socket.send.buffer.bytes": ("-1", "the OS's autotuned socket buffer (Kafka's is a fixed 100 KB)"),
    # Kafka's default is unbounded (-1): ten clients declaring 100 MB frames could make the
    # broker hold a gigabyte. Never below socket.request.max.bytes, which Kafka requires.
    "queued.max.request.bytes": (
        str(256 * 1024 * 1024),
        "requests being read or queued hold at most 256 MiB (Kafka's -1 is unbounded); "
        "never below socket.request.max.bytes",
    ),
}


def _key(name: str) -> str:
    return str(name).strip().replace("_", ".")


def with_dev_defaults(items: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """``items`` (Kafka keys in either spelling) with each dev default it does not set, and
    ``{key: "dev default"}`` for the keys that took one."""
    out = dict(items)
    given = {_key(name) for name in out}
    reasons: dict[str, str] = {}
    for key, (value, _why) in DEV_DEFAULTS.items():
        if key not in given:
            out[key], reasons[key] = value, DEV_REASON
    if "queued.max.request.bytes" in reasons:
        # The pool must fit the largest request (Kafka's rule): a larger one set by the user wins.
        largest = next((v for k, v in out.items() if _key(k) == "socket.request.max.bytes"), None)
        if largest is not None and str(largest).strip().lstrip("-").isdigit():
            out["queued.max.request.bytes"] = str(max(int(out["queued.max.request.bytes"]), int(largest)))
    return out, reasons
