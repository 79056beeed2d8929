"""Ledger store throughput and recovery time, against raw-file baselines on the same disk.

Run ``python benchmarks/store.py`` (``--quick`` for a smoke test of a few seconds). It prints a
table and writes JSON to ``benchmarks/results/store.json``.

What is measured, and why:

- **Appends** of 1 KiB (1024-byte) bodies to a fresh ``LedgerStore`` with DLedger's geometry
  (1 GiB data segments, 5,242,880-record index segments), one at a time (``append``) and 64 at a
  time (``append_batch``), with ``flush="async"`` (DLedger's default: page cache, background
  ``fdatasync`` every 10 ms) and ``flush="sync"`` (``fdatasync`` before each append returns). The
  async runs write 256 MiB of payload each, the size of a busy broker's burst, big enough to
  leave the CPU caches and small enough to run in seconds.
- **Raw baselines** write the same payload bytes (1 KiB per entry, no header, no index, no CRC)
  to a fresh preallocated file of the segment's size: through ``mmap`` 1 KiB and 64 KiB at a time,
  with ``os.write`` 64 KiB at a time, and with ``os.write`` + ``fdatasync`` per 64 KiB (the sync
  baseline). They are what the store's format, CRCs and bookkeeping cost is compared against
  (``research/limits.md`` section 1.5 measured the same shapes).
- **Recovery**: the time ``LedgerStore.open`` takes to scan and verify a 1 GiB log (every entry's
  CRCs and index record), with a warm page cache (repeated) and once after evicting the files
  with ``posix_fadvise(DONTNEED)`` (cold; a restart after a reboot reads from the disk).

Timing rules:

- Store timings cover the ``append*`` calls only; the first one creates the data and index
  segments (``posix_fallocate`` + ``fsync``, a few ms). The raw timings therefore start at file
  creation (open, ``posix_fallocate``, ``fsync``, ``mmap``), so both sides pay for a fresh file.
- The final flush is timed separately (the store's ``close()``, the raw file's ``fdatasync`` and
  close) and reported as "incl. close", because async numbers without it flatter page-cache writes.
- Every run uses a fresh directory or file, deleted afterwards. The host is shared and noisy
  (``research/limits.md``: run-to-run spread of 2-5x), so every workload runs ``--repeats``
  times, interleaved round by round (the order rotates each round), and the table reports the
  median with the min and max. Ratios are ratios of medians; the JSON also holds the median of
  the per-round ratios, which pairs runs made at about the same time.

Goals (judged on medians): batched async appends reach at least half of the raw 64 KiB
baselines; sync appends in batches of 64 reach 100,000 entries/s; recovery of 1 GiB takes at
most 3 s.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import mmap
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

from ledgermq.store import LedgerStore
from ledgermq.store.entry_format import HEADER_SIZE

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

BODY_BYTES: Final = 1024
BATCH: Final = 64
TERM: Final = 1
GIB: Final = 1 << 30
DEFAULT_JSON: Final = Path(__file__).resolve().parent / "results" / "store.json"

# Workload names (also the JSON keys).
ASYNC_SINGLE: Final = "store append, async, single"
ASYNC_BATCH: Final = "store append, async, batch 64"
SYNC_SINGLE: Final = "store append, sync, single"
SYNC_BATCH: Final = "store append, sync, batch 64"
RAW_MMAP_1K: Final = "raw mmap, 1 KiB writes"
RAW_MMAP_64K: Final = "raw mmap, 64 KiB writes"
RAW_WRITE_64K: Final = "raw os.write, 64 KiB writes"
RAW_WRITE_SYNC_64K: Final = "raw os.write 64 KiB + fdatasync"

RATIOS: Final = (
    ("async batch 64 / raw mmap 64 KiB", ASYNC_BATCH, RAW_MMAP_64K),
    ("async batch 64 / raw os.write 64 KiB", ASYNC_BATCH, RAW_WRITE_64K),
    ("async single / raw mmap 1 KiB", ASYNC_SINGLE, RAW_MMAP_1K),
    ("sync batch 64 / raw write+fdatasync 64 KiB", SYNC_BATCH, RAW_WRITE_SYNC_64K),
)
BATCHED_ASYNC_RATIO_GOAL: Final = 0.5
SYNC_BATCH_GOAL_EPS: Final = 100_000.0
RECOVERY_GOAL_S_PER_GIB: Final = 3.0


@dataclass(frozen=True, slots=True)
class Config:
    """Sizes of one benchmark session."""

    async_entries: int
    """Entries per async store run and per raw run without sync (262,144 = 256 MiB)."""
    sync_single_entries: int
    """Entries per ``flush="sync"`` single-append run (one ``fdatasync`` each)."""
    sync_batch_entries: int
    """Entries per ``flush="sync"`` batch run and per raw write+fdatasync run."""
    data_segment_bytes: int
    index_segment_entries: int
    repeats: int
    recovery_gib: float
    quick: bool


@dataclass(frozen=True, slots=True)
class Run:
    """One timed run of one workload."""

    entries: int
    seconds: float
    """Time of the appends or writes (file creation included, final flush excluded)."""
    close_seconds: float
    """Time of the final flush and close (store ``close()``; raw ``fdatasync`` + close)."""

    @property
    def entries_per_s(self) -> float:
        return self.entries / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.entries * BODY_BYTES / 1e6 / self.seconds

    @property
    def entries_per_s_incl_close(self) -> float:
        return self.entries / (self.seconds + self.close_seconds)

    def to_json(self) -> dict[str, float]:
        return {
            "entries": self.entries,
            "seconds": self.seconds,
            "close_seconds": self.close_seconds,
            "entries_per_s": self.entries_per_s,
            "mb_per_s": self.mb_per_s,
            "entries_per_s_incl_close": self.entries_per_s_incl_close,
        }


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    entries: int
    run: Callable[[str], Run]
    """Runs the workload in a scratch path that does not exist yet (a directory or a file)."""


@dataclass(frozen=True, slots=True)
class Spread:
    median: float
    min: float
    max: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        return cls(statistics.median(values), min(values), max(values))

    def to_json(self) -> dict[str, float]:
        return {"median": self.median, "min": self.min, "max": self.max}


# ---------------------------------------------------------------------- workloads
def store_workload(
    path: str, cfg: Config, flush: Literal["async", "sync"], batch: int, entries: int, body: bytes
) -> Run:
    """Append ``entries`` bodies to a fresh store, ``batch`` per call; time appends, then close."""
    assert entries % batch == 0, (entries, batch)
    store = LedgerStore.open(
        path,
        data_segment_bytes=cfg.data_segment_bytes,
        index_segment_entries=cfg.index_segment_entries,
        flush=flush,
    )
    try:
        if batch == 1:
            append = store.append
            start = time.perf_counter()
            for _ in range(entries):
                append(TERM, body)
        else:
            append_batch = store.append_batch
            bodies = [body] * batch
            start = time.perf_counter()
            for _ in range(entries // batch):
                append_batch(TERM, bodies)
        seconds = time.perf_counter() - start
        assert store.end_index == entries - 1, (store.end_index, entries)
    except BaseException:
        store.close()
        raise
    start = time.perf_counter()
    store.close()
    return Run(entries, seconds, time.perf_counter() - start)


def _create_raw_file(path: str, size: int, flags: int) -> int:
    """A fresh file of ``size`` bytes, preallocated and its size synced, as the store does."""
    fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.posix_fallocate(fd, 0, size)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        raise
    return fd


def raw_mmap_workload(path: str, file_bytes: int, chunk: int, entries: int, body: bytes) -> Run:
    """Slice-assign ``chunk`` entries' bytes at a time into a mapping of a fresh file."""
    assert entries % chunk == 0, (entries, chunk)
    assert entries * len(body) <= file_bytes, (entries, file_bytes)
    start = time.perf_counter()
    fd = _create_raw_file(path, file_bytes, os.O_RDWR)
    try:
        mm = mmap.mmap(fd, file_bytes, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        try:
            off = 0
            if chunk == 1:
                step = len(body)
                for _ in range(entries):
                    mm[off : off + step] = body
                    off += step
            else:
                bodies = [body] * chunk
                join = b"".join
                step = len(body) * chunk
                for _ in range(entries // chunk):
                    mm[off : off + step] = join(bodies)
                    off += step
            seconds = time.perf_counter() - start
            start = time.perf_counter()
            os.fdatasync(fd)
        finally:
            mm.close()
    finally:
        os.close(fd)
    return Run(entries, seconds, time.perf_counter() - start)


def raw_write_workload(
    path: str, file_bytes: int, chunk: int, entries: int, body: bytes, *, sync_each: bool
) -> Run:
    """``os.write`` of ``chunk`` entries' bytes at a time, with an ``fdatasync`` after each if
    ``sync_each``, into a fresh preallocated file opened ``O_WRONLY``."""
    assert entries % chunk == 0, (entries, chunk)
    assert entries * len(body) <= file_bytes, (entries, file_bytes)
    bodies = [body] * chunk
    join = b"".join
    write = os.write
    fdatasync = os.fdatasync
    start = time.perf_counter()
    fd = _create_raw_file(path, file_bytes, os.O_WRONLY)
    try:
        if sync_each:
            for _ in range(entries // chunk):
                write(fd, join(bodies))
                fdatasync(fd)
        else:
            for _ in range(entries // chunk):
                write(fd, join(bodies))
        seconds = time.perf_counter() - start
        start = time.perf_counter()
        fdatasync(fd)
    finally:
        os.close(fd)
    return Run(entries, seconds, time.perf_counter() - start)


def make_workloads(cfg: Config, body: bytes) -> list[Workload]:
    seg = cfg.data_segment_bytes
    n_async, n_sync1, n_sync64 = cfg.async_entries, cfg.sync_single_entries, cfg.sync_batch_entries

    def store(flush: Literal["async", "sync"], batch: int, n: int) -> Callable[[str], Run]:
        return lambda path: store_workload(path, cfg, flush, batch, n, body)

    return [
        Workload(ASYNC_SINGLE, n_async, store("async", 1, n_async)),
        Workload(ASYNC_BATCH, n_async, store("async", BATCH, n_async)),
        Workload(SYNC_SINGLE, n_sync1, store("sync", 1, n_sync1)),
        Workload(SYNC_BATCH, n_sync64, store("sync", BATCH, n_sync64)),
        Workload(RAW_MMAP_1K, n_async, lambda p: raw_mmap_workload(p, seg, 1, n_async, body)),
        Workload(RAW_MMAP_64K, n_async, lambda p: raw_mmap_workload(p, seg, BATCH, n_async, body)),
        Workload(
            RAW_WRITE_64K,
            n_async,
            lambda p: raw_write_workload(p, seg, BATCH, n_async, body, sync_each=False),
        ),
        Workload(
            RAW_WRITE_SYNC_64K,
            n_sync64,
            lambda p: raw_write_workload(p, seg, BATCH, n_sync64, body, sync_each=True),
        ),
    ]


def remove(path: str) -> None:
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


def run_rounds(cfg: Config, workloads: list[Workload], scratch: str) -> dict[str, list[Run]]:
    """Every workload once per round, ``cfg.repeats`` rounds; the start rotates each round."""
    runs: dict[str, list[Run]] = {w.name: [] for w in workloads}
    for round_no in range(cfg.repeats):
        shift = round_no % len(workloads)
        for workload in workloads[shift:] + workloads[:shift]:
            path = os.path.join(scratch, f"round{round_no}")
            remove(path)
            gc.collect()
            try:
                run = workload.run(path)
            finally:
                remove(path)
            runs[workload.name].append(run)
            progress(
                f"[round {round_no + 1}/{cfg.repeats}] {workload.name}: "
                f"{run.entries_per_s:,.0f} entries/s, {run.mb_per_s:,.0f} MB/s "
                f"(close {run.close_seconds:.3f} s)"
            )
    return runs


# ---------------------------------------------------------------------- recovery
@dataclass(frozen=True, slots=True)
class RecoveryResult:
    entries: int
    data_bytes: int
    build_seconds: float
    warm_open_seconds: list[float]
    warm_close_seconds: list[float]
    cold_open_seconds: float
    cold_close_seconds: float
    entries_scanned: int

    @property
    def gib(self) -> float:
        return self.data_bytes / GIB

    def to_json(self) -> dict[str, object]:
        return {
            "entries": self.entries,
            "data_bytes": self.data_bytes,
            "gib": self.gib,
            "entries_scanned": self.entries_scanned,
            "build_seconds": self.build_seconds,
            "warm_open_seconds": Spread.of(self.warm_open_seconds).to_json(),
            "warm_open_runs": self.warm_open_seconds,
            "warm_close_seconds": self.warm_close_seconds,
            "cold_open_seconds": self.cold_open_seconds,
            "cold_close_seconds": self.cold_close_seconds,
            "cold_method": "posix_fadvise(POSIX_FADV_DONTNEED) on every file in data/ and index/",
        }


def evict_from_page_cache(directory: str) -> None:
    """Drop the (clean) cached pages of every segment file of a closed store."""
    for sub in ("data", "index"):
        folder = os.path.join(directory, sub)
        for name in sorted(os.listdir(folder)):
            fd = os.open(os.path.join(folder, name), os.O_RDONLY)
            try:
                os.fdatasync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def timed_open(cfg: Config, directory: str, entries: int) -> tuple[float, float, int]:
    """Open (recover) and close the store; returns open seconds, close seconds, entries scanned."""
    start = time.perf_counter()
    store = LedgerStore.open(
        directory,
        data_segment_bytes=cfg.data_segment_bytes,
        index_segment_entries=cfg.index_segment_entries,
        background=False,
    )
    open_seconds = time.perf_counter() - start
    try:
        assert store.end_index == entries - 1, (store.end_index, entries)
        scanned = store.recovery.entries_scanned
    finally:
        start = time.perf_counter()
        store.close()
    return open_seconds, time.perf_counter() - start, scanned


def run_recovery(cfg: Config, scratch: str, body: bytes) -> RecoveryResult:
    """Build a log of ``cfg.recovery_gib`` GiB (entries included), then time recovery of it."""
    entry_bytes = HEADER_SIZE + len(body)
    entries = int(cfg.recovery_gib * GIB) // entry_bytes
    directory = os.path.join(scratch, "recovery")
    remove(directory)
    progress(
        f"[recovery] building a {entries * entry_bytes / GIB:.2f} GiB log ({entries:,} entries)"
    )
    start = time.perf_counter()
    store = LedgerStore.open(
        directory,
        data_segment_bytes=cfg.data_segment_bytes,
        index_segment_entries=cfg.index_segment_entries,
        flush="async",
    )
    try:
        bodies = [body] * BATCH
        for _ in range(entries // BATCH):
            store.append_batch(TERM, bodies)
        if entries % BATCH:
            store.append_batch(TERM, bodies[: entries % BATCH])
    finally:
        store.close()
    build_seconds = time.perf_counter() - start
    warm_open: list[float] = []
    warm_close: list[float] = []
    scanned = 0
    try:
        timed_open(cfg, directory, entries)  # untimed: every timed warm run sees the same cache
        for k in range(cfg.repeats):
            open_s, close_s, scanned = timed_open(cfg, directory, entries)
            warm_open.append(open_s)
            warm_close.append(close_s)
            progress(f"[recovery {k + 1}/{cfg.repeats}] warm open {open_s:.3f} s")
        evict_from_page_cache(directory)
        cold_open, cold_close, _ = timed_open(cfg, directory, entries)
        progress(f"[recovery] cold open {cold_open:.3f} s")
    finally:
        remove(directory)
    return RecoveryResult(
        entries,
        entries * entry_bytes,
        build_seconds,
        warm_open,
        warm_close,
        cold_open,
        cold_close,
        scanned,
    )


# ---------------------------------------------------------------------- report
def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass(frozen=True, slots=True)
class Goal:
    name: str
    value: float
    target: str
    passed: bool

    def to_json(self) -> dict[str, object]:
        return {"value": self.value, "target": self.target, "pass": self.passed}


def compute_ratios(runs: dict[str, list[Run]]) -> dict[str, dict[str, float]]:
    ratios: dict[str, dict[str, float]] = {}
    for label, top, bottom in RATIOS:
        top_eps = [r.entries_per_s for r in runs[top]]
        bottom_eps = [r.entries_per_s for r in runs[bottom]]
        ratios[label] = {
            "of_medians": statistics.median(top_eps) / statistics.median(bottom_eps),
            "median_per_round": statistics.median(
                t / b for t, b in zip(top_eps, bottom_eps, strict=True)
            ),
        }
    return ratios


def compute_goals(
    runs: dict[str, list[Run]], ratios: dict[str, dict[str, float]], recovery: RecoveryResult
) -> list[Goal]:
    goals = [
        Goal(
            f"{label} >= {BATCHED_ASYNC_RATIO_GOAL}",
            ratios[label]["of_medians"],
            f">= {BATCHED_ASYNC_RATIO_GOAL}",
            ratios[label]["of_medians"] >= BATCHED_ASYNC_RATIO_GOAL,
        )
        for label, _, _ in RATIOS[:2]
    ]
    sync_eps = statistics.median(r.entries_per_s for r in runs[SYNC_BATCH])
    goals.append(
        Goal(
            f"{SYNC_BATCH} >= 100,000 entries/s",
            sync_eps,
            f">= {SYNC_BATCH_GOAL_EPS:.0f} entries/s",
            sync_eps >= SYNC_BATCH_GOAL_EPS,
        )
    )
    warm = statistics.median(recovery.warm_open_seconds) / recovery.gib
    cold = recovery.cold_open_seconds / recovery.gib
    for label, value in (("warm cache, median", warm), ("cold cache, one run", cold)):
        goals.append(
            Goal(
                f"recovery <= 3 s per GiB ({label})",
                value,
                f"<= {RECOVERY_GOAL_S_PER_GIB} s/GiB",
                value <= RECOVERY_GOAL_S_PER_GIB,
            )
        )
    return goals


def print_report(
    cfg: Config,
    runs: dict[str, list[Run]],
    ratios: dict[str, dict[str, float]],
    recovery: RecoveryResult,
    goals: list[Goal],
) -> None:
    def spread(values: Sequence[float], scale: float, digits: int) -> str:
        s = Spread.of([v / scale for v in values])
        return f"{s.median:,.{digits}f} ({s.min:,.{digits}f}-{s.max:,.{digits}f})"

    print(
        f"\nLedger store benchmark: 1 KiB bodies, data segments of {cfg.data_segment_bytes:,} "
        f"bytes, {cfg.repeats} interleaved rounds; median (min-max)"
    )
    header = (
        f"{'workload':<34} {'entries':>8} {'k entries/s':>26} {'payload MB/s':>22} "
        f"{'k entries/s incl. close':>26} {'close s':>7}"
    )
    print(header)
    print("-" * len(header))
    for name, name_runs in runs.items():
        print(
            f"{name:<34} {name_runs[0].entries:>8,} "
            f"{spread([r.entries_per_s for r in name_runs], 1e3, 1):>26} "
            f"{spread([r.mb_per_s for r in name_runs], 1, 0):>22} "
            f"{spread([r.entries_per_s_incl_close for r in name_runs], 1e3, 1):>26} "
            f"{statistics.median(r.close_seconds for r in name_runs):>7.3f}"
        )
    print("\nRatios of entries/s (of medians; median of per-round ratios)")
    for label, ratio in ratios.items():
        print(f"  {label:<44} {ratio['of_medians']:6.2f}   {ratio['median_per_round']:6.2f}")
    warm = Spread.of(recovery.warm_open_seconds)
    print(
        f"\nRecovery: open() of a {recovery.gib:.2f} GiB log ({recovery.entries:,} entries, "
        f"{recovery.entries_scanned:,} scanned)"
    )
    print(
        f"  warm page cache, {len(recovery.warm_open_seconds)} runs: {warm.median:.3f} s "
        f"({warm.min:.3f}-{warm.max:.3f}), "
        f"{recovery.entries / warm.median / 1e3:,.0f}k entries/s; "
        f"close {statistics.median(recovery.warm_close_seconds):.3f} s"
    )
    print(
        f"  cold (posix_fadvise DONTNEED on data/ and index/ files), 1 run: "
        f"{recovery.cold_open_seconds:.3f} s; close {recovery.cold_close_seconds:.3f} s"
    )
    print(f"  (building the log took {recovery.build_seconds:.2f} s, close included)")
    print("\nGoals (medians)")
    for goal in goals:
        print(
            f"  {'PASS' if goal.passed else 'MISS'}  {goal.name:<56} "
            f"{goal.value:,.2f} (target {goal.target})"
        )


def to_json(
    cfg: Config,
    runs: dict[str, list[Run]],
    ratios: dict[str, dict[str, float]],
    recovery: RecoveryResult,
    goals: list[Goal],
) -> dict[str, object]:
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "config": {
            "quick": cfg.quick,
            "repeats": cfg.repeats,
            "body_bytes": BODY_BYTES,
            "batch": BATCH,
            "data_segment_bytes": cfg.data_segment_bytes,
            "index_segment_entries": cfg.index_segment_entries,
            "recovery_gib": cfg.recovery_gib,
        },
        "workloads": {
            name: {
                "entries_per_s": Spread.of([r.entries_per_s for r in name_runs]).to_json(),
                "mb_per_s": Spread.of([r.mb_per_s for r in name_runs]).to_json(),
                "entries_per_s_incl_close": Spread.of(
                    [r.entries_per_s_incl_close for r in name_runs]
                ).to_json(),
                "runs": [r.to_json() for r in name_runs],
            }
            for name, name_runs in runs.items()
        },
        "ratios": ratios,
        "recovery": recovery.to_json(),
        "goals": {goal.name: goal.to_json() for goal in goals},
    }


# ---------------------------------------------------------------------- main
def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    parser.add_argument("--repeats", type=int, default=3, help="rounds per workload (default 3)")
    parser.add_argument(
        "--dir", help="scratch directory to create a temporary directory in (default: the system's)"
    )
    parser.add_argument(
        "--json", type=Path, default=DEFAULT_JSON, help=f"results file (default {DEFAULT_JSON})"
    )
    parser.add_argument(
        "--recovery-gib",
        type=float,
        default=None,
        help="size of the recovery log in GiB (default 1.0; 1/16 with --quick)",
    )
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if args.recovery_gib is not None and args.recovery_gib <= 0:
        parser.error("--recovery-gib must be positive")
    return args


def make_config(args: argparse.Namespace) -> Config:
    repeats: int = args.repeats
    recovery_gib: float | None = args.recovery_gib
    if args.quick:
        return Config(
            async_entries=16 * 1024,  # 16 MiB
            sync_single_entries=300,
            sync_batch_entries=8 * 1024,
            data_segment_bytes=64 << 20,
            index_segment_entries=1 << 20,
            repeats=repeats,
            recovery_gib=recovery_gib if recovery_gib is not None else 1 / 16,
            quick=True,
        )
    return Config(
        async_entries=256 * 1024,  # 256 MiB
        sync_single_entries=3000,
        sync_batch_entries=64 * 1024,  # 1024 fdatasyncs
        data_segment_bytes=GIB,  # DLedger's default
        index_segment_entries=5 * 1024 * 1024,  # DLedger's default
        repeats=repeats,
        recovery_gib=recovery_gib if recovery_gib is not None else 1.0,
        quick=False,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    cfg = make_config(args)
    body = os.urandom(BODY_BYTES)
    scratch = tempfile.mkdtemp(prefix="ledgermq-bench-", dir=args.dir)
    try:
        runs = run_rounds(cfg, make_workloads(cfg, body), scratch)
        recovery = run_recovery(cfg, scratch, body)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    ratios = compute_ratios(runs)
    goals = compute_goals(runs, ratios, recovery)
    print_report(cfg, runs, ratios, recovery, goals)
    json_path: Path = args.json
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(to_json(cfg, runs, ratios, recovery, goals), indent=2) + "\n")
    print(f"\nJSON written to {json_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
