"""``examples/spark_batch.py`` run as a user runs it: its own process, its own Spark session,
``spark.stop()`` at the end.

A batch read-transform-write with a plain ``save()`` (no save mode), checked message by
message, and a clean end: nothing on stderr looks like a traceback (the workers' broken pipes
at ``spark.stop()`` printed some). One process, so one JVM start: the expensive part.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'ledgermq[spark]')")
pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install 'ledgermq[spark]')")

from ledgermq.client import Message, SyncProducer, SyncPullConsumer
from ledgermq.spark.local import worker_environment
from tests.spark.conftest import create_topic

if TYPE_CHECKING:
    from ledgermq.testing.broker_cluster import BrokerCluster

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(420)]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spark_batch.py"


def _orders() -> list[tuple[str, float]]:
    """(customer, amount): ``ada`` orders 15 x 100 (big), the others a few small ones."""
    orders = [("ada", 100.0)] * 15
    orders += [("grace", 10.0 + i) for i in range(4)] + [("edsger", 7.5)] * 3
    return orders


def _messages(namesrv: str, topic: str) -> list[tuple[str | None, list[str], dict[str, object]]]:
    """(tags, keys, JSON body) of every message of ``topic``."""
    found = []
    with SyncPullConsumer("spark-batch-check", namesrv) as consumer:
        for mq in consumer.fetch_queues(topic):
            offset, end = consumer.min_offset(mq), consumer.max_offset(mq)
            while offset < end:
                result = consumer.pull(mq, offset, 256)
                found += [(m.tags, m.keys, json.loads(m.body)) for m in result.messages]
                offset = result.next_begin_offset
    return found


def test_batch_example_reads_transforms_writes_and_stops_cleanly(
    cluster: BrokerCluster, tmp_path: Path
) -> None:
    namesrv = cluster.namesrv_addr
    create_topic(namesrv, "BatchOrders", 2)
    create_topic(namesrv, "BatchTotals", 2)
    orders = _orders()
    with SyncProducer("spark-batch-test", namesrv) as producer:
        sent = [Message(json.dumps({"customer": c, "amount": a}).encode()) for c, a in orders]
        assert producer.send_batch("BatchOrders", sent).ok
        assert producer.send("BatchOrders", b"not json").ok  # skipped by the transform

    env = {**os.environ, **worker_environment()}
    # a loaded CI machine can take more than Spark's 15 s to start a Python worker
    env["PYSPARK_SUBMIT_ARGS"] = "--conf spark.python.authenticate.socketTimeout=120s pyspark-shell"
    command = [sys.executable, str(EXAMPLE), "--namesrv", namesrv,
               "--input-topic", "BatchOrders", "--output-topic", "BatchTotals"]  # fmt: skip
    run = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=360, check=False
    )
    assert run.returncode == 0, run.stderr[-4000:]
    assert "wrote 3 customer totals to BatchTotals" in run.stdout
    for sign in ("Traceback", "BrokenPipeError", "Exception"):
        assert sign not in run.stderr, run.stderr[-4000:]

    expected: dict[str, list[float]] = defaultdict(list)
    for customer, amount in orders:
        expected[customer].append(amount)
    got = {keys[0]: (tags, body) for tags, keys, body in _messages(namesrv, "BatchTotals")}
    assert set(got) == set(expected)
    for customer, amounts in expected.items():
        tags, body = got[customer]
        assert body == {"customer": customer, "orders": len(amounts), "total": sum(amounts)}
        assert tags == ("big" if sum(amounts) > 1000 else "small")
