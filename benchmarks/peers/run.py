"""``ledgermq bench peers`` / ``python -m benchmarks.peers``: the side-by-side run.

For each round, each system in turn: start its 3-node cluster fresh under a temporary directory,
run every workload that applies, kill the cluster. Rounds interleave the systems so that a
change in the machine's load hits all of them. Every process is killed whatever happens (an
exception, Ctrl-C, SIGTERM), and the temporary directory is removed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final

from benchmarks.peers.etcd_peer import EtcdSystem
from benchmarks.peers.ledgermq_peer import LedgerMQSystem
from benchmarks.peers.nats_peer import NatsSystem
from benchmarks.peers.rabbitmq_peer import RabbitSystem
from benchmarks.peers.report import (
    SystemInfo,
    format_peers_table,
    summarize,
    write_chart,
    write_json,
)
from benchmarks.peers.servers import INSTALL_HINT, PeerUnavailableError
from benchmarks.peers.workloads import WORKLOADS
from ledgermq.errors import LedgerMQError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from types import FrameType

    from benchmarks.peers.system import System
    from ledgermq.bench.stats import RunResult

__all__ = ["add_arguments", "build_systems", "main", "run_peers"]

SYSTEM_NAMES: Final = ("ledgermq", "nats-go", "nats-py", "rabbitmq", "etcd")
_SYNC_WORKLOADS: Final = ("produce batched", "produce single", "sequential", "latency @10k/s")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per workload")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds")
    parser.add_argument(
        "--systems",
        nargs="+",
        choices=SYSTEM_NAMES,
        default=list(SYSTEM_NAMES),
        help="what to run (default: everything installed)",
    )
    parser.add_argument(
        "--workloads",
        nargs="+",
        choices=[w.name for w in WORKLOADS],
        default=[w.name for w in WORKLOADS],
        metavar="WORKLOAD",
        help="subset of: " + ", ".join(repr(w.name) for w in WORKLOADS),
    )
    parser.add_argument(
        "--peer-path",
        default=None,
        help="where to look for the peers' binaries (default: $PATH and /usr/sbin)",
    )
    parser.add_argument("--json", type=Path, default=None, help="default: <results>/peers.json")
    parser.add_argument("--png", type=Path, default=None, help="default: <results>/peers.png")
    parser.add_argument(
        "--results-dir",
        type=Path,
        default=None,
        help="default: benchmarks/results when run from a clone, else the current directory",
    )


def build_systems(names: Sequence[str], peer_path: str | None) -> list[System]:
    """The systems in run order: LedgerMQ ASYNC_FLUSH first, its NATS peers, then SYNC_FLUSH and
    its peers (RabbitMQ quorum queues, etcd), which fsync on a majority before they answer."""
    systems: list[System] = []
    if "ledgermq" in names:
        systems.append(LedgerMQSystem("ASYNC_FLUSH"))
    if "nats-go" in names:
        systems.append(NatsSystem("go", peer_path))
    if "nats-py" in names:
        systems.append(NatsSystem("nats-py", peer_path))
    if "ledgermq" in names:
        systems.append(LedgerMQSystem("SYNC_FLUSH"))
    if "rabbitmq" in names:
        systems.append(RabbitSystem(peer_path))
    if "etcd" in names:
        systems.append(EtcdSystem(peer_path))
    return systems


def _applies(system: System, workload: str, ready: Sequence[System]) -> bool:
    """LedgerMQ SYNC_FLUSH runs the produce workloads, and consume only when a peer compared
    with it (RabbitMQ, etcd) runs too: without one, its consume row would say nothing new."""
    if isinstance(system, LedgerMQSystem) and system.flush == "SYNC_FLUSH":
        if workload == "consume":
            return any(other.baseline == system.key for other in ready)
        return workload in _SYNC_WORKLOADS
    return True


@contextlib.contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """SIGTERM raises SystemExit, so every ``finally`` (the clusters' kill) runs."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_peers(
    systems: Sequence[System],
    workloads: Sequence[str],
    *,
    rounds: int,
    duration_s: float,
    out: Callable[[str], None] = print,
) -> tuple[list[tuple[int, RunResult]], list[str], list[System]]:
    """Every round, every available system, every workload that applies to it.

    Returns ``(results as (round, result), skipped lines, systems that ran)``.
    """
    skipped: list[str] = []
    ready: list[System] = []
    for system in systems:
        reason = system.unavailable()
        if reason is None:
            ready.append(system)
        elif reason not in skipped:
            skipped.append(reason)
            out(reason)
    chosen = [w for w in WORKLOADS if w.name in workloads]
    results: list[tuple[int, RunResult]] = []
    with _sigterm_unwinds(), tempfile.TemporaryDirectory(prefix="ledgermq-peers-") as tmp:
        for round_number in range(1, rounds + 1):
            for system in list(ready):
                workdir = Path(tmp) / f"round{round_number}" / system.key.replace(" ", "_")
                workdir.mkdir(parents=True)
                try:
                    out(f"round {round_number}: {system.key} ...")
                    system.start(workdir)
                    for workload in chosen:
                        if not _applies(system, workload.name, ready):
                            continue
                        result = asyncio.run(system.run(workload, duration_s))
                        if result is not None:
                            results.append((round_number, result))
                except PeerUnavailableError as exc:
                    skipped.append(str(exc))
                    out(str(exc))
                    ready.remove(system)
                except LedgerMQError as exc:
                    line = f"{system.key}: round {round_number} failed: {exc}"
                    skipped.append(line.splitlines()[0])
                    out(line)
                finally:
                    system.close()
    return results, skipped, ready


