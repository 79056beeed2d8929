"""The official RocketMQ 5 Python client's transactional Producer (``rocketmq-python-client``
5.1.2, with a ``TransactionChecker``) against our gRPC door, in its own venv and ``HOME``
(``test_official_client``'s ``Driver``), over a real 3-replica group.

Each round sends three half messages: one the client commits, one it rolls back, one it never
ends (an orphan), which the master checks back over the client's Telemetry stream after
``transactionTimeOut``; the client's checker commits the even orphans and rolls back the odd
ones. Read back through our remoting PullConsumer: every committed message once, no rolled-back
one.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .test_official_client import GROUP, TOPIC, Driver, _cluster, client_python, read_back

TRANSACTION_TOPIC = "+message.type=TRANSACTION"
"""A v5 transactional send needs a TRANSACTION (or MIXED) topic, as in RocketMQ 5."""

if TYPE_CHECKING:
    from .test_official_client import MakeCluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

SCRIPT = Path(__file__).with_name("rmq5_transaction_driver.py")
SETTINGS = {"transactionTimeOut": "1000", "transactionCheckInterval": "300"}
ROUNDS = 4


def test_transactional_producer_with_checker(broker_clusters: MakeCluster, tmp_path: Path) -> None:
    python = client_python()
    cluster, endpoints = _cluster(broker_clusters, TRANSACTION_TOPIC, extra_settings=SETTINGS)
    driver = Driver(
        python, tmp_path / "client",
        {"endpoints": endpoints, "topic": TOPIC, "count": ROUNDS, "wait_s": 6},
        script=SCRIPT,
    )  # fmt: skip
    try:
        driver.finish(90)
    finally:
        driver.close()
    failed = driver.of("failed")
    assert not failed, f"sends or ends failed: {failed[:3]}\n{driver.report()}"
    sent = {e["body"]: e for e in driver.of("sent")}
    assert len(sent) == 3 * ROUNDS, driver.report()
    assert all(e["transaction_id"] for e in sent.values())
    checked = {e["body"]: e["resolution"] for e in driver.of("checked")}
    orphans = {f"orphan-{i}" for i in range(ROUNDS)}
    # only the orphans are checked back (the ended ones are settled), each at least once
    assert set(checked) == orphans, f"checked {sorted(checked)}\n{driver.report()}"
    deadline = time.monotonic() + 20
    expected = sorted(
        [f"commit-{i}" for i in range(ROUNDS)] + [f"orphan-{i}" for i in range(0, ROUNDS, 2)]
    )
    while True:
        found = read_back(cluster.namesrv_addr)
        bodies = sorted(m.body.decode() for m in found.values())
        if bodies == expected or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert bodies == expected, f"read back {bodies}\n{driver.report()}"
    for body in expected:  # under the client's message id, with its tag
        message = found[sent[body]["message_id"]]
        assert message.tags == body.split("-")[0]


def test_orphans_checked_back_by_the_new_master_after_kill_9(
    broker_clusters: MakeCluster, tmp_path: Path
) -> None:
    """Half messages left open when the master is killed (kill -9): the new master checks them
    back over the client's Telemetry stream to it, and the checker's answers settle them:
    committed ones delivered once, rolled-back ones never.

    The client opens its Telemetry stream to the new master at its next route refresh (every
    30 s); until then the check-backs find no producer and are counted, as RocketMQ counts
    them, so ``transactionCheckMax`` is raised to outlast that wait."""
    python = client_python()
    settings = {
        "transactionTimeOut": "4000",
        "transactionCheckInterval": "1000",
        "transactionCheckMax": "100",
    }
    cluster, endpoints = _cluster(broker_clusters, TRANSACTION_TOPIC, extra_settings=settings)
    master = cluster.wait_master(GROUP)
    driver = Driver(
        python, tmp_path / "client",
        {"endpoints": endpoints, "topic": TOPIC, "count": ROUNDS, "wait_s": 80,
         "kinds": ["orphan"]},
        script=SCRIPT,
    )  # fmt: skip
    expected = sorted(f"orphan-{i}" for i in range(0, ROUNDS, 2))
    try:
        deadline = time.monotonic() + 30
        while not driver.of("all_sent") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert driver.of("all_sent"), driver.report()
        assert not driver.of("checked"), "checked back before the kill: the test proves nothing"
        cluster.kill9(GROUP, master)
        new_master = cluster.wait_master(GROUP, 20)
        assert new_master != master
        deadline = time.monotonic() + 75
        bodies: list[str] = []
        while time.monotonic() < deadline:
            checked = {e["body"] for e in driver.of("checked")}
            if checked == {f"orphan-{i}" for i in range(ROUNDS)}:
                bodies = sorted(m.body.decode() for m in read_back(cluster.namesrv_addr).values())
                if bodies == expected:
                    break
            time.sleep(0.5)
        assert bodies == expected, f"read back {bodies}, checked {driver.of('checked')}\n" + (
            driver.report()
        )
    finally:
        driver.close()
    assert not driver.of("failed"), driver.of("failed")
