"""``ledgermq admin`` against real processes: exit codes and answers of transfer-leader and
topic-create (issue 13 items 8 and 15).

Select with ``-m integration``; skip with ``-m "not integration"``.
"""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

import pytest

from ledgermq.bench.processes import child_env, ledgermq_command
from ledgermq.testing.child_process import wait_until

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledgermq.testing.broker_cluster import BrokerCluster

    MakeCluster = Callable[..., BrokerCluster]

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def ledgermq(*args: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run ``python -m ledgermq ARGS`` as a user would, capturing its output."""
    return subprocess.run(
        ledgermq_command(*args),
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def test_transfer_leader_exits_0_when_the_leader_moved_and_1_with_a_sentence_when_refused(
    broker_clusters: MakeCluster,
) -> None:
    """Issue 13 item 8: the CLI tested ``code != 0`` where DLedger's SUCCESS is 200, so a transfer
    that happened exited 1."""
    cluster = broker_clusters(replicas=3)
    cluster.wait_routable()
    first = cluster.wait_master("broker-a")
    target = next(n for n in cluster.nodes if n != first)
    done = ledgermq("admin", "-n", cluster.namesrv_addr, "transfer-leader", "-b", "broker-a",
                    "--to", target)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"{target} leads broker group broker-a" in done.stdout
    assert cluster.wait_master("broker-a") == target

    unknown = ledgermq("admin", "-n", cluster.namesrv_addr, "transfer-leader", "-b", "broker-a",
                       "--to", "n7")  # fmt: skip
    assert unknown.returncode == 1
    assert "'n7' is not a replica of group broker-a" in unknown.stderr
    assert "Traceback" not in unknown.stderr

    cluster.wait_routable()
    down = next(n for n in cluster.nodes if n != target)
    cluster.kill9("broker-a", down)
    refused = ledgermq("admin", "-n", cluster.namesrv_addr, "transfer-leader", "-b", "broker-a",
                       "--to", down)  # fmt: skip
    assert refused.returncode == 1, refused.stdout
    assert f"leadership of broker group broker-a was not moved to {down}" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert cluster.wait_master("broker-a") == target


def test_topic_create_right_after_start_then_produce_just_works(
    broker_clusters: MakeCluster,
) -> None:
    """Issue 13 item 15: a script that starts a cluster, creates a topic and sends at once. The
    create waits for a group to register and returns once the NameServers route the topic."""
    cluster = broker_clusters(replicas=3, namesrvs=2)
    created = ledgermq("admin", "-n", cluster.namesrv_addr, "topic-create", "-t", "Fresh",
                       "-q", "4")  # fmt: skip
    assert created.returncode == 0, created.stderr
    assert created.stdout.strip() == "topic Fresh (4 queues) on broker-a"
    for i in range(2):
        route = cluster.route("Fresh", namesrv=i)
        assert route is not None
        assert [q["brokerName"] for q in route["queueDatas"]] == ["broker-a"]
    sent = ledgermq("produce", "-n", cluster.namesrv_addr, "-t", "Fresh", "hello")
    assert sent.returncode == 0, sent.stderr


def test_topic_create_on_no_broker_group_is_an_error_or_waits_for_one(
    broker_clusters: MakeCluster,
) -> None:
    """Issue 13 item 15: with no broker registered it printed ``topic X (4 queues) on `` and
    exited 0; the topic existed nowhere."""
    cluster = broker_clusters(replicas=1)
    cluster.wait_routable()
    cluster.kill9("broker-a", "n0")  # its connection closes: the NameServer drops the group
    assert wait_until(lambda: cluster.route("TBW102") is None, 10.0)
    at_once = ledgermq("admin", "-n", cluster.namesrv_addr, "topic-create", "-t", "X",
                       "--wait", "0")  # fmt: skip
    assert at_once.returncode == 1, at_once.stdout
    assert "no broker group is registered with the NameServers" in at_once.stderr
    waited = ledgermq("admin", "-n", cluster.namesrv_addr, "topic-create", "-t", "X",
                      "--wait", "1")  # fmt: skip
    assert waited.returncode == 1, waited.stdout
    assert "(waited 1 s)" in waited.stderr
    assert "Traceback" not in at_once.stderr + waited.stderr
    assert cluster.route("X") is None

    bad = ledgermq("admin", "-n", cluster.namesrv_addr, "topic-create", "-t", "X", "--wait", "-1")
    assert bad.returncode == 2
    assert "must be 0 or more seconds" in bad.stderr

    cluster.start_replica("broker-a", "n0")  # and create while it is still electing itself
    created = ledgermq("admin", "-n", cluster.namesrv_addr, "topic-create", "-t", "X")
    assert created.returncode == 0, created.stderr
    assert created.stdout.strip() == "topic X (8 queues) on broker-a"
    sent = ledgermq("produce", "-n", cluster.namesrv_addr, "-t", "X", "hello")
    assert sent.returncode == 0, sent.stderr
