"""Raft core throughput: entries committed per CPU-second by three in-process cores.

Run ``python benchmarks/raft_core.py`` (``--quick`` for a smoke run). It prints a table and
writes ``benchmarks/results/raft_core.json``.

Three ``RaftCore`` instances over ``MemoryLedgerStore`` logs exchange messages through a
zero-latency in-memory queue (FIFO), driven by the same persist / send / advance loop as the
server. A leader is elected first; then proposals of 1, 16 or 256 bodies of 1 KiB are made,
each followed by pumping messages until it commits (plus a 1 ms tick, so dispatchers push). What is
timed is CPU time of the whole process (``time.process_time``): the cores, the in-memory logs and
the driver, which is the cost the core adds before any I/O. Goal (issue "Raft core"): at batch
256 the core sustains at least 500k entries/s.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import platform
import random
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ledgermq.raft import HardState, Message, RaftConfig, RaftCore, ResponseCode, Role
from ledgermq.store import MemoryLedgerStore
from ledgermq.testing.memory_driver import apply_log_changes

if TYPE_CHECKING:
    from collections.abc import Sequence

BODY = b"x" * 1024
IDS = ("n0", "n1", "n2")


class Group:
    def __init__(self) -> None:
        self.now = 0
        self.stores = {nid: MemoryLedgerStore(data_segment_bytes=1 << 30) for nid in IDS}
        self.cores = {
            nid: RaftCore(
                RaftConfig(group="bench", self_id=nid, peer_ids=IDS, max_wait_ack_time_ms=1 << 40),
                HardState(),
                self.stores[nid],
                random.Random(i),
                0,
            )
            for i, nid in enumerate(IDS)
        }
        self.queue: collections.deque[Message] = collections.deque()
        self.committed_entries = 0

    def process(self, nid: str) -> None:
        core, store = self.cores[nid], self.stores[nid]
        while core.has_ready():
            ready = core.ready()
            apply_log_changes(store, ready)
            self.queue.extend(ready.messages)
            self.queue.extend(ready.messages_after_persist)
            if ready.committed_index is not None:
                store.set_committed_index(ready.committed_index)
            for result in ready.completed:
                if result.code is ResponseCode.SUCCESS:
                    self.committed_entries += result.last_index - result.first_index + 1
            core.advance(ready)

    def pump(self) -> None:
        while self.queue:
            message = self.queue.popleft()
            self.cores[message.remote_id].step(message)
            self.process(message.remote_id)

    def tick(self, ms: int) -> None:
        self.now += ms
        for nid in IDS:
            self.cores[nid].tick(self.now)
            self.process(nid)
        self.pump()

    def leader(self) -> str:
        while True:
            self.tick(10)
            leaders = [n for n, c in self.cores.items() if c.role is Role.LEADER]
            followers = [n for n, c in self.cores.items() if c.role is Role.FOLLOWER]
            if len(leaders) == 1 and len(followers) == 2:
                return leaders[0]


def run(batch: int, entries: int) -> float:
    group = Group()
    leader = group.leader()
    core = group.cores[leader]
    bodies = [BODY] * batch
    started = time.process_time()
    target = entries
    while group.committed_entries < target:
        core.propose(bodies)
        group.process(leader)
        group.tick(1)
    elapsed = time.process_time() - started
    return group.committed_entries / elapsed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=str(Path(__file__).parent / "results" / "raft_core.json"))
    args = parser.parse_args(argv)
    sizes = {1: 3_000, 16: 30_000, 256: 200_000}
    if args.quick:
        sizes = {k: v // 10 for k, v in sizes.items()}
    results: dict[int, list[float]] = {b: [] for b in sizes}
    for round_no in range(args.repeats):
        for batch, entries in sizes.items():
            rate = run(batch, entries)
            results[batch].append(rate)
            print(
                f"[round {round_no + 1}] batch {batch}: {rate:,.0f} entries/CPU-s", file=sys.stderr
            )
    print("\nRaft core, 3 in-process cores, in-memory logs, zero-latency network, 1 KiB bodies")
    print(f"{'batch':>6}  {'entries committed per CPU-second: median (min-max)':<50}")
    for batch, rates in results.items():
        print(
            f"{batch:>6}  {statistics.median(rates):>12,.0f} ({min(rates):,.0f}-{max(rates):,.0f})"
        )
    goal = statistics.median(results[256])
    verdict = "PASS" if goal >= 500_000 else "MISS"
    print(f"\nGoal: batch 256 >= 500,000 entries/CPU-s: {verdict} ({goal:,.0f})")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(
        json.dumps(
            {
                "date": datetime.date.today().isoformat(),
                "machine": {"python": platform.python_version()},
                "entries_per_cpu_s": {
                    str(b): {
                        "median": statistics.median(r),
                        "min": min(r),
                        "max": max(r),
                        "runs": r,
                    }
                    for b, r in results.items()
                },
                "goal_batch_256": {"target": 500_000, "median": goal, "met": goal >= 500_000},
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
