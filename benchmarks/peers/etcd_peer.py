"""etcd in the peers benchmark: 3 members, a message is a put of a 1 KiB value.

etcd is a key-value store, not a broker, but its write path is the same Raft log with an fsync
on a majority before the answer, so it is compared with LedgerMQ ``SYNC_FLUSH``: a single send is
one put, a batch of 64 is one transaction of 64 puts (one Raft entry), each message under its own
key. Consume is a range read, in key order and 256 keys per request, of what the batched workload
stored. The client is ``bench.etcd_client`` (grpcio's asyncio API, messages encoded by hand, in
this process), one channel per producer, all to the leader.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Final

from benchmarks.peers.etcd_client import EtcdError
from benchmarks.peers.etcd_cluster import EtcdCluster, etcd_binary, etcd_unavailable
from benchmarks.peers.servers import PeerUnavailableError
from benchmarks.peers.workloads import BODY_BYTES, drive_produce, result_of
from ledgermq.bench.cpu import CpuMeter
from ledgermq.bench.stats import LatencyRecorder

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    from benchmarks.peers.etcd_client import EtcdClient
    from benchmarks.peers.workloads import Workload
    from ledgermq.bench.stats import RunResult

__all__ = ["DURABILITY", "EtcdSystem", "key_prefix"]

DURABILITY: Final = "WAL fsynced on a majority"
_READ_LIMIT: Final = 256
_CONSUME_LIMIT_S: Final = 30.0
_BATCHED: Final = "produce batched"


def key_prefix(workload: str) -> bytes:
    """Where a workload's keys live: ``bench/<workload>/`` with spaces and symbols dropped."""
    return b"bench/" + "".join(c for c in workload if c.isalnum()).encode() + b"/"


class EtcdSystem:
    """A 3-member etcd cluster driven by our asyncio gRPC client (grpcio)."""

    key: str = "etcd"
    client: str = "grpcio asyncio (Python), protobuf by hand; batch = txn of puts"
    durability: str = DURABILITY
    baseline: str | None = "LedgerMQ SYNC_FLUSH"

    def __init__(self, path: str | None = None) -> None:
        self._path = path
        self._cluster: EtcdCluster | None = None
        self._leader = 0

    def unavailable(self) -> str | None:
        return etcd_unavailable("etcd", self._path)

    def start(self, workdir: Path) -> None:
        if etcd_binary(self._path) is None:
            raise PeerUnavailableError(self.unavailable() or "etcd is not installed")
        self._cluster = EtcdCluster(workdir, self._path)
        self._cluster.start()
        self._leader = asyncio.run(self._cluster.leader_index())

    def server_pids(self) -> list[int]:
        return self._cluster.pids() if self._cluster is not None else []

    async def run(self, workload: Workload, duration_s: float) -> RunResult | None:
        assert self._cluster is not None
        meter = CpuMeter(self.server_pids())
        if workload.consume:
            client = self._cluster.client(self._leader)
            try:
                return await self._consume(client, workload, meter)
            finally:
                await client.close()
        clients = [self._cluster.client(self._leader) for _ in range(workload.producers)]
        prefix = key_prefix(workload.name)
        value = b"x" * BODY_BYTES

        def sender(index: int, client: EtcdClient) -> Callable[[int], Awaitable[None]]:
            sequence = 0

            async def send(count: int) -> None:
                nonlocal sequence
                keys = [b"%s%02d/%012d" % (prefix, index, sequence + i) for i in range(count)]
                sequence += count
                if count == 1:
                    await client.put(keys[0], value)
                else:
                    await client.put_many([(key, value) for key in keys])

            return send

        try:
            senders = [sender(i, c) for i, c in enumerate(clients)]
            return await drive_produce(
                self.key,
                workload,
                senders,
                duration_s=duration_s,
                meter=meter,
                errors_caught=(EtcdError,),
            )
        finally:
            for client in clients:
                await client.close()

    async def _consume(self, client: EtcdClient, workload: Workload, meter: CpuMeter) -> RunResult:
        prefix = key_prefix(_BATCHED)
        end = prefix[:-1] + bytes([prefix[-1] + 1])
        latencies = LatencyRecorder()
        received = 0
        start = prefix
        loop = asyncio.get_running_loop()
        meter.start()
        begin = loop.time()
        while loop.time() - begin < _CONSUME_LIMIT_S:
            sent = loop.time()
            items = await client.range(start, end, _READ_LIMIT)
            latencies.record(loop.time() - sent)
            received += len(items)
            if len(items) < _READ_LIMIT:
                break
            start = items[-1][0] + b"\0"
        seconds = loop.time() - begin
        meter.stop()
        return result_of(
            self.key,
            workload,
            messages=received,
            seconds=seconds,
            latencies=latencies,
            meter=meter,
            clients=1,
            batch=_READ_LIMIT,
            note=f"range reads of {_READ_LIMIT} keys (linearizable), {received:,} keys",
        )

    def close(self) -> None:
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None
