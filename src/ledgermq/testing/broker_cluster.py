"""A real cluster as child processes on 127.0.0.1: NameServers and DLedger broker groups.

``BrokerCluster`` runs ``python -m ledgermq namesrv`` ``namesrvs`` times and, for each of
``groups`` broker groups (``broker-a``, ``broker-b``, ...), one ``python -m ledgermq broker``
per replica (``n0``, ``n1``, ...), each with its own ``storePathRootDir`` and log file. It is the
broker-level twin of ``testing.processes.ReplicaGroup`` and keeps the same rules
(STYLE.md section 7.13.4):

- every wait is bounded, and a process that does not come up fails with the tail of its log;
- ports are picked free on loopback; a broker's remoting and ledger ports are chosen once and
  kept across restarts (clients and NameServers know a broker by its address), and fresh ones
  are tried if another process took one between the probe and the bind, as long as no process
  of the cluster has come up on the old ones yet;
- every child is killed and reaped by PID in ``close()`` (stopped ones get SIGCONT first), which
  runs on ``with`` exit, from the test suite's fixture finalizer and, as a last resort, at exit.

Faults are injected per replica: ``kill9`` (a crash), ``sigstop``/``sigcont`` (a pause),
``terminate`` (a clean stop) and ``restart``; ``age_commit_log`` makes retention due now.
``master`` / ``wait_master`` ask the replicas themselves (GET_BROKER_RUNTIME_INFO, code 28),
``route`` asks a NameServer (code 105).
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import secrets
import signal
import string
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ledgermq.bench.processes import free_ports, ledgermq_command
from ledgermq.clock import SystemClock
from ledgermq.errors import LedgerMQError
from ledgermq.net import ConnectionPool, TcpNetwork
from ledgermq.security.acl import sign_request
from ledgermq.security.acl.strong import sign_strong
from ledgermq.store.layout import parse_segment_name
from ledgermq.testing.child_process import ChildProcess, ProcessStartError, wait_until
from ledgermq.wire import MQRequestCode, MQResponseCode, RemotingCommand
from ledgermq.wire.namesrv_headers import GetRouteInfoRequestHeader

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

    from ledgermq.net.tls import TlsClientConfig

__all__ = ["BrokerCluster", "ClusterStartError"]

HOST: Final = "127.0.0.1"
_NAMESRV_MARK: Final = b"NameServer listening on "
_BROKER_MARK: Final = b" serving on "
_START_ATTEMPTS: Final = 3
_ASK_TIMEOUT_S: Final = 1.0
SMALL_FILES: Final = {
    "mappedFileSizeCommitLog": str(4 << 20),
    "indexFileSize": str(131072),
    "mapedFileSizeConsumeQueue": str(120000),
}
"""Small preallocated files, so that a test cluster takes megabytes of disk, not gigabytes."""

_live_clusters: weakref.WeakSet[BrokerCluster] = weakref.WeakSet()


class ClusterStartError(ProcessStartError):
    """A process of the cluster did not print its ready line in time, or exited."""


class BrokerCluster:
    """NameServers and broker groups as child processes (see the module docstring).

    Args:
        base_dir: where each replica's store (``<base_dir>/<group>/<node>/store``) and every
            log file (``<base_dir>/logs/<name>.log``) go.
        replicas: replicas per broker group (the ledger group of the same name).
        groups: broker groups, named ``broker-a``, ``broker-b``, ...
        namesrvs: NameServers; every broker registers with all of them.
        flush: ``flushDiskType`` (``ASYNC_FLUSH`` or ``SYNC_FLUSH``).
        extra_settings: more ``broker.conf`` settings for every replica (over ``SMALL_FILES``).
        start_timeout_s: how long a process may take to print its ready line.
        stop_timeout_s: how long ``terminate`` waits after SIGTERM before it kills.
        start: start everything now (else call ``start()``).
        credentials: (access key, secret key) the harness signs its requests with, for a
            cluster with ``aclEnable=true``.
        tls: how the harness dials brokers whose ports enforce TLS (``tls.*`` settings).
        namesrv_settings: ``namesrv.conf`` keys for the NameServers (TLS, ACL).
        conf_files: give each replica its ``flushDiskType`` and ``extra_settings`` in its own
            ``broker.conf`` (``conf_path``, written at its first start and kept: what
            UPDATE_BROKER_CONFIG rewrites) instead of ``--set`` flags, which would win over
            the file at a restart.
    """

    def __init__(
        self,
        base_dir: str | os.PathLike[str],
        *,
        replicas: int = 3,
        groups: int = 1,
        namesrvs: int = 1,
        flush: str = "ASYNC_FLUSH",
        extra_settings: Mapping[str, str] | None = None,
        start_timeout_s: float = 20.0,
        stop_timeout_s: float = 10.0,
        start: bool = True,
        credentials: tuple[str, str] | None = None,
        tls: TlsClientConfig | None = None,
        namesrv_settings: Mapping[str, str] | None = None,
        conf_files: bool = False,
    ) -> None:
        if not 1 <= groups <= 26:
            raise ValueError("groups must be between 1 and 26 (broker-a .. broker-z)")
        self.base_dir = Path(base_dir)
        self.flush = flush
        self.credentials = credentials
        """(access key, secret key) the harness signs its own requests with (an ACL cluster)."""
        self.tls = tls
        """How the harness dials the brokers (a cluster whose ports enforce TLS)."""
        self.conf_files = conf_files
        self.namesrv_settings = dict(namesrv_settings or {})
        """``namesrv.conf`` settings of every NameServer (written to a file it is started with)."""
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.settings: dict[str, str] = {**SMALL_FILES, **(extra_settings or {})}
        self._strong = self.settings.get("aclRequireStrongSignature", "").lower() == "true"
        """The brokers require LedgerMQ's strong signature: the harness signs with it."""
        self.groups: list[str] = [f"broker-{c}" for c in string.ascii_lowercase[:groups]]
        self.nodes: list[str] = [f"n{i}" for i in range(replicas)]
        logs = self.base_dir / "logs"
        self._namesrvs = [
            ChildProcess(f"namesrv{i}", logs / f"namesrv{i}.log", _NAMESRV_MARK, ClusterStartError)
            for i in range(namesrvs)
        ]
        self._namesrv_ports: list[int] = []
        self._brokers: dict[tuple[str, str], ChildProcess] = {
            (g, n): ChildProcess(f"{g}/{n}", logs / f"{g}-{n}.log", _BROKER_MARK, ClusterStartError)
            for g in self.groups
            for n in self.nodes
        }
        self.ports: dict[tuple[str, str], int] = {}
        """Remoting port of each replica, kept across restarts."""
        self.ledger_ports: dict[tuple[str, str], int] = {}
        self.grpc_ports: dict[tuple[str, str], int] = {}
        """gRPC port of each replica (``grpcServerPort``), kept across restarts."""
        self._ever_started = False
        _live_clusters.add(self)
        if start:
            try:
                self.start()
            except BaseException:
                self.close()
                raise

    # ------------------------------------------------------------------ addresses
    @property
    def namesrv_addr(self) -> str:
        """``127.0.0.1:P;127.0.0.1:Q``: what clients and brokers are given."""
        if not self._namesrv_ports:
            raise ClusterStartError("the NameServers have not been started")
        return ";".join(f"{HOST}:{port}" for port in self._namesrv_ports)

    @property
    def namesrv_addresses(self) -> list[str]:
        return [f"{HOST}:{port}" for port in self._namesrv_ports]

    @property
    def broker_addresses(self) -> dict[str, dict[str, str]]:
        """``{group: {node: "127.0.0.1:PORT"}}``."""
        return {g: {n: self.address(g, n) for n in self.nodes} for g in self.groups}

    def address(self, group: str, node: str) -> str:
        return f"{HOST}:{self.ports[self._key(group, node)]}"

    def grpc_address(self, group: str, node: str) -> str:
        """Where RocketMQ 5 clients reach this replica (its gRPC door)."""
        return f"{HOST}:{self.grpc_ports[self._key(group, node)]}"

    def peers(self, group: str) -> str:
        """DLedger's peer string of ``group``: ``n0-127.0.0.1:P0;n1-...``."""
        return ";".join(f"{n}-{HOST}:{self.ledger_ports[(group, n)]}" for n in self.nodes)

    def store_dir(self, group: str, node: str) -> Path:
        return self.base_dir / group / node / "store"

    def conf_path(self, group: str, node: str) -> Path:
        """The replica's ``broker.conf`` (with ``conf_files``)."""
        return self.base_dir / "conf" / f"{group}-{node}.conf"

    def log_path(self, group: str, node: str) -> Path:
        return self._child(group, node).log_path

    def _pick_ports(self) -> None:
        keys = list(self._brokers)
        n = len(keys)
        ports = free_ports(3 * n)
        self.ports = dict(zip(keys, ports[:n], strict=True))
        self.ledger_ports = dict(zip(keys, ports[n : 2 * n], strict=True))
        self.grpc_ports = dict(zip(keys, ports[2 * n :], strict=True))

    # ------------------------------------------------------------------ processes
    def broker_command(self, group: str, node: str) -> list[str]:
        key = self._key(group, node)
        # flushDiskType first: an extra setting of the same key wins, as it always has.
        settings = [f"--set=flushDiskType={self.flush}"]
        settings += [f"--set={k}={v}" for k, v in self.settings.items()]
        if self.conf_files:
            path = self.conf_path(group, node)
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                lines = [
                    f"flushDiskType={self.flush}",
                    *(f"{k}={v}" for k, v in self.settings.items()),
                ]
                path.write_text("".join(f"{line}\n" for line in lines))
            settings = ["--config", str(path)]
        return ledgermq_command(
            "broker",
            "--broker-name", group,
            "--self-id", node,
            "--peers", self.peers(group),
            "--listen-port", str(self.ports[key]),
            "--namesrv-addr", self.namesrv_addr,
            "--store-dir", str(self.store_dir(group, node)),
            f"--set=grpcServerPort={self.grpc_ports[key]}",
            *settings,
        )  # fmt: skip

    def start(self, only: Collection[str] | None = None) -> None:
        """Start every NameServer, then every replica that is not running (of the groups in
        ``only``, when given: a group left out joins later, as a group added to a running
        cluster), and wait for them."""
        config: list[str] = []
        if self.namesrv_settings:
            path = self.base_dir / "namesrv.conf"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(f"{k}={v}\n" for k, v in self.namesrv_settings.items()))
            config = ["-c", str(path)]
        for child in self._namesrvs:
            if not child.is_running():
                child.spawn(ledgermq_command("namesrv", *config, "--listen-port", "0"))
        ports = []
        for child in self._namesrvs:
            child.wait_ready(self.start_timeout_s)
            ports.append(int(child.ready_line.rsplit(":", 1)[1]))
        self._namesrv_ports = ports
        if not self.ports:
            self._pick_ports()
        for attempt in range(_START_ATTEMPTS):
            try:
                self._start_brokers(only)
            except ClusterStartError as exc:
                if not exc.address_in_use or self._ever_started or attempt + 1 == _START_ATTEMPTS:
                    raise
                for child in self._brokers.values():  # nobody knows these ports but our children
                    child.kill()
                self._pick_ports()
            else:
                self._ever_started = True
                return

    def _start_brokers(self, only: Collection[str] | None = None) -> None:
        waiting = []
        for (group, node), child in self._brokers.items():
            if not child.is_running() and (only is None or group in only):
                child.spawn(self.broker_command(group, node))
                waiting.append(child)
        failure: ClusterStartError | None = None
        for child in waiting:
            try:
                child.wait_ready(self.start_timeout_s)
            except ClusterStartError as exc:
                failure = failure or exc
        if failure is not None:
            raise failure

    def start_replica(self, group: str, node: str) -> None:
        """Start one replica (stopped before) on its old ports and wait for its ready line."""
        child = self._child(group, node)
        if child.is_running():
            raise ClusterStartError(f"{child.name} is already running")
        child.spawn(self.broker_command(group, node))
        child.wait_ready(self.start_timeout_s)

    def add_replica(self, group: str, node: str) -> str:
        """Make room for a new replica ``node`` of ``group`` at new ports, not started; its
        ledger address ("127.0.0.1:PORT", what ``replica-add --peer`` takes). It is started
        (``start_replica``) with ``peers(group)``: every replica the harness knows, itself
        included, as an operator lists the members plus the new one. One group only."""
        if len(self.groups) != 1 or node in self.nodes:
            raise ValueError(f"cannot add {node} to {group}: one group, a new id")
        key = (group, node)
        self.ports[key], self.ledger_ports[key], self.grpc_ports[key] = free_ports(3)
        logs = self.base_dir / "logs"
        self._brokers[key] = ChildProcess(
            f"{group}/{node}", logs / f"{group}-{node}.log", _BROKER_MARK, ClusterStartError
        )
        self.nodes.append(node)
        return f"{HOST}:{self.ledger_ports[key]}"

    def forget_replica(self, group: str, node: str) -> None:
        """A removed replica (stopped): later replicas are no longer started listing it."""
        self._child(group, node).kill()
        self.nodes.remove(node)

    def restart(self, group: str, node: str) -> None:
        """Stop the replica if it runs (SIGTERM, then SIGKILL) and start it again."""
        if self._child(group, node).is_running():
            self.terminate(group, node)
        self.start_replica(group, node)

    def kill9(self, group: str, node: str) -> None:
        """SIGKILL: the replica dies at once, with whatever it had not written."""
        self._child(group, node).kill()

    def sigstop(self, group: str, node: str) -> None:
        """SIGSTOP: the replica freezes; its sockets stay open, nobody answers."""
        self._child(group, node).signal(signal.SIGSTOP)

    def sigcont(self, group: str, node: str) -> None:
        self._child(group, node).signal(signal.SIGCONT)

    def terminate(self, group: str, node: str) -> int:
        """SIGTERM and wait for a clean exit (SIGKILL after ``stop_timeout_s``); the exit code."""
        return self._child(group, node).terminate(self.stop_timeout_s)

    def age_commit_log(self, group: str, age_s: float, *, keep: int = 2) -> int:
        """Backdate every replica's commit-log files of ``group``, all but the newest ``keep``,
        by ``age_s`` seconds (their mtime); returns the fewest files aged on one replica.

        Retention judges a file's age by its mtime, and keeps a file at least
        ``fileReservedTime + 1`` hours (the ledger's floor is one hour, as DLedger's). With
        ``deleteWhen`` listing every hour and ``age_s`` past that, the stores delete the aged
        files within their next check (every 100 ms), and the brokers then drop the
        ConsumeQueue units of the deleted messages (within a second): messages expire now
        instead of days from now. The newest file is never deleted; keep it and the one
        before young so that something of the log stays.
        """
        aged: list[int] = []
        now = time.time()
        for node in self.nodes:
            data = sorted(
                path
                for path in self.store_dir(group, node).glob("dledger-*/data/*")
                if parse_segment_name(path.name) is not None
            )
            doomed = data[: max(0, len(data) - keep)]
            for path in doomed:
                os.utime(path, (now - age_s, now - age_s))
            aged.append(len(doomed))
        return min(aged)

    def is_running(self, group: str, node: str) -> bool:
        return self._child(group, node).is_running()

    def is_live(self, group: str, node: str) -> bool:
        """Running and not stopped: a replica that can answer."""
        child = self._child(group, node)
        return child.is_running() and not child.stopped

    def returncode(self, group: str, node: str) -> int | None:
        """The exit status of a replica that has exited (reaped), None while it runs."""
        proc = self._child(group, node).proc
        if proc is None:
            raise ClusterStartError(f"{group}/{node} was never started")
        return proc.poll()

    def pid(self, group: str, node: str) -> int:
        proc = self._child(group, node).proc
        if proc is None:
            raise ClusterStartError(f"{group}/{node} was never started")
        return proc.pid

    def server_pids(self) -> list[int]:
        """PIDs of every running NameServer and replica: the processes whose CPU is the
        cluster's (``ledgermq.bench.cpu.CpuMeter``)."""
        children = [*self._namesrvs, *self._brokers.values()]
        return [c.proc.pid for c in children if c.proc is not None and c.is_running()]

    def _key(self, group: str, node: str) -> tuple[str, str]:
        if (group, node) not in self._brokers:
            raise ValueError(
                f"unknown replica {group}/{node}; groups {', '.join(self.groups)}, "
                f"replicas {', '.join(self.nodes)}"
            )
        return (group, node)

    def _child(self, group: str, node: str) -> ChildProcess:
        return self._brokers[self._key(group, node)]

    # ------------------------------------------------------------------ questions
    def request(
        self,
        address: str,
        code: int,
        fields: Mapping[str, str] | None = None,
        body: bytes = b"",
        timeout_s: float = _ASK_TIMEOUT_S,
    ) -> RemotingCommand:
        """One remoting request on a fresh connection (LedgerMQError if it fails)."""
        answer = self._ask({address: (code, dict(fields or {}), body)}, timeout_s)[address]
        if isinstance(answer, BaseException):
            raise LedgerMQError(f"request {code} to {address} failed: {answer}") from answer
        assert isinstance(answer, RemotingCommand)
        return answer

    def _ask(
        self, requests: Mapping[str, tuple[int, dict[str, str], bytes]], timeout_s: float
    ) -> dict[str, Any]:
        """Every request in parallel; each address maps to its response or its exception."""

        async def ask_all() -> dict[str, Any]:
            pool = ConnectionPool(TcpNetwork(tls_client=self.tls), connect_timeout_s=timeout_s)
            try:

                async def one(address: str) -> Any:
                    code, fields, body = requests[address]
                    if self.credentials is not None and self._strong:
                        fields = sign_strong(
                            code, fields, body, *self.credentials,
                            now_s=SystemClock().wall_time_s(), nonce=secrets.token_hex(16),
                        )  # fmt: skip
                    elif self.credentials is not None:
                        fields = sign_request(fields, body, *self.credentials)
                    command = RemotingCommand(code=code, opaque=0, ext_fields=fields, body=body)
                    try:
                        return await pool.request(address, command, timeout_s)
                    except (LedgerMQError, OSError, TimeoutError) as exc:
                        return exc

                answers = await asyncio.gather(*(one(a) for a in requests))
                return dict(zip(requests, answers, strict=True))
            finally:
                await pool.close()

        return asyncio.run(ask_all())

    def runtime_info(self, group: str, timeout_s: float = _ASK_TIMEOUT_S) -> dict[str, Any]:
        """``{node: table}`` from GET_BROKER_RUNTIME_INFO for each live replica of ``group``;
        a replica that did not answer maps to the error text."""
        live = {self.address(group, n): n for n in self.nodes if self.is_live(group, n)}
        ask: tuple[int, dict[str, str], bytes] = (MQRequestCode.GET_BROKER_RUNTIME_INFO, {}, b"")
        requests = dict.fromkeys(live, ask)
        views: dict[str, Any] = {}
        for address, answer in self._ask(requests, timeout_s).items():
            node = live[address]
            if isinstance(answer, BaseException):
                views[node] = f"no answer ({answer})"
            elif answer.code != MQResponseCode.SUCCESS:
                views[node] = f"code {answer.code}: {answer.remark}"
            else:
                views[node] = json.loads(answer.body)["table"]
        return views

    def master(self, group: str, timeout_s: float = _ASK_TIMEOUT_S) -> str | None:
        """The one live replica of ``group`` that says it is master now, or None."""
        views = self.runtime_info(group, timeout_s)
        masters = [
            node
            for node, view in views.items()
            if isinstance(view, dict) and view.get("brokerRole", "").endswith("MASTER")
        ]
        return masters[0] if len(masters) == 1 else None

    def wait_master(self, group: str, timeout_s: float = 20.0) -> str:
        """Poll until one replica of ``group`` is master; AssertionError with the logs if not."""
        found: list[str] = []
        views: dict[str, Any] = {}

        def elected() -> bool:
            views.clear()
            views.update(self.runtime_info(group))
            masters = [
                node
                for node, view in views.items()
                if isinstance(view, dict) and view.get("brokerRole", "").endswith("MASTER")
            ]
            if len(masters) == 1:
                found.append(masters[0])
                return True
            return False

        if not wait_until(elected, timeout_s):
            shown = "\n".join(f"{node}: {view}" for node, view in views.items())
            raise AssertionError(
                f"no master of {group} within {timeout_s:g} s; last views:\n{shown}\n"
                f"{self.log_tails()}"
            )
        return found[-1]

    def route(self, topic: str, namesrv: int = 0) -> dict[str, Any] | None:
        """The NameServer's TopicRouteData for ``topic`` (code 105), None if it has none."""
        answer = self.request(
            self.namesrv_addresses[namesrv],
            MQRequestCode.GET_ROUTEINFO_BY_TOPIC,
            GetRouteInfoRequestHeader(topic).to_ext_fields(),
        )
        if answer.code != MQResponseCode.SUCCESS:
            return None
        route: dict[str, Any] = json.loads(answer.body)
        return route

    def wait_routable(self, topic: str = "TBW102", timeout_s: float = 20.0) -> dict[str, str]:
        """Until every group has a master and every NameServer's route of ``topic`` names it as
        brokerId 0 (what a client needs before its first send); ``{group: master address}``."""
        masters = {g: self.address(g, self.wait_master(g, timeout_s)) for g in self.groups}
        last: list[object] = []

        def listed() -> bool:
            last.clear()
            for i in range(len(self._namesrvs)):
                try:
                    route = self.route(topic, i)
                except LedgerMQError as exc:
                    last.append(exc)
                    return False
                last.append(route)
                if route is None:
                    return False
                addrs = {b["brokerName"]: b["brokerAddrs"].get("0") for b in route["brokerDatas"]}
                if any(addrs.get(g) != a for g, a in masters.items()):
                    return False
            return True

        if not wait_until(listed, timeout_s):
            raise AssertionError(
                f"the route of {topic} does not list the masters {masters} within "
                f"{timeout_s:g} s; last routes: {last}\n{self.log_tails()}"
            )
        return masters

    # ------------------------------------------------------------------ logs
    def log_tail(self, group: str, node: str, lines: int = 30) -> str:
        return self._child(group, node).log_tail(lines)

    def log_tails(self, lines: int = 15) -> str:
        """Every process's log tail, for a failure message."""
        children = [*self._namesrvs, *self._brokers.values()]
        return "\n".join(f"--- {c.name}\n{c.log_tail(lines)}" for c in children)

    # ------------------------------------------------------------------ teardown
    def close(self) -> None:
        """Kill every child (resumed first) and reap it. Idempotent."""
        for child in self._brokers.values():
            child.kill()
        for child in self._namesrvs:
            child.kill()
        _live_clusters.discard(self)

    def __enter__(self) -> BrokerCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@atexit.register
def _close_leftovers() -> None:
    """Last resort: no process of a cluster outlives the interpreter that started it."""
    for cluster in list(_live_clusters):
        cluster.close()
