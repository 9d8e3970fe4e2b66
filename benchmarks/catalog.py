"""Every workload of ``python -m benchmarks``, in the order a round runs them.

The broker rows come first (tiny requests on a small heap, then latency, produce and
consume), the Trio clients' rows after them, the rows that start processes of their own
last. Each module owns its rows; this one only orders them, so none of them imports another
to find its place in the list.
"""

from __future__ import annotations

from benchmarks.startup import startup_workloads
from benchmarks.trio_client import trio_produce_workloads
from benchmarks.trio_consumer import trio_consume_workloads
from benchmarks.workloads import Settings, Workload, broker_workloads, process_workloads

__all__ = ["build_workloads"]


def build_workloads(settings: Settings) -> list[Workload]:
    return [
        *broker_workloads(settings),
        *trio_produce_workloads(settings),
        *trio_consume_workloads(settings),
        *process_workloads(settings),
        *startup_workloads(settings),
    ]
