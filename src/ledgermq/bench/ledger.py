"""``ledgermq ledger bench``: three replica processes on loopback, driven by concurrent clients.

Each workload starts a fresh group (3 ``ledgermq ledger serve`` processes, a fresh store
directory, the workload's flush policy), waits for a leader, then keeps ``clients`` appends of
``batch`` bodies outstanding: every client is its own ``AsyncLedgerClient`` (its own
connections) running append after append. A warm-up is not measured. The driver runs on one
event loop (uvloop when installed) in this process, so it competes with the replicas for the
same two vCPUs, as a real co-located client would.

Failover: with one client appending continuously, the leader is killed with SIGKILL; the
figure is the time from the kill to the first append acknowledged by the new leader. The killed
replica is restarted and the next trial kills whoever leads then.

In the same run the same workloads go to PySyncObj (``benchmarks.peers.pysyncobj_log``) when
it is installed, and the ``flush=sync`` ones to a 3-member etcd (``benchmarks.peers.etcd_log``:
fsync on a majority before the answer, like ``sync``) when it is installed; the table shows a
ratio per peer. Those drivers are the clone's (``benchmarks/``, not installed): an installed
package measures LedgerMQ alone and says so in one line.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ledgermq.bench.checkout import CloneOnlyError, import_from_clone
from ledgermq.bench.processes import (
    HOST,
    child_env,
    free_ports,
    ledgermq_command,
    log_tail,
    stop_processes,
)
from ledgermq.bench.stats import LatencyRecorder, Progress, RunResult
from ledgermq.errors import BenchmarkError, LedgerMQError
from ledgermq.ledger.client import AsyncLedgerClient
from ledgermq.net import run

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = [
    "DEFAULT_WORKLOADS",
    "BenchOptions",
    "LedgerGroup",
    "Workload",
    "measure_failover",
    "run_bench",
    "run_ledger",
]

_READY_TIMEOUT_S: Final = 30.0
_COMPARISONS: Final = "The PySyncObj and etcd comparisons"
_ETCD_CLUSTER: Final = "benchmarks.peers.etcd_cluster"
_ETCD_LOG: Final = "benchmarks.peers.etcd_log"
_PYSYNCOBJ_LOG: Final = "benchmarks.peers.pysyncobj_log"
_GROUP: Final = "bench"


@dataclass(frozen=True, slots=True)
class Workload:
    mode: str
    clients: int
    batch: int
    flush: str


class LedgerGroup:
    """Three replica processes of one group, in ``workdir``; always ``close()`` it."""

    def __init__(self, workdir: str, flush: str, *, replicas: int = 3) -> None:
        self.workdir = workdir
        self.flush = flush
        self.ids = [f"n{i}" for i in range(replicas)]
        ports = free_ports(replicas)
        self.addresses = {node: (HOST, port) for node, port in zip(self.ids, ports, strict=True)}
        self.peers = ";".join(f"{n}-{h}:{p}" for n, (h, p) in self.addresses.items())
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def log_path(self, node: str) -> str:
        return os.path.join(self.workdir, f"{node}.log")

    def start(self, node: str) -> None:
        command = ledgermq_command(
            "ledger", "serve", "--group", _GROUP, "--id", node, "--peers", self.peers,
            "--store-dir", self.workdir, "--flush", self.flush,
        )  # fmt: skip
        with open(self.log_path(node), "ab") as log:
            self.processes[node] = subprocess.Popen(  # noqa: S603 - our own command line
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=child_env(),
                start_new_session=True,
            )

    def start_all(self) -> None:
        for node in self.ids:
            self.start(node)

    def kill(self, node: str) -> None:
        process = self.processes.pop(node)
        process.send_signal(signal.SIGKILL)
        process.wait()

    async def wait_for_leader(self, client: AsyncLedgerClient) -> str:
        """Append until one is acknowledged; returns the leader's id."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _READY_TIMEOUT_S
        while loop.time() < deadline:
            self._check_alive()
            try:
                await client.append(b"ready?")
            except LedgerMQError:
                await asyncio.sleep(0.05)
                continue
            assert client.leader is not None
            return client.leader
        tails = "\n".join(f"--- {n}\n{log_tail(self.log_path(n))}" for n in self.processes)
        raise BenchmarkError(f"no leader within {_READY_TIMEOUT_S:g} s; logs:\n{tails}")

    def _check_alive(self) -> None:
        for node, process in self.processes.items():
            if process.poll() is not None:
                raise BenchmarkError(
                    f"replica {node} exited with {process.returncode}; the end of its log:\n"
                    f"{log_tail(self.log_path(node))}"
                )

    def client(self, **options: Any) -> AsyncLedgerClient:
        return AsyncLedgerClient(_GROUP, dict(self.addresses), **options)

    def close(self) -> None:
        stop_processes(list(self.processes.values()))
        self.processes.clear()


