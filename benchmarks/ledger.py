"""The ledger benchmark: ``python benchmarks/ledger.py [ledgermq ledger bench options]``.

The same as ``ledgermq ledger bench``: three replica processes on loopback, single / many
clients / batched appends with flush=async and flush=sync, PySyncObj with the same workloads
for the ratio, and failover by kill -9. Prints a table; ``--json FILE`` keeps the results
(default here: benchmarks/results/ledger.json).
"""

from __future__ import annotations

import os
import sys

from ledgermq.cli.main import main

if __name__ == "__main__":
    args = sys.argv[1:]
    if "--json" not in args:
        results = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
        os.makedirs(results, exist_ok=True)
        args += ["--json", os.path.join(results, "ledger.json")]
    sys.exit(main(["ledger", "bench", *args]))
