"""Backup and restore with real processes (issue 27 item 7), and ``admin replica-status
--ready`` (item 6) on the way: a follower's data is backed up
with ``ledgermq store backup`` while it runs under load; the follower then loses its disk, is
restored from the backup with ``ledgermq store restore`` into its storePathRootDir and started
again as the same replica. It catches up from the backup's end (its log still begins where the
backup's does, and it never discards its log to start again from the leader's), it votes only
after catching up (``rebuilding=true``), and the chaos checker finds nothing lost on any
replica. ``replica-status --ready`` says the group can lose a replica before, names the stopped
voter while it is down, and says the restored replica has caught up (also asked on its own
address, ``--json``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from typing import TYPE_CHECKING

import pytest

from ledgermq.bench.processes import child_env, ledgermq_command
from ledgermq.broker.backup import restore_replica
from ledgermq.cli.main import main
from ledgermq.client import SyncAdmin, SyncProducer
from ledgermq.errors import LedgerMQError
from ledgermq.ledger.hard_state import read_hard_state
from ledgermq.testing.chaos.checker import check, format_report
from ledgermq.testing.chaos.history import History, Outcome
from ledgermq.testing.chaos.workload import Workload, consume_all, read_replica, run_as_client

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from ledgermq.testing.broker_cluster import BrokerCluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

GROUP = "broker-a"
TOPIC = "BackupTopic"
QUEUES = 4


def _ledgermq(*args: str) -> subprocess.CompletedProcess[str]:
    """``ledgermq ARGS`` as a command, which must succeed."""
    done = subprocess.run(
        ledgermq_command(*args),
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    return done


def test_a_replica_restored_from_an_online_backup_catches_up_from_its_end(
    broker_clusters: Callable[..., BrokerCluster],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cluster = broker_clusters(replicas=3)
    master = cluster.wait_master(GROUP)
    cluster.wait_routable()
    with SyncAdmin(cluster.namesrv_addr) as admin:
        admin.create_topic(TOPIC, QUEUES, wait_s=20.0)
    follower = next(n for n in cluster.nodes if n != master)
    root = cluster.store_dir(GROUP, follower)
    backup = tmp_path / "backup"
    history = History(seed=0, queues=QUEUES)
    workload = Workload(cluster.namesrv_addr, TOPIC, producers=3, origin=time.monotonic())
    workload.start()
    status = ("admin", "-n", cluster.namesrv_addr, "replica-status")

    def ask(*args: str, code: int = 0) -> tuple[str, str]:
        """``ledgermq admin replica-status ARGS`` in this process (the command itself runs
        below where it matters: the wait for the restored replica); (stdout, stderr)."""
        capsys.readouterr()  # what came before is not this command's
        assert main([*status, *args]) == code
        out, err = capsys.readouterr()
        return out, err

    def say(line: str) -> None:
        """A figure of the run, on the terminal (the commands' output is captured)."""
        with capsys.disabled():
            print(line)

    try:
        time.sleep(3.0)
        assert (
            f"ready: {GROUP} can lose a replica" in ask("-b", GROUP, "--ready", "--wait", "20")[0]
        )
        _, err = ask("-b", "broker-x", "--ready", code=1)
        assert f"broker group 'broker-x' is not registered; known: {GROUP}" in err
        done = _ledgermq("store", "backup", "--data", str(root), "--to", str(backup), "--json")
        manifest = json.loads(done.stdout)
        say(f"backup of a running replica: {manifest}")
        assert manifest["selfId"] == follower
        assert manifest["endIndex"] > 0
        assert manifest["committedIndex"] >= manifest["metadataAppliedIndex"]
        time.sleep(2.0)  # the group goes on past the backup's end
        assert cluster.terminate(GROUP, follower) == 0
        down, _ = ask("-b", GROUP, "--id", master, "--ready", code=1)
        assert f"not ready: replica {master} of {GROUP}: voter {follower} did not answer" in down
        shutil.rmtree(root)  # its disk is lost
        _ledgermq("store", "restore", "--from", str(backup), "--data", str(root))
        assert read_hard_state(str(root / f"dledger-{follower}")).rebuilding
        started = time.monotonic()
        cluster.start_replica(GROUP, follower)
        back = _ledgermq(*status, "-b", GROUP, "--id", follower, "--ready", "--wait", "60")
        assert f"ready: replica {follower} of {GROUP} has caught up" in back.stdout
        say(f"restored replica caught up {time.monotonic() - started:.1f} s after its start")
        info = cluster.runtime_info(GROUP)[follower]
        assert int(info["ledgerBeginIndex"]) == manifest["beginIndex"]
        assert int(info["ledgerEndIndex"]) > manifest["endIndex"]
        say(f"the leader streamed entries {manifest['endIndex'] + 1}..{info['ledgerEndIndex']}")
        verdict = json.loads(ask("-a", cluster.address(GROUP, follower), "--ready", "--json")[0])
        assert (verdict["target"], verdict["leader"]) == (follower, cluster.master(GROUP))
        assert {r["id"]: r["caughtUp"] for r in verdict["replicas"]} == dict.fromkeys(
            cluster.nodes, True
        )
        # caught up with a leader: no longer rebuilding, it votes again
        assert not read_hard_state(str(root / f"dledger-{follower}")).rebuilding
        time.sleep(1.0)
    finally:
        workload.stop()
    history.sends = sorted(workload.sends, key=lambda op: op.invoke_ms)
    log = cluster.log_path(GROUP, follower).read_text("utf-8", errors="replace")
    assert "beginning again from" not in log  # it kept its log: the leader sent only the tail
    for node in cluster.nodes:
        try:
            history.replica_reads[node], history.replica_first[node] = read_replica(
                cluster, GROUP, node, TOPIC, QUEUES
            )
        except LedgerMQError as exc:
            history.replica_errors[node] = str(exc)
    expected = {(op.producer, op.seq) for op in history.sends if op.outcome is Outcome.OK}
    history.consumed = run_as_client(
        None, lambda: consume_all(cluster.namesrv_addr, TOPIC, expected, timeout_s=60.0)
    )
    report = check(history)
    print(format_report(report))
    assert report.valid, format_report(report)
    assert report.acks > 0


def test_a_whole_group_restored_from_one_backup_elects_and_serves_it(
    broker_clusters: Callable[..., BrokerCluster], tmp_path: Path
) -> None:
    """Disaster recovery: every replica restored (rebuilding) from one replica's backup, taken
    with ``ledgermq admin backup`` (the running replica serves it; a relative or non-empty
    directory is refused with the rule). They may not vote for a log they cannot judge until
    every peer has shown its own; all three show the same log, so they elect one and serve the
    backup's messages."""
    cluster = broker_clusters(replicas=3)
    cluster.wait_master(GROUP)
    cluster.wait_routable()
    with SyncAdmin(cluster.namesrv_addr) as admin:
        admin.create_topic(TOPIC, QUEUES, wait_s=20.0)
    with SyncProducer("backup-all", cluster.namesrv_addr) as producer:
        for i in range(40):
            producer.send(TOPIC, b"m%d" % i)
    backup = tmp_path / "backup"
    # the backup as an admin request served by the running replica n1 (into a path on its host)
    namesrv = ("-n", cluster.namesrv_addr)
    done = _ledgermq("admin", "backup", "-b", GROUP, "--replica", "n1", "--to", str(backup),
                     "--json", *namesrv)  # fmt: skip
    manifest = json.loads(done.stdout)
    assert manifest["selfId"] == "n1"
    assert manifest["committedIndex"] >= 40
    assert json.loads((backup / "backup.json").read_text()) == manifest
    for where, rule in ((str(backup), "is not empty"), ("relative/dir", "an absolute path")):
        refused = subprocess.run(
            ledgermq_command("admin", "backup", "-b", GROUP, "--replica", "n1", "--to", where,
                             *namesrv),
            env=child_env(), capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert refused.returncode != 0
        assert rule in refused.stdout + refused.stderr
        assert "Traceback" not in refused.stderr
    for node in cluster.nodes:
        cluster.kill9(GROUP, node)  # every disk is lost
    for node in cluster.nodes:
        shutil.rmtree(cluster.store_dir(GROUP, node))
        restore_replica(str(backup), str(cluster.store_dir(GROUP, node)), self_id=node)
    cluster.start()  # every replica at once
    cluster.wait_master(GROUP, timeout_s=60.0)
    cluster.wait_routable(TOPIC)
    with SyncAdmin(cluster.namesrv_addr) as admin:
        assert sum(s.max_offset for s in admin.topic_stats(TOPIC)) == 40
