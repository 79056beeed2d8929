"""``ledgermq consume`` against a real one-replica cluster: --max acknowledges exactly what it
printed (item 9), and output is one whole line per message under load (item 10)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from typing import TYPE_CHECKING

import pytest

from ledgermq.bench.processes import child_env
from ledgermq.cli.main import main
from ledgermq.client import Message
from ledgermq.client.blocking import SyncAdmin, SyncProducer

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledgermq.testing.broker_cluster import BrokerCluster

pytestmark = pytest.mark.timeout(180)


def _fill(cluster: BrokerCluster, topic: str, count: int, queues: int = 4) -> list[str]:
    """``count`` messages over ``queues`` queues; their message ids."""
    cluster.wait_routable()
    with SyncAdmin(cluster.namesrv_addr) as admin:
        admin.create_topic(topic, queues)
        admin.wait_for_route(topic, ["broker-a"])
    ids: list[str] = []
    with SyncProducer("fill", cluster.namesrv_addr) as producer:
        for start in range(0, count, 50):
            batch = [
                Message(b"%s message %d" % (topic.encode(), i))
                for i in range(start, min(count, start + 50))
            ]
            ids.extend(producer.send_batch(topic, batch).msg_id.split(","))
    return ids


def test_draining_in_chunks_of_max_prints_every_message_exactly_once(
    broker_clusters: Callable[..., BrokerCluster], capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = broker_clusters(replicas=1)
    sent = _fill(cluster, "Drain", 90)
    printed: list[str] = []
    chunks: list[int] = []
    for _ in range(30):
        args = ["consume", "-n", cluster.namesrv_addr, "-t", "Drain", "-g", "drainers"]
        assert main([*args, "--from-beginning", "--max", "7", "--timeout", "3"]) == 0
        out, err = capsys.readouterr()
        lines = out.splitlines()
        assert f"consumed {len(lines)} message(s)" in err
        chunks.append(len(lines))
        printed.extend(line.split()[1] for line in lines)
        if not lines:
            break
    assert chunks == [7] * 12 + [6, 0]
    assert Counter(printed) == Counter(sent)  # none skipped, none twice


def test_json_output_is_one_whole_line_per_message_under_load(
    broker_clusters: Callable[..., BrokerCluster],
) -> None:
    cluster = broker_clusters(replicas=1)
    sent = _fill(cluster, "Load", 5000, queues=8)
    result = subprocess.run(
        [sys.executable, "-m", "ledgermq", "consume", "-n", cluster.namesrv_addr, "-t", "Load",
         "-g", "loaders", "--from-beginning", "--json", "--max", "5000", "--timeout", "10"],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=120,
        check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    records = [json.loads(line) for line in lines]  # every line parses
    assert len(records) == 5000
    assert Counter(r["msgId"] for r in records) == Counter(sent)
    assert result.stderr.strip() == "consumed 5000 message(s)"
