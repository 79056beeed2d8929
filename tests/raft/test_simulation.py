"""Seeded whole-cluster simulation: thousands of runs with faults, invariants after every event."""

from __future__ import annotations

import itertools
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from typing import TYPE_CHECKING, TypeVar

import pytest

from ledgermq.testing.cluster_sim import SimCluster, run_seed
from ledgermq.testing.simulate import main as simulate_main

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledgermq.testing.cluster_sim import SimResult

T = TypeVar("T")

CI_SEEDS = int(os.environ.get("LEDGERMQ_SIM_SEEDS", "2000"))


def on_every_core(run: Callable[[int, int], T], seeds: range, nodes: int) -> list[T]:
    """``run(seed, nodes)`` for every seed, spread over the machine's cores (in seed order):
    a simulated run is one ``random.Random(seed)`` and nothing else (no clock, no shared
    state), so a seed's result is the same in a worker process as here; a machine of one core
    runs them all here."""
    workers = min(os.cpu_count() or 1, 4)
    if workers < 2:
        return [run(seed, nodes) for seed in seeds]
    # spawn: a fork of this process (threads of other tests' clients) could deadlock
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        chunk = max(1, len(seeds) // (workers * 8))
        return list(pool.map(run, seeds, itertools.repeat(nodes), chunksize=chunk))


def run_with_disk_counts(seed: int, nodes: int) -> tuple[SimResult, int, int]:
    """A run, the disks it replaced and the followers it began again at a leader's oldest
    entry."""
    cluster = SimCluster(seed, nodes)
    result = cluster.run()
    replaced = sum(len(n.lost_stores) for n in cluster.nodes.values())
    return result, replaced, cluster.restarts_from_begin


EXERCISED_SEEDS = 200
"""The first seeds of three nodes whose runs must exercise membership changes, disk loss and
retention (the counts below were set on them)."""


_THREE_NODE_RUNS: list[tuple[SimResult, int, int]] = []


def three_node_runs(count: int) -> list[tuple[SimResult, int, int]]:
    """``run_with_disk_counts(seed, 3)`` for seeds 1 to ``count``, each seed simulated once
    in this process for every test that reads it: a run is a pure function of its seed
    (``on_every_core``), so a shared result is the very run each test made for itself before
    (``run_seed(seed, 3)`` is ``SimCluster(seed, 3).run()``); seeds 1-200 of three nodes were
    simulated four times."""
    have = len(_THREE_NODE_RUNS)
    if count > have:
        _THREE_NODE_RUNS.extend(on_every_core(run_with_disk_counts, range(have + 1, count + 1), 3))
    return _THREE_NODE_RUNS[:count]


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
    (910062, 3, False, "retention: a follower that lost its commit index cut its whole log"),
    (1010809, 3, False, "replaced disk: a blank follower forgot its vote, two leaders in term 2"),
    (1021452, 3, False, "same bug: a blank node followed on a heartbeat and recorded no vote"),
]


# Seeds that found bugs of membership changes (issue 27), replayed with every fault of today.
MEMBERSHIP_REGRESSIONS = [
    (1715, 3, "a leader removed itself and a node re-campaigned in its term: two leaders"),
    (760, 3, "a committed configuration persisted before the commit index: log cut below it"),
    (466, 3, "the node with the longest log had removed itself (uncommitted): no leader ever"),
]


@pytest.mark.parametrize("nodes", [3, 5])
def test_many_seeds_hold_every_invariant(nodes: int) -> None:
    if nodes == 3:
        results = [result for result, _, _ in three_node_runs(CI_SEEDS)]
    else:
        results = on_every_core(run_seed, range(1, CI_SEEDS + 1), nodes)
    assert [r.seed for r in results] == list(range(1, CI_SEEDS + 1))
    failures = [
        f"seed {r.seed}: {r.violation} (replay: python -m ledgermq.testing.simulate "
        f"--seeds {r.seed} --nodes {nodes})"
        for r in results
        if not r.ok
    ]
    assert failures == []


@pytest.mark.parametrize(("seed", "nodes", "legacy", "bug"), REGRESSIONS)
def test_regression_seeds(seed: int, nodes: int, legacy: bool, bug: str) -> None:
    # as when the bug was found: membership changes came later (MEMBERSHIP_REGRESSIONS)
    result = run_seed(seed, nodes, leadership_moves=not legacy, membership_changes=False)
    assert result.ok, f"{bug}: {result.violation}"


@pytest.mark.parametrize(("seed", "nodes", "bug"), MEMBERSHIP_REGRESSIONS)
def test_membership_regression_seeds(seed: int, nodes: int, bug: str) -> None:
    result = run_seed(seed, nodes)
    assert result.ok, f"{bug}: {result.violation}"


def test_membership_changes_are_exercised() -> None:
    """Adds, promotions, removals (of the leader too) commit, and some changes are truncated
    and undone, with every invariant holding after every event (issue 27 item 1)."""
    results = [result for result, _, _ in three_node_runs(EXERCISED_SEEDS)]
    assert [r.violation for r in results if not r.ok] == []
    assert sum(r.membership_changes for r in results) >= 150  # 201 today
    assert sum(r.truncated_changes for r in results) >= 8  # 15 today
    assert sum(r.leader_removals for r in results) >= 3  # 6 today


def test_disk_loss_and_retention_are_exercised() -> None:
    """The replaced-disk and retention faults happen and are survived: blank nodes rebuilt
    from index 0 and followers begun again at a leader's oldest entry (issue 13 items 1-2)."""
    replaced = rebuilt_from_begin = 0
    for result, lost, from_begin in three_node_runs(EXERCISED_SEEDS):
        assert result.ok, f"seed {result.seed}: {result.violation}"
        replaced += lost
        rebuilt_from_begin += from_begin
    assert replaced >= 25  # 51 today
    assert rebuilt_from_begin >= 5  # 10 today


def test_runs_make_progress() -> None:
    """A run that never elects a leader or commits would pass every safety check vacuously."""
    results = [result for result, _, _ in three_node_runs(50)]
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
