"""The simulator's apply model (issue 25 item 1): poison entries are committed in seeded runs,
every replica quarantines them alike, and apply never stops.

The broker's dispatcher once stopped (exit 74, and again at every restart) on an entry whose
content it could not apply, on every replica, so one committed entry took the group down for
good. The simulator now applies what every node commits to a small state machine that rejects
poison entries deterministically, and checks after every event that every node has applied all
it has committed and that the states agree; the fail-stop behaviour is kept as an option only
to show that the check catches it.
"""

from __future__ import annotations

import pytest

from ledgermq.store import MemoryLedgerStore
from ledgermq.testing.apply_model import Applier, ApplyLedger, poison
from ledgermq.testing.cluster_sim import SimCluster, run_seed
from ledgermq.testing.invariants import InvariantViolationError

from .test_simulation import on_every_core


def _quarantine_off(seed: int, nodes: int) -> bool:
    """Whether the run with the old fail-stop rule reports apply stopping."""
    result = run_seed(seed, nodes, quarantine_poison=False)
    return result.violation is not None and "apply stopped" in result.violation


@pytest.mark.parametrize("nodes", [3, 5])
def test_poison_entries_are_committed_quarantined_alike_and_apply_never_stops(nodes: int) -> None:
    results = on_every_core(run_seed, range(1, 301), nodes)
    failures = [f"seed {r.seed}: {r.violation}" for r in results if not r.ok]
    assert failures == []
    # The class is exercised: many runs commit poison entries (and then quarantine them).
    assert sum(1 for r in results if r.quarantined) >= 50
    assert sum(r.quarantined for r in results) >= 500


def test_the_old_fail_stop_rule_is_caught_by_the_invariant() -> None:
    """With a poison entry stopping apply (the dispatcher before the fix), runs that commit
    one fail with "apply stopped"; runs that commit none pass either way."""
    seeds = [r.seed for r in on_every_core(run_seed, range(1, 61), 3) if r.quarantined]
    assert len(seeds) >= 10
    assert all(_quarantine_off(seed, 3) for seed in seeds[:5])
    clean = next(r.seed for r in on_every_core(run_seed, range(1, 61), 3) if not r.quarantined)
    assert run_seed(clean, 3, quarantine_poison=False).ok


def test_replicas_that_would_apply_differently_are_caught() -> None:
    """The same-state check: a replica whose apply of an index gives another state."""
    ledger = ApplyLedger()
    store = MemoryLedgerStore()
    store.append_batch(1, [b"a", poison(b"b"), b"c"])
    store.set_committed_index(2)
    good = Applier("n0", ledger)
    good.catch_up(store, 2)
    assert good.applied_index == 2
    assert ledger.quarantined == {1}
    good.check(2)
    # A replica that applies the poison entry as if it were fine (say, a newer rule) differs.
    careless = Applier("n1", ledger)
    careless.model.apply(0, b"a")
    careless.applied_index = 0
    careless.model.apply(1, b"b")
    with pytest.raises(InvariantViolationError, match="differs from another replica"):
        ledger.applied("n1", 1, careless.model.digest)
    # And one that stops on it is behind what it committed.
    stopping = Applier("n2", ledger, quarantine_poison=False)
    stopping.catch_up(store, 2)
    with pytest.raises(InvariantViolationError, match="apply stopped at entry 1"):
        stopping.check(2)


def test_a_log_that_begins_later_takes_the_state_applied_there() -> None:
    """Retention or a rebuild from the leader's oldest entry: the replica starts from the
    state some replica had after ``begin - 1`` (a snapshot), then applies on alike."""
    ledger = ApplyLedger()
    full = MemoryLedgerStore()
    full.append_batch(1, [b"a", b"b", poison(b"c"), b"d"])
    full.set_committed_index(3)
    Applier("n0", ledger).catch_up(full, 3)
    late = MemoryLedgerStore()
    late.append_batch(1, [b"a", b"b", poison(b"c"), b"d"])
    late.set_committed_index(3)
    late.reset_begin(2)
    applier = Applier("n1", ledger)
    applier.catch_up(late, 3)
    assert applier.applied_index == 3
    applier.check(3)


def test_poison_does_not_change_a_seed_s_raft_run() -> None:
    """Poison bodies keep their length and come from a generator of their own: a seed's
    Raft run (events, commits, terms) is the one it was before the apply model existed."""
    cluster = SimCluster(7, 3)
    cluster.plan.poison = 0.5
    plain = SimCluster(7, 3)
    plain.plan.poison = 0.0
    a, b = cluster.run(), plain.run()
    assert a.ok, a.violation
    assert (a.events, a.proposals, a.committed, a.terms) == (
        b.events, b.proposals, b.committed, b.terms
    )  # fmt: skip
    assert a.quarantined > 0
    assert b.quarantined == 0
