"""``testing.broker_cluster.BrokerCluster``: real NameServer and broker processes, and faults.

Select with ``-m integration``; skip with ``-m "not integration"``.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledgermq.testing.broker_cluster import BrokerCluster

    MakeCluster = Callable[..., BrokerCluster]

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_master_failover_restart_pause_and_reaping(broker_clusters: MakeCluster) -> None:
    """The route names the elected master as brokerId 0; a killed master is replaced by one of
    the others, which the NameServer learns; the old one comes back on its old address as a
    slave; a paused replica is resumed; ``close`` leaves no process behind."""
    cluster = broker_clusters(replicas=3)
    masters = cluster.wait_routable()
    first = cluster.wait_master("broker-a")
    assert masters == {"broker-a": cluster.address("broker-a", first)}
    address = cluster.address("broker-a", first)

    cluster.kill9("broker-a", first)
    assert not cluster.is_running("broker-a", first)
    second = cluster.wait_master("broker-a")
    assert second != first
    assert cluster.wait_routable() == {"broker-a": cluster.address("broker-a", second)}

    cluster.start_replica("broker-a", first)
    assert cluster.address("broker-a", first) == address
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        view = cluster.runtime_info("broker-a")[first]
        if isinstance(view, dict) and view["brokerRole"] == "SLAVE":
            break
        time.sleep(0.05)
    assert view["brokerRole"] == "SLAVE", view
    assert cluster.wait_master("broker-a") == second

    paused = next(n for n in cluster.nodes if n not in (first, second))
    cluster.sigstop("broker-a", paused)
    assert not cluster.is_live("broker-a", paused)
    assert paused not in cluster.runtime_info("broker-a")
    cluster.sigcont("broker-a", paused)
    assert cluster.is_live("broker-a", paused)

    cluster.sigstop("broker-a", paused)  # close() must resume it to kill it
    pids = [cluster.pid("broker-a", n) for n in cluster.nodes]
    cluster.close()
    assert not any(_alive(pid) for pid in pids)


def test_two_groups_and_two_namesrvs(broker_clusters: MakeCluster) -> None:
    """Each group elects its own master and registers with every NameServer."""
    cluster = broker_clusters(replicas=1, groups=2, namesrvs=2)
    assert cluster.namesrv_addr.count(";") == 1
    masters = cluster.wait_routable()
    assert sorted(masters) == ["broker-a", "broker-b"]
    assert cluster.terminate("broker-b", "n0") == 0
