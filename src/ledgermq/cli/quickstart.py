"""``ledgermq quickstart``: run LedgerMQ locally with sensible defaults, in one command.

Today LedgerMQ is its replicated log's storage engine, so the quickstart exercises that end to
end on a local folder: it appends a workload of 1 KiB entries in batches, reads every entry back
(verifying CRCs and the chain), closes the store, re-opens it (crash recovery runs) and prints
what it measured. Later releases turn this into a NameServer plus a 3-replica broker group.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from ledgermq.errors import LedgerMQError
from ledgermq.store import LedgerStore

if TYPE_CHECKING:
    import argparse

DEFAULT_DIR = "ledgermq-data"


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "quickstart", help="run LedgerMQ on a local folder and show what it does"
    )
    parser.add_argument(
        "--dir", default=DEFAULT_DIR, help=f"data folder (default: ./{DEFAULT_DIR})"
    )
    parser.add_argument("--entries", type=int, default=100_000, help="entries to append")
    parser.add_argument("--body-bytes", type=int, default=1024, help="body size of each entry")
    parser.add_argument("--batch", type=int, default=64, help="entries per append call")
    parser.add_argument("--flush", choices=["async", "sync"], default="sync")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.entries < 1 or args.batch < 1 or args.body_bytes < 0:
        raise LedgerMQError("--entries and --batch must be positive, --body-bytes not negative")
    directory = os.path.join(args.dir, "quickstart-store")
    print(f"LedgerMQ quickstart: ledger store in {os.path.abspath(directory)} (flush={args.flush})")
    with LedgerStore.open(directory, flush=args.flush) as store:
        start_index = store.end_index + 1
        term = max(store.end_term, 1)
        body = os.urandom(args.body_bytes)
        bodies = [body] * args.batch
        started = time.perf_counter()
        written = 0
        while written < args.entries:
            n = min(args.batch, args.entries - written)
            store.append_batch(term, bodies[:n])
            written += n
        append_s = time.perf_counter() - started
        store.set_committed_index(store.end_index)
        started = time.perf_counter()
        index = start_index
        while index <= store.end_index:
            batch = store.read_range(index, 4 << 20)
            for entry in batch:
                if entry.body != body:
                    raise LedgerMQError(f"entry {entry.index} read back differently")
            index = batch[-1].index + 1
        read_s = time.perf_counter() - started
        end_index = store.end_index
    started = time.perf_counter()
    with LedgerStore.open(directory, flush=args.flush, background=False) as reopened:
        recover_s = time.perf_counter() - started
        if reopened.end_index != end_index:
            raise LedgerMQError(
                f"recovery found end index {reopened.end_index}, expected {end_index}"
            )
        committed = reopened.committed_index
    mib = args.entries * (args.body_bytes + 48) / (1 << 20)
    rows = [
        ("entries appended", f"{args.entries:,} x {args.body_bytes} B in batches of {args.batch}"),
        ("append", f"{args.entries / append_s:,.0f} entries/s ({mib / append_s:,.1f} MiB/s)"),
        ("read back + verify", f"{args.entries / read_s:,.0f} entries/s"),
        ("re-open (recovery)", f"{recover_s * 1000:,.1f} ms, log ends at index {end_index}"),
        ("committed index", f"{committed} (restored from the checkpoint)"),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"  {key:<{width}}  {value}")
    print("Done. Inspect it with: ledgermq store info " + directory)
    return 0
