"""Real processes: a replica that lost its ledger, or fell behind its leader's retention point,
is rebuilt and serves every queue again (issue 13, items 1 and 2).

The outside test that found it: 3 replicas, 200 messages, SIGTERM a follower, move its
``dledger-<id>`` directory aside (the README's recovery for ``CorruptLogError``), restart it,
wait 8 s with no traffic, send 50 more: the replica reported ``ledgerEndIndex -1`` forever and
answered pulls with empty queues.
"""

from __future__ import annotations

import shutil
import time
from typing import TYPE_CHECKING, Any

import pytest

from ledgermq.client import Message, SyncAdmin, SyncProducer
from ledgermq.testing.child_process import wait_until
from ledgermq.wire import MQRequestCode, MQResponseCode
from ledgermq.wire.message import decode_records

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledgermq.testing.broker_cluster import BrokerCluster

    MakeCluster = Callable[..., BrokerCluster]

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

GROUP = "broker-a"


def _send(namesrv: str, topic: str, start: int, count: int) -> None:
    with SyncProducer("rebuild", namesrv) as producer:
        for i in range(start, start + count, 10):
            batch = [
                Message(b"m%05d" % k + b"." * 1000) for k in range(i, min(i + 10, start + count))
            ]
            assert producer.send_batch(topic, batch).ok  # one queue: queue 0


def _ledger(cluster: BrokerCluster, node: str) -> dict[str, Any]:
    view = cluster.runtime_info(GROUP)[node]
    assert isinstance(view, dict), view
    return view


def _pull_all(cluster: BrokerCluster, node: str, topic: str) -> list[bytes]:
    """Every message of queue 0 as ``node`` itself serves it (a slave serves pulls too)."""
    bodies: list[bytes] = []
    offset = 0
    while True:
        answer = cluster.request(
            cluster.address(GROUP, node),
            MQRequestCode.PULL_MESSAGE,
            {
                "consumerGroup": "rebuild-check",
                "topic": topic,
                "queueId": "0",
                "queueOffset": str(offset),
                "maxMsgNums": "32",
                "sysFlag": "0",
                "commitOffset": "-1",
                "suspendTimeoutMillis": "0",
                "subscription": "*",
                "subVersion": "0",
                "expressionType": "TAG",
            },
        )
        moved = int(answer.ext_fields.get("nextBeginOffset", offset))
        if answer.code == MQResponseCode.PULL_OFFSET_MOVED and moved > offset:
            offset = moved  # below the queue's min offset: expired by retention
            continue
        if answer.code != MQResponseCode.SUCCESS:
            return bodies
        messages = decode_records(answer.body)
        bodies += [m.body[:6] for m in messages]
        offset = int(answer.ext_fields["nextBeginOffset"])


def _follower(cluster: BrokerCluster) -> tuple[str, str]:
    master = cluster.wait_master(GROUP)
    return master, next(n for n in cluster.nodes if n != master)


def test_a_replica_restarted_with_an_empty_ledger_is_rebuilt(
    broker_clusters: MakeCluster,
) -> None:
    cluster = broker_clusters(replicas=3)
    cluster.wait_routable()
    namesrv = cluster.namesrv_addr
    with SyncAdmin(namesrv) as admin:
        admin.create_topic("Rebuild", 1)
        admin.wait_for_route("Rebuild")
    _send(namesrv, "Rebuild", 0, 200)
    master, follower = _follower(cluster)
    assert cluster.terminate(GROUP, follower) == 0
    for ledger_dir in cluster.store_dir(GROUP, follower).glob("dledger-*"):
        shutil.move(str(ledger_dir), str(ledger_dir) + ".corrupt")
    cluster.start_replica(GROUP, follower)

    # No traffic: the leader notices the empty log and rebuilds it on its own.
    def caught_up() -> bool:
        views = cluster.runtime_info(GROUP)
        ours, theirs = views.get(follower), views.get(master)
        return (
            isinstance(ours, dict)
            and isinstance(theirs, dict)
            and int(ours["ledgerEndIndex"]) >= 0
            and ours["ledgerEndIndex"] == theirs["ledgerEndIndex"]
        )

    assert wait_until(caught_up, 15.0), cluster.log_tails()
    _send(namesrv, "Rebuild", 200, 50)
    expected = [b"m%05d" % k for k in range(250)]
    assert wait_until(lambda: _pull_all(cluster, follower, "Rebuild") == expected, 15.0), (
        _pull_all(cluster, follower, "Rebuild")[-3:],
        _ledger(cluster, follower),
    )
    log = cluster.log_tail(GROUP, master, 200)
    assert f"follower {follower} acknowledged entries up to" in log  # said, not silent


def test_a_replica_behind_the_leaders_retention_point_is_rebuilt_from_its_oldest_segment(
    broker_clusters: MakeCluster,
) -> None:
    every_hour = ";".join(f"{hour:02d}" for hour in range(24))
    cluster = broker_clusters(
        replicas=3,
        extra_settings={"mappedFileSizeCommitLog": str(64 << 10), "deleteWhen": every_hour},
    )
    cluster.wait_routable()
    namesrv = cluster.namesrv_addr
    with SyncAdmin(namesrv) as admin:
        admin.create_topic("Behind", 1)
        admin.wait_for_route("Behind")
    _send(namesrv, "Behind", 0, 20)
    master, follower = _follower(cluster)
    assert cluster.terminate(GROUP, follower) == 0
    _send(namesrv, "Behind", 20, 300)  # ~310 KiB: five 64 KiB files more
    cluster.age_commit_log(GROUP, 7 * 24 * 3600.0, keep=2)  # the stopped one has one file

    def leader_deleted() -> bool:
        return int(_ledger(cluster, master)["ledgerBeginIndex"]) > 0

    assert wait_until(leader_deleted, 15.0), _ledger(cluster, master)
    begin = int(_ledger(cluster, master)["ledgerBeginIndex"])
    cluster.start_replica(GROUP, follower)

    def rebuilt() -> bool:
        ours = cluster.runtime_info(GROUP).get(follower)
        return (
            isinstance(ours, dict)
            and int(ours["ledgerBeginIndex"]) >= begin
            and ours["ledgerEndIndex"] == _ledger(cluster, master)["ledgerEndIndex"]
        )

    assert wait_until(rebuilt, 20.0), (_ledger(cluster, follower), cluster.log_tails())
    _send(namesrv, "Behind", 320, 10)
    # The rebuilt replica serves every message its leader still has, and the new ones.
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        theirs = _pull_all(cluster, master, "Behind")
        ours = _pull_all(cluster, follower, "Behind")
        if ours == theirs and ours[-1:] == [b"m00329"]:
            break
        time.sleep(0.2)
    assert ours == theirs, (len(ours), len(theirs), ours[:2], theirs[:2])
    assert theirs[-1] == b"m00329"
    assert theirs[0] != b"m00000"
