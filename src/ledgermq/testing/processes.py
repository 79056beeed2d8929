"""Real ledger replicas as child processes on 127.0.0.1, with the faults a machine can suffer.

``ReplicaGroup`` runs ``python -m ledgermq ledger serve`` once per replica, on free loopback
ports, each with its own log file, and injects process-level faults by PID: ``kill9`` (a crash:
nothing is flushed), ``sigstop``/``sigcont`` (a pause: a GC stall, a frozen VM, a partition
from the replica's point of view), ``terminate`` (a clean SIGTERM stop) and ``restart``.

Rules it keeps (STYLE.md section 7.13.4):

- every wait is bounded, and a replica that does not come up fails with the tail of its log;
- every child is killed and reaped by PID in ``close()`` (stopped ones get SIGCONT first), which
  runs on ``with`` exit, from the test suite's fixture finalizer and, as a last resort, at exit;
- nothing is shared between groups: ports, store directories and logs are per group.

The children import ``ledgermq`` from the same place this module was imported from, so a test
runs the code under test whether the package is installed (CI) or on ``PYTHONPATH`` (a worktree).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import signal
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ledgermq.bench.processes import child_env, free_ports, ledgermq_command
from ledgermq.errors import LedgerMQError
from ledgermq.ledger.client import AsyncLedgerClient, LedgerClient
from ledgermq.store.entry_format import INDEX_UNIT_SIZE
from ledgermq.testing.child_process import ChildProcess, ProcessStartError, wait_until

if TYPE_CHECKING:
    import os
    import subprocess
    from collections.abc import Iterable, Sequence

    from ledgermq.ledger.requests import LedgerEntry, Metadata

__all__ = ["ReplicaGroup", "ReplicaStartError", "child_env", "free_ports", "ledgermq_command"]

READY_MARK: Final = b" serving on "
"""What ``ledger serve`` prints on stdout once it listens."""
_POLL_S: Final = 0.02
_START_ATTEMPTS: Final = 3
"""Fresh ports are tried this often when another process took one between probe and bind."""

_live_groups: weakref.WeakSet[ReplicaGroup] = weakref.WeakSet()


class ReplicaStartError(ProcessStartError):
    """A replica did not print its "serving on" line in time, or exited; carries its log tail."""


class ReplicaGroup:
    """``n`` replicas ``n0``..``n{n-1}`` of ledger group ``group``, as child processes.

    Args:
        tmp_dir: where the stores (``<tmp_dir>/store/dledger-<id>``) and the per-replica log
            files (``<tmp_dir>/<id>.log``, appended to across restarts) go.
        n: the number of replicas.
        group: the ledger group name.
        flush: ``async`` or ``sync`` (``--flush``).
        extra_args: more ``ledger serve`` flags, for every replica.
        data_segment_bytes: the size of each preallocated data file (``dataFileSize``); small,
            so that a test group takes megabytes of disk, not the production gigabyte per
            replica, and long tests roll segments.
        index_segment_entries: index records per preallocated index file (``indexFileSize``).
        start_timeout_s: how long a replica may take to print its "serving on" line.
        stop_timeout_s: how long ``terminate`` waits after SIGTERM before it kills.
    """

    def __init__(
        self,
        tmp_dir: str | os.PathLike[str],
        n: int = 3,
        group: str = "g",
        flush: str = "async",
        extra_args: Sequence[str] = (),
        *,
        data_segment_bytes: int = 4 << 20,
        index_segment_entries: int = 16384,
        start_timeout_s: float = 15.0,
        stop_timeout_s: float = 10.0,
    ) -> None:
        self.tmp_dir = Path(tmp_dir)
        self.group = group
        self.flush = flush
        self.extra_args = tuple(extra_args)
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.nodes: list[str] = [f"n{i}" for i in range(n)]
        self.store_dir = self.tmp_dir / "store"
        self.config_path = self.tmp_dir / "replica.conf"
        self.settings = {
            "dataFileSize": str(data_segment_bytes),
            "indexFileSize": str(index_segment_entries * INDEX_UNIT_SIZE),
        }
        self.ports: dict[str, int] = {}
        self._children = {
            node: ChildProcess(
                f"replica {node}", self.log_path(node), READY_MARK, ReplicaStartError
            )
            for node in self.nodes
        }
        self._clients: list[LedgerClient] = []
        self._probe: LedgerClient | None = None
        self._ever_started = False
        self._pick_ports()
        _live_groups.add(self)

    # ------------------------------------------------------------------ addresses
    def _pick_ports(self) -> None:
        self.ports = dict(zip(self.nodes, free_ports(len(self.nodes)), strict=True))
        if self._probe is not None:
            self._probe.close()
            self._probe = None

    @property
    def peers(self) -> str:
        """DLedger's peer string: ``n0-127.0.0.1:P0;n1-127.0.0.1:P1;...``."""
        return ";".join(f"{node}-127.0.0.1:{self.ports[node]}" for node in self.nodes)

    def peers_of(self, nodes: Iterable[str]) -> str:
        """The peer string naming only ``nodes`` (a client that talks to those alone)."""
        return ";".join(f"{node}-127.0.0.1:{self.ports[node]}" for node in nodes)

    def log_path(self, node: str) -> Path:
        return self.tmp_dir / f"{node}.log"

    # ------------------------------------------------------------------ processes
    def serve_command(self, node: str) -> list[str]:
        return ledgermq_command(
            "ledger", "serve", "--group", self.group, "--id", node, "--peers", self.peers,
            "--store-dir", str(self.store_dir), "--flush", self.flush,
            "--config", str(self.config_path), *self.extra_args,
        )  # fmt: skip

    def start(self, node: str) -> None:
        """Start ``node`` and wait for its "serving on" line (ReplicaStartError otherwise)."""
        self._check_node(node)
        if self.is_running(node):
            raise ReplicaStartError(f"replica {node} is already running")
        self.tmp_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in self.settings.items()))
        child = self._children[node]
        child.spawn(self.serve_command(node))
        child.wait_ready(self.start_timeout_s)
        self._ever_started = True

    def start_all(self) -> None:
        """Start every replica that is not running; new ports if one was taken meanwhile."""
        for attempt in range(_START_ATTEMPTS):
            try:
                for node in self.nodes:
                    if not self.is_running(node):
                        self.start(node)
            except ReplicaStartError as exc:
                if not exc.address_in_use or self._ever_started or attempt + 1 == _START_ATTEMPTS:
                    raise
                for node in self.nodes:  # nobody knows these ports yet but our own children
                    self._children[node].kill()
                self._pick_ports()
            else:
                return

    def restart(self, node: str) -> None:
        """Stop ``node`` if it runs (SIGTERM, then SIGKILL) and start it again."""
        if self.is_running(node):
            self.terminate(node)
        self.start(node)

    def kill9(self, node: str) -> None:
        """SIGKILL: the replica dies at once, with whatever it had not written."""
        self._child(node).kill()

    def sigstop(self, node: str) -> None:
        """SIGSTOP: the replica freezes; its sockets stay open, nobody answers."""
        self._child(node).signal(signal.SIGSTOP)

    def sigcont(self, node: str) -> None:
        self._child(node).signal(signal.SIGCONT)

    def terminate(self, node: str) -> int:
        """SIGTERM and wait for a clean exit; SIGKILL after ``stop_timeout_s``. The exit code."""
        return self._child(node).terminate(self.stop_timeout_s)

    def is_running(self, node: str) -> bool:
        """True while ``node``'s process exists (stopped ones too)."""
        return self._child(node).is_running()

    def is_live(self, node: str) -> bool:
        """Running and not stopped: a replica that can answer."""
        child = self._child(node)
        return child.is_running() and not child.stopped

    def pid(self, node: str) -> int:
        return self._proc(node).pid

    def exit_code(self, node: str) -> int | None:
        proc = self._child(node).proc
        return None if proc is None else proc.poll()

    def _proc(self, node: str) -> subprocess.Popen[bytes]:
        proc = self._child(node).proc
        if proc is None:
            raise ReplicaStartError(f"replica {node} was never started")
        return proc

    def _child(self, node: str) -> ChildProcess:
        self._check_node(node)
        return self._children[node]

    def _check_node(self, node: str) -> None:
        if node not in self.nodes:
            raise ValueError(f"unknown replica {node!r}; this group has {', '.join(self.nodes)}")

    # ------------------------------------------------------------------ logs
    def log_tail(self, node: str, lines: int = 30) -> str:
        """The last ``lines`` lines ``node`` wrote (all its runs, in one file)."""
        return self._child(node).log_tail(lines)

    def log_tails(self, lines: int = 15) -> str:
        """Every replica's log tail, for a failure message."""
        return "\n".join(f"--- {node}\n{self.log_tail(node, lines)}" for node in self.nodes)

    # ------------------------------------------------------------------ clients
    def client(self, nodes: Iterable[str] | None = None, **options: Any) -> LedgerClient:
        """A ``LedgerClient`` of the group (or of ``nodes`` only), closed by ``close()``."""
        peers = self.peers if nodes is None else self.peers_of(nodes)
        client = LedgerClient(self.group, peers, **options)
        self._clients.append(client)
        return client

    def read_entries(
        self, indexes: Iterable[int], node: str | None = None, *, concurrency: int = 64
    ) -> dict[int, LedgerEntry]:
        """GET every index in ``indexes``, ``concurrency`` requests in flight at a time.

        From the leader, or with ``node`` from that replica alone (a follower answers for
        indexes up to its own commit index). Errors after the client's 10 s retry budget.
        """
        peers = self.peers if node is None else self.peers_of([node])
        wanted = list(indexes)

        async def fetch() -> dict[int, LedgerEntry]:
            client = AsyncLedgerClient(self.group, peers, retry_timeout_s=10.0)
            found: dict[int, LedgerEntry] = {}
            try:
                for start in range(0, len(wanted), concurrency):
                    chunk = wanted[start : start + concurrency]
                    entries = await asyncio.gather(*(client.get(i) for i in chunk))
                    found.update(zip(chunk, entries, strict=True))
            finally:
                await client.close()
            return found

        return asyncio.run(fetch())

    def metadata(self, node: str) -> Metadata:
        """``node``'s own view; a NetworkError after 1 s if it does not answer."""
        if self._probe is None:
            self._probe = LedgerClient(
                self.group, self.peers, request_timeout_s=1.0, retry_timeout_s=1.0
            )
        return self._probe.metadata(node)

    def leader_of(self, node: str) -> str | None:
        """Who ``node`` believes leads (None while it does not know)."""
        return self.metadata(node).leader

    def wait_for_leader(self, timeout_s: float = 10.0, among: Iterable[str] | None = None) -> str:
        """Poll until every live replica (of ``among``) names one leader that says it leads.

        The leader must be one of the polled replicas, report role LEADER and hold the highest
        term among them. AssertionError with every view and the log tails after ``timeout_s``.
        """
        candidates = list(self.nodes if among is None else among)
        views: dict[str, Metadata | str] = {}
        found: list[str] = []

        def agreed() -> bool:
            views.clear()
            live = [n for n in candidates if self.is_live(n)]
            for node in live:
                try:
                    views[node] = self.metadata(node)
                except LedgerMQError as exc:
                    views[node] = f"no answer ({exc})"
            metas = [v for v in views.values() if not isinstance(v, str)]
            if not live or len(metas) != len(live):
                return False
            leaders = {m.leader for m in metas}
            if len(leaders) != 1:
                return False
            (leader,) = leaders
            if leader is None or leader not in views:
                return False
            lead = views[leader]
            assert not isinstance(lead, str)
            if lead.role != "LEADER" or lead.term < max(m.term for m in metas):
                return False
            found.append(leader)
            return True

        if not wait_until(agreed, timeout_s, _POLL_S):
            shown = "\n".join(f"{node}: {view}" for node, view in views.items())
            raise AssertionError(
                f"no agreed leader among {', '.join(candidates)} within {timeout_s:g} s; "
                f"last views:\n{shown}\n{self.log_tails()}"
            )
        return found[-1]

    def wait_for_commit(
        self, index: int, nodes: Iterable[str] | None = None, timeout_s: float = 10.0
    ) -> None:
        """Poll until each of ``nodes`` (default: the live ones) has committed ``index``."""
        targets = [n for n in self.nodes if self.is_live(n)] if nodes is None else list(nodes)
        seen: dict[str, int | str] = {}

        def reached() -> bool:
            for node in targets:
                try:
                    seen[node] = self.metadata(node).committed_index
                except LedgerMQError as exc:
                    seen[node] = str(exc)
            return all(isinstance(v, int) and v >= index for v in seen.values())

        if not wait_until(reached, timeout_s, _POLL_S):
            raise AssertionError(
                f"index {index} not committed on {', '.join(targets)} within {timeout_s:g} s: "
                f"{seen}\n{self.log_tails()}"
            )

    # ------------------------------------------------------------------ teardown
    def close(self) -> None:
        """Close every client, kill every child (resumed first) and reap it. Idempotent."""
        clients, self._clients = self._clients, []
        if self._probe is not None:
            clients.append(self._probe)
            self._probe = None
        for client in clients:
            with contextlib.suppress(Exception):
                client.close()
        for node in self.nodes:
            self._children[node].kill()
        _live_groups.discard(self)

    def __enter__(self) -> ReplicaGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@atexit.register
def _close_leftovers() -> None:
    """Last resort: no replica outlives the interpreter that started it."""
    for group in list(_live_groups):
        group.close()
