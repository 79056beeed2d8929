"""LedgerMQ in the peers benchmark: a NameServer and one 3-replica broker group as processes.

The same code as ``benchmarks/broker.py`` drives it (``run_produce`` / ``run_consume`` with a
``CpuMeter`` over the NameServer and the replicas); this module only starts the processes, since
``ledgermq.testing`` (where ``BrokerCluster`` lives) is a layer above ``bench``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import TYPE_CHECKING, Final

from benchmarks.peers.servers import ServerProcess
from ledgermq.bench.broker import ConsumeOptions, ProduceOptions, run_consume, run_produce
from ledgermq.bench.cpu import CpuMeter
from ledgermq.bench.processes import HOST, child_env, free_ports, ledgermq_command
from ledgermq.client import Admin
from ledgermq.errors import LedgerMQError

if TYPE_CHECKING:
    from pathlib import Path

    from benchmarks.peers.workloads import Workload
    from ledgermq.bench.stats import RunResult

__all__ = ["DURABILITY", "LedgerMQSystem"]

DURABILITY: Final = {
    "ASYNC_FLUSH": "majority in memory, flushed every 10 ms",
    "SYNC_FLUSH": "fsynced on a majority",
}
_START_TIMEOUT_S: Final = 30.0
_TOPICS: Final = {
    "produce batched": "PeersBatched",
    "produce single": "PeersSingle",
    "sequential": "PeersSequential",
    "latency @10k/s": "PeersLatency",
}


class LedgerMQSystem:
    """LedgerMQ with ``flush`` (``ASYNC_FLUSH`` or ``SYNC_FLUSH``), driven by our Python client."""

    client: str = "our Python client"
    baseline: str | None = None

    def __init__(self, flush: str) -> None:
        self.flush = flush
        self.key = f"LedgerMQ {flush}"
        self.durability = DURABILITY[flush]
        self._servers: list[ServerProcess] = []
        self._namesrv = ""

    def unavailable(self) -> str | None:
        return None

    def start(self, workdir: Path) -> None:
        namesrv_port, *ports = free_ports(7)
        broker_ports, ledger_ports = ports[:3], ports[3:]
        env = child_env()
        namesrv = ServerProcess("ledgermq namesrv", workdir / "namesrv.log")
        self._servers.append(namesrv)
        namesrv.spawn(ledgermq_command("namesrv", "--listen-port", str(namesrv_port)), env)
        namesrv.wait_port(namesrv_port, _START_TIMEOUT_S)
        self._namesrv = f"{HOST}:{namesrv_port}"
        peers = ";".join(f"n{i}-{HOST}:{port}" for i, port in enumerate(ledger_ports))
        for i, port in enumerate(broker_ports):
            broker = ServerProcess(f"ledgermq broker n{i}", workdir / f"n{i}.log")
            self._servers.append(broker)
            broker.spawn(
                ledgermq_command(
                    "broker",
                    "--broker-name", "broker-a",
                    "--self-id", f"n{i}",
                    "--peers", peers,
                    "--listen-port", str(port),
                    "--namesrv-addr", self._namesrv,
                    "--store-dir", str(workdir / f"n{i}"),
                    f"--set=flushDiskType={self.flush}",
                    f"--set=mappedFileSizeCommitLog={256 << 20}",
                    "--set=grpcServerPort=0",  # three replicas on one host: each its own
                ),
                env,
            )  # fmt: skip
        for broker, port in zip(self._servers[1:], broker_ports, strict=True):
            broker.wait_port(port, _START_TIMEOUT_S)
        asyncio.run(self._create_topics())

    async def _create_topics(self) -> None:
        admin = Admin(self._namesrv)
        await admin.start()
        try:
            deadline = time.monotonic() + _START_TIMEOUT_S
            for topic in _TOPICS.values():
                await admin.create_topic(topic, 8, wait_s=max(0.0, deadline - time.monotonic()))
        except LedgerMQError as exc:
            tails = "\n".join(f"--- {s.name}\n{s.log_tail()}" for s in self._servers)
            raise LedgerMQError(f"LedgerMQ did not come up: {exc}\n{tails}") from exc
        finally:
            await admin.close()

    def server_pids(self) -> list[int]:
        return [pid for server in self._servers for pid in server.pids()]

    async def run(self, workload: Workload, duration_s: float) -> RunResult | None:
        meter = CpuMeter(self.server_pids())
        if workload.consume:
            options = ConsumeOptions(
                self._namesrv, _TOPICS["produce batched"], duration_s=30.0, mode=workload.name
            )
            result = await run_consume(options, meter=meter)
            return _relabel(result, self.key)
        produce = ProduceOptions(
            self._namesrv,
            _TOPICS[workload.name],
            batch=workload.batch,
            producers=workload.producers,
            duration_s=duration_s,
            rate=workload.rate,
            mode=workload.name,
        )
        return _relabel(await run_produce(produce, meter=meter), self.key)

    def close(self) -> None:
        for server in reversed(self._servers):
            server.kill()
        self._servers.clear()


def _relabel(result: RunResult, key: str) -> RunResult:
    return dataclasses.replace(result, system=key)
