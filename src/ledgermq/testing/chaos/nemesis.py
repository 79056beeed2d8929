"""The nemesis: faults chosen by a seed, one at a time, each healed before the next.

Every fault touches one replica of the three, so a majority is always up and connected: the
cluster must stay safe *and* recover (the default, survivable mode). Kinds:

- ``partition-master``: the master is cut from the other replicas (blackhole routes on both
  sides of each pair); clients and the NameServer still reach it, so it may keep accepting
  sends that can never commit.
- ``partition-minority``: the same for a replica picked at random (a 1 | 2 split).
- ``link-down``: a replica's ``eth0`` goes down: cut off from everyone, clients included.
- ``bridge-cut``: a replica's veth is taken off the bridge: cut off from everyone, and,
  unlike ``link-down``, its own interface stays up, so every packet is silently lost.
- ``link-flap``: a replica's ``eth0`` goes down and up every 0.2 to 1 s while the fault lasts
  (connections break and come back, elections start and are interrupted).
- ``kill9``: SIGKILL, restarted on its old store when the fault heals.
- ``pause``: SIGSTOP, SIGCONT when the fault heals.

Opt-in only (``--faults wipe``; not in the default set, so not survivable by definition):

- ``wipe``: a follower is killed, its ledger directory (``dledger-<id>``, the README's
  recovery for a corrupt log) deleted, and it is restarted at once to be rebuilt by the
  master. Raft assumes a replica never forgets its term and vote, which this breaks: a
  wiped replica may vote twice in a term. Jepsen calls such faults unsafe.

The network kinds need namespaces; on loopback only ``kill9``, ``pause`` and ``wipe`` are
possible.
``random.Random(seed)`` picks the kinds, targets, hold and quiet times, so a seed replays the
same schedule (which replica is master at a given moment is up to the cluster).
"""

from __future__ import annotations

import random
import shutil
import time
from typing import TYPE_CHECKING, Final

from ledgermq.testing.chaos.cluster import GROUP
from ledgermq.testing.chaos.history import FaultRecord

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ledgermq.testing.chaos.cluster import ChaosCluster

__all__ = [
    "ALL_KINDS",
    "DEFAULT_KINDS",
    "NETWORK_KINDS",
    "PROCESS_KINDS",
    "UNSAFE_KINDS",
    "Nemesis",
]

NETWORK_KINDS: Final = (
    "partition-master",
    "partition-minority",
    "link-down",
    "link-flap",
    "bridge-cut",
)
PROCESS_KINDS: Final = ("kill9", "pause")
DEFAULT_KINDS: Final = (*NETWORK_KINDS, *PROCESS_KINDS)
"""Survivable faults: one replica of three at a time."""
UNSAFE_KINDS: Final = ("wipe",)
ALL_KINDS: Final = (*DEFAULT_KINDS, *UNSAFE_KINDS)
_FLAP_S: Final = (0.2, 1.0)
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
            raise ValueError("network faults need namespaces; on loopback use kill9, pause, wipe")
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
        cluster = self.cluster
        target = self.rng.choice(cluster.nodes)
        if kind in ("partition-master", "wipe"):
            master = cluster.master(GROUP)
            if kind == "partition-master":
                target = master or target
            elif target == master:  # wipe a follower: the master's log is the one to copy
                target = self.rng.choice([n for n in cluster.nodes if n != master])
        start = self.now_ms()
        self.log(f"{start / 1000:7.1f} s  {kind} {target} for {hold_s:.1f} s")
        self._apply(kind, target)
        if kind == "link-flap":
            self._flap(target, hold_s)
        else:
            self._sleep(hold_s)
        self.heal()
        self.faults.append(FaultRecord(kind, (target,), start, self.now_ms()))
        self.log(f"{self.now_ms() / 1000:7.1f} s  healed {kind} {target}")

    def _apply(self, kind: str, target: str) -> None:
        """Inject ``kind`` on ``target`` and remember how to heal it."""
        cluster, lab = self.cluster, self.cluster.lab
        if kind in ("partition-master", "partition-minority"):
            assert lab is not None
            for other in cluster.nodes:
                if other != target:
                    lab.cut(target, other)
            self._heal = lab.heal_cuts
        elif kind in ("link-down", "link-flap"):
            assert lab is not None
            lab.link(target, up=False)
            self._heal = lambda: lab.link(target, up=True)
        elif kind == "bridge-cut":
            assert lab is not None
            lab.bridge_port(target, attached=False)
            self._heal = lambda: lab.bridge_port(target, attached=True)
        elif kind == "kill9":
            cluster.kill9(GROUP, target)
            self._heal = lambda: cluster.start_replica(GROUP, target)
        elif kind == "wipe":
            cluster.kill9(GROUP, target)
            for ledger in cluster.store_dir(GROUP, target).glob("dledger-*"):
                shutil.rmtree(ledger)
            cluster.start_replica(GROUP, target)
        else:
            cluster.sigstop(GROUP, target)
            self._heal = lambda: cluster.sigcont(GROUP, target)

    def _flap(self, target: str, hold_s: float) -> None:
        lab = self.cluster.lab
        assert lab is not None
        end = self._monotonic() + hold_s
        up = False
        while self._monotonic() < end:
            self._sleep(min(self.rng.uniform(*_FLAP_S), max(0.0, end - self._monotonic())))
            up = not up
            lab.link(target, up=up)

    def heal(self) -> None:
        """Undo the fault in force, if any (idempotent)."""
        heal, self._heal = self._heal, None
        if heal is not None:
            heal()
