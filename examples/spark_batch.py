"""A batch job over LedgerMQ: ``python examples/spark_batch.py``.

Reads every message of a topic (JSON orders ``{"customer": ..., "amount": ...}``), sums the
orders per customer, and writes one message per customer to another topic: a JSON body with
the count and the total, the customer as the key, and the tag ``big`` or ``small``. It is a
plain batch job (``spark.read`` / ``df.write``, no checkpoint): running it again reads the
whole input topic again and appends another summary per customer.

    pip install 'ledgermq[spark]'
    export SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON=$(which python)
    ledgermq quickstart &                      # or your cluster's NameServer
    python examples/spark_batch.py --namesrv 127.0.0.1:9876 --demo-orders 500

``--demo-orders N`` first sends N orders to the input topic (creating the topics), so the
example runs on an empty cluster.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import DataFrame, SparkSession

CUSTOMERS = ("ada", "grace", "edsger", "barbara", "donald")
BIG = 1000.0
"""A customer whose orders sum to more than this gets the tag ``big``."""


def _options(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--namesrv", default="127.0.0.1:9876", help="the NameServer(s)")
    parser.add_argument("--input-topic", default="Orders")
    parser.add_argument("--output-topic", default="CustomerTotals")
    parser.add_argument(
        "--demo-orders", type=int, default=0, help="send this many orders to the input first"
    )
    return parser.parse_args(argv)


def _demo_orders(args: argparse.Namespace) -> None:
    import json
    import random

    from ledgermq.client import Message, SyncAdmin, SyncProducer

    with SyncAdmin(args.namesrv) as admin:
        for topic in (args.input_topic, args.output_topic):
            admin.create_topic(topic, 4)
            admin.wait_for_route(topic)
    rng = random.Random(7)
    orders = [
        Message(
            json.dumps({"customer": rng.choice(CUSTOMERS), "amount": rng.randint(1, 100)}).encode()
        )
        for _ in range(args.demo_orders)
    ]
    with SyncProducer("spark-batch-demo", args.namesrv) as producer:
        for start in range(0, len(orders), 64):
            producer.send_batch(args.input_topic, orders[start : start + 64])


def totals(spark: SparkSession, namesrv: str, topic: str) -> DataFrame:
    """Read: every message of ``topic``; transform: count and sum the orders per customer,
    as the columns the ``ledgermq`` sink writes (``body``, ``keys``, ``tags``)."""
    from pyspark.sql import functions as F  # noqa: N812

    orders = (
        spark.read.format("ledgermq")
        .option("namesrvAddr", namesrv)
        .option("topic", topic)
        .load()
        .select(
            F.from_json(F.col("body").cast("string"), "customer STRING, amount DOUBLE").alias("o")
        )
        .where(F.col("o.customer").isNotNull())
    )
    per_customer = orders.groupBy("o.customer").agg(
        F.count("*").alias("orders"), F.sum("o.amount").alias("total")
    )
    return per_customer.select(
        F.to_json(F.struct("customer", "orders", "total")).alias("body"),
        F.col("customer").alias("keys"),
        F.when(F.col("total") > BIG, "big").otherwise("small").alias("tags"),
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Run the job; ``argv`` as on the command line (default: ``sys.argv[1:]``)."""
    args = _options(argv)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if args.demo_orders:
        _demo_orders(args)

    from pyspark.sql import SparkSession

    import ledgermq.spark

    # Without it Spark refuses a write that names no save mode (its default, ErrorIfExists,
    # is not offered to Python data sources); with it, no mode means append.
    ledgermq.spark.install_save_modes()

    spark = (
        SparkSession.builder.appName("ledgermq-batch")
        .config("spark.sql.shuffle.partitions", "2")
        # idle Python workers end quietly at spark.stop() (no BrokenPipeError tracebacks)
        .config("spark.python.daemon.module", "ledgermq.spark.daemon")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    try:
        out = totals(spark, args.namesrv, args.input_topic).cache()
        (
            out.write.format("ledgermq")  # found through the pyspark_ledgermq module
            .option("namesrvAddr", args.namesrv)
            .option("topic", args.output_topic)
            .save()  # no .mode(...): a topic is appended to
        )
        print(f"wrote {out.count()} customer totals to {args.output_topic}")
        out.orderBy("keys").show(truncate=False)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
