"""A dead replica replaced by a blank one at a new id and address, in the simulator (issue 27
item 5): the group keeps (or quickly regains) a leader and terms do not run away, whatever the
order in which the new replica starts and the others are restarted with the new peer list."""

from __future__ import annotations

import pytest

from ledgermq.testing.replace_sim import ORDERS, run_replacement

CASES = [(seed, order) for seed in (0, 1) for order in ORDERS] + [
    (5, "310"),
    (7, "301"),
    (15, "310"),
    (17, "301"),
]
"""Every order for two seeds, and the seeds where n2 led when it died (the old-list n0 leads
the rest): those livelocked through the blank member's ALREADY_VOTED, not its own campaign."""


@pytest.mark.parametrize(("seed", "order"), CASES)
def test_a_replaced_replica_never_livelocks_the_election(seed: int, order: str) -> None:
    """Before the fix the new replica, refused as unknown by the replicas still on the old
    list, moved to a new term every round (terms 50-100 in these 10 s steps) and each leader
    that heard its term stepped down. With only that fixed, the last four cases still ran
    to term 47-52 with 10 s without an acknowledgement: n1, restarted with the new list, was
    refused by the blank n3 (which could not judge a log before hearing n0, and n0, on the
    old list, never spoke to it) with REJECT_ALREADY_VOTED, moved to a new term every round,
    and deposed the old-list leader n0 each time it heard of it."""
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
