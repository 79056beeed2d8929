"""The official RocketMQ 5 Python client (``rocketmq-python-client`` 5.1.2) with delay (timer)
messages against a 3-replica group's gRPC door (issue 16 sections 3 and 4): its Producer sends
messages with a ``delivery_timestamp`` and recalls some with the handle its receipt carries,
its SimpleConsumer receives the others no earlier than their due time (and within a bound),
never the recalled ones, and recalling a delivered message fails. The client runs in its own
venv and HOME (``test_official_client``'s ``Driver``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ledgermq.client.blocking import SyncAdmin

from .test_official_client import Driver, _cluster, client_python

if TYPE_CHECKING:
    from .test_official_client import MakeCluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

DELAY = Path(__file__).with_name("rmq5_delay_driver.py")
DELAY_TOPIC = "DelayTopic"


def test_producer_delay_messages_received_when_due_and_recalled(
    broker_clusters: MakeCluster, tmp_path: Path
) -> None:
    python = client_python()
    cluster, endpoints = _cluster(broker_clusters)
    # One queue: the client's SimpleConsumer long-polls one queue of the route per receive, so
    # with several a message due meanwhile waits for the receives on the others to time out.
    with SyncAdmin(cluster.namesrv_addr) as admin:
        admin.create_topic(DELAY_TOPIC, 1, wait_s=10)
    driver = Driver(
        python, tmp_path / "client",
        {"endpoints": endpoints, "topic": DELAY_TOPIC, "group": "delay-g", "count": 10,
         "duration_s": 40},
        script=DELAY,
    )  # fmt: skip
    try:
        driver.finish(90)
    finally:
        driver.close()
    assert not driver.of("failed"), (driver.of("failed")[:3], driver.report())
    sent = {e["message_id"]: e for e in driver.of("sent")}
    assert len(sent) == 10
    assert all(e["recall_handle"] for e in sent.values()), "a delay send has a recall handle"
    recalled = {e["message_id"] for e in driver.of("recalled")}
    assert len(recalled) == 2
    received = driver.of("received")
    assert sorted(e["message_id"] for e in received) == sorted(set(sent) - recalled)
    lateness = []
    for event in received:
        due_ms = sent[event["message_id"]]["due_ms"]
        assert event["delivery_ms"] == due_ms  # the message says when it was due
        assert event["wall_ms"] >= due_ms, f"received {due_ms - event['wall_ms']} ms early"
        lateness.append(event["wall_ms"] - due_ms)
    print(f"received after their due time by {sorted(lateness)} ms")

    # generous: the consumer's long polling answers on arrival; a loaded machine adds delay
    assert max(lateness) < 3_000
    (after,) = driver.of("recall_after_delivery")
    assert after["error"] is not None, "recalling a delivered message must fail"
    assert "delivered" in after["error"]
    assert driver.of("done")[0]["leftover"] == 0
