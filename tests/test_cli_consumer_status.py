"""``ledgermq admin consumer-status`` against real processes (issue 18 section 3, RocketMQ's
``mqadmin consumerStatus``): the broker passes GET_CONSUMER_RUNNING_INFO to each online Python
consumer, which describes itself; the command shows per client its consume type, subscriptions,
and per queue its offset, the broker's, the lag and the cache; an offline group or an unknown
client is one clear line and exit status 1.

Select with ``-m integration``; skip with ``-m "not integration"``.
"""

from __future__ import annotations

import json
import threading
import time
from typing import TYPE_CHECKING, Any

import pytest

from ledgermq.client import ConsumeStatus, SyncProducer, SyncPushConsumer
from tests.test_cli_admin import ledgermq

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledgermq.testing.broker_cluster import BrokerCluster
    from ledgermq.wire import MessageExt

    MakeCluster = Callable[..., BrokerCluster]

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

GROUP = "watchers"


def status(ns: str, *args: str) -> tuple[int, Any, str]:
    """Exit status, the parsed ``--json`` answer, stderr."""
    done = ledgermq("admin", "-n", ns, "consumer-status", "-g", GROUP, *args, "--json")
    assert "Traceback" not in done.stderr
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else None, done.stderr


def watched(client: dict[str, Any]) -> list[dict[str, Any]]:
    return [q for q in client.get("queues", ()) if q["topic"] == "Watched"]


def wait_for(ns: str, ready: Callable[[list[dict[str, Any]]], bool]) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 60
    clients: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        code, clients, _ = status(ns)
        if code == 0 and ready(clients):
            return clients
        time.sleep(0.5)
    pytest.fail(f"consumer-status never showed what was expected; last: {clients}")


def test_consumer_status_shows_each_client_its_queues_offsets_and_lag(
    broker_clusters: MakeCluster,
) -> None:
    cluster = broker_clusters(replicas=1)
    cluster.wait_routable()
    ns = cluster.namesrv_addr
    assert ledgermq("admin", "-n", ns, "topic-create", "-t", "Watched", "-q", "2").returncode == 0

    release = threading.Event()

    def quick(messages: list[MessageExt]) -> ConsumeStatus:
        return ConsumeStatus.CONSUME_SUCCESS

    def stuck(messages: list[MessageExt]) -> ConsumeStatus:
        release.wait(60)
        return ConsumeStatus.CONSUME_SUCCESS

    consumers = []
    try:
        for listener in (quick, stuck):
            consumer = SyncPushConsumer(
                GROUP, ns, consume_from_where="CONSUME_FROM_FIRST_OFFSET", rebalance_interval_s=2
            )
            consumer.subscribe("Watched", "*")
            consumer.register_listener(listener)
            consumer.start()
            consumers.append(consumer)
        quick_id, stuck_id = (c.client_id for c in consumers)
        # both online, each holding one of the two queues
        wait_for(ns, lambda cs: len(cs) == 2 and all(len(watched(c)) == 1 for c in cs))
        producer = SyncProducer("watched-producer", ns)
        try:
            producer.start()
            for i in range(8):
                producer.send("Watched", f"m{i}".encode())
        finally:
            producer.close()

        def settled(clients: list[dict[str, Any]]) -> bool:
            by_id = {c["clientId"]: c for c in clients}
            if set(by_id) != {quick_id, stuck_id}:
                return False
            queues = watched(by_id[quick_id]) + watched(by_id[stuck_id])
            return (
                len(queues) == 2
                and sum(q["brokerOffset"] for q in queues) == 8
                and watched(by_id[quick_id])[0]["lag"] == 0
                and watched(by_id[stuck_id])[0]["cachedMsgCount"] > 0
            )

        clients = {c["clientId"]: c for c in wait_for(ns, settled)}
        fast, slow = clients[quick_id], clients[stuck_id]
        for client in (fast, slow):
            assert client["consumeType"] == "CONSUME_PASSIVELY"
            assert client["messageModel"] == "CLUSTERING"
            assert client["consumeFromWhere"] == "CONSUME_FROM_FIRST_OFFSET"
            assert client["orderly"] == "false"
            assert client["clientVersion"].startswith("LedgerMQ ")
            now_ms = time.time() * 1000
            assert now_ms - 120_000 < client["startTimestamp"] <= now_ms  # epoch ms, as Java's
            assert client["language"] == "PYTHON"
            assert {s["topic"] for s in client["subscriptions"]} == {"Watched", f"%RETRY%{GROUP}"}
            assert client["startTimestamp"] <= watched(client)[0]["lastPullTimestamp"] <= now_ms
            assert client["warnings"] == []  # stuck for less than RocketMQ's minute
        (fast_queue,) = watched(fast)
        (slow_queue,) = watched(slow)
        assert fast_queue["consumerOffset"] == fast_queue["brokerOffset"] > 0
        assert fast["startTimestamp"] <= fast_queue["lastConsumeTimestamp"] <= time.time() * 1000
        # the stuck client has pulled but not consumed: its offset stays, the lag is its cache
        assert slow_queue["lag"] == slow_queue["brokerOffset"] - slow_queue["consumerOffset"] > 0
        assert slow_queue["cachedMsgCount"] == slow_queue["lag"]
        assert slow_queue["lastConsumeTimestamp"] == 0
        assert {fast_queue["queueId"], slow_queue["queueId"]} == {0, 1}

        # the table form and one client only
        text = ledgermq("admin", "-n", ns, "consumer-status", "-g", GROUP, "-i", stuck_id)
        assert text.returncode == 0, text.stderr
        assert f"client {stuck_id} at " in text.stdout
        assert quick_id not in text.stdout
        assert "consumeType CONSUME_PASSIVELY" in text.stdout
        assert "subscriptions: " in text.stdout
        assert "Watched (TAG *)" in text.stdout
        assert "warning" not in text.stdout + text.stderr  # both subscribe alike
        header = next(line for line in text.stdout.splitlines() if "consumer offset" in line)
        assert header.split() == ["topic", "broker", "queue", "consumer", "offset", "broker",
                                  "offset", "lag", "cached", "locked", "last", "pull", "last",
                                  "consume"]  # fmt: skip
        code, _, err = status(ns, "-i", "10.9.9.9@1#1")
        assert code == 1
        assert f"client 10.9.9.9@1#1 of consumer group {GROUP} is not online" in err
        assert len(err.strip().splitlines()) == 1
    finally:
        release.set()
        for consumer in consumers:
            consumer.close()

    # nobody online: one line, exit 1, in both forms
    code, rows, err = status(ns)
    assert (code, rows) == (1, [])
    assert f"no client of consumer group {GROUP} is online" in err
    text = ledgermq("admin", "-n", ns, "consumer-status", "-g", GROUP)
    assert text.returncode == 1
    assert text.stdout.startswith(f"no client of consumer group {GROUP} is online")
