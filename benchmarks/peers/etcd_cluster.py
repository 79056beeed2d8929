"""A 3-member etcd cluster on loopback, for the comparisons of ``ledgermq ledger bench`` and
``ledgermq bench peers``.

etcd answers a put once its WAL entry is fsynced on a majority of the members, the durability of
the ledger's ``flush=sync`` and of LedgerMQ ``SYNC_FLUSH``. The limits are raised so a batch of
1024 puts of 1 KiB fits one transaction (``--max-txn-ops 1024``, ``--max-request-bytes`` 4 MiB)
and a long run does not hit the default 2 GiB backend quota.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Final

from benchmarks.peers.etcd_client import EtcdClient, EtcdError, client_unavailable
from benchmarks.peers.servers import ServerProcess, find_binary
from ledgermq.bench.processes import HOST, free_ports
from ledgermq.errors import LedgerMQError

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["INSTALL_LINE", "MAX_TXN_OPS", "EtcdCluster", "etcd_binary", "etcd_unavailable"]

INSTALL_LINE: Final = "apt-get install etcd-server"
MAX_TXN_OPS: Final = 1024
MAX_REQUEST_BYTES: Final = 4 << 20
QUOTA_BACKEND_BYTES: Final = 8 << 30
_MEMBERS: Final = 3
_START_TIMEOUT_S: Final = 30.0
_SBIN: Final = ("/usr/sbin", "/usr/local/sbin")


def etcd_binary(path: str | None = None) -> str | None:
    return find_binary("etcd", path, () if path else _SBIN)


def etcd_unavailable(what: str, path: str | None = None) -> str | None:
    """The one line printed instead of ``what``'s rows when etcd or grpcio is not installed
    (saying how to install it), or None."""
    if etcd_binary(path) is None:
        return f"{what}: skipped, etcd is not installed ({INSTALL_LINE})"
    missing = client_unavailable()
    if missing is not None:
        return f"{what}: skipped, {missing}"
    return None


class EtcdCluster:
    """Three ``etcd`` members under ``workdir``; always ``close()`` it."""

    def __init__(self, workdir: Path, path: str | None = None) -> None:
        self.workdir = workdir
        self._path = path
        self.servers: list[ServerProcess] = []
        self.client_ports: list[int] = []

    def start(self) -> None:
        """Start the members and wait until a put is acknowledged (a leader is elected)."""
        binary = etcd_binary(self._path)
        if binary is None:
            raise LedgerMQError(etcd_unavailable("etcd", self._path) or "etcd is not installed")
        ports = free_ports(2 * _MEMBERS)
        self.client_ports, peer_ports = ports[:_MEMBERS], ports[_MEMBERS:]
        initial = ",".join(f"e{i}=http://{HOST}:{p}" for i, p in enumerate(peer_ports))
        for i in range(_MEMBERS):
            server = ServerProcess(f"etcd e{i}", self.workdir / f"e{i}.log")
            self.servers.append(server)
            client_url = f"http://{HOST}:{self.client_ports[i]}"
            peer_url = f"http://{HOST}:{peer_ports[i]}"
            server.spawn(
                [
                    binary,
                    "--name", f"e{i}",
                    "--data-dir", str(self.workdir / f"e{i}.etcd"),
                    "--listen-client-urls", client_url,
                    "--advertise-client-urls", client_url,
                    "--listen-peer-urls", peer_url,
                    "--initial-advertise-peer-urls", peer_url,
                    "--initial-cluster", initial,
                    "--initial-cluster-state", "new",
                    "--initial-cluster-token", self.workdir.name,
                    "--max-txn-ops", str(MAX_TXN_OPS),
                    "--max-request-bytes", str(MAX_REQUEST_BYTES),
                    "--quota-backend-bytes", str(QUOTA_BACKEND_BYTES),
                    "--log-level", "warn",
                ],
            )  # fmt: skip
        for server, port in zip(self.servers, self.client_ports, strict=True):
            server.wait_port(port, _START_TIMEOUT_S)
        asyncio.run(self._wait_ready())

    async def _wait_ready(self) -> None:
        client = self.client()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _START_TIMEOUT_S
        try:
            while True:
                try:
                    await client.put(b"ready?", b"")
                except EtcdError as exc:
                    if loop.time() > deadline:
                        raise LedgerMQError(
                            f"etcd did not elect a leader: {exc}\n{self.tails()}"
                        ) from exc
                    await asyncio.sleep(0.1)
                else:
                    return
        finally:
            await client.close()

    async def leader_index(self) -> int:
        """Which member leads (clients talk to it: a follower would forward every request)."""
        for index in range(len(self.client_ports)):
            client = self.client(index)
            try:
                if await client.is_leader():
                    return index
            except EtcdError:
                continue
            finally:
                await client.close()
        return 0

    def tails(self) -> str:
        return "\n".join(f"--- {s.name}\n{s.log_tail()}" for s in self.servers)

    def client(self, index: int = 0) -> EtcdClient:
        """A client of member ``index`` (one connection, one request at a time)."""
        return EtcdClient(HOST, self.client_ports[index % _MEMBERS])

    def pids(self) -> list[int]:
        return [pid for server in self.servers for pid in server.pids()]

    def close(self) -> None:
        for server in self.servers:
            server.kill()
        self.servers.clear()
