"""The broker benchmark: ``python benchmarks/broker.py [--duration S] [--failover-trials N]``.

Starts a NameServer and one 3-replica broker group as real processes on loopback
(``ledgermq.testing.broker_cluster``), then measures, with 1 KiB messages:

- produce, batched: 4 producers x SEND_BATCH of 64 messages (issue 5 goal: >= 50k msgs/s);
- produce, single: 16 producers x one message per send;
- sequential: one producer, one message per send, each waiting for the previous acknowledgement;
- send latency at 10k msgs/s offered (8 producers x batches of 16, paced; goal p99 <= 5 ms);
- consume: a pull consumer reads everything produced, from each queue's start (>= 100k msgs/s);
- failover write gap: kill -9 of the master under a paced load, time to the first acknowledged
  send after the kill, over several trials (the killed replica is restarted between trials;
  goal: median <= 2 s).

Every workload also reports the **CPU per acknowledged (or consumed) message**: utime + stime
(``/proc/<pid>/stat``) of every process of the cluster (the three replicas and the NameServer),
summed, over the measured window, divided by the messages; and separately that of the load
generator (this process). ``--flush both`` runs the produce workloads with ``ASYNC_FLUSH`` and then
the batched and paced ones again on a ``SYNC_FLUSH`` cluster.

Prints a table and writes benchmarks/results/broker.json (``--json FILE`` elsewhere).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import statistics
import sys
import tempfile
import time

from ledgermq.bench.broker import ConsumeOptions, ProduceOptions, run_consume, run_produce
from ledgermq.bench.cpu import CpuMeter
from ledgermq.bench.stats import Progress, RunResult, format_table
from ledgermq.client import Admin, Credentials, Producer
from ledgermq.errors import LedgerMQError
from ledgermq.testing.broker_cluster import BrokerCluster

GROUP = "broker-a"


def _options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per workload")
    parser.add_argument("--failover-trials", type=int, default=5)
    parser.add_argument(
        "--flush",
        choices=["ASYNC_FLUSH", "SYNC_FLUSH", "both"],
        default="ASYNC_FLUSH",
        help="both: everything on ASYNC_FLUSH, then batched and paced sends on SYNC_FLUSH",
    )
    parser.add_argument(
        "--acl",
        action="store_true",
        help="also run batched and single sends on a cluster with aclEnable=true and signed "
        "requests (the ACL's cost per message, issue 17)",
    )
    parser.add_argument(
        "--json",
        default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "broker.json"),
    )
    return parser.parse_args()


_ACL = """
accounts:
  - accessKey: bench-admin
    secretKey: bench-admin-secret
    admin: true
