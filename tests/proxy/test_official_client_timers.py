"""The official RocketMQ 5 Python client (``rocketmq-python-client`` 5.1.2) with delay (timer)
messages against a 3-replica group's gRPC door (issue 16 sections 3 and 4): its Producer sends
messages with a ``delivery_timestamp`` and recalls some with the handle its receipt carries,
its SimpleConsumer receives the others no earlier than their due time (and within a bound),
never the recalled ones, and recalling a delivered message fails. The client runs in its own
venv and HOME (``test_official_client``'s ``Driver``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ledgermq.client.blocking import SyncAdmin

from .test_official_client import Driver, _cluster, client_python

if TYPE_CHECKING:
    from .test_official_client import MakeCluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(200)]

DELAY = Path(__file__).with_name("rmq5_delay_driver.py")
DELAY_TOPIC = "DelayTopic"
GROUP = "broker-a"


def _delay_run(
    broker_clusters: MakeCluster, tmp_path: Path, *, kill_master: bool, millis: bool = False
) -> tuple[Driver, list[int]]:
    """The driver's run, checked: what was sent, recalled and received; the lateness of each
    received message (wall clock at receive minus its due time). ``millis``: the client is
    given its delivery times in milliseconds."""
    python = client_python()
    cluster, endpoints = _cluster(broker_clusters)
    # One queue: the client's SimpleConsumer long-polls one queue of the route per receive, so
    # with several a message due meanwhile waits for the receives on the others to time out.
    with SyncAdmin(cluster.namesrv_addr) as admin:
        admin.create_topic(DELAY_TOPIC, 1, wait_s=10)
    driver = Driver(
        python, tmp_path / "client",
        {"endpoints": endpoints, "topic": DELAY_TOPIC, "group": "delay-g", "count": 10,
         "duration_s": 80 if kill_master else 40, "delay_s": 8 if kill_master else 2,
         "pause_s": 3 if kill_master else 0, "millis": millis},
        script=DELAY,
    )  # fmt: skip
    try:
        if kill_master:
            deadline = time.monotonic() + 30
            while not driver.of("sent_all") and time.monotonic() < deadline:
                time.sleep(0.05)
            assert driver.of("sent_all"), driver.report()
            cluster.kill9(GROUP, cluster.wait_master(GROUP, 10.0))
        driver.finish(150)
    finally:
        driver.close()
    failed = driver.of("failed")
    if kill_master:  # receives may fail until the client's route names the new master
        failed = [e for e in failed if not e["error"].startswith("receive:")]
    assert not failed, (failed[:3], driver.report())
    sent = {e["message_id"]: e for e in driver.of("sent")}
    assert len(sent) == 10
    assert all(e["recall_handle"] for e in sent.values()), "a delay send has a recall handle"
    recalled = {e["message_id"] for e in driver.of("recalled")}
    assert len(recalled) == 2
    received = driver.of("received")
    assert {e["message_id"] for e in received} == set(sent) - recalled, driver.report()
    lateness = []
    for event in received:
        due_ms = sent[event["message_id"]]["due_ms"]
        assert event["delivery_ms"] == due_ms  # the message says when it was due
        assert event["wall_ms"] >= due_ms, f"received {due_ms - event['wall_ms']} ms early"
        lateness.append(event["wall_ms"] - due_ms)
    assert driver.of("done")[0]["leftover"] == 0
    return driver, sorted(lateness)


def test_producer_delay_messages_received_when_due_and_recalled(
    broker_clusters: MakeCluster, tmp_path: Path
) -> None:
    driver, lateness = _delay_run(broker_clusters, tmp_path, kill_master=False)
    print(f"received after their due time by {lateness} ms")
    # generous: the consumer's long polling answers on arrival; a loaded machine adds delay
    assert max(lateness) < 3_000
    (after,) = driver.of("recall_after_delivery")
    assert after["error"] is not None, "recalling a delivered message must fail"
    assert "delivered" in after["error"]


def test_a_delivery_time_in_milliseconds_as_the_clients_own_tests_give_it(
    broker_clusters: MakeCluster, tmp_path: Path
) -> None:
    """The client puts ``delivery_timestamp = now_ms + ...`` into ``Timestamp.seconds`` as it
    is (issue 25 item 24): the door reads seconds past year 9999 as milliseconds, so each send
    is acknowledged (not INTERNAL_ERROR "ValueError") and each message comes when due."""
    _, lateness = _delay_run(broker_clusters, tmp_path, kill_master=False, millis=True)
    assert max(lateness) < 3_000


def test_delay_messages_across_a_kill_9_of_the_master(
    broker_clusters: MakeCluster, tmp_path: Path
) -> None:
    """The master is killed while the timers are pending: the new master delivers them, the
    recalled ones stay recalled, and the client receives each once it finds the new master."""
    _, lateness = _delay_run(broker_clusters, tmp_path, kill_master=True)
    print(f"after the kill, received after their due time by {lateness} ms")
