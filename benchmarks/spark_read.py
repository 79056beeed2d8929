"""The Spark connector benchmark: ``python benchmarks/spark_read.py [--messages N]``.

Starts a NameServer and one 3-replica broker group as real processes on loopback, produces
``--messages`` (default 1M) 1 KiB messages into a topic of 8 queues, then with Spark
``local[2]``:

- batch read into a DataFrame count (goal: >= 100k rows/s), median of ``--runs``, after a
  warm-up read that starts the Python workers; also ``sum(length(body))``, which makes every
  body cross into the JVM;
- streaming end-to-end latency: a paced producer (``--rate`` msgs/s for ``--latency-s``
  seconds) and a streaming query from ``latest`` with the default trigger (as fast as
  possible); a ``foreachBatch`` sink notes, per row, the time from the producer's send
  (``bornTimestamp``) to the batch being in the sink.

Prints a table and writes benchmarks/results/spark_read.json (``--json FILE`` elsewhere).
Set ``SPARK_LOCAL_IP=127.0.0.1`` and ``PYSPARK_PYTHON`` (done here when unset).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from ledgermq.bench.broker import fill_topic
from ledgermq.client import Admin, SyncProducer
from ledgermq.spark.local import local_session, worker_environment
from ledgermq.testing.broker_cluster import BrokerCluster

GROUP = "broker-a"
TOPIC = "SparkBench"
LATENCY_TOPIC = "SparkLatency"


def _options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--body-bytes", type=int, default=1024)
    parser.add_argument("--queues", type=int, default=8)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rate", type=float, default=500.0, help="msgs/s of the latency run")
    parser.add_argument("--latency-s", type=float, default=15.0)
    parser.add_argument(
        "--json", default=str(Path(__file__).resolve().parent / "results" / "spark_read.json")
    )
    return parser.parse_args()


async def _setup_and_produce(namesrv: str, args: argparse.Namespace) -> float:
    admin = Admin(namesrv)
    await admin.start()
    try:
        for topic in (TOPIC, LATENCY_TOPIC):
            await admin.create_topic(topic, args.queues)
            await admin.wait_for_route(topic)
    finally:
        await admin.close()
    return await fill_topic(
        namesrv, TOPIC, args.messages, body_bytes=args.body_bytes, client_name="spark-bench"
    )


def _session() -> Any:
    os.environ.update(worker_environment())
    return local_session("ledgermq-spark-bench")


def _batch_read(spark: Any, namesrv: str, args: argparse.Namespace) -> dict[str, Any]:
    from pyspark.sql import functions as F  # noqa: N812

    def reader() -> Any:
        return spark.read.format("ledgermq").option("namesrvAddr", namesrv).option("topic", TOPIC)

    warm = json.dumps({TOPIC: {GROUP: {str(q): 100 for q in range(args.queues)}}})
    reader().option("endingOffsets", warm).load().count()  # starts the Python workers
    counts, sums = [], []
    for _ in range(args.runs):
        start = time.perf_counter()
        n = reader().load().count()
        counts.append(time.perf_counter() - start)
        assert n == args.messages, (n, args.messages)
        start = time.perf_counter()
        total = reader().load().agg(F.sum(F.length("body"))).collect()[0][0]
        sums.append(time.perf_counter() - start)
        assert total == args.messages * args.body_bytes
    return {
        "count_s": counts,
        "count_rows_per_s": args.messages / statistics.median(counts),
        "sum_body_s": sums,
        "sum_body_rows_per_s": args.messages / statistics.median(sums),
        "partitions": reader().load().rdd.getNumPartitions(),
    }


def _latency(spark: Any, namesrv: str, args: argparse.Namespace) -> dict[str, Any]:
    from pyspark.sql import functions as F  # noqa: N812

    latencies: list[float] = []
    batch_rows: list[int] = []

    def sink(df: Any, _batch_id: int) -> None:
        born = [r.bornMs for r in df.select((F.unix_micros("bornTimestamp") / 1000).alias(
            "bornMs")).collect()]  # fmt: skip
        now = time.time() * 1000
        latencies.extend(now - b for b in born)
        batch_rows.append(len(born))

    query = (
        spark.readStream.format("ledgermq")
        .option("namesrvAddr", namesrv)
        .option("topic", LATENCY_TOPIC)
        .option("startingOffsets", "latest")
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", tempfile.mkdtemp(prefix="spark-bench-ckpt-"))
        .start()
    )
    stop = threading.Event()
    sent = 0

    def produce() -> None:
        nonlocal sent
        with SyncProducer("spark-bench-latency", namesrv) as producer:
            interval = 1.0 / args.rate
            next_at = time.perf_counter()
            while not stop.is_set():
                producer.send(LATENCY_TOPIC, b"x" * args.body_bytes)
                sent += 1
                next_at += interval
                delay = next_at - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)

    try:
        time.sleep(8.0)  # the first micro-batches start the workers; measure after them
        thread = threading.Thread(target=produce)
        thread.start()
        time.sleep(args.latency_s)
        stop.set()
        thread.join()
        deadline = time.time() + 30
        while len(latencies) < sent and time.time() < deadline:
            time.sleep(0.2)
    finally:
        query.stop()
    latencies.sort()
    return {
        "sent": sent,
        "received": len(latencies),
        "rate": args.rate,
        "p50_ms": statistics.median(latencies),
        "p99_ms": latencies[int(len(latencies) * 0.99) - 1],
        "max_ms": latencies[-1],
        "mean_rows_per_batch": statistics.mean(batch_rows) if batch_rows else 0,
    }


def main() -> None:
    args = _options()
    with tempfile.TemporaryDirectory(prefix="ledgermq-spark-bench-") as base:
        cluster = BrokerCluster(base, replicas=3)
        try:
            cluster.wait_master(GROUP, 30.0)
            cluster.wait_routable()
            namesrv = cluster.namesrv_addr
            print(f"producing {args.messages} x {args.body_bytes} B ...", flush=True)
            produce_rate = asyncio.run(_setup_and_produce(namesrv, args))
            spark = _session()
            try:
                batch = _batch_read(spark, namesrv, args)
                latency = _latency(spark, namesrv, args)
            finally:
                spark.stop()
        finally:
            cluster.close()
    rows = [
        ("produce (setup), 4 producers x batches of 64", f"{produce_rate:,.0f} msgs/s", ""),
        (
            f"batch read -> count, local[2], {batch['partitions']} partitions",
            f"{batch['count_rows_per_s']:,.0f} rows/s",
            ">= 100,000 rows/s: " + ("met" if batch["count_rows_per_s"] >= 100_000 else "NOT met"),
        ),
        ("batch read -> sum(length(body))", f"{batch['sum_body_rows_per_s']:,.0f} rows/s", ""),
        (
            f"streaming produce -> foreachBatch sink, {latency['rate']:.0f} msgs/s",
            f"p50 {latency['p50_ms']:.0f} ms, p99 {latency['p99_ms']:.0f} ms",
            (
                f"{latency['received']}/{latency['sent']} rows, "
                f"{latency['mean_rows_per_batch']:.0f} rows/batch"
            ),
        ),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"\n{'workload':<{width}}  {'result':<28}  note")
    for name, result, note in rows:
        print(f"{name:<{width}}  {result:<28}  {note}")
    record = {
        "date": time.strftime("%Y-%m-%d"),
        "messages": args.messages,
        "body_bytes": args.body_bytes,
        "queues": args.queues,
        "produce_msgs_per_s": produce_rate,
        "batch_read": batch,
        "streaming_latency": latency,
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(record, indent=2) + "\n")
    print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
