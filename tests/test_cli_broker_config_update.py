"""``ledgermq admin broker-config update`` against real processes (issue 18 section 3):
UPDATE_BROKER_CONFIG reaches every replica, takes effect at once, is written to each replica's
``broker.conf`` and survives a restart; keys that need a restart are refused whole; a replica that
is down is named and keeps its old value; with aclEnable only an admin account may change it.

Select with ``-m integration``; skip with ``-m "not integration"``.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import pytest

from ledgermq.client import SyncProducer
from ledgermq.errors import LedgerMQError
from tests.test_cli_admin import ledgermq

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from ledgermq.testing.broker_cluster import BrokerCluster

    MakeCluster = Callable[..., BrokerCluster]

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def update(ns: str, *args: str) -> tuple[int, Any, str]:
    """Exit status, parsed ``--json`` rows (None if stdout is empty), stderr."""
    done = ledgermq("admin", "-n", ns, "broker-config", "update", *args, "--json")
    assert "Traceback" not in done.stderr
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else None, done.stderr


def settings_of(ns: str, replica: int, *, timeout_s: float = 30.0) -> dict[str, str]:
    """``broker-config get`` of broker-a's replica ``replica``, waiting for it to register."""
    deadline = time.monotonic() + timeout_s
    while True:
        done = ledgermq("admin", "-n", ns, "broker-config", "get", "-b", "broker-a",
                        "--replica", str(replica), "--json")  # fmt: skip
        if done.returncode == 0:
            result: dict[str, str] = json.loads(done.stdout)
            return result
        assert "Traceback" not in done.stderr
        if time.monotonic() > deadline:
            pytest.fail(f"replica {replica} never answered: {done.stderr}")
        time.sleep(0.5)


def test_update_reaches_every_replica_works_live_and_persists(
    broker_clusters: MakeCluster,
) -> None:
    cluster = broker_clusters(replicas=3, conf_files=True)
    cluster.wait_routable()
    ns = cluster.namesrv_addr
    assert ledgermq("admin", "-n", ns, "topic-create", "-t", "Sized", "-q", "1").returncode == 0

    status, rows, _ = update(ns, "-b", "broker-a", "-k", "maxMessageSize", "-v", "2048")
    assert status == 0
    assert sorted(r["selfId"] for r in rows) == cluster.nodes
    assert {(r["result"], r["value"]) for r in rows} == {("updated", "2048")}
    for node in cluster.nodes:
        assert "maxMessageSize=2048\n" in cluster.conf_path("broker-a", node).read_text()
    # GET_BROKER_CONFIG shows it, the old form of the command included
    old_form = ledgermq("admin", "-n", ns, "broker-config", "-b", "broker-a")
    assert "maxMessageSize=2048" in old_form.stdout.splitlines()

    # live: the master refuses a larger message at once, a small one still goes
    producer = SyncProducer("sized-producer", ns, retry_times=0)
    try:
        producer.start()
        producer.send("Sized", b"x" * 1000)
        with pytest.raises(LedgerMQError, match=r"(?i)size|large|big"):
            producer.send("Sized", b"x" * 4000)
    finally:
        producer.close()

    # keys that need a restart: refused whole, named, nothing written
    before = cluster.conf_path("broker-a", "n0").read_text()
    status, rows, err = update(ns, "-b", "broker-a", "-k", "listenPort", "-v", "1")
    assert status == 1
    assert rows is None
    assert "listenPort" in err
    assert "restart" in err
    assert len(err.strip().splitlines()) == 1
    assert cluster.conf_path("broker-a", "n0").read_text() == before
    for bad, remark in (
        (("-k", "noSuchKey", "-v", "1"), "unknown broker setting(s): noSuchKey"),
        (("-k", "maxMessageSize", "-v", "abc"), "maxMessageSize must be an integer"),
        (("-k", "maxMessageSize", "-v", str(8 << 20)), "can grow live only up to"),
    ):
        status, _, err = update(ns, "-b", "broker-a", *bad)
        assert status == 1
        assert remark in err
        assert len(err.strip().splitlines()) == 1
    status, _, err = update(ns, "-b", "no-such-group", "-k", "maxMessageSize", "-v", "2048")
    assert (status, err.strip()) == (
        1,
        "ledgermq: error: no broker group 'no-such-group' is registered with the NameServers",
    )

    # a replica that is down: the others change, it is named and keeps its old value
    master = cluster.wait_master("broker-a")
    down = next(n for n in cluster.nodes if n != master)
    cluster.kill9("broker-a", down)
    status, rows, _ = update(ns, "-c", "DefaultCluster", "-k", "shortPollingTimeMills",
                             "-v", "500")  # fmt: skip
    assert status == 1
    updated = {r["selfId"] for r in rows if r["result"] == "updated"}
    assert updated == set(cluster.nodes) - {down}
    missed = [r for r in rows if r["result"] != "updated"]
    assert missed
    assert all(r["result"] in {"unreachable", "not reached"} for r in missed)
    assert any(
        r["selfId"] == down or r["address"] == cluster.address("broker-a", down) for r in missed
    )
    # back up: its earlier update came from its broker.conf, the missed one did not happen
    cluster.start_replica("broker-a", down)
    settings = settings_of(ns, int(down[1:]) + 1)
    assert settings["dLegerSelfId"] == down
    assert settings["maxMessageSize"] == "2048"
    assert settings["shortPollingTimeMills"] == "1000"


