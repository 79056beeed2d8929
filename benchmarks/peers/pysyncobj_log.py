"""PySyncObj as a 3-node replicated log: the comparison side of ``ledgermq ledger bench``.

Theory of operation
-------------------

PySyncObj (PyPI ``pysyncobj``) replicates method calls of a ``SyncObj`` subclass. Our state
machine, ``ReplicatedLog``, is the thinnest log it can hold: ``append(body)`` adds one body to an
in-memory list and ``append_batch(bodies)`` adds several in one Raft entry; both return the new
length. Each of the three nodes is a separate OS process on 127.0.0.1, like the three replicas of
a LedgerMQ ledger.

PySyncObj has no network client: commands are submitted on a node object in the same process.
So the driver (``run_pysyncobj``) hosts node 0 itself and starts nodes 1 and 2 as subprocesses
(``python -m benchmarks.peers.pysyncobj_log node ...``). Node 0 gets shorter election timeouts, so
it usually wins the first election and the driver submits on the leader (no forwarding hop); if
another node wins, the driver asks it to hand leadership over (PySyncObj's ``transfer`` utility
command, Raft TimeoutNow) and, if that fails too, runs anyway against a follower, which forwards
every command to the leader. The result's ``note`` says which happened.

Load: ``clients`` calls are kept outstanding at once, callback style: PySyncObj calls our
callback on its tick thread when the command is applied, and the callback issues the next call.
Latency is submission to that callback. A warm-up runs first and is not measured; calls that
complete inside the measured window count, calls still in flight at its end are drained and
ignored. Failed calls (``FAIL_REASON`` other than SUCCESS) are counted and re-issued.

Durability (``flush``), from PySyncObj 0.3.17's source, which has no fsync option of its own:

- ``journalFile`` is PySyncObj's file journal: every log entry is written into an ``mmap`` of
  the file as it is appended (leader) or received (follower), and never flushed while running.
  The Raft term and vote go to a ``.meta`` file (write + rename, not fsynced) before any vote
  leaves the node.
- ``flush="async"``: that journal as it is. A process crash loses nothing (the page cache keeps
  the mmap's bytes); a machine crash loses what the kernel had not yet written back.
- ``flush="sync"``: the same journal, plus a small shim (``_SyncedFileJournal``) that calls the
  journal's own ``flush()`` -- ``mmap.flush()``, i.e. ``msync(MS_SYNC)``, which on Linux writes
  the dirty pages and syncs the data like ``fdatasync`` -- after every entry it writes. The leader
  writes its entry before sending it and a follower before acknowledging it, so an acknowledged
  entry is on disk on at least two of the three nodes. One Raft entry is one sync: a batch of
  bodies (``append_batch``) shares one, but a follower that receives 10 entries in one message
  syncs 10 times (PySyncObj has no hook after a whole message).

Knobs set on every node, and why (defaults in brackets):

- ``appendEntriesUseBatch=False`` [True]: with True, new commands wait for the next periodic
  append_entries (``appendEntriesPeriod``, 100 ms) and the tick thread sleeps in ``poll`` up to
  ``autoTickPeriod`` (50 ms) before it even looks at the command queue, so one client gets about
  5-10 calls/s. False wakes the tick thread through a pipe on each submission and sends
  append_entries as soon as a command is in the log and as soon as entries are applied.
- ``appendEntriesBatchSizeBytes=1 MiB`` [64 KiB]: an entry larger than this is sent in chunks,
  one round trip each; a batch of 64 x 1 KiB bodies pickles to just over 64 KiB, and with the
  default the 16-client, batch-64 workload ran at ~280 entries/s instead of ~5,000.
- ``sendBufferSize``/``recvBufferSize=1 MiB`` [64 KiB]: socket buffers and bytes per ``recv``
  (made no measurable difference; 1 MiB so a whole batch fits).

Not a knob: PySyncObj's transport compresses every message with ``zlib`` (level 3), once per
follower. Our bodies are random, so this buys nothing and, with batches of 64, is about two thirds
of the leader's tick-thread time (profiled: ~5 ms per 64 KiB message on this host).
- ``logCompactionMinEntries``/``logCompactionMinTime`` effectively infinite [5,000 entries /
  300 s]: compaction pickles the whole state -- for a log, every body so far -- in a forked child
  and rewrites the journal, again every 5,000 entries. A replicated log never snapshots its own
  contents, and LedgerMQ's ledger does not either.
- Election timeouts: node 0 (the driver's) 1.0-1.5 s, nodes 1-2 2.5-3.5 s [0.4-1.4 s]: longer
  than the default so a busy 2-vCPU host does not trigger elections mid-run, and skewed so the
  driver's node tends to win.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ledgermq.bench.processes import child_env, free_ports, log_tail, stop_processes
from ledgermq.bench.stats import LatencyRecorder, Progress, RunResult, format_table, write_json
from ledgermq.errors import BenchmarkError, ConfigError, LedgerMQError

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

__all__ = ["SYSTEM", "run_pysyncobj"]

SYSTEM: Final = "pysyncobj"
FLUSH_MODES: Final = ("async", "sync")

_HOST: Final = "127.0.0.1"
_MIB: Final = 1 << 20
_APPEND_ENTRIES_BATCH_BYTES: Final = _MIB
_SOCKET_BUFFER_BYTES: Final = _MIB
_NEVER_COMPACT_ENTRIES: Final = 1 << 62
_NEVER_COMPACT_S: Final = 1e12
# (raftMinTimeout, raftMaxTimeout) in seconds; see the module docstring.
_DRIVER_ELECTION_TIMEOUT_S: Final = (1.0, 1.5)
_OTHER_ELECTION_TIMEOUT_S: Final = (2.5, 3.5)
# SyncObjConf.validate wants connectionTimeout >= every raftMaxTimeout.
_CONNECTION_TIMEOUT_S: Final = 4.0

# Distinct payloads cycled through by the load (random bytes, made once: generating them per
# call would cost the driver's CPU, which the hosted node shares).
_PAYLOAD_POOL: Final = 256
_READY_TIMEOUT_S: Final = 30.0
_TRANSFER_TIMEOUT_S: Final = 10.0
_DRAIN_TIMEOUT_S: Final = 10.0
_STOP_TIMEOUT_S: Final = 5.0
_POLL_S: Final = 0.05


# ---------------------------------------------------------------- the replicated state machine


@functools.cache
def _log_class() -> type[Any]:
    """``ReplicatedLog``, built on first use so ``ledgermq.bench`` imports without pysyncobj."""
    from pysyncobj import SyncObj, replicated

    class ReplicatedLog(SyncObj):  # type: ignore[misc] # pysyncobj is untyped
        """A list of bodies, appended to through Raft."""

        def __init__(self, self_address: str, partners: list[str], conf: Any) -> None:
            # bodies: every applied body, in log order. Set before SyncObj starts its tick
            # thread, which may apply entries before the constructor returns.
            self.bodies: list[bytes] = []
            super().__init__(self_address, partners, conf)

        @replicated  # type: ignore[untyped-decorator] # pysyncobj is untyped
        def append(self, body: bytes) -> int:
            self.bodies.append(body)
            return len(self.bodies)

        @replicated  # type: ignore[untyped-decorator] # pysyncobj is untyped
        def append_batch(self, bodies: list[bytes]) -> int:
            self.bodies.extend(bodies)
            return len(self.bodies)

    return ReplicatedLog


@contextlib.contextmanager
def _journal_for(flush: str) -> Iterator[None]:
    """While constructing a node, make PySyncObj's file journal msync after every write if sync.

    PySyncObj creates its journal inside ``SyncObj.__init__`` through the module-level
    ``createJournal``; the shim swaps that function for the duration of the constructor only.
    """
    if flush == "async":
        yield
        return
    from pysyncobj import syncobj as syncobj_module
    from pysyncobj.journal import FileJournal

    class _SyncedFileJournal(FileJournal):  # type: ignore[misc] # pysyncobj is untyped
        def add(self, command: bytes, idx: int, term: int) -> None:
            super().add(command, idx, term)
            self.flush()  # mmap.flush(): msync(MS_SYNC) of the journal's mapping

    original = syncobj_module.createJournal

    def create_journal(journal_file: str | None = None) -> Any:
        return original(None) if journal_file is None else _SyncedFileJournal(journal_file)

    syncobj_module.createJournal = create_journal
    try:
        yield
    finally:
        syncobj_module.createJournal = original


def _conf(journal_dir: str, *, preferred: bool) -> Any:
    from pysyncobj import SyncObjConf

    Path(journal_dir).mkdir(parents=True, exist_ok=True)
    low_s, high_s = _DRIVER_ELECTION_TIMEOUT_S if preferred else _OTHER_ELECTION_TIMEOUT_S
    return SyncObjConf(
        journalFile=os.path.join(journal_dir, "journal.bin"),
        fullDumpFile=os.path.join(journal_dir, "dump.bin"),
        appendEntriesUseBatch=False,
        appendEntriesBatchSizeBytes=_APPEND_ENTRIES_BATCH_BYTES,
        sendBufferSize=_SOCKET_BUFFER_BYTES,
        recvBufferSize=_SOCKET_BUFFER_BYTES,
        logCompactionMinEntries=_NEVER_COMPACT_ENTRIES,
        logCompactionMinTime=_NEVER_COMPACT_S,
        raftMinTimeout=low_s,
        raftMaxTimeout=high_s,
        connectionTimeout=_CONNECTION_TIMEOUT_S,
    )


def _start_node(self_address: str, partners: list[str], journal_dir: str, flush: str, *,
                preferred: bool) -> Any:  # fmt: skip
    conf = _conf(journal_dir, preferred=preferred)
    with _journal_for(flush):
        return _log_class()(self_address, partners, conf)


def _serve_node(args: argparse.Namespace) -> int:
    """``node`` sub-command: run one node until killed or until the driver that started it dies."""
    parent = os.getppid()
    partners = [address for address in args.partners.split(",") if address]
    node = _start_node(args.self_address, partners, args.journal, args.flush, preferred=False)
    try:
        while os.getppid() == parent:
            time.sleep(0.5)
    finally:
        node.destroy()
    return 0


# ---------------------------------------------------------------- processes


def _spawn_node(
    self_address: str, partners: list[str], journal_dir: str, flush: str, log_path: str
) -> subprocess.Popen[bytes]:
    command = [
        sys.executable, "-m", "benchmarks.peers.pysyncobj_log", "node",
        "--self", self_address, "--partners", ",".join(partners),
        "--journal", journal_dir, "--flush", flush,
    ]  # fmt: skip
    with open(log_path, "wb") as log:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=child_env(),
            start_new_session=True,  # a Ctrl-C in the terminal reaches only the driver
        )


# ---------------------------------------------------------------- the load


class _Load:
    """Keeps ``clients`` calls outstanding on a node; callbacks run on PySyncObj's tick thread."""

    def __init__(self, node: Any, *, batch: int, body_bytes: int, expected_calls: int) -> None:
        from pysyncobj import FAIL_REASON

        self._success: int = FAIL_REASON.SUCCESS
        self._submit = node.append if batch == 1 else node.append_batch
        bodies = [os.urandom(body_bytes) for _ in range(_PAYLOAD_POOL)]
        self._payloads: list[Any] = (
            bodies
            if batch == 1
            else [
                [bodies[(i * batch + j) % _PAYLOAD_POOL] for j in range(batch)] for i in range(16)
            ]
        )
        self._next_payload = 0
        self._batch = batch
        self._lock = threading.RLock()  # RLock: a call can fail synchronously into _done
        # Window, in time.perf_counter() seconds: completions in [measure_from_s, stop_at_s)
        # are measured; no call is issued at or after stop_at_s.
        self.measure_from_s = float("inf")
        self.stop_at_s = float("inf")
        self.latencies = LatencyRecorder(expected_calls)
        self.entries = 0  # bodies acknowledged inside the window
        self.errors = 0  # failed calls, whole run (warm-up included)
        self.outstanding = 0  # calls submitted and not yet called back

    def start(self, clients: int, warmup_s: float, duration_s: float) -> None:
        now = time.perf_counter()
        self.measure_from_s = now + warmup_s
        self.stop_at_s = self.measure_from_s + duration_s
        with self._lock:
            for _ in range(clients):
                self._issue()

    def _issue(self) -> None:
        payload = self._payloads[self._next_payload]
        self._next_payload = (self._next_payload + 1) % len(self._payloads)
        self.outstanding += 1
        self._submit(payload, callback=functools.partial(self._done, time.perf_counter()))

    def _done(self, started_s: float, _result: object, error: int) -> None:
        now = time.perf_counter()
        with self._lock:
            self.outstanding -= 1
            if error != self._success:
                self.errors += 1
            elif self.measure_from_s <= now < self.stop_at_s:
                self.latencies.record(now - started_s)
                self.entries += self._batch
            if now < self.stop_at_s:
                self._issue()


