"""The PUSH entry codec: C (``_speedups``) against the Python references, per entry.

Run ``python benchmarks/codec.py`` (``--quick`` for a smoke test). It prints a table and writes
JSON to ``benchmarks/results/codec.json``.

What is measured: one push of 256 entries with 1 KiB (1024-byte) bodies, as a leader's store
holds them. ``encode`` turns them into the stored bytes (``codec.encode_entries``, once per
follower per push); ``decode`` parses and checks them back (``codec._decode_entries``: headers,
body CRC-32C, one ``Entry`` and one body copy each). ``push`` is the whole PUSH request through
``encode_message`` + ``decode_message``, the rest of the message included. Each workload runs
``--repeats`` rounds, the implementations interleaved within a round; a round's time is the best
of several timeit runs, and the table reports the median over rounds in microseconds per entry.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import platform
import statistics
import sys
import timeit
from pathlib import Path
from typing import TYPE_CHECKING

from ledgermq.ledger import codec
from ledgermq.raft import PushEntryRequest, PushKind
from ledgermq.store import MemoryLedgerStore

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

ENTRIES = 256
BODY_BYTES = 1024


def workloads() -> dict[str, Callable[[], object]]:
    store = MemoryLedgerStore()
    entries = list(store.append_batch(3, [bytes([i % 256]) * BODY_BYTES for i in range(ENTRIES)]))
    encoded = codec._encode_entries_py(entries)
    push = PushEntryRequest("g", "n0", "n1", 1, 3, "n0", PushKind.APPEND, 0, -1, -1, entries)
    for use_c in (False, True):  # both round-trip the push before either is timed
        codec._use_speedups = use_c
        assert codec.decode_message(codec.encode_message(push)) == push
    return {
        "encode": lambda: codec.encode_entries(entries),
        "decode": lambda: codec._decode_entries(encoded, 0, ENTRIES),
        "push": lambda: codec.decode_message(codec.encode_message(push)),
    }


def time_once(work: Callable[[], object], use_c: bool, number: int) -> float:
    """Microseconds per entry, best of 5 runs of ``number`` calls."""
    codec._use_speedups = use_c
    best = min(timeit.repeat(work, number=number, repeat=5))
    return best / number / ENTRIES * 1e6


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", default=str(Path(__file__).parent / "results" / "codec.json"))
    args = parser.parse_args(argv)
    if not codec.HAVE_SPEEDUPS:
        print("the C extension is not built: nothing to compare", file=sys.stderr)
        return 1
    work = workloads()
    number = 5 if args.quick else 50
    results: dict[str, dict[str, list[float]]] = {name: {"python": [], "c": []} for name in work}
    gc.collect()
    for _ in range(1 if args.quick else args.repeats):
        for name, fn in work.items():
            for impl in ("python", "c"):
                results[name][impl].append(time_once(fn, impl == "c", number))
    codec._use_speedups = codec.HAVE_SPEEDUPS
    print(f"\nPUSH entry codec, {ENTRIES} entries x {BODY_BYTES}-byte bodies, us per entry")
    print(f"{'':>8}  {'python':>8}  {'c':>8}  {'speed-up':>8}")
    summary = {}
    for name, times in results.items():
        py, c = statistics.median(times["python"]), statistics.median(times["c"])
        summary[name] = {"python_us": py, "c_us": c, "speedup": py / c}
        print(f"{name:>8}  {py:>8.3f}  {c:>8.3f}  {py / c:>7.1f}x")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(
        json.dumps(
            {
                "date": datetime.date.today().isoformat(),
                "machine": {"python": platform.python_version()},
                "entries": ENTRIES,
                "body_bytes": BODY_BYTES,
                "us_per_entry": summary,
                "rounds": results,
            },
            indent=2,
        )
        + "\n"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
