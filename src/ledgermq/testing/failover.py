"""Failover time in the simulator: from the leader's death to the first write a new leader
acknowledges, with the default timing settings.

    python -m ledgermq.testing.failover --trials 200

Each trial is a fault-free group of three on a 1 ms network with its own seed: it elects a
leader, runs a random while longer (so the crash falls anywhere between heartbeats), then the
leader is killed while a client keeps proposing every 10 ms to whichever node leads. Failover
time is the simulated time from the kill to the first proposal a new leader reports committed.
The goal of issue "Raft core" is a median of at most 2 s.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import sys
from typing import TYPE_CHECKING

from ledgermq.errors import RaftError
from ledgermq.raft import ResponseCode, Role
from ledgermq.testing.interaction import InteractionEnv

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["measure_failover", "summarize"]

GIVE_UP_MS = 30_000


def measure_failover(seed: int, nodes: int = 3) -> int:
    """Milliseconds (simulated) from killing the leader to the first acknowledged write."""
    env = InteractionEnv(seed=seed)
    env.handle(f"cluster nodes={nodes}")
    env.handle("run 2000 trace=none")
    env.handle(f"run {random.Random(seed).randrange(1, 1000)} trace=none")
    old = _leader(env)
    if old is None:
        raise AssertionError(f"seed {seed}: no leader after the warm-up")
    env.handle(f"crash {old}")
    killed_at = env.now
    env.completed.clear()
    while env.now - killed_at < GIVE_UP_MS:
        leader = _leader(env)
        if leader is not None:
            core = env.nodes[leader].core
            assert core is not None
            with contextlib.suppress(RaftError):  # not leader any more, or transferring
                core.propose([b"probe"])
        env.handle("run 10 trace=none")
        for at, node, result in env.completed:
            if node != old and result.code is ResponseCode.SUCCESS:
                return at - killed_at
    return GIVE_UP_MS


def _leader(env: InteractionEnv) -> str | None:
    leaders = [
        n.node_id for n in env.nodes.values() if n.core is not None and n.core.role is Role.LEADER
    ]
    return leaders[0] if len(leaders) == 1 else None


def summarize(times: Sequence[int]) -> str:
    ordered = sorted(times)
    p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
    return (
        f"failover over {len(ordered)} trials: median {statistics.median(ordered):.0f} ms, "
        f"p90 {p90} ms, min {ordered[0]} ms, max {ordered[-1]} ms"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n", 1)[0] if __doc__ else None, allow_abbrev=False
    )
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--nodes", type=int, default=3)
    args = parser.parse_args(argv)
    times = [measure_failover(seed, args.nodes) for seed in range(1, args.trials + 1)]
    print(summarize(times))
    return 0 if statistics.median(times) <= 2000 else 1


if __name__ == "__main__":
    sys.exit(main())
