"""A Structured Streaming job over LedgerMQ: ``python examples/spark_pipeline.py``.

Reads JSON events (``{"ts": <epoch ms>, "value": <number>}``) from a topic, counts them and
sums their values per tag in 10-second event-time windows (watermark 30 s), and writes each
finished window to Parquet and, as a JSON message, to a LedgerMQ topic (exactly-once sink).
Stop it (Ctrl-C) and start it again with the same ``--checkpoint``: it carries on where it was,
and neither output gets a window twice. The output and checkpoint folders default to
``./ledgermq-spark-pipeline/`` in the current directory (printed at start): a checkpoint is one
query's progress, and a shared default (``/tmp``) made a second user's run silently resume the
first one's.

    pip install 'ledgermq[spark]'
    export SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON=$(which python)
    ledgermq quickstart &                      # or your cluster's NameServer
    python examples/spark_pipeline.py --namesrv 127.0.0.1:9876 --demo-events 2000

``--demo-events N`` first sends N events to the input topic (creating the topics), so the
example runs on an empty cluster; ``--available-now`` processes what is there and exits.
Called as ``main([...])`` from a process that already has a Spark session (a notebook, the
tests), it runs in that session and leaves it running.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import SparkSession

DEFAULT_DIR = os.path.join(os.curdir, "ledgermq-spark-pipeline")
"""Where the output and the checkpoint go by default: under the current directory, one per
user and project, never a shared folder whose checkpoint another run would resume."""


def _options(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namesrv", default="127.0.0.1:9876")
    parser.add_argument("--input-topic", default="Events")
    parser.add_argument("--output-topic", default="EventStats")
    parser.add_argument("--output-dir", default=os.path.join(DEFAULT_DIR, "parquet"))
    parser.add_argument("--checkpoint", default=os.path.join(DEFAULT_DIR, "checkpoint"))
    parser.add_argument("--demo-events", type=int, default=0)
    parser.add_argument("--available-now", action="store_true")
    args = parser.parse_args(argv)
    args.output_dir = os.path.abspath(args.output_dir)
    args.checkpoint = os.path.abspath(args.checkpoint)
    return args


def _demo_events(namesrv: str, args: argparse.Namespace) -> None:
    import json
    import random

    from ledgermq.client import Message, SyncAdmin, SyncProducer

    with SyncAdmin(namesrv) as admin:
        for topic in (args.input_topic, args.output_topic):
            admin.create_topic(topic, 4)
            admin.wait_for_route(topic)
    rng = random.Random(7)
    # event time runs 60 s back from now, so windows close behind the watermark
    now_ms = int(time.time() * 1000)
    events = [
        Message(
            json.dumps(
                {
                    "ts": now_ms - 60_000 + i * 60_000 // args.demo_events,
                    "value": rng.randint(1, 100),
                }
            ).encode(),
            tags=rng.choice(["click", "view", "buy"]),
        )
        for i in range(args.demo_events)
    ]
    with SyncProducer("spark-pipeline-demo", namesrv) as producer:
        for start in range(0, len(events), 64):
            producer.send_batch(args.input_topic, events[start : start + 64])


def main(argv: Sequence[str] | None = None) -> None:
    """Run the pipeline; ``argv`` as on the command line (default: ``sys.argv[1:]``)."""
    args = _options(argv)
    print(f"output {args.output_dir}, checkpoint {args.checkpoint}", flush=True)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if args.demo_events:
        _demo_events(args.namesrv, args)

    from pyspark.sql import SparkSession

    existing = SparkSession.getActiveSession()
    spark = existing or (
        SparkSession.builder.appName("ledgermq-pipeline")
        .config("spark.sql.shuffle.partitions", "2")
        # idle Python workers end quietly at spark.stop() (no BrokenPipeError tracebacks)
        .config("spark.python.daemon.module", "ledgermq.spark.daemon")
        .getOrCreate()
    )
    if existing is None:
        spark.sparkContext.setLogLevel("WARN")
    try:
        _run(spark, args)
        windows = spark.read.parquet(args.output_dir)
        print(f"{windows.count()} windows in {args.output_dir}")
        windows.orderBy("windowStart", "tag").show(10, truncate=False)
    finally:
        if existing is None:  # a session someone else started is theirs to stop
            spark.stop()


def _run(spark: SparkSession, args: argparse.Namespace) -> None:
    """Start both queries and wait for them: until Ctrl-C, or with ``--available-now``
    until they have processed what was there when they started."""
    from pyspark.sql import functions as F  # noqa: N812

    events = (
        spark.readStream.format("ledgermq")  # found through the pyspark_ledgermq module
        .option("namesrvAddr", args.namesrv)
        .option("topic", args.input_topic)
        .option("startingOffsets", "earliest")
        .option("maxMessagesPerTrigger", "10000")
        .load()
        .select(
            "tags",
            F.from_json(F.col("body").cast("string"), "ts LONG, value DOUBLE").alias("e"),
        )
        .select(
            F.col("tags").alias("tag"),
            F.timestamp_millis(F.col("e.ts")).alias("eventTime"),
            F.col("e.value").alias("value"),
        )
        .where(F.col("eventTime").isNotNull())
    )
    stats = (
        events.withWatermark("eventTime", "30 seconds")
        .groupBy(F.window("eventTime", "10 seconds"), "tag")
        .agg(F.count("*").alias("events"), F.sum("value").alias("total"))
        .select(
            F.col("window.start").alias("windowStart"),
            F.col("window.end").alias("windowEnd"),
            "tag",
            "events",
            "total",
        )
    )

    trigger = {"availableNow": True} if args.available_now else {"processingTime": "5 seconds"}
    parquet = (
        stats.writeStream.format("parquet")
        .outputMode("append")  # a window is written once, when the watermark passes its end
        .option("path", args.output_dir)
        .option("checkpointLocation", os.path.join(args.checkpoint, "parquet"))
        .trigger(**trigger)
        .start()
    )
    to_topic = (
        stats.select(
            F.to_json(F.struct("windowStart", "windowEnd", "tag", "events", "total")).alias("body"),
            F.col("tag").alias("tags"),
        )
        .writeStream.format("ledgermq")
        .outputMode("append")
        .option("namesrvAddr", args.namesrv)
        .option("topic", args.output_topic)
        .option("checkpointLocation", os.path.join(args.checkpoint, "ledgermq"))
        .trigger(**trigger)
        .start()
    )
    try:
        if args.available_now:
            parquet.awaitTermination()
            to_topic.awaitTermination()
        else:
            spark.streams.awaitAnyTermination()
    except KeyboardInterrupt:
        pass
    finally:
        for query in (parquet, to_topic):
            query.stop()


if __name__ == "__main__":
    main()
