"""The ``ledgermq`` Spark data source end to end: local[2] Spark against real broker processes.

Few, coarse tests (each Spark action costs a fraction of a second, the session ~10 s): one
session and one cluster for the module, a topic per test.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import TYPE_CHECKING, Any

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'ledgermq[spark]')")
pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install 'ledgermq[spark]')")

from ledgermq.client import Message, SyncProducer
from ledgermq.errors import LedgerMQError
from tests.spark.conftest import create_topic

if TYPE_CHECKING:
    from ledgermq.testing.broker_cluster import BrokerCluster

OUT_SCHEMA = "queueId INT, queueOffset BIGINT, msgId STRING"

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(240)]


def _produce(namesrv: str, topic: str, batches: int, per_batch: int, tag: str = "") -> list[
        dict[str, Any]]:  # fmt: skip
    """Send ``batches`` batches; what each message is and where the broker stored it."""
    sent: list[dict[str, Any]] = []
    with SyncProducer(f"spark-test-{topic}", namesrv) as producer:
        for b in range(batches):
            messages = [
                Message(
                    json.dumps({"b": b, "i": i, "tag": tag}).encode(),
                    tags=f"t{i % 3}",
                    keys=[f"k{b}", f"i{i}"],
                    properties={"batch": str(b)},
                )
                for i in range(per_batch)
            ]
            result = producer.send_batch(topic, messages)
            assert result.ok
            for i, (message, msg_id) in enumerate(
                zip(messages, result.msg_id.split(","), strict=True)
            ):
                sent.append(
                    {
                        "queueId": result.message_queue.queue_id,
                        "queueOffset": result.queue_offset + i,
                        "msgId": msg_id,
                        "body": message.body,
                        "tags": message.tags,
                        "keys": " ".join(message.keys or ()),
                        "properties": {"batch": str(b)},
                    }
                )
    return sent


def _reader(spark: Any, namesrv: str, topic: str) -> Any:
    return spark.read.format("ledgermq").option("namesrvAddr", namesrv).option("topic", topic)


def test_batch_read_equals_what_was_produced(spark: Any, cluster: BrokerCluster) -> None:
    from ledgermq.spark import LedgerMQDataSource

    spark.dataSource.register(LedgerMQDataSource)
    namesrv = cluster.namesrv_addr
    create_topic(namesrv, "SparkBatch", 4)
    sent = _produce(namesrv, "SparkBatch", 12, 25)

    df = _reader(spark, namesrv, "SparkBatch").load()
    assert df.rdd.getNumPartitions() == 4  # one per queue
    rows = df.collect()
    got = sorted(
        (
            {
                "queueId": r.queueId,
                "queueOffset": r.queueOffset,
                "msgId": r.msgId,
                "body": bytes(r.body),
                "tags": r.tags,
                "keys": r.keys,
                "properties": dict(r.properties),
            }
            for r in rows
        ),
        key=lambda d: (d["queueId"], d["queueOffset"]),
    )
    assert got == sorted(sent, key=lambda d: (d["queueId"], d["queueOffset"]))
    assert {r.topic for r in rows} == {"SparkBatch"}
    assert {r.brokerName for r in rows} == {"broker-a"}
    assert all(r.storeTimestamp >= r.bornTimestamp for r in rows)

    # offsets as JSON, and minPartitions splitting the ranges
    q = sent[0]["queueId"]
    ranged = (
        _reader(spark, namesrv, "SparkBatch")
        .option("startingOffsets", json.dumps({"SparkBatch": {"broker-a": {str(q): 10}}}))
        .option("endingOffsets", json.dumps({"SparkBatch": {"broker-a": {str(q): 40}}}))
        .option("minPartitions", "12")
        .load()
    )
    assert ranged.rdd.getNumPartitions() >= 12
    offsets = sorted(r.queueOffset for r in ranged.where(ranged.queueId == q).collect())
    assert offsets == list(range(10, 40))
    # another queue: from earliest (not named in startingOffsets) to latest
    expected_others = sum(1 for s in sent if s["queueId"] != q)
    assert ranged.where(ranged.queueId != q).count() == expected_others

    # a timestamp start: everything is at or after the epoch
    assert _reader(spark, namesrv, "SparkBatch").option(
        "startingOffsets", "0"
    ).load().count() == len(sent)

    # nothing in range (e.g. retention removed it all): an empty result, not an error
    empty = _reader(spark, namesrv, "SparkBatch").option("startingOffsets", "latest").load()
    assert empty.count() == 0
    assert empty.collect() == []


def test_options_are_validated(spark: Any, cluster: BrokerCluster) -> None:
    namesrv = cluster.namesrv_addr
    cases = [
        ({"topic": "NoSuchTopic"}, "unknown topic 'NoSuchTopic'"),
        (
            {"topic": "SparkBatch", "startingOfsets": "earliest"},
            "(?i)unknown option 'startingOfsets'",
        ),
        (
            {"topic": "SparkBatch", "startingOffsets": "{not json"},
            "startingOffsets is not valid JSON",
        ),
        ({"topic": "SparkBatch", "endingOffsets": "earliest"}, "endingOffsets cannot be earliest"),
        ({"topicPattern": "Spark.*", "topic": "SparkBatch"}, "exactly one of the options topic"),
    ]
    for options, message in cases:
        reader = spark.read.format("ledgermq").option("namesrvAddr", namesrv)
        for key, value in options.items():
            reader = reader.option(key, value)
        with pytest.raises(Exception, match=message):
            reader.load().count()


def _stream(spark: Any, namesrv: str, topic: str, **options: str) -> Any:
    reader = spark.readStream.format("ledgermq").option("namesrvAddr", namesrv)
    reader = reader.option("topic", topic).option("startingOffsets", "earliest")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _run_available_now(df: Any, out: str, checkpoint: str) -> list[int]:
    """Run the query until it has read what was there at its start; rows per micro-batch."""
    query = (
        df.select("queueId", "queueOffset", "msgId", "body")
        .writeStream.format("parquet")
        .option("path", out)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert not query.isActive, "the availableNow query did not end"
    assert query.exception() is None
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def test_stream_restarts_from_checkpoint_exactly_once(
    spark: Any, cluster: BrokerCluster, tmp_path: Any
) -> None:
    namesrv = cluster.namesrv_addr
    create_topic(namesrv, "SparkStream", 4)
    sent = _produce(namesrv, "SparkStream", 8, 25)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    df = _stream(spark, namesrv, "SparkStream", maxMessagesPerTrigger="70")
    sizes = _run_available_now(df, out, checkpoint)
    assert sum(sizes) == 200
    assert max(sizes) <= 70  # admission control
    assert len(sizes) >= 3

    # more messages, and two more queues, then the same query again from its checkpoint
    create_topic(namesrv, "SparkStream", 6)
    sent += _produce(namesrv, "SparkStream", 12, 10)
    assert {s["queueId"] for s in sent} & {4, 5}, "nothing landed in the new queues"
    df = _stream(spark, namesrv, "SparkStream", maxMessagesPerTrigger="70")
    sizes = _run_available_now(df, out, checkpoint)
    assert sum(sizes) == 120

    rows = spark.read.parquet(out).collect()
    positions = [(r.queueId, r.queueOffset) for r in rows]
    assert len(positions) == len(set(positions)) == len(sent)  # each message exactly once
    assert sorted(positions) == sorted((s["queueId"], s["queueOffset"]) for s in sent)
    assert {r.msgId for r in rows} == {s["msgId"] for s in sent}


def test_stream_through_a_master_failover_loses_nothing(
    spark: Any, broker_clusters: Any, tmp_path: Any
) -> None:
    failover = broker_clusters(replicas=3)
    master = failover.wait_master("broker-a", 30.0)
    failover.wait_routable()
    namesrv = failover.namesrv_addr
    create_topic(namesrv, "SparkFailover", 4)
    acked: set[str] = set()
    stop = threading.Event()

    def produce() -> None:
        with SyncProducer("spark-failover", namesrv, send_timeout_s=3.0, retry_times=3) as p:
            seq = 0
            while not stop.is_set():
                try:
                    result = p.send("SparkFailover", b"m%06d" % seq)
                except LedgerMQError:
                    stop.wait(0.05)
                    continue
                seq += 1
                acked.add(result.msg_id)

    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    query = (
        _stream(spark, namesrv, "SparkFailover")
        .select("queueId", "queueOffset", "msgId")
        .writeStream.format("parquet")
        .option("path", out)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    producer = threading.Thread(target=produce)
    producer.start()
    try:
        deadline = time.monotonic() + 30
        while len(acked) < 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        failover.kill9("broker-a", master)
        time.sleep(6.0)
        stop.set()
        producer.join(30)
        assert len(acked) > 200
        deadline = time.monotonic() + 90
        rows: list[Any] = []
        while time.monotonic() < deadline:
            assert query.exception() is None
            rows = (
                spark.read.schema(OUT_SCHEMA).parquet(out).collect() if os.path.isdir(out) else []
            )
            if acked <= {r.msgId for r in rows}:
                break
            time.sleep(1.0)
    finally:
        stop.set()
        producer.join(30)
        query.stop()
    missing = acked - {r.msgId for r in rows}
    assert not missing, f"{len(missing)} acknowledged messages never reached the sink"
    positions = [(r.queueId, r.queueOffset) for r in rows]
    assert len(positions) == len(set(positions))  # no queue offset read twice


def _consume_all(namesrv: str, topic: str) -> list[Any]:
    """Every message of ``topic``, through the plain pull consumer."""
    from ledgermq.client import SyncPullConsumer

    messages: list[Any] = []
    with SyncPullConsumer("spark-test-check", namesrv) as consumer:
        for mq in consumer.fetch_queues(topic):
            offset, end = consumer.min_offset(mq), consumer.max_offset(mq)
            while offset < end:
                result = consumer.pull(mq, offset, 256)
                messages.extend(result.messages)
                offset = result.next_begin_offset
    return messages


def test_batch_write_produces_consumable_messages(spark: Any, cluster: BrokerCluster) -> None:
    namesrv = cluster.namesrv_addr
    create_topic(namesrv, "SparkWrite", 4)
    rows = [
        (f"body-{i}", f"k{i} common", f"t{i % 2}", {"n": str(i)} if i % 3 else None)
        for i in range(300)
    ]
    df = spark.createDataFrame(
        rows, "body STRING, keys STRING, tags STRING, properties MAP<STRING, STRING>"
    ).repartition(3)
    df.write.format("ledgermq").option("namesrvAddr", namesrv).option("topic", "SparkWrite").mode(
        "append"
    ).save()
    got = {m.body.decode(): m for m in _consume_all(namesrv, "SparkWrite")}
    assert len(got) == 300
    for body, keys, tags, props in rows:
        message = got[body]
        assert message.keys == keys.split()
        assert message.tags == tags
        assert message.properties.get("n") == (props or {}).get("n")


def test_batch_write_without_a_save_mode_appends(spark: Any, cluster: BrokerCluster) -> None:
    """What users write, ``df.write.format("ledgermq")...save()``: Spark's default mode
    (ErrorIfExists) was refused with UNSUPPORTED_DATA_SOURCE_SAVE_MODE; now it appends, a
    second write appends again, and the modes about an existing target are refused with a
    sentence before Spark runs anything."""
    from ledgermq.errors import ConfigError

    namesrv = cluster.namesrv_addr
    create_topic(namesrv, "SparkDefaultMode", 2)
    df = spark.createDataFrame([(f"d-{i}",) for i in range(20)], "body STRING")

    def writer() -> Any:
        return (
            df.write.format("ledgermq")
            .option("namesrvAddr", namesrv)
            .option("topic", "SparkDefaultMode")
        )

    writer().save()
    writer().save()
    bodies = sorted(m.body.decode() for m in _consume_all(namesrv, "SparkDefaultMode"))
    assert bodies == sorted(f"d-{i}" for i in range(20) for _ in range(2))
    from ledgermq.spark.save_modes import OVERWRITE_REFUSED

    with pytest.raises(ConfigError) as info:
        writer().mode("overwrite").save()
    assert str(info.value) == OVERWRITE_REFUSED
    for mode in ("error", "ignore"):
        with pytest.raises(ConfigError, match=f"does not support save mode '{mode}'"):
            writer().save(mode=mode)
    assert len(_consume_all(namesrv, "SparkDefaultMode")) == 40


def test_sink_partitions_are_not_written_twice(cluster: BrokerCluster) -> None:
    """A task re-run after part of its rows were stored sends only the rest (no Spark here:
    the executor-side function itself, called as two attempts would call it)."""
    from ledgermq.spark._sink_io import OutRow, commit_batch, write_partition
    from ledgermq.spark.planning import parse_sink_options

    namesrv = cluster.namesrv_addr
    create_topic(namesrv, "SparkReplay", 4)
    options = parse_sink_options({"namesrvAddr": namesrv})
    rows: list[OutRow] = [("SparkReplay", b"same" if i % 10 == 0 else b"r%d" % i, None, None, None)
            for i in range(100)]  # fmt: skip
    first = write_partition(options, rows[:40], sink_id="q1", batch=7, part=2, attempt=0)
    assert first == (40, 0)
    again = write_partition(options, list(reversed(rows)), sink_id="q1", batch=7, part=2, attempt=1)
    assert again == (60, 40)
    assert commit_batch(options, "q1", 7)
    assert not commit_batch(options, "q1", 7)
    assert write_partition(options, rows, sink_id="q1", batch=7, part=2, attempt=2) == (0, 100)
    bodies = sorted(m.body for m in _consume_all(namesrv, "SparkReplay"))
    assert bodies == sorted(r[1] for r in rows)  # the 10 equal bodies kept, nothing twice


def test_exactly_once_sink_after_a_crash_before_spark_commits(
    spark: Any, cluster: BrokerCluster, tmp_path: Any
) -> None:
    namesrv = cluster.namesrv_addr
    create_topic(namesrv, "SparkSinkIn", 4)
    create_topic(namesrv, "SparkSinkOut", 4)
    sent = _produce(namesrv, "SparkSinkIn", 6, 25)
    checkpoint = tmp_path / "checkpoint"

    def run() -> list[int]:
        query = (
            _stream(spark, namesrv, "SparkSinkIn", maxMessagesPerTrigger="60")
            .selectExpr("body", "tags", "concat('from-', msgId) AS keys")
            .writeStream.format("ledgermq")
            .option("namesrvAddr", namesrv)
            .option("topic", "SparkSinkOut")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        assert query.exception() is None
        return [p["batchId"] for p in query.recentProgress if p["numInputRows"]]

    batches = run()
    assert len(batches) == 3
    # The crash: the sink committed the last batch, Spark did not record it (commits/N lost).
    last = max(batches)
    (checkpoint / "commits" / str(last)).unlink()
    (checkpoint / "commits" / f".{last}.crc").unlink(missing_ok=True)  # Hadoop's checksum
    replayed = run()
    assert replayed == [last]  # Spark ran the batch again, with the same offsets

    out = _consume_all(namesrv, "SparkSinkOut")
    assert sorted(m.body for m in out) == sorted(s["body"] for s in sent)
    assert {m.keys[0] for m in out} == {f"from-{s['msgId']}" for s in sent}
    assert {m.properties["__spark_batch"] for m in out} == {str(b) for b in batches}
