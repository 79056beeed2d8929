"""The cluster a chaos run attacks: one or two NameServers and one or two broker groups of three
replicas (``replica_name``: ``n0``... in ``broker-a``, ``bn0``... in ``broker-b``), each process
in its own network namespace (``netns.NetnsLab``), the clients in one more (``cl``), or all on
loopback when namespaces are not available (then only process faults are possible).

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
    from collections.abc import Collection

    from ledgermq.testing.chaos.disks import LoopDisks
    from ledgermq.testing.chaos.netns import NetnsLab

__all__ = [
    "CLIENT_NODE",
    "GROUP",
    "NAMESRV_NODE",
    "SPARE_REPLICAS",
    "ChaosCluster",
    "namesrv_node",
    "replica_name",
]

GROUP: Final = "broker-a"
NAMESRV_NODE: Final = "ns"
CLIENT_NODE: Final = "cl"
"""The clients' namespace: producers, consumers and readers (``workload.run_as_client``)."""
_NAMESRV_PORT: Final = 9876
_BROKER_PORT: Final = 10911
_LEDGER_PORT: Final = 40911
_GRPC_PORT: Final = 8081
"""Each replica has its own address in its namespace, so the default ports fit (RocketMQ's)."""
SPARE_REPLICAS: Final = 4
"""Replicas a run may add (``n3``...``n6``: the ``replace`` fault); in namespaces the runner
makes a namespace for each beforehand."""


def namesrv_node(index: int) -> str:
    """The node name of NameServer ``index``: ``ns``, ``ns1``, ..."""
    return NAMESRV_NODE if index == 0 else f"{NAMESRV_NODE}{index}"