"""
_ACL_CREDENTIALS = Credentials("bench-admin", "bench-admin-secret")


async def _create_topics(
    namesrv: str, topics: list[str], credentials: Credentials | None = None
) -> None:
    admin = Admin(namesrv, credentials=credentials)
    await admin.start()
    try:
        for topic in topics:
            await admin.create_topic(topic, 8)
            await admin.wait_for_route(topic)
    finally:
        await admin.close()


async def _failover_gap(cluster: BrokerCluster, topic: str) -> float:
    """Seconds from kill -9 of the master to the first acknowledgement of a send started after
    it."""
    producer = Producer("bench-failover", cluster.namesrv_addr, send_timeout_s=2.0)
    await producer.start()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    acked_after_kill = asyncio.Event()
    acks: list[float] = []
    killed_at = float("inf")

    async def sender() -> None:
        while not stop.is_set():
            started = loop.time()
            try:
                await producer.send(topic, b"x" * 1024)
            except LedgerMQError:
                await asyncio.sleep(0.01)
                continue
            # Only a send that started after the kill proves the new master took over (an
            # answer already on its way from the old master can arrive after the kill).
            if started > killed_at:
                acks.append(loop.time())
                acked_after_kill.set()

    senders = [asyncio.ensure_future(sender()) for _ in range(4)]
    try:
        await asyncio.sleep(1.0)
        master = await asyncio.to_thread(cluster.master, GROUP)
        assert master is not None
        killed_at = loop.time()
        cluster.kill9(GROUP, master)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(acked_after_kill.wait(), 30)
        after = [t for t in acks if t > killed_at]
        gap = (min(after) - killed_at) if after else float("inf")
    finally:
        stop.set()
        await asyncio.gather(*senders, return_exceptions=True)
        await producer.shutdown()
    await asyncio.to_thread(cluster.restart, GROUP, master)
    await asyncio.to_thread(cluster.wait_master, GROUP, 30.0)
    return gap


async def _bench(
    cluster: BrokerCluster, args: argparse.Namespace, *, full: bool, acl: bool = False
) -> dict[str, object]:
    """The workloads on ``cluster``; ``full=False`` runs only batched and paced sends (the
    SYNC_FLUSH pass of ``--flush both``); ``acl``: batched and single sends, signed."""
    namesrv = cluster.namesrv_addr
    credentials = _ACL_CREDENTIALS if acl else None
    topics = ["BenchBatched", "BenchSingle", "BenchSequential", "BenchLatency", "BenchFailover"]
    await _create_topics(namesrv, topics, credentials)
    progress = Progress()
    meter = CpuMeter(cluster.server_pids())
    produce = [
        ProduceOptions(namesrv, "BenchBatched", batch=64, producers=4,
                       duration_s=args.duration, mode="produce batched"),
        ProduceOptions(namesrv, "BenchSingle", batch=1, producers=16,
                       duration_s=args.duration, mode="produce single"),
        ProduceOptions(namesrv, "BenchSequential", batch=1, producers=1,
                       duration_s=args.duration, mode="sequential"),
        ProduceOptions(namesrv, "BenchLatency", batch=16, producers=8, rate=10_000,
                       duration_s=args.duration, mode="latency @10k/s"),
    ]  # fmt: skip
    if acl:
        produce = [
            dataclasses.replace(o, credentials=credentials, mode=f"{o.mode} (ACL)")
            for o in produce[:2]
        ]
    elif not full:
        produce = [o for o in produce if o.batch > 1]
    results = [await run_produce(options, progress, meter=meter) for options in produce]
    gaps: list[float] = []
    if full:
        consume = ConsumeOptions(
            namesrv, "BenchBatched", duration_s=max(args.duration, 30.0), mode="consume"
        )
        results.append(await run_consume(consume, progress, meter=meter))
        gaps = [await _failover_gap(cluster, "BenchFailover") for _ in range(args.failover_trials)]
    return {"results": results, "failover_gaps_s": gaps}


def _run_cluster(
    flush: str, args: argparse.Namespace, *, full: bool, acl: bool = False
) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="ledgermq-broker-bench-") as tmp:
        settings = {"mappedFileSizeCommitLog": str(256 << 20)}
        credentials = None
        if acl:
            path = os.path.join(tmp, "plain_acl.yml")
            with open(path, "w", encoding="utf-8") as f:
                f.write(_ACL)
            settings |= {"aclEnable": "true", "aclFilePath": path}
            credentials = (_ACL_CREDENTIALS.access_key, _ACL_CREDENTIALS.secret_key)
        cluster = BrokerCluster(
            os.path.join(tmp, "cluster"), replicas=3, flush=flush, extra_settings=settings,
            credentials=credentials,
        )  # fmt: skip
        try:
            cluster.wait_routable()
            outcome = asyncio.run(_bench(cluster, args, full=full, acl=acl))
        finally:
            cluster.close()
    results = outcome["results"]
    assert isinstance(results, list)
    outcome["results"] = [dataclasses.replace(r, flush=flush) for r in results]
    return outcome


def main() -> int:
    args = _options()
    logging.basicConfig(level=logging.ERROR)
    flushes = ["ASYNC_FLUSH", "SYNC_FLUSH"] if args.flush == "both" else [args.flush]
    results: list[RunResult] = []
    gaps: list[float] = []
    for index, flush in enumerate(flushes):
        outcome = _run_cluster(flush, args, full=index == 0)
        more = outcome["results"]
        more_gaps = outcome["failover_gaps_s"]
        assert isinstance(more, list)
        assert isinstance(more_gaps, list)
        results.extend(more)
        gaps.extend(more_gaps)
    if args.acl:
        more = _run_cluster("ASYNC_FLUSH", args, full=False, acl=True)["results"]
        assert isinstance(more, list)
        results.extend(more)
    print(format_table(results))
    print(
        "server us/msg: CPU (user + kernel) of the 3 replicas and the NameServer, summed, per "
        "acknowledged (consume: received) message; loadgen us/msg: the same for this process"
    )
    if gaps:
        print(
            f"failover write gap (kill -9 master -> first ack), {len(gaps)} trials: median "
            f"{statistics.median(gaps) * 1000:,.0f} ms, min {min(gaps) * 1000:,.0f}, "
            f"max {max(gaps) * 1000:,.0f}"
        )
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w", encoding="utf-8") as f:
        json.dump(
            {
                "measured_at": time.strftime("%Y-%m-%d %H:%M:%S"),
                "flush": args.flush,
                "results": [r.to_json() for r in results],
                "failover_gaps_s": gaps,
            },
            f,
            indent=2,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