# ---------------------------------------------------------------- the driver


def _wait_ready(
    node: Any, processes: dict[str, subprocess.Popen[bytes]], logs: dict[str, str]
) -> None:
    """Until node 0 knows a leader, has applied the log and is connected to both partners."""
    deadline = time.monotonic() + _READY_TIMEOUT_S
    while True:
        for address, process in processes.items():
            code = process.poll()
            if code is not None:
                raise BenchmarkError(
                    f"PySyncObj node {address} exited with code {code} before the cluster was "
                    f"ready; the end of its log:\n{log_tail(logs[address])}"
                )
        connected = all(node.isNodeConnected(partner) for partner in node.otherNodes)
        if node._getLeader() is not None and node.isReady() and connected:
            return
        if time.monotonic() > deadline:
            raise BenchmarkError(
                f"the PySyncObj cluster {node.selfNode.address} + {', '.join(processes)} had no "
                f"ready leader after {_READY_TIMEOUT_S:.0f} s (leader: {node._getLeader()}, "
                f"connected to both partners: {connected}, ready: {node.isReady()})"
            )
        time.sleep(_POLL_S)


def _take_leadership(node: Any) -> str:
    """Ask the current leader to hand over to node 0; returns how it went, for the note."""
    from pysyncobj.utility import TcpUtility, UtilityException

    if node._isLeader():
        return "elected"
    leader = node._getLeader()
    try:
        TcpUtility(timeout=_TRANSFER_TIMEOUT_S).executeCommand(
            leader.address, ["transfer", node.selfNode.address]
        )
    except UtilityException as exc:
        return f"transfer from {leader.address} refused ({exc})"
    deadline = time.monotonic() + _TRANSFER_TIMEOUT_S
    while time.monotonic() < deadline:
        if node._isLeader() and node.isReady():
            return f"took over from {leader.address}"
        time.sleep(_POLL_S)
    return f"transfer from {leader.address} did not complete"


