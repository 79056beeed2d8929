"""Issue 28 items 1 and 8 against real processes: the msgId ``produce`` printed is found by
``admin message --id`` with no topic given (the broker's key index, every topic), as is the
offsetMsgId; ``producer-connection`` lists a producer group's clients
(GET_PRODUCER_CONNECTION_LIST).

Select with ``-m integration``; skip with ``-m "not integration"``.
"""

from __future__ import annotations

import json
import re
import time
from typing import TYPE_CHECKING

import pytest

from ledgermq.client import SyncProducer
from tests.test_cli_admin import ledgermq

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from ledgermq.testing.broker_cluster import BrokerCluster

    MakeCluster = Callable[..., BrokerCluster]

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def test_both_ids_and_producer_connections_on_a_real_broker(broker_clusters: MakeCluster) -> None:
    cluster = broker_clusters(replicas=1)
    cluster.wait_routable()
    ns = cluster.namesrv_addr
    for topic in ("Ids", "Other"):
        assert ledgermq("admin", "topic-create", "-t", topic, "-q", "2", "-n", ns).returncode == 0
    sent = ledgermq("produce", "-n", ns, "-t", "Ids", "real ids")
    assert sent.returncode == 0, sent.stderr
    match = re.search(r"msgId=(\w+) offsetMsgId=(\w+)", sent.stdout)
    assert match is not None, sent.stdout
    msg_id, offset_msg_id = match.groups()
    for given in (msg_id, offset_msg_id):
        found = ledgermq("admin", "message", "--id", given, "-n", ns, "--json")
        assert found.returncode == 0, found.stderr
        (record,) = json.loads(found.stdout)
        assert (record["msgId"], record["offsetMsgId"]) == (msg_id, offset_msg_id)
        assert record["body"] == "real ids"
    missing = ledgermq("admin", "message", "--id", msg_id, "-t", "Other", "-n", ns)
    assert missing.returncode == 1
    assert f"no message of topic Other has the id {msg_id}" in missing.stderr

    # A key of more messages than a broker answers for one lookup (64), all stored in one
    # millisecond (one batch): --max 200 finds every one (it printed 64 before).
    bodies = [f"many {n}" for n in range(100)]
    sent = ledgermq("produce", "-n", ns, "-t", "Ids", "--keys", "many", "-q", *bodies)
    assert sent.returncode == 0, sent.stderr
    listed = ledgermq("admin", "message", "-t", "Ids", "-k", "many", "--max", "200", "-n", ns,
                      "--json")  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert sorted(r["body"] for r in json.loads(listed.stdout)) == sorted(bodies)

    # A producer heartbeats the brokers of the topics it uses: the first beat after a send.
    with SyncProducer("billing-producers", ns, heartbeat_interval_s=0.2) as producer:
        assert producer.send("Ids", b"keep the heartbeat").ok
        deadline = time.monotonic() + 20
        while True:
            listed = ledgermq("admin", "producer-connection", "-g", "billing-producers",
                              "-n", ns, "--json")  # fmt: skip
            rows = json.loads(listed.stdout) if listed.returncode == 0 else []
            if rows or time.monotonic() > deadline:
                break
        assert listed.returncode == 0, listed.stderr
        assert [r["brokerName"] for r in rows] == ["broker-a"]
        assert rows[0]["clientId"]
        assert rows[0]["clientAddr"].startswith("127.0.0.1:")
    none = ledgermq("admin", "producerConnection", "-g", "nobody", "-n", ns)
    assert none.returncode == 1
    assert "no client of producer group nobody is connected" in none.stdout


ACL = """
accounts:
  - accessKey: ops-admin
    secretKey: ops-admin-secret
    admin: true
  - accessKey: reader-account
    secretKey: reader-secret
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
    topicPerms:
      - Secret=DENY
"""


def test_with_acl_an_id_is_found_where_the_account_may_read_and_refusals_are_named(
    broker_clusters: MakeCluster, tmp_path: Path
) -> None:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL)
    admin = ("--access-key", "ops-admin", "--secret-key", "ops-admin-secret")
    reader = ("--access-key", "reader-account", "--secret-key", "reader-secret")
    cluster = broker_clusters(
        replicas=1,
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
    ids = {}
    for topic in ("Open", "Secret"):
        made = ledgermq("admin", "topic-create", "-t", topic, "-q", "1", "-n", ns, *admin)
        assert made.returncode == 0, made.stderr
        sent = ledgermq("produce", "-n", ns, "-t", topic, f"{topic} body", *admin)
        assert sent.returncode == 0, sent.stderr
        match = re.search(r"msgId=(\w+)", sent.stdout)
        assert match is not None, sent.stdout
        ids[topic] = match.group(1)
    found = ledgermq("admin", "message", "--id", ids["Open"], "-n", ns, "--json", *reader)
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)[0]["body"] == "Open body"
    hidden = ledgermq("admin", "message", "--id", ids["Secret"], "-n", ns, *reader)
    assert hidden.returncode == 1
    assert f"no message of any topic has the id {ids['Secret']}" in hidden.stderr
    assert "refused (NO_PERMISSION: the account lacks SUB)" in hidden.stderr
    assert "Secret body" not in hidden.stdout
    alone = ledgermq("admin", "message", "--id", ids["Secret"], "-t", "Secret", "-n", ns, *reader)
    assert alone.returncode == 1
    assert "Secret body" not in alone.stdout
    assert "Traceback" not in alone.stderr
