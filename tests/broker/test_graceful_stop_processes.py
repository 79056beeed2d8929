"""A rolling restart's step with real processes (issue 27 item 6): SIGTERM to the master of a
group under steady sends. The master hands its leadership to the most caught-up follower before
it stops, so the group is writable again at once, not after an election timeout; a follower just
stops. Nothing acknowledged is lost (the failover tests' checks). The longest time without an
acknowledged send is printed and must stay under a second.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from typing import TYPE_CHECKING

import pytest

from tests.broker.test_failover_processes import GROUP, _check, _scenario

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledgermq.testing.broker_cluster import BrokerCluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def _longest_gap_after_sigterm(cluster: BrokerCluster, pick: Callable[[str], str]) -> float:
    """SIGTERM ``pick(master)`` (in a thread: the producers keep sending meanwhile); the
    longest time without an acknowledged send from the signal to 6 s after it, in seconds."""
    sent_at: list[float] = []
    stopped: list[int] = []

    def stop(master: str) -> None:
        node = pick(master)
        sent_at.append(time.monotonic())  # the clock of asyncio's loop.time()
        threading.Thread(target=lambda: stopped.append(cluster.terminate(GROUP, node))).start()

    async def main() -> float:
        run, _ = await _scenario(cluster, stop)
        await _check(cluster, run)
        start = sent_at[0]
        times = [start, *sorted(t for t in run.ack_times if start <= t <= start + 6.0)]
        gap = max(b - a for a, b in itertools.pairwise(times))
        print(
            f"acked {len(run.acked)}, send failures {run.failures}, longest time without an "
            f"acknowledged send after SIGTERM: {gap * 1000:.0f} ms"
        )
        assert len(times) > 1, "nothing was acknowledged after the SIGTERM"
        return gap

    gap = asyncio.run(asyncio.wait_for(main(), 150))
    assert stopped == [0]  # a clean exit, not SIGKILL after the stop timeout
    return gap


def test_sigterm_of_the_master_hands_over_before_it_stops(
    broker_clusters: Callable[..., BrokerCluster],
) -> None:
    """Before: the master just closed and the followers elected after their heartbeat
    timeout; the group took no writes for several seconds."""
    cluster = broker_clusters(replicas=3)
    gap = _longest_gap_after_sigterm(cluster, lambda master: master)
    assert gap < 1.0


def test_sigterm_of_a_follower_costs_nothing(
    broker_clusters: Callable[..., BrokerCluster],
) -> None:
    cluster = broker_clusters(replicas=3)
    gap = _longest_gap_after_sigterm(
        cluster, lambda master: next(n for n in cluster.nodes if n != master)
    )
    assert gap < 1.0