def run_pysyncobj(
    *,
    mode: str,
    clients: int,
    batch: int,
    body_bytes: int,
    duration_s: float,
    flush: str,
    workdir: str,
    progress: Progress | None = None,
    warmup_s: float = 1.0,
) -> RunResult:
    """Run one workload on a fresh 3-node PySyncObj cluster on 127.0.0.1 and measure it.

    Args:
        mode: workload label for the table and JSON (rows with the same label compare).
        clients: calls kept outstanding at once (>= 1).
        batch: bodies per call; 1 uses ``append(body)``, more ``append_batch(bodies)``.
        body_bytes: size of each body (random bytes).
        duration_s: length of the measured window, after the warm-up.
        flush: ``"async"`` or ``"sync"``; see the module docstring for what each means here.
        workdir: an existing directory; the nodes' journals go to a fresh subdirectory of it,
            deleted afterwards.
        progress: progress bar to update during the measured window (default: none).
        warmup_s: unmeasured load before the window (default 1.0 s).

    Returns:
        The measurements; ``note`` says what ``flush`` meant and whether the driver's node led.

    Raises:
        ConfigError: an argument is out of range.
        BenchmarkError: a node process died or the cluster had no ready leader within 30 s.
    """
    if clients < 1 or batch < 1 or body_bytes < 0 or duration_s <= 0 or warmup_s < 0:
        raise ConfigError(
            f"clients ({clients}) and batch ({batch}) must be >= 1, body_bytes ({body_bytes}) "
            f">= 0, duration_s ({duration_s}) > 0 and warmup_s ({warmup_s}) >= 0"
        )
    if flush not in FLUSH_MODES:
        raise ConfigError(f"flush must be one of {', '.join(FLUSH_MODES)}, not {flush!r}")
    run_dir = tempfile.mkdtemp(prefix="pysyncobj-", dir=workdir)
    addresses = [f"{_HOST}:{port}" for port in free_ports(3)]
    processes: dict[str, subprocess.Popen[bytes]] = {}
    logs: dict[str, str] = {}
    node: Any = None
    try:
        for i, address in enumerate(addresses[1:], start=1):
            logs[address] = os.path.join(run_dir, f"node{i}.log")
            processes[address] = _spawn_node(
                address,
                [a for a in addresses if a != address],
                os.path.join(run_dir, f"node{i}"),
                flush,
                logs[address],
            )
        node = _start_node(
            addresses[0], addresses[1:], os.path.join(run_dir, "node0"), flush, preferred=True
        )
        _wait_ready(node, processes, logs)
        leadership = _take_leadership(node)
        led_at_start, term_at_start = node._isLeader(), node._getTerm()
        rate_guess = 200_000 if flush == "async" else 20_000
        load = _Load(
            node,
            batch=batch,
            body_bytes=body_bytes,
            expected_calls=int(rate_guess * duration_s / batch) + 1024,
        )
        load.start(clients, warmup_s, duration_s)
        label = f"{SYSTEM} {mode} c{clients} b{batch} {flush}"
        while (now := time.perf_counter()) < load.stop_at_s:
            if progress is not None and now >= load.measure_from_s:
                progress.update(label, now - load.measure_from_s, duration_s, load.entries)
            time.sleep(_POLL_S)
        if progress is not None:
            progress.finish()
        drain_deadline = time.monotonic() + _DRAIN_TIMEOUT_S
        while load.outstanding > 0 and time.monotonic() < drain_deadline:
            time.sleep(_POLL_S)
        led_throughout = led_at_start and node._isLeader() and node._getTerm() == term_at_start
        dead = [a for a, p in processes.items() if p.poll() is not None]
        note = _note(flush, leadership, led_throughout, node, dead, load.outstanding)
        recorder = load.latencies
        return RunResult(
            system=SYSTEM,
            mode=mode,
            clients=clients,
            batch=batch,
            body_bytes=body_bytes,
            flush=flush,
            entries=load.entries,
            seconds=duration_s,
            entries_per_s=load.entries / duration_s,
            p50_ms=recorder.percentile(50),
            p99_ms=recorder.percentile(99),
            max_ms=recorder.max_ms(),
            errors=load.errors,
            note=note,
        )
    finally:
        if node is not None:
            node.destroy()
        stop_processes(list(processes.values()))
        if node is not None:
            deadline = time.monotonic() + _STOP_TIMEOUT_S
            while node.tick_thread_alive() and time.monotonic() < deadline:
                time.sleep(_POLL_S)
        shutil.rmtree(run_dir, ignore_errors=True)


