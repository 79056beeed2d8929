"""A rolling restart under load, judged like a chaos run (issue 27 item 6).

Every replica of every broker group is restarted one at a time, as
docs/operations/rolling-restarts.md tells an operator to: per group the followers first, the
master last (its SIGTERM hands the leadership to the most caught-up follower before it stops);
before each stop ``ledgermq admin replica-status -b GROUP --ready`` (the group can lose a
replica), after each start ``replica-status -b GROUP --id NODE --ready --wait`` (it has caught
up), both run as the operator runs them, as commands. The chaos workload sends throughout (every
send's outcome recorded); afterwards every replica is read and a consumer group consumes
everything, and ``checker.check`` judges the history: nothing acknowledged lost, one message per
slot, per-producer order, delivery, duplicates counted.

What it measures, per restart (``Restart``), from the SIGTERM to the moment ``--ready`` passed:
the longest time without an acknowledged send into *that group's* queues (a group's own
unavailability: a master's restart costs its group the hand-over; a follower's should cost
nothing), and the longest time without any acknowledged send at all (the application's, which
other groups cover). ``baseline_ms`` is the first measure in the quiet seconds before the first
restart: the noise of the workload's own pauses.

Run it with ``python -m ledgermq.testing.chaos.rolling [--groups 2]`` (loopback, no root);
tests/chaos/test_rolling_restart.py runs a short one in CI.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import itertools
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ledgermq.bench.processes import child_env, ledgermq_command
from ledgermq.client import Admin, SyncAdmin
from ledgermq.client.readiness import replica_status
from ledgermq.errors import LedgerMQError
from ledgermq.testing.chaos.checker import Report, check, format_report
from ledgermq.testing.chaos.cluster import ChaosCluster, replica_name
from ledgermq.testing.chaos.history import QUEUE_STRIDE, FaultRecord, History, Outcome
from ledgermq.testing.chaos.workload import Workload, consume_all, read_replica, run_as_client

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ledgermq.testing.chaos.history import SendOp

__all__ = ["Restart", "RollingOptions", "RollingResult", "longest_gap", "run_rolling"]

TOPIC: Final = "RollingTopic"
_READY_WAIT_S: Final = 60.0
_SETTLE_S: Final = 30.0
_CONSUME_S: Final = 60.0


@dataclass(frozen=True)
class RollingOptions:
    groups: int = 2
    producers: int = 3
    queues: int = 4
    warmup_s: float = 3.0
    """Load before the first restart (the baseline is measured in it)."""
    pause_s: float = 2.0
    """Load between a replica's ``--ready`` and the next stop."""
    base_dir: str | None = None
    keep: bool = False


@dataclass
class Restart:
    """One replica's restart, times in ms from the run's origin."""

    group: str
    node: str
    was_master: bool
    stop_ms: float
    stopped_ms: float
    ready_ms: float
    exit_code: int
    group_gap_ms: float = 0.0
    any_gap_ms: float = 0.0
    failed_sends: int = 0
    """Sends invoked in the window that were not acknowledged (failed or unknown outcome)."""

    def line(self) -> str:
        kind = "master" if self.was_master else "follower"
        return (
            f"{self.group} {self.node} ({kind}): stop->ready {self.ready_ms - self.stop_ms:.0f} ms"
            f" (stopped in {self.stopped_ms - self.stop_ms:.0f} ms, exit {self.exit_code}); "
            f"longest without an ack in {self.group} {self.group_gap_ms:.0f} ms, "
            f"in any group {self.any_gap_ms:.0f} ms; unacknowledged sends {self.failed_sends}"
        )


@dataclass
class RollingResult:
    report: Report
    history: History
    restarts: list[Restart] = field(default_factory=list)
    baseline_ms: float = 0.0
    base_dir: Path | None = None

    def summary(self) -> str:
        lines = [f"baseline (before any restart): longest without an ack {self.baseline_ms:.0f} ms"]
        lines += [restart.line() for restart in self.restarts]
        masters = [r.group_gap_ms for r in self.restarts if r.was_master]
        followers = [r.group_gap_ms for r in self.restarts if not r.was_master]
        lines.append(
            f"worst in the group: master restart {max(masters, default=0):.0f} ms, "
            f"follower restart {max(followers, default=0):.0f} ms"
        )
        return "\n".join([*lines, format_report(self.report)])


