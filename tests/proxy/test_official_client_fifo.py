"""FIFO messages with the official RocketMQ 5 Python client (``rocketmq-python-client`` 5.1.2),
each client in its own process, venv and ``HOME`` (``test_official_client``'s ``Driver``),
against one NameServer and a 3-replica broker group.

The topic is made FIFO and the consumer group orderly with our CLI, as an operator would
(``admin topic-create -a +message.type=FIFO``, ``admin subgroup-update --orderly true``). The
client's Producer sends numbered messages in several message groups; its SimpleConsumer in the
FIFO group receives them. What must hold: every message whose send was acknowledged is
received; per message group, the messages are received in the order sent (the sequence of
numbers received, redeliveries included, never goes down), so a message left unacknowledged
comes back (delivery attempt 2) before any of its successors. Once with the master killed
(kill -9) in the middle of sending and receiving.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .test_official_client import GROUP, Driver, client_python

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledgermq.testing.broker_cluster import BrokerCluster

    MakeCluster = Callable[..., BrokerCluster]

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

PRODUCER = Path(__file__).with_name("rmq5_fifo_producer_driver.py")
CONSUMER = PRODUCER.with_name("rmq5_fifo_consumer_driver.py")
TOPIC = "FifoTopic"
CONSUMER_GROUP = "fifo-g"


def _admin(namesrv: str, *args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ledgermq", "admin", "-n", namesrv, *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"admin {args}: {done.stdout}{done.stderr}"


def _fifo_cluster(broker_clusters: MakeCluster) -> tuple[BrokerCluster, str]:
    cluster = broker_clusters()
    cluster.wait_routable()
    _admin(cluster.namesrv_addr, "topic-create", "-t", TOPIC, "-q", "4",
           "-a", "+message.type=FIFO")  # fmt: skip
    _admin(cluster.namesrv_addr, "subgroup-update", "-g", CONSUMER_GROUP, "--orderly", "true")
    return cluster, ";".join(cluster.grpc_address(GROUP, n) for n in cluster.nodes)


def _consumer(python: str, home: Path, endpoints: str, **args: Any) -> Driver:
    return Driver(
        python, home,
        {"endpoints": endpoints, "topic": TOPIC, "group": CONSUMER_GROUP, "invisible_s": 3,
         "stop_file": str(home.parent / "stop"), **args},
        script=CONSUMER,
    )  # fmt: skip


def check_fifo(producer: Driver, consumer: Driver) -> dict[str, list[tuple[int, int]]]:
    """Every acknowledged send received, and the FIFO rule as the consumer saw it: a message of
    a group is received only once every earlier message of the group it ever received was
    settled before (acknowledged, or an ack whose outcome is unknown) or comes earlier in the
    same receive; and per group the acknowledged numbers never go down. Returns each group's
    (seq, attempt) in the order received."""
    sent = producer.of("sent")
    received = consumer.of("received")
    (consumer.home / "events.json").write_text(json.dumps(consumer.events))
    missing = {e["message_id"] for e in sent} - {e["message_id"] for e in received}
    assert not missing, (
        f"{len(missing)} acknowledged sends never received: "
        f"{[e for e in sent if e['message_id'] in missing][:5]}\n{consumer.report()}"
    )
    ever: dict[str, set[int]] = {}
    for event in received:
        ever.setdefault(event["group"], set()).add(event["seq"])
    settled: dict[str, set[int]] = {g: set() for g in ever}
    in_batch: dict[str, set[int]] = {g: set() for g in ever}
    batch = None
    per_group: dict[str, list[tuple[int, int]]] = {g: [] for g in ever}
    for event in consumer.events:
        kind, group = event["event"], str(event.get("group"))
        if kind == "received":
            if event["batch"] != batch:
                batch, in_batch = event["batch"], {g: set() for g in ever}
            seq = event["seq"]
            pending = {t for t in ever[group] if t < seq} - settled[group] - in_batch[group]
            assert not pending, f"group {group}: {seq} received before {sorted(pending)}"
            in_batch[group].add(seq)
            per_group[group].append((seq, event["attempt"]))
        elif kind in ("acked", "ack_failed"):
            settled[group].add(event["seq"])
    for group in ever:
        acked = [e["seq"] for e in consumer.of("acked") if e["group"] == group]
        assert acked == sorted(acked), f"group {group} acknowledged out of order: {acked}"
    return per_group


def test_fifo_producer_and_simple_consumer(broker_clusters: MakeCluster, tmp_path: Path) -> None:
    python = client_python()
    _, endpoints = _fifo_cluster(broker_clusters)
    groups = [f"order-{i}" for i in range(5)]
    producer = Driver(python, tmp_path / "producer",
                      {"endpoints": endpoints, "topic": TOPIC, "groups": groups, "per_group": 8},
                      script=PRODUCER)  # fmt: skip
    try:
        producer.finish(90)
    finally:
        producer.close()
    assert not producer.of("failed"), producer.of("failed")[:3]
    assert len(producer.of("sent")) == 40
    consumer = _consumer(
        python, tmp_path / "consumer", endpoints, hold=True, duration_s=90, count=40
    )
    try:
        consumer.finish(120)
    finally:
        consumer.close()
    assert not consumer.of("ack_failed"), consumer.of("ack_failed")[:3]
    per_group = check_fifo(producer, consumer)
    assert sorted(per_group) == groups
    (held,) = consumer.of("held")
    group_receipts = [e for e in consumer.of("received") if e["group"] == held["group"]]
    (held_receipt,) = (e for e in group_receipts if e["message_id"] == held["message_id"]
                       and e["attempt"] == 1)  # fmt: skip
    after = [e for e in group_receipts if e["batch"] > held_receipt["batch"]]
    # the group's next receipt after the held one's batch is the held message, attempt 2
    assert (after[0]["seq"], after[0]["attempt"]) == (held["seq"], 2), per_group[held["group"]]
    acked = [e["message_id"] for e in consumer.of("acked")]
    assert sorted(acked) == sorted(e["message_id"] for e in producer.of("sent"))
    assert consumer.of("done")[0]["leftover"] == 0


def test_fifo_with_the_master_killed(broker_clusters: MakeCluster, tmp_path: Path) -> None:
    python = client_python()
    cluster, endpoints = _fifo_cluster(broker_clusters)
    master = cluster.wait_master(GROUP)
    groups = [f"order-{i}" for i in range(4)]
    producer = Driver(python, tmp_path / "producer",
                      {"endpoints": endpoints, "topic": TOPIC, "groups": groups, "per_group": 40,
                       "pause_s": 0.15, "retry_s": 60},
                      script=PRODUCER)  # fmt: skip
    # queues=0: no leftover count at the end (four receives long-polling 2 s each, 8 s): this
    # test does not read it, every sent message is checked received and acknowledged instead
    consumer = _consumer(
        python, tmp_path / "consumer", endpoints, hold=False, duration_s=150, queues=0
    )
    try:
        deadline = time.monotonic() + 60
        while len(consumer.of("acked")) < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(consumer.of("acked")) >= 20, consumer.report()
        sent_before = len(producer.of("sent"))
        cluster.kill9(GROUP, master)
        new_master = cluster.wait_master(GROUP, 20)
        assert new_master != master
        producer.finish(120)
        sent_pairs = sorted({(e["group"], e["seq"]) for e in producer.of("sent")})
        (tmp_path / "stop").write_text(json.dumps(sent_pairs))
        consumer.finish(150)
    finally:
        producer.close()
        consumer.close()
    sent, failed = producer.of("sent"), producer.of("failed")
    received = consumer.of("received")
    print(  # the run's shape, for the report: -s shows it
        f"sent {len(sent)} (retries {len(producer.of('retry'))}, failed {len(failed)}), "
        f"received {len(received)} "
        f"({sum(1 for e in received if e['attempt'] > 1)} redeliveries), acked "
        f"{len(consumer.of('acked'))}, ack failures {len(consumer.of('ack_failed'))}, receive "
        f"failures {len(consumer.of('receive_failed'))}; master {master} -> {new_master}; sent "
        f"before the kill {sent_before}"
    )
    assert sent_before < len(sent), "the producer was done before the kill"
    assert not failed, f"sends given up: {failed[:3]}"
    assert len({(e["group"], e["seq"]) for e in sent}) == 160
    check_fifo(producer, consumer)
