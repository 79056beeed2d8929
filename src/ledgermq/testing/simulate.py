"""Run the seeded cluster simulation from the command line.

    python -m ledgermq.testing.simulate --seeds 1-2000 --nodes 3

Exit status 0 only when no invariant was violated. A failing seed prints the one-line command
that replays it.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from ledgermq.testing.cluster_sim import run_seed

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
    args = parser.parse_args(argv)
    seeds = parse_seeds(args.seeds)
    started = time.perf_counter()
    failures = 0
    events = proposals = committed = transfers = quarantined = 0
    for seed in seeds:
        result = run_seed(seed, args.nodes)
        events += result.events
        proposals += result.proposals
        committed += result.committed
        transfers += result.transfers
        quarantined += result.quarantined
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
        f"{quarantined} poison entries quarantined in {elapsed:.1f} s"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