def longest_gap(acked_ms: Sequence[float], start_ms: float, end_ms: float) -> float:
    """The longest stretch of ``[start_ms, end_ms]`` without a time of ``acked_ms`` (sorted)."""
    inside = acked_ms[
        bisect.bisect_right(acked_ms, start_ms) : bisect.bisect_left(acked_ms, end_ms)
    ]
    points = [start_ms, *inside, end_ms]
    return max(b - a for a, b in itertools.pairwise(points))


def _ready_command(cluster: ChaosCluster, group: str, node: str | None) -> list[str]:
    target = ["--id", node] if node is not None else []
    return ledgermq_command(
        "admin", "-n", cluster.namesrv_addr, "replica-status", "-b", group, *target,
        "--ready", "--wait", str(_READY_WAIT_S),
    )  # fmt: skip


def _wait_ready(
    cluster: ChaosCluster, group: str, node: str | None, log: Callable[[str], None]
) -> None:
    """``replica-status --ready --wait`` as a command; AssertionError with its output if not."""
    done = subprocess.run(
        _ready_command(cluster, group, node),
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=_READY_WAIT_S + 30,
        check=False,
    )
    verdict = done.stdout.strip().splitlines()[-1:] or [done.stderr.strip()]
    log(f"  replica-status {group} {node or ''} --ready: exit {done.returncode}: {verdict[0]}")
    if done.returncode != 0:
        raise AssertionError(f"{group} {node} not ready: {done.stdout}{done.stderr}")


def run_rolling(options: RollingOptions, log: Callable[[str], None]) -> RollingResult:
    """The module docstring's run; the result carries the checker's report and the figures."""
    base = Path(options.base_dir or tempfile.mkdtemp(prefix="ledgermq-rolling-"))
    base.mkdir(parents=True, exist_ok=True)
    cluster = ChaosCluster(base / "cluster", lab=None, groups=options.groups)
    origin = time.monotonic()
    history = History(seed=0, queues=options.queues)
    restarts: list[Restart] = []
    try:
        cluster.start()
        cluster.wait_routable(timeout_s=30.0)
        with SyncAdmin(cluster.namesrv_addr) as admin:
            admin.create_topic(TOPIC, options.queues, wait_s=20.0)
        log(f"cluster up: {options.groups} group(s), NameServer {cluster.namesrv_addr}")
        workload = Workload(cluster.namesrv_addr, TOPIC, producers=options.producers, origin=origin)
        workload.start()
        try:
            time.sleep(options.warmup_s)
            _roll(cluster, workload, options.pause_s, history, restarts, log)
        finally:
            workload.stop()
            history.sends = sorted(workload.sends, key=lambda op: op.invoke_ms)
            history.notes += workload.errors
        _settle(cluster, log)
        _read_and_consume(cluster, options.queues, history, log)
    finally:
        cluster.close()
    result = RollingResult(check(history), history, restarts, base_dir=base)
    _measure(result, cluster.groups)
    if result.report.valid and not options.keep and options.base_dir is None:
        shutil.rmtree(base, ignore_errors=True)
        result.base_dir = None
    return result


def _roll(
    cluster: ChaosCluster,
    workload: Workload,
    pause_s: float,
    history: History,
    restarts: list[Restart],
    log: Callable[[str], None],
) -> None:
    """Restart every replica, group by group, followers first, waiting for ``--ready``. The
    roles are read again before each stop: a group's leadership may move between restarts (a
    preferred leader taking it back, an election), and a restart is a master's when the replica
    leads at its SIGTERM, whatever it led before."""
    for group in cluster.groups:
        remaining = list(cluster.nodes)
        while remaining:
            _wait_ready(cluster, group, None, log)
            master = cluster.wait_master(group, timeout_s=30.0)
            followers = [n for n in remaining if n != master]
            node = followers[0] if followers else remaining[0]
            remaining.remove(node)
            stop_ms = workload.now_ms()
            code = cluster.terminate(group, node)
            stopped_ms = workload.now_ms()
            cluster.start_replica(group, node)
            _wait_ready(cluster, group, node, log)
            ready_ms = workload.now_ms()
            restarts.append(
                Restart(group, node, node == master, stop_ms, stopped_ms, ready_ms, code)
            )
            history.faults.append(
                FaultRecord("restart", (replica_name(group, node),), stop_ms, ready_ms)
            )
            log(f"restarted {group} {node}{' (master)' if node == master else ''}")
            time.sleep(pause_s)