def _note(
    flush: str, leadership: str, led_throughout: bool, node: Any, dead: list[str], stuck: int
) -> str:
    journal = (
        "journal msynced after every entry written (shim: PySyncObj has no fsync option)"
        if flush == "sync"
        else "mmap journal, never flushed by PySyncObj"
    )
    if led_throughout:
        where = f"driver's node was leader throughout ({leadership})"
    else:
        where = (
            f"driver's node was NOT leader throughout ({leadership}; leader at end: "
            f"{node._getLeader()}); commands forwarded"
        )
    parts = [journal, where]
    if dead:
        parts.append(f"node(s) {', '.join(dead)} died during the run")
    if stuck:
        parts.append(f"{stuck} call(s) never completed")
    return "; ".join(parts)


# ---------------------------------------------------------------- command line


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.peers.pysyncobj_log",
        description="PySyncObj as a 3-node replicated log on 127.0.0.1: run a benchmark "
        "(run) or one node of the cluster (node, started by run).",
        allow_abbrev=False,
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    run = commands.add_parser(
        "run", help="benchmark; every combination of the lists given", allow_abbrev=False
    )
    run.add_argument("--clients", type=int, nargs="+", default=[1], help="outstanding calls")
    run.add_argument("--batch", type=int, nargs="+", default=[1], help="bodies per call")
    run.add_argument("--flush", choices=FLUSH_MODES, nargs="+", default=["async"])
    run.add_argument("--body-bytes", type=int, default=1024, help="bytes per body (1024)")
    run.add_argument("--duration", type=float, default=5.0, help="measured seconds (5)")
    run.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds first (1)")
    run.add_argument("--mode", default="append", help="workload label (append)")
    run.add_argument("--workdir", default=tempfile.gettempdir(), help="for the journals")
    run.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    run.add_argument("--progress", action="store_true", help="progress bar even if not a TTY")
    node = commands.add_parser("node", help="one node (started by run)", allow_abbrev=False)
    node.add_argument("--self", dest="self_address", required=True, help="HOST:PORT")
    node.add_argument("--partners", required=True, help="HOST:PORT,HOST:PORT")
    node.add_argument("--journal", required=True, help="directory for this node's files")
    node.add_argument("--flush", choices=FLUSH_MODES, default="async")
    return parser


def _run_command(args: argparse.Namespace) -> int:
    progress = Progress(force=args.progress)
    results = [
        run_pysyncobj(
            mode=args.mode,
            clients=clients,
            batch=batch,
            body_bytes=args.body_bytes,
            duration_s=args.duration,
            flush=flush,
            workdir=args.workdir,
            progress=progress,
            warmup_s=args.warmup,
        )
        for flush in args.flush
        for clients in args.clients
        for batch in args.batch
    ]
    print(format_table(results))
    if args.json:
        from importlib.metadata import version

        write_json(
            args.json,
            results,
            {
                "system": SYSTEM,
                "pysyncobj_version": version("pysyncobj"),
                "python": platform.python_version(),
                "cpus": os.cpu_count(),
                "warmup_s": args.warmup,
            },
        )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    if args.command == "node":
        return _serve_node(args)
    try:
        return _run_command(args)
    except LedgerMQError as exc:
        print(f"pysyncobj_log: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
