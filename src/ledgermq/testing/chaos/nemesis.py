"""The nemesis: faults chosen by a seed, one at a time, each healed before the next.

Every fault touches one replica of the three, so a majority is always up and connected: the
cluster must stay safe *and* recover (the default, survivable mode). Kinds:

- ``partition-master``: the master is cut from the other replicas (blackhole routes on both
  sides of each pair); clients and the NameServer still reach it, so it may keep accepting
  sends that can never commit.
- ``partition-minority``: the same for a replica picked at random (a 1 | 2 split).
- ``link-down``: a replica's ``eth0`` goes down: cut off from everyone, clients included.
- ``kill9``: SIGKILL, restarted on its old store when the fault heals.
- ``pause``: SIGSTOP, SIGCONT when the fault heals.

The network kinds need namespaces; on loopback only ``kill9`` and ``pause`` are possible.
``random.Random(seed)`` picks the kinds, targets, hold and quiet times, so a seed replays the
same schedule (which replica is master at a given moment is up to the cluster).
"""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING, Final

from ledgermq.testing.chaos.cluster import GROUP
from ledgermq.testing.chaos.history import FaultRecord

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ledgermq.testing.chaos.cluster import ChaosCluster

__all__ = ["ALL_KINDS", "NETWORK_KINDS", "PROCESS_KINDS", "Nemesis"]

NETWORK_KINDS: Final = ("partition-master", "partition-minority", "link-down")
PROCESS_KINDS: Final = ("kill9", "pause")
ALL_KINDS: Final = (*NETWORK_KINDS, *PROCESS_KINDS)
_HOLD_S: Final = (2.0, 6.0)
_QUIET_S: Final = (1.0, 4.0)
_TICK_S: Final = 0.05


class Nemesis:
    """Injects ``kinds`` into ``cluster`` until ``run``'s deadline (module docstring).

    ``faults`` is the record: one ``FaultRecord`` per fault, with times in ms since ``origin``.
    ``monotonic`` and ``sleep`` are the clock (a test passes a fake one).
    """

    def __init__(
        self,
        cluster: ChaosCluster,
        seed: int,
        kinds: Sequence[str],
        *,
        origin: float,
        log: Callable[[str], None] = lambda line: None,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        unknown = set(kinds) - set(ALL_KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {ALL_KINDS}")
        if cluster.lab is None and set(kinds) & set(NETWORK_KINDS):
            raise ValueError("network faults need namespaces; on loopback use kill9 / pause")
        if not kinds:
            raise ValueError("the nemesis needs at least one fault kind")
        self.cluster = cluster
        self.rng = random.Random(seed)
        self.kinds = list(kinds)
        self.origin = origin
        self.log = log
        self.faults: list[FaultRecord] = []
        self._monotonic = monotonic
        self._sleep = sleep
        self._heal: Callable[[], None] | None = None

    def now_ms(self) -> float:
        return (self._monotonic() - self.origin) * 1000

    def run(self, duration_s: float) -> None:
        """Quiet, fault, hold, heal, ... for ``duration_s``; always ends healed."""
        deadline = self._monotonic() + duration_s
        try:
            while True:
                quiet = self.rng.uniform(*_QUIET_S)
                if self._monotonic() + quiet >= deadline:
                    break
                self._sleep(quiet)
                kind = self.rng.choice(self.kinds)
                hold = min(self.rng.uniform(*_HOLD_S), max(0.0, deadline - self._monotonic()))
                self._inject(kind, hold)
            self._sleep(max(0.0, deadline - self._monotonic()))
        finally:
            self.heal()

    def _inject(self, kind: str, hold_s: float) -> None:
        nodes = self.cluster.nodes
        target = self.rng.choice(nodes)
        if kind == "partition-master":
            target = self.cluster.master(GROUP) or target
        start = self.now_ms()
        self.log(f"{start / 1000:7.1f} s  {kind} {target} for {hold_s:.1f} s")
        lab = self.cluster.lab
        if kind in ("partition-master", "partition-minority"):
            assert lab is not None
            for other in nodes:
                if other != target:
                    lab.cut(target, other)
            self._heal = lab.heal_cuts
        elif kind == "link-down":
            assert lab is not None
            lab.link(target, up=False)
            self._heal = lambda: lab.link(target, up=True)
        elif kind == "kill9":
            self.cluster.kill9(GROUP, target)
            self._heal = lambda: self.cluster.start_replica(GROUP, target)
        else:
            self.cluster.sigstop(GROUP, target)
            self._heal = lambda: self.cluster.sigcont(GROUP, target)
        self._sleep(hold_s)
        self.heal()
        self.faults.append(FaultRecord(kind, (target,), start, self.now_ms()))
        self.log(f"{self.now_ms() / 1000:7.1f} s  healed {kind} {target}")

    def heal(self) -> None:
        """Undo the fault in force, if any (idempotent)."""
        heal, self._heal = self._heal, None
        if heal is not None:
            heal()
