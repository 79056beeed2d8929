"""etcd as a 3-member replicated log: a comparison side of ``ledgermq ledger bench``.

An entry is a put of one body under its own key; a batch of ``batch`` bodies is one transaction
of that many puts (one Raft entry, as ``append_batch`` is one request; etcd takes up to
``MAX_TXN_OPS`` = 1024 operations per transaction with the limit we start it with). etcd answers
once its WAL is fsynced on a majority, so only the ledger's ``flush=sync`` workloads are compared
(``applies``). The load is the ledger driver's: ``clients`` connections to the leader, each with
one request outstanding, a warm-up first; the client is ``bench.etcd_client`` (grpcio's
asyncio API, in this process).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final

from benchmarks.peers.etcd_client import EtcdError
from benchmarks.peers.etcd_cluster import MAX_TXN_OPS, EtcdCluster
from ledgermq.bench.stats import LatencyRecorder, RunResult
from ledgermq.errors import BenchmarkError
from ledgermq.net import run

if TYPE_CHECKING:
    from benchmarks.peers.etcd_client import EtcdClient
    from ledgermq.bench.stats import Progress

__all__ = ["NOTE", "SYSTEM", "applies", "run_etcd"]

SYSTEM: Final = "etcd"
NOTE: Final = (
    "3 members, WAL fsynced on a majority; a batch = one txn of puts; asyncio gRPC client "
    "(grpcio, protobuf by hand), connections to the leader"
)


def applies(flush: str, batch: int) -> bool:
    """etcd is compared with the ledger's ``flush=sync`` workloads whose batch fits one txn."""
    return flush == "sync" and batch <= MAX_TXN_OPS


def run_etcd(
    *,
    mode: str,
    clients: int,
    batch: int,
    body_bytes: int,
    duration_s: float,
    flush: str,
    warmup_s: float = 1.0,
    workdir: str | None = None,
    progress: Progress | None = None,
) -> RunResult:
    """One workload on a fresh 3-member cluster; the members are always killed."""
    if not applies(flush, batch):
        raise BenchmarkError(f"etcd is compared with flush=sync and batches <= {MAX_TXN_OPS}")
    with tempfile.TemporaryDirectory(prefix="etcd-bench-", dir=workdir) as tmp:
        cluster = EtcdCluster(Path(tmp))
        try:
            cluster.start()
            return run(
                _drive(
                    cluster,
                    mode=mode,
                    clients=clients,
                    batch=batch,
                    body_bytes=body_bytes,
                    duration_s=duration_s,
                    flush=flush,
                    warmup_s=warmup_s,
                    progress=progress,
                )
            )
        finally:
            cluster.close()


async def _drive(
    cluster: EtcdCluster,
    *,
    mode: str,
    clients: int,
    batch: int,
    body_bytes: int,
    duration_s: float,
    flush: str,
    warmup_s: float,
    progress: Progress | None,
) -> RunResult:
    leader = await cluster.leader_index()
    connections = [cluster.client(leader) for _ in range(clients)]
    value = b"x" * body_bytes
    start = time.perf_counter()
    measure_from = start + warmup_s
    end = measure_from + duration_s
    latencies = LatencyRecorder()
    counters = {"entries": 0, "errors": 0}

    async def one_client(index: int, client: EtcdClient) -> None:
        sequence = 0
        while True:
            t0 = time.perf_counter()
            if t0 >= end:
                return
            keys = [b"log/%02d/%012d" % (index, sequence + i) for i in range(batch)]
            sequence += batch
            try:
                if batch == 1:
                    await client.put(keys[0], value)
                else:
                    await client.put_many([(key, value) for key in keys])
            except EtcdError:
                counters["errors"] += 1
                await asyncio.sleep(0.01)
                continue
            t1 = time.perf_counter()
            if t0 >= measure_from and t1 <= end:
                latencies.record(t1 - t0)
                counters["entries"] += batch

    async def report() -> None:
        while time.perf_counter() < end:
            await asyncio.sleep(0.2)
            now = time.perf_counter()
            if progress is not None and now > measure_from:
                progress.update(f"etcd {mode}", now - measure_from, duration_s, counters["entries"])

    reporter = asyncio.ensure_future(report())
    try:
        await asyncio.gather(*(one_client(i, c) for i, c in enumerate(connections)))
    finally:
        reporter.cancel()
        for client in connections:
            await client.close()
    if progress is not None:
        progress.finish()
    return RunResult(
        system=SYSTEM,
        mode=mode,
        clients=clients,
        batch=batch,
        body_bytes=body_bytes,
        flush=flush,
        entries=counters["entries"],
        seconds=duration_s,
        entries_per_s=counters["entries"] / duration_s,
        p50_ms=latencies.percentile(50),
        p99_ms=latencies.percentile(99),
        max_ms=latencies.max_ms(),
        errors=counters["errors"],
        note=NOTE,
    )