def test_without_a_config_file_the_update_is_live_and_says_it_is_not_persisted(
    broker_clusters: MakeCluster,
) -> None:
    cluster = broker_clusters(replicas=1)
    cluster.wait_routable()
    ns = cluster.namesrv_addr
    address = cluster.address("broker-a", "n0")
    # A topic of its own (TBW102 takes no sends: the client refuses it before the broker would)
    producer = SyncProducer("perm-producer", ns, retry_times=0)
    try:
        producer.start()
        producer.send("PermProbe", b"while writable")
    finally:
        producer.close()
    status, rows, _ = update(ns, "-b", address, "-k", "brokerPermission", "-v", "4")
    assert status == 0
    assert [(r["result"], r["value"]) for r in rows] == [("updated", "4")]
    assert "not persisted" in rows[0]["remark"]
    producer = SyncProducer("perm-producer", ns, retry_times=0)
    try:
        producer.start()
        with pytest.raises(LedgerMQError, match=r"(?i)permission|forbidden|not writ"):
            producer.send("PermProbe", b"read-only broker")
    finally:
        producer.close()


ACL = """
accounts:
  - accessKey: ops-admin
    secretKey: ops-admin-secret
    admin: true
  - accessKey: app-user
    secretKey: app-user-secret
    defaultTopicPerm: PUB|SUB
"""


ADMIN_SECRET = "ops-admin-secret"


def test_with_acl_only_an_admin_account_may_update(
    broker_clusters: MakeCluster, tmp_path: Path
) -> None:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL)
    cluster = broker_clusters(
        replicas=1,
        conf_files=True,
        credentials=("ops-admin", "ops-admin-secret"),
        extra_settings={
            "aclEnable": "true",
            "aclFilePath": str(acl),
            "aclAccessKey": "ops-admin",
            "aclSecretKey": "ops-admin-secret",
        },
    )
    cluster.wait_routable()
    ns = cluster.namesrv_addr
    conf = cluster.conf_path("broker-a", "n0")
    change = ("-b", "broker-a", "-k", "longPollingEnable", "-v", "false")
    status, _, err = update(
        ns, *change, "--access-key", "app-user", "--secret-key", "app-user-secret"
    )
    assert status == 1
    assert "needs an admin account" in err
    assert "longPollingEnable" not in conf.read_text()
    status, rows, _ = update(ns, *change, "--access-key", "ops-admin", "--secret-key", ADMIN_SECRET)
    assert status == 0
    assert [(r["result"], r["value"]) for r in rows] == [("updated", "false")]
    assert "longPollingEnable=false\n" in conf.read_text()
    assert "aclSecretKey=ops-admin-secret\n" in conf.read_text()  # the rest of the file stays
