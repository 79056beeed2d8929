"""``failOnDataLoss`` end to end: retention removes messages a query has not read yet.

The module's cluster keeps its commit log in 64 KiB files, its ConsumeQueues in files of 100
units, and runs retention at every hour (``deleteWhen``). ``BrokerCluster.age_commit_log``
makes all but the newest commit-log files a week old, so the brokers delete them, and the
ConsumeQueue units of their messages, within about a second: what ``fileReservedTime`` does in
production days later. Spark's Kafka source is the model: an offset below what the broker still
has is data loss in batch and streaming queries alike, detected where the range is read; with
``failOnDataLoss=true`` (the default) the query fails naming the queue and the offsets, with
``false`` it skips them with a warning and reads the rest.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'ledgermq[spark]')")
pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install 'ledgermq[spark]')")

from pyspark.errors import StreamingQueryException

from ledgermq.client import Message, SyncProducer, SyncPullConsumer
from ledgermq.spark._io import DataLossError, read_range
from ledgermq.testing.child_process import wait_until
from tests.spark.conftest import create_topic, running_cluster

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ledgermq.testing.broker_cluster import BrokerCluster

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(240)]

TOPIC = "Expiring"
BROKER = "broker-a"
RETENTION_SETTINGS = {
    "mappedFileSizeCommitLog": str(64 << 10),  # about 60 of the messages below per file
    "mapedFileSizeConsumeQueue": str(100 * 20),  # 100 units per file, so some files go too
    "deleteWhen": ";".join(f"{hour:02d}" for hour in range(24)),
}
WEEK_S = 7 * 24 * 3600.0
OUT_SCHEMA = "queueId INT, queueOffset BIGINT, body BINARY"
Position = tuple[int, int]
"""(queue id, queue offset) of one message."""


def _lost_text(queue: int, first: int, last: int) -> str:
    """The DataLossError's words for the offsets ``first..last`` of ``queue``."""
    return (
        f"{TOPIC}@{BROKER}:{queue}: messages at offsets {first}..{last} are gone (removed by "
        "retention before this query read them)"
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerCluster]:
    """The conftest's cluster, with small files and retention at every hour."""
    with running_cluster(tmp_path_factory.mktemp("retention"), RETENTION_SETTINGS) as started:
        yield started


@dataclass(frozen=True)
class Expired:
    """A topic whose oldest messages expired after a streaming query had read part of them."""

    namesrv: str
    out: str
    checkpoint: str
    read: dict[int, int]
    """Per queue id: the offset the query read up to (exclusive) before retention ran."""
    kept: dict[int, tuple[int, int]]
    """Per queue id: (min offset, max offset) after retention; min > what the query read."""
    sent: dict[Position, bytes]
    """Body of every message sent, by position."""

    def stored(self) -> dict[Position, bytes]:
        """The messages retention kept."""
        return {(q, o): body for (q, o), body in self.sent.items() if o >= self.kept[q][0]}

    def first_read(self) -> dict[Position, bytes]:
        """The messages the query read before retention ran."""
        return {(q, o): body for (q, o), body in self.sent.items() if o < self.read[q]}


def _produce(namesrv: str, first: int, count: int) -> dict[Position, bytes]:
    """``count`` messages of about 1 KiB, in batches of 8; where each one was stored."""
    sent: dict[Position, bytes] = {}
    with SyncProducer("spark-data-loss", namesrv) as producer:
        for start in range(first, first + count, 8):
            bodies = [b"m%06d " % n + b"x" * 992 for n in range(start, start + 8)]
            result = producer.send_batch(TOPIC, [Message(body) for body in bodies])
            assert result.ok
            for i, body in enumerate(bodies):
                sent[(result.message_queue.queue_id, result.queue_offset + i)] = body
    return sent


def _offsets(namesrv: str) -> dict[int, tuple[int, int]]:
    """(min offset, max offset) of every queue of the topic."""
    with SyncPullConsumer("spark-data-loss-check", namesrv) as consumer:
        return {
            mq.queue_id: (consumer.min_offset(mq), consumer.max_offset(mq))
            for mq in consumer.fetch_queues(TOPIC)
        }


def _start(spark: Any, namesrv: str, out: str, checkpoint: str, **options: str) -> Any:
    """The test's streaming query: the topic from earliest into Parquet, Trigger.AvailableNow."""
    reader = spark.readStream.format("ledgermq").option("namesrvAddr", namesrv)
    reader = reader.option("topic", TOPIC).option("startingOffsets", "earliest")
    for key, value in options.items():
        reader = reader.option(key, value)
    return (
        reader.load()
        .select("queueId", "queueOffset", "body")
        .writeStream.format("parquet")
        .option("path", out)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )


def _finish(query: Any) -> int:
    """Wait for a query that must succeed; the rows it read."""
    try:
        query.awaitTermination(120)
        assert not query.isActive, "the availableNow query did not end"
        assert query.exception() is None
    finally:
        query.stop()
    return sum(p["numInputRows"] for p in query.recentProgress)


def _rows(spark: Any, out: str) -> list[tuple[Position, bytes]]:
    """What the Parquet sink committed (its log ignores files of failed batches)."""
    rows = spark.read.schema(OUT_SCHEMA).parquet(out).collect()
    return [((r.queueId, r.queueOffset), bytes(r.body)) for r in rows]


