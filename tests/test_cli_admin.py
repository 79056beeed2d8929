"""``ledgermq admin`` against real processes: exit codes and answers of transfer-leader and
topic-create (issue 13 items 8 and 15).

Select with ``-m integration``; skip with ``-m "not integration"``.
"""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

import pytest

from ledgermq.bench.processes import child_env, ledgermq_command

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