async def _drive(
    group: LedgerGroup,
    workload: Workload,
    *,
    body_bytes: int,
    warmup_s: float,
    duration_s: float,
    progress: Progress | None,
) -> RunResult:
    clients = [group.client() for _ in range(workload.clients)]
    try:
        await group.wait_for_leader(clients[0])
        for c in clients[1:]:
            c.leader = clients[0].leader
        bodies = [os.urandom(body_bytes) for _ in range(workload.batch)]
        start = time.perf_counter()
        measure_from = start + warmup_s
        end = measure_from + duration_s
        latencies = LatencyRecorder()
        counters = {"entries": 0, "errors": 0}

        async def one_client(client: AsyncLedgerClient) -> None:
            clock = time.perf_counter  # uvloop's loop.time() ticks in whole milliseconds
            while True:
                t0 = clock()
                if t0 >= end:
                    return
                try:
                    if workload.batch == 1:
                        await client.append(bodies[0])
                    else:
                        await client.append_batch(bodies)
                except LedgerMQError:
                    counters["errors"] += 1
                    continue
                t1 = clock()
                if t0 >= measure_from and t1 <= end:
                    latencies.record(t1 - t0)
                    counters["entries"] += workload.batch

        async def report() -> None:
            while time.perf_counter() < end:
                await asyncio.sleep(0.2)
                now = time.perf_counter()
                if progress is not None and now > measure_from:
                    progress.update(
                        f"ledgermq {workload.mode}", now - measure_from, duration_s,
                        counters["entries"],
                    )  # fmt: skip

        reporter = asyncio.ensure_future(report())
        await asyncio.gather(*(one_client(c) for c in clients))
        reporter.cancel()
        if progress is not None:
            progress.finish()
        seconds = duration_s
        return RunResult(
            system="ledgermq",
            mode=workload.mode,
            clients=workload.clients,
            batch=workload.batch,
            body_bytes=body_bytes,
            flush=workload.flush,
            entries=counters["entries"],
            seconds=seconds,
            entries_per_s=counters["entries"] / seconds,
            p50_ms=latencies.percentile(50),
            p99_ms=latencies.percentile(99),
            max_ms=latencies.max_ms(),
            errors=counters["errors"],
            note="3 replica processes; clients over TCP from the driver process",
        )
    finally:
        for c in clients:
            await c.close()


def run_ledger(
    workload: Workload,
    *,
    body_bytes: int,
    duration_s: float,
    warmup_s: float = 1.0,
    workdir: str | None = None,
    progress: Progress | None = None,
) -> RunResult:
    """One workload on a fresh 3-replica group; the processes are always reaped."""
    with tempfile.TemporaryDirectory(prefix="ledgermq-bench-", dir=workdir) as tmp:
        group = LedgerGroup(tmp, workload.flush)
        try:
            group.start_all()
            drive = _drive(
                group,
                workload,
                body_bytes=body_bytes,
                warmup_s=warmup_s,
                duration_s=duration_s,
                progress=progress,
            )
            return run(drive)
        finally:
            group.close()


async def _failover_trials(group: LedgerGroup, trials: int) -> list[float]:
    client = group.client(request_timeout_s=0.5, retry_timeout_s=20.0)
    times: list[float] = []
    try:
        leader = await group.wait_for_leader(client)
        for _ in range(trials):
            await client.append(b"before")
            killed_at = time.monotonic()
            group.kill(leader)
            while True:
                try:
                    await client.append(b"after")
                except LedgerMQError:
                    continue
                break
            times.append(time.monotonic() - killed_at)
            new_leader = client.leader
            assert new_leader is not None
            assert new_leader != leader
            group.start(leader)
            await asyncio.sleep(1.0)  # let the restarted replica rejoin before the next kill
            leader = new_leader
    finally:
        await client.close()
    return times


def measure_failover(trials: int, *, workdir: str | None = None) -> list[float]:
    """Seconds from SIGKILL of the leader to the first append acknowledged after it."""
    with tempfile.TemporaryDirectory(prefix="ledgermq-failover-", dir=workdir) as tmp:
        group = LedgerGroup(tmp, "async")
        try:
            group.start_all()
            return run(_failover_trials(group, trials))
        finally:
            group.close()


DEFAULT_WORKLOADS: Final = (
    Workload("single", 1, 1, "async"),
    Workload("clients", 16, 1, "async"),
    Workload("batched", 4, 1024, "async"),
    Workload("single", 1, 1, "sync"),
    Workload("clients", 16, 1, "sync"),
    Workload("batched", 4, 1024, "sync"),
)
"""Single appends from one client; many clients; batched appends (1 MiB requests, Kafka's
``max.request.size``); each flush policy (sync has all three: etcd is compared with them)."""


def pysyncobj_available() -> bool:
    try:
        import pysyncobj  # noqa: F401, PLC0415
    except ImportError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class BenchOptions:
    workloads: Sequence[Workload] = DEFAULT_WORKLOADS
    body_bytes: int = 1024
    duration_s: float = 5.0
    warmup_s: float = 1.0
    pysyncobj: bool = True
    etcd: bool = True
    failover_trials: int = 5
    json_path: str | None = None
    workdir: str | None = None