@pytest.fixture(scope="module")
def expired(
    spark: Any, cluster: BrokerCluster, tmp_path_factory: pytest.TempPathFactory
) -> Expired:
    """120 messages read by a streaming query, 240 more, then retention: every queue loses
    all of the first 120 and some of the next 240, and keeps the rest."""
    namesrv = cluster.namesrv_addr
    create_topic(namesrv, TOPIC, 2)
    sent = _produce(namesrv, 0, 120)
    base = tmp_path_factory.mktemp("expiring-query")
    out, checkpoint = str(base / "out"), str(base / "checkpoint")
    assert _finish(_start(spark, namesrv, out, checkpoint)) == 120
    read = {q: high for q, (_, high) in _offsets(namesrv).items()}
    sent.update(_produce(namesrv, 120, 240))

    assert cluster.age_commit_log(BROKER, WEEK_S) >= 3
    kept: dict[int, tuple[int, int]] = {}

    def expired_past_what_was_read() -> bool:
        kept.update(_offsets(namesrv))
        return all(low > read[q] for q, (low, _) in kept.items())

    assert wait_until(expired_past_what_was_read, 20.0), (
        f"retention did not remove unread messages of every queue: read {read}, kept {kept}\n"
        f"{cluster.log_tails()}"
    )
    assert all(high > low for low, high in kept.values()), f"every message expired: {kept}"
    return Expired(namesrv, out, checkpoint, read, kept, sent)


def test_stream_fails_on_lost_messages_then_skips_them_when_told(
    spark: Any, expired: Expired
) -> None:
    # Restarted from its checkpoint, the query finds its next offsets gone.
    query = _start(spark, expired.namesrv, expired.out, expired.checkpoint)
    try:
        with pytest.raises(StreamingQueryException) as failure:
            query.awaitTermination(120)
    finally:
        query.stop()
    text = str(failure.value)
    found = re.search(rf"{TOPIC}@{BROKER}:(\d+): messages at offsets (\d+)\.\.(\d+) are gone", text)
    assert found, text
    queue = int(found.group(1))
    lost = _lost_text(queue, expired.read[queue], expired.kept[queue][0] - 1)
    assert f"{lost}; set the option failOnDataLoss to false to skip lost messages" in text
    assert sorted(_rows(spark, expired.out)) == sorted(expired.first_read().items())

    # failOnDataLoss=false: the same batch again, the lost offsets skipped, the rest read once.
    query = _start(spark, expired.namesrv, expired.out, expired.checkpoint, failOnDataLoss="false")
    assert _finish(query) == len(expired.stored())
    rows = _rows(spark, expired.out)
    positions = [position for position, _ in rows]
    assert len(positions) == len(set(positions)), "a message was written twice"
    assert dict(rows) == {**expired.first_read(), **expired.stored()}


def test_batch_start_below_the_first_kept_offset_is_data_loss(spark: Any, expired: Expired) -> None:
    def read(**options: str) -> dict[Position, bytes]:
        reader = spark.read.format("ledgermq").option("namesrvAddr", expired.namesrv)
        reader = reader.option("topic", TOPIC)
        for key, value in options.items():
            reader = reader.option(key, value)
        rows = reader.load().select("queueId", "queueOffset", "body").collect()
        found = {(r.queueId, r.queueOffset): bytes(r.body) for r in rows}
        assert len(found) == len(rows), "a message was read twice"
        return found

    # earliest is the first offset still stored: nothing is lost
    assert read() == expired.stored()

    # Offsets named explicitly are taken as given (as Kafka's): those retention removed are
    # data loss, reported when the range is read.
    from_zero = json.dumps({TOPIC: {BROKER: {"0": 0}}})  # queue 1: earliest
    with pytest.raises(Exception, match="failOnDataLoss") as failure:
        read(startingOffsets=from_zero)
    first_kept = expired.kept[0][0]
    assert _lost_text(0, 0, first_kept - 1) in str(failure.value)
    assert f"{TOPIC}@{BROKER}:1" not in str(failure.value)

    assert read(startingOffsets=from_zero, failOnDataLoss="false") == expired.stored()


def test_read_range_reports_or_skips_the_lost_offsets(
    expired: Expired, caplog: pytest.LogCaptureFixture
) -> None:
    """The executor side alone: the exact error, and the warning Spark's logs would show."""
    first_kept, end = expired.kept[1]
    key = (TOPIC, BROKER, 1)
    with pytest.raises(DataLossError) as failure:
        for _ in read_range(expired.namesrv, "spark-data-loss", key, 0, end):
            pass
    lost = _lost_text(1, 0, first_kept - 1)
    assert str(failure.value) == (
        f"{lost}; set the option failOnDataLoss to false to skip lost messages"
    )

    with caplog.at_level(logging.WARNING, logger="ledgermq.spark"):
        for _ in read_range(
            expired.namesrv, "spark-data-loss", key, 0, end, fail_on_data_loss=False
        ):
            pass
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [f"{lost}; skipped (failOnDataLoss=false)"]