def replica_name(group: str, node: str) -> str:
    """The name (namespace, fault target) of replica ``node`` of ``group``: ``n0`` in
    ``broker-a``, ``bn0`` in ``broker-b``. Each replica keeps its ledger id (``n0``...)."""
    return node if group == GROUP else f"{group[-1]}{node}"


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
        namesrvs: int = 1,
        groups: int = 1,
    ) -> None:
        self.lab = lab
        self.broker_module = broker_module
        self.disks = disks
        """Each replica's store on its own small file system (the disk-full fault), or None."""
        self._loopback_namesrv_ports = [0] * namesrvs
        super().__init__(
            base_dir,
            replicas=3,
            groups=groups,
            namesrvs=namesrvs,
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
    def namesrv_nodes(self) -> list[str]:
        """``ns``, and ``ns1`` with a second NameServer (every broker registers with each)."""
        return [namesrv_node(index) for index in range(len(self._namesrvs))]

    @property
    def namesrv_addresses(self) -> list[str]:
        return [
            f"{self.host(node)}:{_NAMESRV_PORT if self.lab else self._loopback_namesrv_ports[i]}"
            for i, node in enumerate(self.namesrv_nodes)
        ]

    @property
    def namesrv_addr(self) -> str:
        """``host:port;host:port``: what clients and brokers are given."""
        return ";".join(self.namesrv_addresses)

    @property
    def replica_names(self) -> list[str]:
        """Every replica's name (``replica_name``), group by group."""
        return [replica_name(group, node) for group in self.groups for node in self.nodes]

    def locate(self, name: str) -> tuple[str, str]:
        """``(group, node)`` of the replica called ``name``."""
        for group in self.groups:
            for node in self.nodes:
                if replica_name(group, node) == name:
                    return group, node
        raise ValueError(f"no replica is called {name!r}; replicas: {self.replica_names}")

    def address(self, group: str, node: str) -> str:
        return f"{self.host(replica_name(group, node))}:{self.ports[(group, node)]}"

    def peers(self, group: str) -> str:
        return ";".join(
            f"{n}-{self.host(replica_name(group, n))}:{self.ledger_ports[(group, n)]}"
            for n in self.nodes
        )

    def _pick_ports(self) -> None:
        keys = list(self._brokers)
        if self.lab is None:
            super()._pick_ports()
            return
        self.ports = dict.fromkeys(keys, _BROKER_PORT)
        self.ledger_ports = dict.fromkeys(keys, _LEDGER_PORT)
        self.grpc_ports = dict.fromkeys(keys, _GRPC_PORT)

    def spare_replica(self, group: str) -> str | None:
        """An id never used in ``group`` for a replica added during the run (the ``replace``
        fault): ``n3``, ``n4``, ...; in namespaces only those with a namespace made for them
        (``SPARE_REPLICAS``). None when none is left."""
        for index in range(3, 3 + SPARE_REPLICAS):
            node = f"n{index}"
            if (group, node) in self._brokers:
                continue
            if self.lab is not None and replica_name(group, node) not in self.lab.ips:
                return None
            return node
        return None

    def add_replica(self, group: str, node: str) -> str:
        """Room for a new replica (``BrokerCluster.add_replica``); in namespaces on the fixed
        ports of its own namespace. Its ledger address, as ``replica-add --peer`` takes it."""
        address = super().add_replica(group, node)
        if self.lab is None:
            return address
        key = (group, node)
        self.ports[key], self.ledger_ports[key] = _BROKER_PORT, _LEDGER_PORT
        self.grpc_ports[key] = _GRPC_PORT
        return f"{self.host(replica_name(group, node))}:{_LEDGER_PORT}"

    def _prefix(self, node: str) -> list[str]:
        return [] if self.lab is None else self.lab.exec_prefix(node)

    # ------------------------------------------------------------------ processes
    def broker_command(self, group: str, node: str) -> list[str]:
        command = super().broker_command(group, node)
        assert command[1:3] == ["-m", "ledgermq"], command
        name = replica_name(group, node)
        return [
            *self._prefix(name),
            command[0],
            "-m",
            self.broker_module,
            *command[3:],
            f"--set=brokerIP1={self.host(name)}",
        ]

    def start_namesrv(self, index: int = 0) -> None:
        """Start NameServer ``index`` if it is not running, on its old address (clients and
        brokers know it by that): a restarted one knows no route until the brokers register
        again."""
        namesrv, node = self._namesrvs[index], namesrv_node(index)
        if namesrv.is_running():
            return
        if self.lab is None and not self._loopback_namesrv_ports[index]:
            self._loopback_namesrv_ports[index] = free_ports(1)[0]
        port = self.namesrv_addresses[index].rsplit(":", 1)[1]
        namesrv.spawn(
            [
                *self._prefix(node),
                sys.executable, "-m", "ledgermq", "namesrv",
                "--listen-host", self.host(node),
                "--listen-port", port,
            ]
        )  # fmt: skip
        namesrv.wait_ready(self.start_timeout_s)

    def namesrv_kill9(self, index: int = 0) -> None:
        self._namesrvs[index].kill()

    def namesrv_signal(self, sig: signal.Signals, index: int = 0) -> None:
        """SIGSTOP / SIGCONT to NameServer ``index``."""
        self._namesrvs[index].signal(sig)

    def start(self, only: Collection[str] | None = None) -> None:
        """The NameServers (on their fixed port in namespaces), then the replicas (every
        group's: ``only`` is the plain cluster's, for a group that joins later, and is
        refused here)."""
        if only is not None:
            raise NotImplementedError("a chaos cluster starts every group at once")
        for index in range(len(self._namesrvs)):
            self.start_namesrv(index)
        self._namesrv_ports = [int(a.rsplit(":", 1)[1]) for a in self.namesrv_addresses]
        if not self.ports:
            self._pick_ports()
        if self.disks is not None and not self.disks.mounts:
            for group in self.groups:
                for node in self.nodes:
                    self.disks.mount(replica_name(group, node), self.store_dir(group, node))
        try:
            self._start_brokers()
        except ClusterStartError:
            self.close()
            raise
        self._ever_started = True