def _results_dir(explicit: Path | None) -> Path:
    if explicit is not None:
        return explicit
    return Path(__file__).resolve().parents[1] / "results"  # benchmarks/results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.peers",
        description="LedgerMQ side by side with Raft-replicated peers",
        allow_abbrev=False,
    )
    add_arguments(parser)
    return run_from_args(parser.parse_args(argv))


def run_from_args(args: argparse.Namespace) -> int:
    if args.rounds < 1 or args.duration <= 0:
        print("--rounds must be >= 1 and --duration > 0", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.ERROR)
    systems = build_systems(args.systems, args.peer_path)
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    load_before = os.getloadavg()
    results, skipped, ran = run_peers(
        systems, args.workloads, rounds=args.rounds, duration_s=args.duration
    )
    infos = [SystemInfo(s.key, s.client, s.durability, s.baseline) for s in ran]
    rows = summarize([r for _, r in results], infos)
    if any(not isinstance(s, LedgerMQSystem) for s in systems) and all(
        isinstance(s, LedgerMQSystem) for s in ran
    ):
        skipped.append(f"no peer ran: install them with `{INSTALL_HINT}`")
    print()
    print(format_peers_table(rows, infos, skipped))
    directory = _results_dir(args.results_dir)
    meta = {
        "measured_at": started,
        "cpus": os.cpu_count(),
        "load_average_before": load_before,
        "rounds": args.rounds,
        "duration_s": args.duration,
        "body_bytes": 1024,
        "command": "ledgermq bench peers " + " ".join(sys.argv[1:]),
    }
    json_path = args.json or directory / "peers.json"
    write_json(json_path, meta, infos, results, rows, skipped)
    png_path = args.png or directory / "peers.png"
    problem = write_chart(png_path, rows, f"3-node clusters on one 2-vCPU host, {started}")
    print(f"\nJSON: {json_path}" + (f"\n{problem}" if problem else f"\nchart: {png_path}"))
    measured = {result.system for _, result in results}
    failed = [s.key for s in systems if isinstance(s, LedgerMQSystem) and s.key not in measured]
    if failed:
        # A benchmark that measured nothing of LedgerMQ must not look like a success.
        print(f"error: no round of {', '.join(failed)} completed (see above)", file=sys.stderr)
        return 1
    return 0
