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


def test_sql_selects_by_property_and_skips_nothing_that_matches(
    broker_clusters: Callable[..., BrokerCluster], capsys: pytest.CaptureFixture[str]
) -> None:
    """``consume --sql``: the broker filters on properties (issue 13 item 3, from the CLI)."""
    cluster = broker_clusters(replicas=1)
    cluster.wait_routable()
    with SyncAdmin(cluster.namesrv_addr) as admin:
        admin.create_topic("Colors", 2)
        admin.wait_for_route("Colors", ["broker-a"])
    with SyncProducer("colors", cluster.namesrv_addr) as producer:
        for i in range(30):
            color = ("red", "blue", "green")[i % 3]
            body = b"%s %d" % (color.encode(), i)
            assert producer.send("Colors", body, properties={"color": color}).ok
    args = ["consume", "-n", cluster.namesrv_addr, "-t", "Colors", "-g", "reds"]
    query = "color = 'red' OR color = 'green'"
    assert main([*args, "--from-beginning", "--sql", query, "--timeout", "3"]) == 0
    out, _ = capsys.readouterr()
    bodies = sorted(line.split(maxsplit=2)[2] for line in out.splitlines())
    colors = [("red", "blue", "green")[i % 3] for i in range(30)]
    expected = sorted(f"{c} {i}" for i, c in enumerate(colors) if c != "blue")
    assert bodies == expected
    with pytest.raises(SystemExit):  # a tag expression and a SQL filter at once: usage error
        main([*args, "-s", "a", "--sql", query])
