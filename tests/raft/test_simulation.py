"""Seeded whole-cluster simulation: thousands of runs with faults, invariants after every event."""

from __future__ import annotations

import os

import pytest

from ledgermq.testing.cluster_sim import SimCluster, run_seed
from ledgermq.testing.simulate import main as simulate_main

CI_SEEDS = int(os.environ.get("LEDGERMQ_SIM_SEEDS", "2000"))

# Seeds that once found a bug; each must keep passing (DEVELOPERS.md: a bug found by a seed
# becomes a regression test with that seed).
# ``legacy``: found before leadership moves and slow disks were simulated; replayed without them.
# The disk-loss and retention seeds (issue 13) run with every fault of today: ``legacy`` False.
REGRESSIONS = [
    (173, 3, True, "a duplicated TRUNCATE after the next APPEND erased acknowledged entries"),
    (54, 3, True, "same bug, found through an acknowledged proposal held by one node only"),
    (156, 3, True, "a leader re-elected in its own term after a restart was ignored"),
    (1982, 3, True, "checker: a stale leader of an older term need not hold newer commits"),
    (1414, 3, False, "TRUNCATE below the follower's commit index refused: COMPARE loop forever"),
    (2, 3, False, "replaced disk: the blank node voted twice in a term (two leaders in term 1)"),
    (132, 3, False, "replaced disk: a leader elected without a committed entry it had forgotten"),
    (17, 3, False, "replaced disk: a TRUNCATE past the blank log's end was taken as verified"),
    (184, 3, False, "retention: the leader compared below its own begin index (IndexCompacted)"),
    (274, 3, False, "retention: go-back-N resent from an index deleted by retention"),
    (510, 3, False, "fresh cluster: a blank node refused every log and the group never elected"),
    (135, 5, False, "fresh cluster: blank candidates out-bid each other's terms forever"),
    (223, 5, False, "checker: an acknowledgement from a node whose disk was later replaced"),
    (50, 3, False, "replaced disk: a term persisted before hearing of the log made it unblank"),
]


@pytest.mark.parametrize("nodes", [3, 5])
def test_many_seeds_hold_every_invariant(nodes: int) -> None:
    failures = [
        f"seed {r.seed}: {r.violation} (replay: python -m ledgermq.testing.simulate "
        f"--seeds {r.seed} --nodes {nodes})"
        for r in (run_seed(seed, nodes) for seed in range(1, CI_SEEDS + 1))
        if not r.ok
    ]
    assert failures == []


@pytest.mark.parametrize(("seed", "nodes", "legacy", "bug"), REGRESSIONS)
def test_regression_seeds(seed: int, nodes: int, legacy: bool, bug: str) -> None:
    result = run_seed(seed, nodes, leadership_moves=not legacy)  # as when the bug was found
    assert result.ok, f"{bug}: {result.violation}"


def test_disk_loss_and_retention_are_exercised() -> None:
    """The replaced-disk and retention faults happen and are survived: blank nodes rebuilt
    from index 0 and followers begun again at a leader's oldest entry (issue 13 items 1-2)."""
    replaced = rebuilt_from_begin = 0
    for seed in range(1, 201):
        cluster = SimCluster(seed, 3)
        result = cluster.run()
        assert result.ok, f"seed {seed}: {result.violation}"
        replaced += sum(len(n.lost_stores) for n in cluster.nodes.values())
        rebuilt_from_begin += cluster.restarts_from_begin
    assert replaced >= 25  # 51 today
    assert rebuilt_from_begin >= 5  # 10 today


def test_runs_make_progress() -> None:
    """A run that never elects a leader or commits would pass every safety check vacuously."""
    results = [run_seed(seed, 3) for seed in range(1, 51)]
    assert sum(r.committed for r in results) > 1000
    assert all(r.terms >= 1 for r in results)


def test_same_seed_same_run() -> None:
    first, second = SimCluster(7, 3), SimCluster(7, 3)
    a, b = first.run(), second.run()
    assert (a.events, a.proposals, a.committed, a.terms) == (
        b.events,
        b.proposals,
        b.committed,
        b.terms,
    )
    assert first.safety.committed == second.safety.committed


def test_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert simulate_main(["--seeds", "1-5", "--nodes", "3"]) == 0
    assert "5 seeds, 3 nodes: 0 failed" in capsys.readouterr().out
