"""Master CPU per message served by PULL_MESSAGE: ``python benchmarks/pull_cpu.py``.

Starts a NameServer and one 3-replica broker group as real processes on loopback, produces
``--messages`` (default 200k) 1 KiB messages into a topic of 8 queues with SEND_BATCH of 64 (as
``spark_read.py`` does), then, ``--runs`` times for each ``--max-nums`` (default 1024, the Spark
connector's pulls, and 32, the default), pulls every queue from its start to its end with
``SyncPullConsumer.pull`` and reads the master's CPU time (utime + stime from
``/proc/<pid>/stat``) before and after. It reports that CPU time divided by the messages served,
in microseconds: the cost the connector's reads put on the master, which shares a small machine
with the readers. A warm-up pass first maps the pages and fills the caches.

The master's idle CPU (heartbeats, flushes; measured for ``--idle-s`` and printed) is part of
every number, in proportion to the wall time of a run. The machine is usually shared, so quote
the median of the runs. To compare with another checkout, run this script with ``PYTHONPATH``
pointing at that checkout's ``src`` (the brokers run the code the script imports). Prints one
line per run and a summary; ``--json FILE`` also writes them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from ledgermq.bench.broker import fill_topic
from ledgermq.client import Admin, MessageQueue, SyncPullConsumer
from ledgermq.testing.broker_cluster import BrokerCluster

GROUP = "broker-a"
TOPIC = "PullCpu"


def _options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--body-bytes", type=int, default=1024)
    parser.add_argument("--queues", type=int, default=8)
    parser.add_argument("--max-nums", type=int, nargs="+", default=[1024, 32])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--idle-s", type=float, default=5.0, help="idle CPU sample length")
    parser.add_argument("--json", default=None)
    return parser.parse_args()


async def _setup_and_produce(namesrv: str, args: argparse.Namespace) -> float:
    """Create the topic and fill it with batches of 64 from 4 producers; msgs/s."""
    admin = Admin(namesrv)
    await admin.start()
    try:
        await admin.create_topic(TOPIC, args.queues)
        await admin.wait_for_route(TOPIC)
    finally:
        await admin.close()
    return await fill_topic(
        namesrv, TOPIC, args.messages, body_bytes=args.body_bytes, client_name="pull-cpu"
    )


def _cpu_times(pid: int) -> tuple[float, float]:
    """(utime, stime) of process ``pid``, in seconds: user and kernel CPU time."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def _cpu_s(pid: int) -> float:
    """utime + stime of process ``pid``, in seconds."""
    return sum(_cpu_times(pid))


def _pull_all(consumer: SyncPullConsumer, queues: list[MessageQueue], max_nums: int) -> int:
    """Pull every queue from its start to its end; the number of messages received."""
    total = 0
    for mq in queues:
        end = consumer.max_offset(mq)
        offset = consumer.min_offset(mq)
        while offset < end:
            result = consumer.pull(mq, offset, max_nums)
            total += len(result.messages)
            offset = result.next_begin_offset
    return total


def main() -> None:
    args = _options()
    report: dict[str, object] = {"messages": args.messages, "body_bytes": args.body_bytes}
    with tempfile.TemporaryDirectory() as base, BrokerCluster(base, replicas=3) as cluster:
        master = cluster.wait_master(GROUP, 30.0)
        cluster.wait_routable()
        namesrv = cluster.namesrv_addr
        report["produce_msgs_per_s"] = asyncio.run(_setup_and_produce(namesrv, args))
        pid = cluster.pid(GROUP, master)
        consumer = SyncPullConsumer("pull-cpu", namesrv)
        consumer.start()
        try:
            queues = [MessageQueue(TOPIC, GROUP, q) for q in range(args.queues)]
            _pull_all(consumer, queues, max(args.max_nums))  # warm-up
            cpu0 = _cpu_s(pid)
            time.sleep(args.idle_s)
            idle = (_cpu_s(pid) - cpu0) / args.idle_s
            report["idle_cpu_s_per_s"] = idle
            print(f"master idle: {idle:.3f} s CPU per second (included in the numbers below)")
            for max_nums in args.max_nums:
                runs = []
                for run in range(args.runs):
                    (user0, sys0), wall0 = _cpu_times(pid), time.perf_counter()
                    served = _pull_all(consumer, queues, max_nums)
                    user1, sys1 = _cpu_times(pid)
                    user, kernel = user1 - user0, sys1 - sys0
                    cpu = user + kernel
                    wall = time.perf_counter() - wall0
                    us = cpu / served * 1e6
                    runs.append(us)
                    print(
                        f"maxMsgNums {max_nums:5d} run {run}: {served} msgs in {wall:.2f}s "
                        f"({served / wall:,.0f}/s), master cpu {cpu:.2f}s (user {user:.2f}s, "
                        f"kernel {kernel:.2f}s) = {us:.2f} us/msg"
                    )
                median = statistics.median(runs)
                print(f"maxMsgNums {max_nums:5d}: median {median:.2f} us/msg on the master")
                report[f"us_per_msg_{max_nums}"] = {"runs": runs, "median": median}
        finally:
            consumer.close()
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
