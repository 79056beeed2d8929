"""A simulated replacement of a dead replica by a blank one at a new id and address.

The operator's procedure of issue 27 (item 5): a group n0, n1, n2 runs under load; n2 dies for
good; a new replica n3 starts with an empty disk and the peer list n0, n1, n3; then n0 and n1 are
restarted one at a time with that list, in a drawn order (the new replica first is the order
that livelocked: it campaigns while the others still have the old list and refuse it as
unknown). Each step is ``step_ms`` apart. The run is a ``SimCluster`` (a real ``RaftCore`` per
node, its invariants checked after every event) with a mild network and no other faults.

The result says what an operator sees: the highest term any node reached (terms must not run
away), the longest time without an acknowledged proposal, and whether one leader with every
member following it was settled within ``settle_ms`` of the last edit.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ledgermq.raft import RaftConfig, ResponseCode, Role
from ledgermq.store import MemoryLedgerStore
from ledgermq.testing.cluster_sim import FaultPlan, SimCluster, SimNode
from ledgermq.testing.invariants import InvariantViolationError

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["ReplaceResult", "ReplaceScenario", "run_replacement"]

OLD_PEERS = ("n0", "n1", "n2")
NEW_PEERS = ("n0", "n1", "n3")
ORDERS = ("301", "310", "031", "013", "130", "103")
"""Which of n3 (start), n0 and n1 (restart with the new list) comes first, second, third."""


@dataclass
class ReplaceResult:
    seed: int
    order: str
    max_term: int
    longest_gap_ms: int
    """Longest simulated time without an acknowledged proposal, from n2's death to the end."""
    settled_ms: int | None
    """When one leader had every member of the new list following it, after the last edit."""
    violation: str | None


class ReplaceScenario(SimCluster):
    """``SimCluster`` with per-node peer lists and the replacement's scripted steps."""

    def __init__(self, seed: int, order: str, *, step_ms: int = 3000) -> None:
        self.peers_of: dict[str, tuple[str, ...]] = {}
        super().__init__(seed, 3, FaultPlan(max_delay_ms=5, fault_ms=0, heal_ms=0))
        self.nodes["n3"] = SimNode("n3", MemoryLedgerStore(flush="sync"))
        self.nodes["n3"].applier = self._applier("n3")  # applies what it commits, as the others
        self.order = order
        self.step_ms = step_ms
        self.acks: list[int] = []

    def config(self, nid: str) -> RaftConfig:
        return RaftConfig(group="sim", self_id=nid, peer_ids=self.peers_of.get(nid, OLD_PEERS))

    def _proposal_done(self, node: SimNode, pid: int, code: ResponseCode, first: int) -> None:
        super()._proposal_done(node, pid, code, first)
        if code is ResponseCode.SUCCESS:
            self.acks.append(self.now)

    def _start_new(self) -> None:
        self.peers_of["n3"] = NEW_PEERS
        self.ids = NEW_PEERS
        self._start("n3")

    def _restart_with_new_peers(self, nid: str) -> Callable[[], None]:
        def restart() -> None:
            self._crash(nid)
            self.peers_of[nid] = NEW_PEERS
            self._start(nid)

        return restart

    def _settled_now(self) -> bool:
        cores = [self.nodes[n].core for n in NEW_PEERS]
        leaders = [c for c in cores if c is not None and c.role is Role.LEADER]
        if len(leaders) != 1:
            return False
        term = leaders[0].term
        return all(c is not None and c.term == term and c.role is not Role.CANDIDATE for c in cores)

    def play(self, *, settle_ms: int = 10_000) -> ReplaceResult:
        death_ms = 2000
        last_edit = death_ms + 500 + self.step_ms * (len(self.order) - 1)
        end_ms = last_edit + settle_ms
        for t in range(0, end_ms, 50):
            self.schedule(t, self._propose)
        self.schedule(death_ms, lambda: self._crash("n2"))
        steps: dict[str, Callable[[], None]] = {
            "3": self._start_new,
            "0": self._restart_with_new_peers("n0"),
            "1": self._restart_with_new_peers("n1"),
        }
        for i, step in enumerate(self.order):
            self.schedule(death_ms + 500 + self.step_ms * i, steps[step])
        settled_ms: int | None = None
        max_term = 0
        violation = None
        try:
            while self._queue and self.now <= end_ms:
                at, _, action = heapq.heappop(self._queue)
                self.now = at
                action()
                self.events += 1
                live = [n.core for n in self.nodes.values() if n.core is not None]
                max_term = max([max_term] + [c.term for c in live])
                if settled_ms is None and self.now >= last_edit and self._settled_now():
                    settled_ms = self.now - last_edit
        except InvariantViolationError as exc:
            violation = f"{exc} (at {self.now} ms)"
        times = [death_ms] + [t for t in self.acks if t >= death_ms] + [self.now]
        gap = max(b - a for a, b in itertools.pairwise(times))
        return ReplaceResult(self.seed, self.order, max_term, gap, settled_ms, violation)


def run_replacement(seed: int, order: str = "301", *, step_ms: int = 3000) -> ReplaceResult:
    return ReplaceScenario(seed, order, step_ms=step_ms).play()
