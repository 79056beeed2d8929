"""Failover time in simulated milliseconds (deterministic: not a wall-clock timing test).

Issue "Raft core": with the default timing, a new leader accepts writes within 2 s of the old one
dying, at the median. ``python -m ledgermq.testing.failover --trials 200`` prints the full
distribution.
"""

from __future__ import annotations

import statistics

from ledgermq.testing.failover import measure_failover, summarize


def test_median_failover_within_two_seconds() -> None:
    times = [measure_failover(seed) for seed in range(1, 61)]
    assert statistics.median(times) <= 2000, summarize(times)
    assert max(times) < 5000, summarize(times)


def test_five_nodes_fail_over_too() -> None:
    times = [measure_failover(seed, nodes=5) for seed in range(1, 21)]
    assert statistics.median(times) <= 2000, summarize(times)
