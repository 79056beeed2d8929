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


def test_aged_commit_log_files_expire_and_pulls_move_past_them(
    broker_clusters: MakeCluster,
) -> None:
    """``age_commit_log`` with ``deleteWhen`` at every hour: every replica deletes the aged
    files at once, the queues' min offset moves past their messages, and a pull below it gets
    PULL_OFFSET_MOVED with the first kept offset (what the Spark source's failOnDataLoss and
    a consumer's offset reset rely on)."""
    from ledgermq.client import Message, PullStatus, SyncAdmin, SyncProducer, SyncPullConsumer
    from ledgermq.testing.child_process import wait_until

    every_hour = ";".join(f"{hour:02d}" for hour in range(24))
    cluster = broker_clusters(
        replicas=3,
        extra_settings={"mappedFileSizeCommitLog": str(64 << 10), "deleteWhen": every_hour},
    )
    cluster.wait_routable()
    namesrv = cluster.namesrv_addr
    with SyncAdmin(namesrv) as admin:
        admin.create_topic("Aging", 1)
        admin.wait_for_route("Aging")
    with SyncProducer("aging", namesrv) as producer:
        for _ in range(40):  # ~330 KiB: six files
            assert producer.send_batch("Aging", [Message(b"x" * 1000)] * 8).ok
    assert cluster.age_commit_log("broker-a", 7 * 24 * 3600.0, keep=2) >= 3

    with SyncPullConsumer("aging", namesrv) as consumer:
        mq = consumer.fetch_queues("Aging")[0]
        assert wait_until(lambda: consumer.min_offset(mq) > 0, 15.0), "nothing expired"
        first_kept, end = consumer.min_offset(mq), consumer.max_offset(mq)
        assert 0 < first_kept < end == 320
        below = consumer.pull(mq, 0, 32)
        assert (below.status, below.next_begin_offset) == (PullStatus.OFFSET_ILLEGAL, first_kept)
        kept = consumer.pull(mq, first_kept, 32)
        assert kept.status is PullStatus.FOUND
        assert kept.messages[0].queue_offset == first_kept
    files: dict[str, list[str]] = {}

    def deleted_on_every_replica() -> bool:
        for node in cluster.nodes:
            data = cluster.store_dir("broker-a", node).glob("dledger-*/data/*")
            files[node] = sorted(path.name for path in data)
        return all(len(names) == 2 for names in files.values())

    assert wait_until(deleted_on_every_replica, 10.0), f"commit-log files left: {files}"
