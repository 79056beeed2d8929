"""The cluster a chaos run attacks: a NameServer and one broker group of three replicas, each
process in its own network namespace (``netns.NetnsLab``), the clients in one more (``cl``), or
all on loopback when namespaces are not available (then only process faults are possible).

It is ``testing.broker_cluster.BrokerCluster`` (processes, logs, kill -9, SIGSTOP, restart,
master queries, teardown at exit) with other addresses: in namespaces every replica listens on
its own 10.200.K.x address (``brokerIP1``, which the broker binds and registers, and the
``dLegerPeers`` address of its ledger), on the same ports, and every command is prefixed with
``ip netns exec``. ``broker_module`` lets a test run the brokers through a wrapper module (the
injected bug of ``buggy_broker``) without any switch in the broker itself.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Final

from ledgermq.bench.processes import free_ports
from ledgermq.testing.broker_cluster import HOST, BrokerCluster, ClusterStartError

if TYPE_CHECKING:
    import os
    import signal

    from ledgermq.testing.chaos.disks import LoopDisks
    from ledgermq.testing.chaos.netns import NetnsLab

__all__ = ["CLIENT_NODE", "GROUP", "NAMESRV_NODE", "ChaosCluster"]

GROUP: Final = "broker-a"
NAMESRV_NODE: Final = "ns"
CLIENT_NODE: Final = "cl"
"""The clients' namespace: producers, consumers and readers (``workload.run_as_client``)."""
_NAMESRV_PORT: Final = 9876
_BROKER_PORT: Final = 10911
_LEDGER_PORT: Final = 40911


class ChaosCluster(BrokerCluster):
    """See the module docstring. ``lab`` must be created already (or None: loopback)."""

    def __init__(
        self,
        base_dir: str | os.PathLike[str],
        *,
        lab: NetnsLab | None,
        broker_module: str = "ledgermq",
        disks: LoopDisks | None = None,
        flush: str = "ASYNC_FLUSH",
        start_timeout_s: float = 30.0,
    ) -> None:
        self.lab = lab
        self.broker_module = broker_module
        self.disks = disks
        """Each replica's store on its own small file system (the disk-full fault), or None."""
        self._loopback_namesrv_port = 0
        super().__init__(
            base_dir,
            replicas=3,
            groups=1,
            namesrvs=1,
            flush=flush,
            start_timeout_s=start_timeout_s,
            start=False,
        )

    # ------------------------------------------------------------------ addresses
    @property
    def client_namespace(self) -> str | None:
        """The namespace the workload's clients run in; None on loopback."""
        if self.lab is None or CLIENT_NODE not in self.lab.nodes:
            return None
        return self.lab.namespace(CLIENT_NODE)

    def host(self, node: str) -> str:
        """The IP ``node`` (``ns`` for the NameServer, ``n0``...) listens on."""
        return HOST if self.lab is None else self.lab.ips[node]

    @property
    def namesrv_addresses(self) -> list[str]:
        port = _NAMESRV_PORT if self.lab is not None else self._loopback_namesrv_port
        return [f"{self.host(NAMESRV_NODE)}:{port}"]

    @property
    def namesrv_addr(self) -> str:
        return self.namesrv_addresses[0]

    def address(self, group: str, node: str) -> str:
        return f"{self.host(node)}:{self.ports[(group, node)]}"

    def peers(self, group: str) -> str:
        return ";".join(f"{n}-{self.host(n)}:{self.ledger_ports[(group, n)]}" for n in self.nodes)

    def _pick_ports(self) -> None:
        keys = list(self._brokers)
        if self.lab is None:
            super()._pick_ports()
            return
        self.ports = dict.fromkeys(keys, _BROKER_PORT)
        self.ledger_ports = dict.fromkeys(keys, _LEDGER_PORT)

    def _prefix(self, node: str) -> list[str]:
        return [] if self.lab is None else self.lab.exec_prefix(node)

    # ------------------------------------------------------------------ processes
    def broker_command(self, group: str, node: str) -> list[str]:
        command = super().broker_command(group, node)
        assert command[1:3] == ["-m", "ledgermq"], command
        return [
            *self._prefix(node),
            command[0],
            "-m",
            self.broker_module,
            *command[3:],
            f"--set=brokerIP1={self.host(node)}",
        ]

    def start_namesrv(self) -> None:
        """Start the NameServer if it is not running, on its old address (clients and brokers
        know it by that): a restarted one knows no route until the brokers register again."""
        namesrv = self._namesrvs[0]
        if namesrv.is_running():
            return
        if self.lab is None:
            self._loopback_namesrv_port = self._loopback_namesrv_port or free_ports(1)[0]
        port = self.namesrv_addresses[0].rsplit(":", 1)[1]
        namesrv.spawn(
            [
                *self._prefix(NAMESRV_NODE),
                sys.executable, "-m", "ledgermq", "namesrv",
                "--listen-host", self.host(NAMESRV_NODE),
                "--listen-port", port,
            ]
        )  # fmt: skip
        namesrv.wait_ready(self.start_timeout_s)

    def namesrv_kill9(self) -> None:
        self._namesrvs[0].kill()

    def namesrv_signal(self, sig: signal.Signals) -> None:
        """SIGSTOP / SIGCONT to the NameServer."""
        self._namesrvs[0].signal(sig)

    def start(self) -> None:
        """The NameServer (on its fixed port in namespaces), then the replicas."""
        self.start_namesrv()
        self._namesrv_ports = [int(self.namesrv_addresses[0].rsplit(":", 1)[1])]
        if not self.ports:
            self._pick_ports()
        if self.disks is not None and not self.disks.mounts:
            for node in self.nodes:
                self.disks.mount(node, self.store_dir(GROUP, node))
        try:
            self._start_brokers()
        except ClusterStartError:
            self.close()
            raise
        self._ever_started = True
