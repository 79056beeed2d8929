"""The NameServer's routes, ``cluster-list`` and the console's cluster page follow a membership
change (issue 27 item 2), with real processes and the operator's commands: ``replica-add`` of
``n3`` (started with the members plus itself), then ``replica-remove`` of a follower that is
still running. The added replica appears in all three within seconds of its start; the removed
one, told by the master that its removal is committed, unregisters and disappears from all
three while its process still runs (before, it kept registering as a slave every 30 s, so it
stayed in the routes, ``cluster-list`` and the console until it was stopped)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING

import pytest

from ledgermq.client import Admin
from ledgermq.console.views import cluster_view
from tests.broker.test_membership_processes import _add, _admin

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ledgermq.testing.broker_cluster import BrokerCluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

GROUP = "broker-a"


async def _views(cluster: BrokerCluster) -> tuple[set[str], set[str], set[str]]:
    """The broker addresses the NameServer routes to, the replica ids ``cluster-list`` shows
    registered, and the replica ids the console's cluster page shows."""
    admin = Admin(cluster.namesrv_addr)
    await admin.start()
    try:
        info = await admin.cluster_info()
        routed = set(info.broker_addr_table[GROUP].broker_addrs.values())
        console = {r.self_id for g in await cluster_view(admin) for r in g.replicas}
    finally:
        await admin.close()
    rows = json.loads(await _admin(cluster, "cluster-list", "--json"))
    listed = {str(r["replica"]) for r in rows if r["brokerId"] != "-"}
    return routed, listed, console


async def _until(check: Callable[[], Awaitable[bool]], what: str, timeout_s: float) -> float:
    """Seconds until ``check`` holds."""
    start = time.monotonic()
    while not await check():
        assert time.monotonic() - start < timeout_s, f"not within {timeout_s} s: {what}"
        await asyncio.sleep(0.2)
    return time.monotonic() - start


async def _scenario(cluster: BrokerCluster) -> None:
    master = await asyncio.to_thread(cluster.wait_master, GROUP, 30.0)
    await asyncio.to_thread(cluster.wait_routable)
    routed, listed, console = await _views(cluster)
    assert len(routed) == 3
    assert listed == console == {"n0", "n1", "n2"}
    await _add(cluster, "n3")  # replica-add, start, wait for its promotion
    n3 = cluster.address(GROUP, "n3")

    async def shows_n3() -> bool:
        routed, listed, console = await _views(cluster)
        return n3 in routed and "n3" in listed and "n3" in console

    await _until(shows_n3, "n3 in the routes, cluster-list and the console", 10)
    victim = next(n for n in ("n0", "n1", "n2") if n != master)
    gone = cluster.address(GROUP, victim)
    await _admin(cluster, "replica-remove", "-b", GROUP, "--id", victim)

    async def dropped_victim() -> bool:
        routed, listed, console = await _views(cluster)
        return gone not in routed and victim not in listed and victim not in console

    seconds = await _until(dropped_victim, f"{victim} out of every view", 10)
    assert cluster.is_running(GROUP, victim)  # it left on its own, not because it died
    routed, listed, console = await _views(cluster)
    assert len(routed) == 3
    assert listed == console == {"n0", "n1", "n2", "n3"} - {victim}
    print(f"{victim} left the routes, cluster-list and the console {seconds:.2f} s after removal")
    cluster.forget_replica(GROUP, victim)


def test_routes_cluster_list_and_console_follow_an_add_and_a_remove(
    broker_clusters: Callable[..., BrokerCluster],
) -> None:
    cluster = broker_clusters(replicas=3)
    asyncio.run(asyncio.wait_for(_scenario(cluster), 100))
