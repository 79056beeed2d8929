"""``ledgermq admin replica-status --ready`` against real processes (issue 27 item 6): ready
with the group whole; not ready, with the sentence naming the missing voter, while one replica
is down; ready again (``--wait``) once the restarted replica has caught up; and on the
replica's own address."""

from __future__ import annotations

import json
import subprocess
from typing import TYPE_CHECKING

import pytest

from ledgermq.bench.processes import child_env, ledgermq_command

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledgermq.testing.broker_cluster import BrokerCluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def _status(namesrv: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ledgermq_command("admin", "-n", namesrv, "replica-status", *args),
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


def test_ready_only_when_every_voter_has_caught_up(
    broker_clusters: Callable[..., BrokerCluster],
) -> None:
    cluster = broker_clusters(replicas=3)
    master = cluster.wait_master("broker-a")
    cluster.wait_routable()
    follower = next(n for n in cluster.nodes if n != master)
    whole = _status(cluster.namesrv_addr, "-b", "broker-a", "--ready", "--wait", "20")
    assert whole.returncode == 0, whole.stdout + whole.stderr
    assert "ready: broker-a can lose a replica" in whole.stdout
    typo = _status(cluster.namesrv_addr, "-b", "broker-x", "--ready")
    assert typo.returncode == 1
    assert "broker group 'broker-x' is not registered; known: broker-a" in typo.stderr

    assert cluster.terminate("broker-a", follower) == 0
    down = _status(cluster.namesrv_addr, "-b", "broker-a", "--id", master, "--ready")
    assert down.returncode == 1, down.stdout + down.stderr
    assert f"not ready: replica {master} of broker-a: " in down.stdout
    assert f"voter {follower} did not answer" in down.stdout
    assert "Traceback" not in down.stderr

    cluster.start_replica("broker-a", follower)
    back = _status(
        cluster.namesrv_addr, "-b", "broker-a", "--id", follower, "--ready", "--wait", "60"
    )
    assert back.returncode == 0, back.stdout + back.stderr
    assert f"ready: replica {follower} of broker-a has caught up" in back.stdout

    own = _status(
        cluster.namesrv_addr, "-a", cluster.address("broker-a", follower), "--ready", "--json"
    )
    assert own.returncode == 0, own.stdout + own.stderr
    verdict = json.loads(own.stdout)
    assert verdict["target"] == follower
    assert verdict["leader"] == cluster.master("broker-a")
    assert {r["id"]: r["caughtUp"] for r in verdict["replicas"]} == dict.fromkeys(
        cluster.nodes, True
    )


def test_a_command_without_a_group_says_what_it_needs() -> None:
    done = _status("127.0.0.1:1", "--ready")
    assert done.returncode != 0
    assert "replica-status needs --broker GROUP or --address HOST:PORT" in done.stderr
    assert "Traceback" not in done.stderr
