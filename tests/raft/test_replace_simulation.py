"""A dead replica replaced by a blank one at a new id and address, in the simulator (issue 27
item 5): the group keeps (or quickly regains) a leader and terms do not run away, whatever the
order in which the new replica starts and the others are restarted with the new peer list."""

from __future__ import annotations

import pytest

from ledgermq.testing.replace_sim import ORDERS, run_replacement


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("seed", [0, 1])
def test_a_replaced_replica_never_livelocks_the_election(seed: int, order: str) -> None:
    """Before the fix the new replica, refused as unknown by the replicas still on the old
    list, moved to a new term every round (terms 50-100 in these 10 s steps) and each leader
    that heard its term stepped down."""
    result = run_replacement(seed, order, step_ms=10_000)
    assert result.violation is None
    assert result.max_term <= 5, result
    assert result.settled_ms is not None, result
    assert result.settled_ms <= 2000, result
    assert result.longest_gap_ms <= 3000, result  # one failover (n2 was the leader in some seeds)


def test_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    from ledgermq.testing.simulate import main

    assert main(["--seeds", "3", "--replace"]) == 0
    assert "6 replacement runs: 0 failed" in capsys.readouterr().out
