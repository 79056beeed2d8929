"""A committed entry no replica can apply never takes the group down (issue 25 item 1), with
real processes: a message for ``%DLQ%orders.v1`` is committed in a 3-replica group (through
``tests.chaos.buggy.poison_broker``, which writes it past the doors' name checks, as a broker
without them did); every replica quarantines it and keeps serving, every replica survives a
kill -9 and restart (they used to exit 74 and refuse to start again), and ``ledgermq admin
quarantined-entries`` lists it on each.

Select with ``-m integration``.
"""

from __future__ import annotations

import json
import subprocess
import time
from typing import TYPE_CHECKING

import pytest

from ledgermq.bench.processes import child_env, ledgermq_command
from ledgermq.client import SyncAdmin, SyncProducer
from ledgermq.testing.chaos.cluster import ChaosCluster
from tests.chaos.buggy.poison_broker import POISON_TOPIC, TRIGGER_TOPIC

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

GROUP = "broker-a"
TOPIC = "Healthy"


def _quarantined(cluster: ChaosCluster) -> dict[str, object]:
    """``{node: quarantinedEntries}`` of every live replica (its runtime info)."""
    views = cluster.runtime_info(GROUP)
    return {
        node: view.get("quarantinedEntries") if isinstance(view, dict) else view
        for node, view in views.items()
    }


def _wait(what: str, done: object, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not callable(done) or not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_a_poison_entry_is_quarantined_and_every_replica_keeps_serving_and_restarts(
    tmp_path: Path,
) -> None:
    cluster = ChaosCluster(
        tmp_path / "cluster", lab=None, broker_module="tests.chaos.buggy.poison_broker"
    )
    try:
        cluster.start()
        cluster.wait_routable(timeout_s=30.0)
        with SyncAdmin(cluster.namesrv_addr) as admin:
            admin.create_topic(TOPIC, 1, wait_s=20.0)
            admin.create_topic(TRIGGER_TOPIC, 1, wait_s=20.0)
        with SyncProducer("poison-producer", cluster.namesrv_addr) as producer:
            producer.send(TOPIC, b"before")
            producer.send(TRIGGER_TOPIC, b"poison")  # committed as %DLQ%orders.v1
            producer.send(TOPIC, b"after")
        _wait("every replica to quarantine it",
              lambda: _quarantined(cluster) == dict.fromkeys(cluster.nodes, "1"))  # fmt: skip
        assert all(cluster.is_running(GROUP, node) for node in cluster.nodes)

        listed = subprocess.run(
            ledgermq_command("admin", "-n", cluster.namesrv_addr, "quarantined-entries", "--json"),
            env=child_env(), capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert listed.returncode == 0, listed.stderr
        rows = json.loads(listed.stdout)
        assert len(rows) == 3  # one per replica, the same entry on each
        assert {(r["index"], r["record"], r["topic"]) for r in rows} == {
            (rows[0]["index"], 0, POISON_TOPIC)
        }
        assert "may contain only the characters" in rows[0]["reason"]

        # kill -9 and restart every replica, one by one: each starts again and still lists it
        # (it used to refuse to start, with the same error, for good).
        for node in cluster.nodes:
            cluster.kill9(GROUP, node)
            cluster.start_replica(GROUP, node)
            cluster.wait_master(GROUP)
        _wait("every replica back, the entry still quarantined",
              lambda: _quarantined(cluster) == dict.fromkeys(cluster.nodes, "1"))  # fmt: skip
        with SyncProducer("poison-producer-2", cluster.namesrv_addr) as producer:
            sent = producer.send(TOPIC, b"again")
        assert sent.queue_offset == 2  # before, after, again: the queue went on
        assert "CRITICAL" not in "".join(cluster.log_tail(GROUP, n, 400) for n in cluster.nodes)
    finally:
        cluster.close()
