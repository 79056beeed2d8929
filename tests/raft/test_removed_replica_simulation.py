"""A replica removed while it was cut off, in the simulator (issue 27): it never receives the
entry that removes it, so when the network heals it asks for votes; the voters refuse it as not
a member, and it must stop asking instead of asking every back-off for ever. The run is a
``SimCluster`` (a real ``RaftCore`` per node, its invariants checked after every event) with a
lossy, duplicating, delaying network drawn from the seed."""

from __future__ import annotations

import heapq
import random

import pytest

from ledgermq.raft import Message, Role, VoteRequest
from ledgermq.testing.cluster_sim import FaultPlan, SimCluster

CUT_MS = 2000
HEAL_MS = 4000
END_MS = 14_000


class RemovedWhileCutOff(SimCluster):
    """Three voters; at ``CUT_MS`` a follower is cut off and the leader removes it; at
    ``HEAL_MS`` the network heals; every vote request the removed replica sends is recorded."""

    def __init__(self, seed: int) -> None:
        rng = random.Random(f"removed-{seed}")
        plan = FaultPlan(
            loss=rng.choice([0.0, 0.01, 0.05]),
            duplicate=rng.choice([0.0, 0.02]),
            max_delay_ms=rng.choice([2, 5, 20]),
            fault_ms=0,
            heal_ms=0,
        )
        super().__init__(seed, 3, plan)
        self.removed: str | None = None
        self.asked_at: list[int] = []

    def _send(self, message: Message) -> None:
        if isinstance(message, VoteRequest) and message.local_id == self.removed:
            self.asked_at.append(self.now)
        super()._send(message)

    def _cut_and_remove(self) -> None:
        leader = self._live_leader()
        assert leader is not None, "no leader after 2 s"
        assert leader.core is not None
        victim = next(n for n in self.ids if n != leader.node_id)
        self.cut = {(victim, o) for o in self.ids} | {(o, victim) for o in self.ids}
        self.removed = victim
        self._track_change(leader, leader.core.remove_member(victim))

    def _heal_the_cut(self) -> None:
        self.cut.clear()

    def play(self) -> None:
        for t in range(0, END_MS, 100):
            self.schedule(t, self._propose)
        self.schedule(CUT_MS, self._cut_and_remove)
        self.schedule(HEAL_MS, self._heal_the_cut)
        while self._queue and self.now <= END_MS:
            at, _, action = heapq.heappop(self._queue)
            self.now = at
            action()


@pytest.mark.parametrize("seed", range(8))
def test_a_replica_removed_while_cut_off_stops_asking_for_votes(seed: int) -> None:
    """Before the fix the removed replica asked both voters every back-off, refused each time:
    17-20 rounds in these 10 s after healing. Now it stops after the round in which a quorum of
    the voters it knows refused it (a few rounds when the network loses the answers), and the
    group keeps its leader."""
    sim = RemovedWhileCutOff(seed)
    sim.play()
    removed = sim.nodes[sim.removed or ""].core
    assert removed is not None
    assert removed.refused_as_non_member
    assert removed.role is Role.CANDIDATE
    rounds_after_heal = sorted({t for t in sim.asked_at if t >= HEAL_MS})
    assert len(rounds_after_heal) <= 3, rounds_after_heal
    assert not [t for t in rounds_after_heal if t >= HEAL_MS + 5000], rounds_after_heal
    cores = [sim.nodes[n].core for n in sim.ids if n != sim.removed]
    assert [c.role for c in cores if c is not None].count(Role.LEADER) == 1
    assert all(c is not None and not c.membership.is_member(sim.removed or "") for c in cores)
