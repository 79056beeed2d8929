"""``examples/spark_pipeline.py`` as its README section runs it, twice from one checkpoint.

Its ``main`` runs with command-line arguments in this module's Spark session (the example
leaves a session it did not start running), so the two runs share one warm JVM: as two
``python examples/spark_pipeline.py`` processes each would pay Spark's cold start, about
30-50 s on a 2-core machine. ``--available-now`` makes each run stop by itself once it has
processed what was there when it started; the module's timeout bounds a run that does not.

The events are the test's own, with known event times, so the expected windows are exact: a
window is written once the watermark (latest event time - 30 s) has passed its end, and a run
ends with a batch without data that moves the watermark.
"""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'ledgermq[spark]')")
pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install 'ledgermq[spark]')")

from ledgermq.client import Message, SyncProducer, SyncPullConsumer
from tests.spark.conftest import create_topic

if TYPE_CHECKING:
    from types import ModuleType

    from ledgermq.testing.broker_cluster import BrokerCluster

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(180)]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spark_pipeline.py"
BASE_MS = 1_700_000_000_000
"""Event times start here, a multiple of 10 s, so windows start on it."""
WINDOW_MS = 10_000
WATERMARK_MS = 30_000
TAGS = ("click", "view", "buy")
Event = tuple[int, str, int]
"""(event time in epoch ms, tag, value)."""
Window = tuple[int, str]
"""(window start in epoch ms, tag)."""


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("spark_pipeline", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _events(windows: range, late_ms: int) -> list[Event]:
    """1-3 events per tag in each 10-s window of ``windows``, then one event ``late_ms``
    after the first window, to move the watermark past them."""
    events = [
        (BASE_MS + w * WINDOW_MS + i * 100, tag, w * 10 + t)
        for w in windows
        for t, tag in enumerate(TAGS)
        for i in range(1 + (w + t) % 3)
    ]
    events.append((BASE_MS + late_ms, "view", 1))
    return events


def _closed_windows(events: list[Event]) -> dict[Window, tuple[int, float]]:
    """(events, total) of each (window, tag) whose window ends behind the watermark."""
    watermark = max(ts for ts, _, _ in events) - WATERMARK_MS
    out: dict[Window, tuple[int, float]] = {}
    for ts, tag, value in events:
        start = ts - ts % WINDOW_MS
        if start + WINDOW_MS <= watermark:
            count, total = out.get((start, tag), (0, 0.0))
            out[(start, tag)] = (count + 1, total + value)
    return out


def _send(namesrv: str, topic: str, events: list[Event]) -> None:
    messages = [
        Message(json.dumps({"ts": ts, "value": value}).encode(), tags=tag)
        for ts, tag, value in events
    ]
    with SyncProducer("spark-pipeline-test", namesrv) as producer:
        for start in range(0, len(messages), 32):
            assert producer.send_batch(topic, messages[start : start + 32]).ok


def _parquet(spark: Any, path: Path) -> list[tuple[Window, tuple[int, float]]]:
    rows = spark.read.parquet(str(path)).selectExpr(
        "unix_millis(windowStart) AS start", "tag", "events", "total"
    )
    return [((r.start, r.tag), (r.events, r.total)) for r in rows.collect()]


def _topic(namesrv: str, topic: str) -> list[tuple[str, int, float]]:
    """(tag, events, total) of every window message in ``topic``."""
    found: list[tuple[str, int, float]] = []
    with SyncPullConsumer("spark-pipeline-check", namesrv) as consumer:
        for mq in consumer.fetch_queues(topic):
            offset, end = consumer.min_offset(mq), consumer.max_offset(mq)
            while offset < end:
                result = consumer.pull(mq, offset, 256)
                for m in result.messages:
                    window = json.loads(m.body)
                    found.append((window["tag"], window["events"], window["total"]))
                offset = result.next_begin_offset
    return found


def test_pipeline_writes_each_closed_window_once_across_a_restart(
    spark: Any, cluster: BrokerCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    namesrv = cluster.namesrv_addr
    create_topic(namesrv, "PipelineEvents", 2)
    create_topic(namesrv, "PipelineStats", 2)
    out, checkpoint = tmp_path / "parquet", tmp_path / "checkpoint"
    example = _example()
    argv = [
        "--namesrv", namesrv,
        "--input-topic", "PipelineEvents",
        "--output-topic", "PipelineStats",
        "--output-dir", str(out),
        "--checkpoint", str(checkpoint),
        "--available-now",
    ]  # fmt: skip

    first = _events(range(6), late_ms=100_000)  # watermark at +70 s: windows 0-5 close
    _send(namesrv, "PipelineEvents", first)
    example.main(argv)
    expected = _closed_windows(first)
    assert len(expected) == 6 * len(TAGS)
    assert sorted(_parquet(spark, out)) == sorted(expected.items())
    printed = capsys.readouterr().out
    assert printed.startswith(f"output {out}, checkpoint {checkpoint}\n")  # where its state is
    assert f"{len(expected)} windows in {out}" in printed

    # Later events, then the same command again: it resumes from the checkpoint, with the
    # watermark it had; the windows written before are not written again.
    second = _events(range(10, 16), late_ms=200_000)  # watermark at +170 s
    _send(namesrv, "PipelineEvents", second)
    example.main(argv)
    expected = _closed_windows(first + second)
    written = _parquet(spark, out)
    windows = [window for window, _ in written]
    assert len(windows) == len(set(windows)), "a window was written twice"
    assert sorted(written) == sorted(expected.items())
    assert f"{len(expected)} windows in {out}" in capsys.readouterr().out

    # The exactly-once sink: the topic got each window once too.
    stats = [(tag, count, total) for (_, tag), (count, total) in expected.items()]
    assert Counter(_topic(namesrv, "PipelineStats")) == Counter(stats)
