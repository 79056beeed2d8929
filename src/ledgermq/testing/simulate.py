"""Run the seeded cluster simulation from the command line.

    python -m ledgermq.testing.simulate --seeds 1-2000 --nodes 3
    python -m ledgermq.testing.simulate --seeds 1-20 --replace

Exit status 0 only when no invariant was violated. A failing seed prints the one-line command
that replays it. ``--replace`` runs the replacement of a dead replica by a blank one at a new
id (``replace_sim``) in every restart order instead, and fails a run whose terms run away or
whose group has no settled leader 2 s after the last edit.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from ledgermq.testing.cluster_sim import run_seed
from ledgermq.testing.replace_sim import ORDERS, run_replacement

if TYPE_CHECKING:
    from collections.abc import Sequence


def parse_seeds(text: str) -> range:
    first, sep, last = text.partition("-")
    if not sep:
        return range(int(first), int(first) + 1)
    return range(int(first), int(last) + 1)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n", 1)[0] if __doc__ else None, allow_abbrev=False
    )
    parser.add_argument("--seeds", default="1-100", help="a seed or an inclusive range A-B")
    parser.add_argument("--nodes", type=int, default=3, help="group size")
    parser.add_argument(
        "--replace", action="store_true", help="replace a dead replica by a blank one at a new id"
    )
    args = parser.parse_args(argv)
    seeds = parse_seeds(args.seeds)
    if args.replace:
        return replace_main(seeds)
    started = time.perf_counter()
    failures = 0
    events = proposals = committed = transfers = quarantined = changes = truncated = 0
    for seed in seeds:
        result = run_seed(seed, args.nodes)
        events += result.events
        proposals += result.proposals
        committed += result.committed
        transfers += result.transfers
        quarantined += result.quarantined
        changes += result.membership_changes
        truncated += result.truncated_changes
        if not result.ok:
            failures += 1
            print(f"seed {seed}: {result.violation}")
            print(
                f"  replay: python -m ledgermq.testing.simulate --seeds {seed} --nodes {args.nodes}"
            )
    elapsed = time.perf_counter() - started
    print(
        f"{len(seeds)} seeds, {args.nodes} nodes: {failures} failed, {events} events, "
        f"{proposals} proposals ({committed} committed), {transfers} leadership transfers, "
        f"{quarantined} poison entries quarantined, {changes} membership changes committed "
        f"({truncated} truncated) in {elapsed:.1f} s"
    )
    return 1 if failures else 0


def replace_main(seeds: range) -> int:
    """Every seed in every order; a violation, a term above 5 or no settled leader fails."""
    failures = 0
    for seed in seeds:
        for order in ORDERS:
            r = run_replacement(seed, order, step_ms=10_000)
            settled = r.settled_ms is not None and r.settled_ms <= 2000
            if r.violation or r.max_term > 5 or not settled:
                failures += 1
                print(f"seed {seed} order {order}: {r}")
    print(f"{len(seeds) * len(ORDERS)} replacement runs: {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
