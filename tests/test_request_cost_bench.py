"""``python -m benchmarks.request_cost`` runs and answers every request it times.

Figures are checked for shape only (present, positive), never for speed: a busy machine
must not fail the suite.
"""

from __future__ import annotations

import trio

from benchmarks.request_cost import measure


def test_every_request_kind_has_positive_figures() -> None:
    results = trio.run(measure, 50, 0.3)
    assert set(results["on a socket"]) == {"ApiVersions v3", "Fetch v16, empty", "Fetch v16, 1 record"}
    for figures in results["on a socket"].values():
        assert figures["round_trip_us"] > 0 and figures["broker_cpu_us"] > 0
    assert len(results["warm"]) == 6 and all(value > 0 for value in results["warm"].values())
