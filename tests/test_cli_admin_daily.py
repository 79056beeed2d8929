"""``ledgermq admin``'s daily commands against real processes (issue 18 section 3): consumer
groups, subscription group create / delete, consumer connections, broker status and config,
messages by id and by key, and ``--json`` on each.

Select with ``-m integration``; skip with ``-m "not integration"``.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import pytest

from ledgermq.client import ConsumeStatus, SyncProducer, SyncPushConsumer
from ledgermq.errors import LedgerMQError
from tests.test_cli_admin import ledgermq

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledgermq.testing.broker_cluster import BrokerCluster
    from ledgermq.wire import MessageExt

    MakeCluster = Callable[..., BrokerCluster]

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def admin_json(namesrv: str, *args: str) -> Any:
    done = ledgermq("admin", "-n", namesrv, *args, "--json")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return json.loads(done.stdout)


def test_daily_admin_commands(broker_clusters: MakeCluster) -> None:
    cluster = broker_clusters(replicas=3)
    cluster.wait_routable()
    ns = cluster.namesrv_addr
    assert ledgermq("admin", "-n", ns, "topic-create", "-t", "Daily", "-q", "2").returncode == 0

    # subscription groups: create with settings, list, delete
    made = admin_json(ns, "subgroup-update", "-g", "OpsGroup", "--retry-max-times", "3",
                      "--orderly", "true")  # fmt: skip
    assert made == {
        "group": "OpsGroup",
        "brokers": ["broker-a"],
        "settings": {"retryMaxTimes": 3, "consumeMessageOrderly": True},
    }
    groups = admin_json(ns, "consumer-groups")
    assert isinstance(groups, list)
    ops = [g for g in groups if g["group"] == "OpsGroup"]
    assert ops == [
        {
            "group": "OpsGroup",
            "brokerName": "broker-a",
            "consumeEnable": True,
            "consumeMessageOrderly": True,
            "consumeBroadcastEnable": True,
            "retryMaxTimes": 3,
        }
    ]
    table = ledgermq("admin", "-n", ns, "consumer-groups")
    assert "OpsGroup" in table.stdout
    assert table.stdout.splitlines()[0].split()[:2] == ["group", "broker"]

    # a message, then find it by id and by key
    before_ms = int(time.time() * 1000) - 1
    producer = SyncProducer("daily-producer", ns)
    try:
        producer.start()
        result = producer.send("Daily", b"hello ops", keys=["order-42"])
    finally:
        producer.close()
    by_id = admin_json(ns, "message", "--id", result.offset_msg_id)
    assert isinstance(by_id, list)
    assert by_id[0]["body"] == "hello ops"
    assert by_id[0]["properties"]["KEYS"] == "order-42"
    by_key = admin_json(ns, "message", "--key", "order-42", "-t", "Daily")
    assert [m["offsetMsgId"] for m in by_key] == [result.offset_msg_id]
    text = ledgermq("admin", "-n", ns, "message", "--key", "order-42", "-t", "Daily")
    assert "body: hello ops" in text.stdout
    in_range = admin_json(ns, "message", "-t", "Daily", "--from", str(before_ms))
    assert [m["offsetMsgId"] for m in in_range] == [result.offset_msg_id]
    earlier = admin_json(ns, "message", "-t", "Daily", "--from", "2020-01-01T00:00:00",
                         "--to", str(before_ms - 1))  # fmt: skip
    assert earlier == []
    missing = ledgermq("admin", "-n", ns, "message", "--key", "nothing", "-t", "Daily")
    assert missing.returncode == 1
    no_topic = ledgermq("admin", "-n", ns, "message", "--key", "order-42")
    assert no_topic.returncode != 0
    assert "--key and --from need --topic" in no_topic.stderr

    # a consumer online: its connection shows
    consumer = SyncPushConsumer("OpsGroup", ns)
    consumer.subscribe("Daily", "*")
    consumer.register_listener(lambda messages: ConsumeStatus.CONSUME_SUCCESS)
    try:
        consumer.start()
        rows = admin_json(ns, "consumer-connection", "-g", "OpsGroup")
        assert isinstance(rows, list)
        assert len(rows) == 1
        assert rows[0]["topics"] == "%RETRY%OpsGroup,Daily"  # the group's retry topic too
        assert rows[0]["messageModel"] == "CLUSTERING"
    finally:
        consumer.close()
    assert ledgermq("admin", "-n", ns, "consumer-connection", "-g", "Nobody").returncode == 1

    # brokers: status of every replica, config of the master
    status = admin_json(ns, "broker-status")
    assert isinstance(status, list)
    roles = sorted(r["brokerRole"] for r in status)
    assert roles[:2] == ["SLAVE", "SLAVE"]
    assert roles[2].endswith("MASTER")
    assert len({r["dLegerTerm"] for r in status}) == 1
    config = admin_json(ns, "broker-config", "-b", "broker-a")
    assert isinstance(config, dict)
    assert config["brokerName"] == "broker-a"  # broker.conf key names

    # draining the group: routed read-only, sends refused with a sentence; then writable again
    wiped = admin_json(ns, "wipe-write-perm", "-b", "broker-a")
    assert [row["namesrvAddr"] for row in wiped] == [ns]
    topics = wiped[0]["wipeTopicCount"]
    assert topics >= 2  # Daily, %RETRY%OpsGroup and the broker's system topics
    route = admin_json(ns, "topic-route", "-t", "Daily")
    assert route[0]["perm"] == 4  # read only
    drained = SyncProducer("drained-producer", ns, retry_times=0)
    try:
        drained.start()
        with pytest.raises(LedgerMQError, match="does not allow writing"):
            drained.send("Daily", b"refused")
    finally:
        drained.close()
    assert admin_json(ns, "add-write-perm", "-b", "broker-a")[0]["addTopicCount"] == topics
    assert admin_json(ns, "topic-route", "-t", "Daily")[0]["perm"] == 6

    deleted = admin_json(ns, "subgroup-delete", "-g", "OpsGroup")
    assert deleted == {"deleted": "OpsGroup", "brokers": ["broker-a"]}
    after = admin_json(ns, "consumer-groups")
    assert not [g for g in after if g["group"] == "OpsGroup"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1795600800000", 1795600800000),
        ("2026-11-25T10:00:00+00:00", 1795600800000),
        ("2026-11-25T10:00:00.250Z", 1795600800250),
    ],
)
def test_time_arguments(text: str, expected: int) -> None:
    from ledgermq.cli.client_commands import _time_ms

    assert _time_ms(text) == expected


def test_rocketmq_time_format_is_local_time() -> None:
    from ledgermq.cli.client_commands import _time_ms

    local = _time_ms("2026-11-25#10:00:00:000")
    assert local == _time_ms("2026-11-25T10:00:00")  # both naive: local time


def test_reset_offset_of_a_stopped_group(broker_clusters: MakeCluster) -> None:
    """mqadmin resetOffsetByTime for a group whose consumers are stopped; refused (clearly)
    while one is online, unless --force."""
    cluster = broker_clusters(replicas=3)
    cluster.wait_routable()
    ns = cluster.namesrv_addr
    assert ledgermq("admin", "-n", ns, "topic-create", "-t", "Replay", "-q", "1").returncode == 0
    producer = SyncProducer("replay-producer", ns)
    try:
        producer.start()
        for i in range(6):
            producer.send("Replay", f"r{i}".encode())
        # 50 ms on both sides: the broker's store time of r5 may trail the answer of its send
        # by a millisecond or two (failed 1 run in 3 under load: r5 counted as after middle_ms)
        time.sleep(0.05)
        middle_ms = int(time.time() * 1000)
        time.sleep(0.05)
        for i in range(6, 10):
            producer.send("Replay", f"r{i}".encode())
    finally:
        producer.close()
    latest = admin_json(ns, "reset-offset", "-g", "replayers", "-t", "Replay", "--latest")
    # a group that never committed reads as 0 here, as from RocketMQ (its first-boot rule)
    assert [(r["before"], r["after"]) for r in latest] == [(0, 10)]
    by_time = admin_json(ns, "reset-offset", "-g", "replayers", "-t", "Replay",
                         "--to-time", str(middle_ms))  # fmt: skip
    assert [(r["before"], r["after"]) for r in by_time] == [(10, 6)]
    earliest = admin_json(ns, "reset-offset", "-g", "replayers", "-t", "Replay", "--earliest")
    assert [r["after"] for r in earliest] == [0]

    consumer = SyncPushConsumer("replayers", ns)
    consumer.subscribe("Replay", "*")
    consumer.register_listener(lambda messages: ConsumeStatus.CONSUME_SUCCESS)
    try:
        consumer.start()
        refused = ledgermq("admin", "-n", ns, "reset-offset", "-g", "replayers", "-t", "Replay",
                           "--latest")  # fmt: skip
        assert refused.returncode == 1
        assert "client(s) online" in refused.stderr
        assert "Traceback" not in refused.stderr
        forced = admin_json(ns, "reset-offset", "-g", "replayers", "-t", "Replay", "--latest",
                            "--force")  # fmt: skip
        assert [r["after"] for r in forced] == [10]
    finally:
        consumer.close()


def test_resend_a_dead_letter_to_its_group(broker_clusters: MakeCluster) -> None:
    """A message in %DLQ%G (as the broker moves one there, with its original topic in
    RETRY_TOPIC) goes back to group G only, through %RETRY%G, and its consumers see it on its
    original topic with its keys and properties."""
    cluster = broker_clusters(replicas=3)
    cluster.wait_routable()
    ns = cluster.namesrv_addr
    assert ledgermq("admin", "-n", ns, "topic-create", "-t", "Orders", "-q", "1").returncode == 0
    producer = SyncProducer("dlq-maker", ns)
    try:
        producer.start()
        dead = producer.send("%DLQ%payments", b"refund 42", keys=["order-42"],
                             properties={"RETRY_TOPIC": "Orders", "region": "eu"})  # fmt: skip
    finally:
        producer.close()
    wrong = ledgermq("admin", "-n", ns, "resend-dlq", "-g", "billing", "--id", dead.offset_msg_id)
    assert wrong.returncode == 1
    assert "not in the dead-letter topic of billing" in wrong.stderr
    resent = admin_json(ns, "resend-dlq", "-g", "payments", "--id", dead.offset_msg_id)
    assert resent["topic"] == "%RETRY%payments"
    # a group of 110 characters (legal: at most 120) resends too, though the resending
    # producer's own group would be longer than a group may be if it were not cut
    long_group = "p" * 110
    producer = SyncProducer("dlq-maker", ns)
    try:
        producer.start()
        long_dead = producer.send(f"%DLQ%{long_group}", b"x", properties={"RETRY_TOPIC": "Orders"})
    finally:
        producer.close()
    resent = admin_json(ns, "resend-dlq", "-g", long_group, "--id", long_dead.offset_msg_id)
    assert resent["topic"] == f"%RETRY%{long_group}"

    received: list[tuple[str, bytes, str, str]] = []
    consumer = SyncPushConsumer("payments", ns, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe("Orders", "*")

    def listener(messages: list[MessageExt]) -> ConsumeStatus:
        received.extend(
            (m.topic, m.body, m.properties.get("KEYS", ""), m.properties.get("region", ""))
            for m in messages
        )
        return ConsumeStatus.CONSUME_SUCCESS

    consumer.register_listener(listener)
    try:
        consumer.start()
        deadline = time.monotonic() + 30
        while not received and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        consumer.close()
    assert received == [("Orders", b"refund 42", "order-42", "eu")]


def test_stats_all_shows_backlog_and_rates(broker_clusters: MakeCluster) -> None:
    cluster = broker_clusters(replicas=3)
    cluster.wait_routable()
    ns = cluster.namesrv_addr
    assert ledgermq("admin", "-n", ns, "topic-create", "-t", "Stats", "-q", "2").returncode == 0
    producer = SyncProducer("stats-producer", ns)
    try:
        producer.start()
        for i in range(8):
            producer.send("Stats", f"s{i}".encode())
    finally:
        producer.close()
    # a group that committed 3 of the first queue's messages: its backlog is the rest
    reset = admin_json(ns, "reset-offset", "-g", "stats-group", "-t", "Stats", "--earliest")
    assert len(reset) == 2
    rows = admin_json(ns, "stats-all", "--window", "0.5")
    mine = [r for r in rows if r["topic"] == "Stats"]
    assert mine == [
        {"topic": "Stats", "group": "stats-group", "backlog": 8, "inTps": 0.0, "outTps": 0.0}
    ]
    assert not [r for r in rows if r["topic"].startswith("%")]  # system topics left out
    table = ledgermq("admin", "-n", ns, "stats-all", "--window", "0")
    assert "stats-group" in table.stdout