def run_bench(options: BenchOptions, out: Any = None) -> dict[str, Any]:
    """Every workload on LedgerMQ (and PySyncObj and etcd), then failover; prints the table.

    Replicas are started and killed on purpose, so the client's reconnect warnings are noise:
    the peer logger is quiet while it runs and left as it was found (run in-process by tests,
    a raised level made later tests of that logger see nothing)."""
    peer_log = logging.getLogger("ledgermq.net.peer")
    level = peer_log.level
    peer_log.setLevel(logging.ERROR)
    try:
        return _run_bench(options, out)
    finally:
        peer_log.setLevel(level)


@dataclass(frozen=True)
class _PeerDrivers:
    """The clone's PySyncObj and etcd drivers (``benchmarks.peers``), looked up by name."""

    etcd_unavailable: Callable[[str], str | None]
    etcd_applies: Callable[[str, int], bool]
    run_etcd: Callable[..., RunResult]
    run_pysyncobj: Callable[..., RunResult]


def _peer_drivers(options: BenchOptions, out: Any) -> _PeerDrivers | None:
    """The comparisons' drivers when any is asked for and this is a clone; else None, with one
    line saying why when they were asked for."""
    if not (options.pysyncobj or options.etcd):
        return None
    try:
        etcd_cluster = import_from_clone(_ETCD_CLUSTER, _COMPARISONS)
    except CloneOnlyError as exc:
        print(f"{exc}; measuring LedgerMQ alone", file=out)
        return None
    etcd_log = importlib.import_module(_ETCD_LOG)
    pysyncobj_log = importlib.import_module(_PYSYNCOBJ_LOG)
    return _PeerDrivers(
        etcd_unavailable=etcd_cluster.etcd_unavailable,
        etcd_applies=etcd_log.applies,
        run_etcd=etcd_log.run_etcd,
        run_pysyncobj=pysyncobj_log.run_pysyncobj,
    )


def _run_bench(options: BenchOptions, out: Any = None) -> dict[str, Any]:
    from ledgermq.bench.stats import format_table, write_json  # noqa: PLC0415

    out = out or sys.stdout
    progress = Progress()
    peers = _peer_drivers(options, out)
    compare = peers is not None and options.pysyncobj and pysyncobj_available()
    etcd_skipped = peers.etcd_unavailable("etcd comparison") if peers and options.etcd else None
    with_etcd = peers is not None and options.etcd and etcd_skipped is None
    results: list[RunResult] = []
    for workload in options.workloads:
        results.append(
            run_ledger(
                workload,
                body_bytes=options.body_bytes,
                duration_s=options.duration_s,
                warmup_s=options.warmup_s,
                workdir=options.workdir,
                progress=progress,
            )
        )
        if compare and peers is not None:
            with tempfile.TemporaryDirectory(prefix="pysyncobj-", dir=options.workdir) as tmp:
                results.append(
                    peers.run_pysyncobj(
                        mode=workload.mode,
                        clients=workload.clients,
                        batch=workload.batch,
                        body_bytes=options.body_bytes,
                        duration_s=options.duration_s,
                        flush=workload.flush,
                        workdir=tmp,
                        progress=progress,
                        warmup_s=options.warmup_s,
                    )
                )
        if with_etcd and peers is not None and peers.etcd_applies(workload.flush, workload.batch):
            results.append(
                peers.run_etcd(
                    mode=workload.mode,
                    clients=workload.clients,
                    batch=workload.batch,
                    body_bytes=options.body_bytes,
                    duration_s=options.duration_s,
                    flush=workload.flush,
                    warmup_s=options.warmup_s,
                    workdir=options.workdir,
                    progress=progress,
                )
            )
    ratios = [("ledgermq", "pysyncobj")] if compare else []
    if with_etcd:
        ratios.append(("ledgermq", "etcd"))
    print(format_table(results, ratios=ratios), file=out)
    if peers is not None and options.pysyncobj and not compare:
        print("PySyncObj comparison skipped: pip install 'ledgermq[bench]'", file=out)
    if etcd_skipped is not None:
        print(etcd_skipped, file=out)
    failover: list[float] = []
    if options.failover_trials > 0:
        failover = measure_failover(options.failover_trials, workdir=options.workdir)
        ms = sorted(t * 1000 for t in failover)
        print(
            f"\nfailover (kill -9 of the leader -> first acknowledged append on the new leader), "
            f"{len(ms)} trials: median {statistics.median(ms):.0f} ms, min {ms[0]:.0f} ms, "
            f"max {ms[-1]:.0f} ms",
            file=out,
        )
    meta = {
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "duration_s": options.duration_s,
        "warmup_s": options.warmup_s,
        "failover_s": failover,
        "failover_median_s": statistics.median(failover) if failover else None,
    }
    if options.json_path:
        write_json(options.json_path, results, meta)
        print(f"results written to {options.json_path}", file=out)
    return {"results": results, "meta": meta}