def _read_and_consume(
    cluster: ChaosCluster, queues: int, history: History, log: Callable[[str], None]
) -> None:
    """Read every replica, then consume everything acknowledged or stored, into ``history``."""
    history.replica_groups = {
        replica_name(group, node): index
        for index, group in enumerate(cluster.groups)
        for node in cluster.nodes
    }
    for group in cluster.groups:
        for node in cluster.nodes:
            name = replica_name(group, node)
            try:
                history.replica_reads[name], history.replica_first[name] = read_replica(
                    cluster, group, node, TOPIC, queues
                )
            except LedgerMQError as exc:
                history.replica_errors[name] = str(exc)
    expected = {(op.producer, op.seq) for op in history.sends if op.outcome is Outcome.OK}
    for reads in history.replica_reads.values():
        expected |= {(read.producer, read.seq) for read in reads}
    log(f"{len(history.sends)} sends; consuming {len(expected)} distinct messages")
    history.consumed = run_as_client(
        None, lambda: consume_all(cluster.namesrv_addr, TOPIC, expected, timeout_s=_CONSUME_S)
    )


def _settle(cluster: ChaosCluster, log: Callable[[str], None]) -> None:
    """Until every replica of every group holds the whole committed log (max lag 0), so that
    reading them shows what they keep, not what is still in flight; bounded by ``_SETTLE_S``."""

    async def caught_up() -> bool:
        admin = Admin(cluster.namesrv_addr)
        await admin.start()
        try:
            for group in cluster.groups:
                if not (await replica_status(admin, group, max_lag=0)).ready:
                    return False
            return True
        finally:
            await admin.close()

    deadline = time.monotonic() + _SETTLE_S
    while not asyncio.run(caught_up()):
        if time.monotonic() >= deadline:
            log(f"the replicas did not all catch up within {_SETTLE_S:g} s; reading them anyway")
            return
        time.sleep(0.5)


def _measure(result: RollingResult, groups: Sequence[str]) -> None:
    """Fill each restart's gaps and the baseline from the history's sends."""
    sends: list[SendOp] = result.history.sends
    acked = sorted(op.complete_ms for op in sends if op.outcome is Outcome.OK)
    by_group = {
        index: sorted(
            op.complete_ms
            for op in sends
            if op.outcome is Outcome.OK and op.queue // QUEUE_STRIDE == index
        )
        for index in range(len(groups))
    }
    if acked and result.restarts:
        first_stop = result.restarts[0].stop_ms
        start = min(acked[0] + 1000.0, first_stop)
        result.baseline_ms = max(
            longest_gap(times, start, first_stop) for times in by_group.values() if times
        )
    for restart in result.restarts:
        times = by_group[groups.index(restart.group)]
        restart.group_gap_ms = longest_gap(times, restart.stop_ms, restart.ready_ms)
        restart.any_gap_ms = longest_gap(acked, restart.stop_ms, restart.ready_ms)
        restart.failed_sends = sum(
            1
            for op in sends
            if restart.stop_ms <= op.invoke_ms <= restart.ready_ms and op.outcome is not Outcome.OK
        )


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ledgermq.testing.chaos.rolling",
        description="restart every replica one by one under load; the figures and the verdict",
        allow_abbrev=False,
    )
    parser.add_argument("--groups", type=int, default=2)
    parser.add_argument("--producers", type=int, default=3)
    parser.add_argument("--pause", type=float, default=2.0, help="seconds of load between restarts")
    parser.add_argument("--dir", help="keep the cluster's files and logs here")
    args = parser.parse_args(argv)
    result = run_rolling(
        RollingOptions(
            groups=args.groups, producers=args.producers, pause_s=args.pause, base_dir=args.dir
        ),
        _say,
    )
    sys.stdout.write(result.summary() + "\n")
    return 0 if result.report.valid else 1


if __name__ == "__main__":
    sys.exit(main())
