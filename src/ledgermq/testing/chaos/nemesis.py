"""The nemesis: faults chosen by a seed, one at a time or two overlapping, each healed before
the next.

Every fault touches one replica of the three, so a majority is always up and connected: the
cluster must stay safe *and* recover (the default, survivable mode). About one fault in three
(``_OVERLAP_P``) gets a second, compatible one during its hold, which heals first: one more
fault on the same replica (``_SAME_REPLICA``: a process or disk fault on a replica that is
cut off, or the other way round), or ``namesrv-pause`` beside a replica fault (clients cannot
learn a new master while the NameServer is stopped), so that two faults still never take a
majority away (``overlap=False``: one at a time). Kinds:

- ``partition-master``: the master is cut from the other replicas (blackhole routes on both
  sides of each pair); clients and the NameServer still reach it, so it may keep accepting
  sends that can never commit.
- ``partition-minority``: the same for a replica picked at random (a 1 | 2 split).
- ``bridge``: the two replicas other than the one picked cannot reach each other, and both
  reach the one picked (Jepsen's bridge: one node sees both halves, no majority is cut off).
  A follower that stops hearing the master still reaches the master's other voter: the
  election rules decide whether it disrupts a working leader.
- ``link-down``: a replica's ``eth0`` goes down: cut off from everyone, clients included.
- ``bridge-cut``: a replica's veth is taken off the bridge: cut off from everyone, and,
  unlike ``link-down``, its own interface stays up, so every packet is silently lost.
- ``link-flap``: a replica's ``eth0`` goes down and up every 0.2 to 1 s while the fault lasts
  (connections break and come back, elections start and are interrupted).
- ``kill9``: SIGKILL, restarted on its old store when the fault heals.
- ``pause``: SIGSTOP, SIGCONT when the fault heals.
- ``disk-full``: a replica's store, a small loop-mounted ext4 file system, is filled up by a
  filler file until the fault heals (then the file is deleted). A follower whose store fails
  stops for good (exit code 74); a master refuses sends while its disk is full. The nemesis,
  like a supervisor, restarts any replica that exited by itself once its fault healed
  (``supervise``), and the run reports it. Needs root (loop mounts), like the network kinds.

- ``namesrv-kill9``: a NameServer is killed, and restarted on its address when the fault
  heals, knowing no route until the brokers register again (every 30 s, and at once on a
  role change; opt-in, see ``DEFAULT_KINDS``). ``namesrv-pause``: SIGSTOP, SIGCONT when the
  fault heals. Clients hold the routes they looked up: sends and reads must go on.

``unsafe`` mode (``--unsafe``): each fault hits one or two replicas, so a majority can be
down, paused or cut off (two replicas each cut from all leave no two replicas connected): the
group must stop acknowledging sends, and still lose none it acknowledged.

Opt-in only (``--faults wipe``; not in the default set, and never more than one follower):

- ``wipe``: a follower is killed, its ledger directory (``dledger-<id>``, the README's
  recovery for a corrupt log) deleted, and it is restarted at once to be rebuilt by the
  master. Raft assumes a replica never forgets its term and vote, which this breaks: a
  wiped replica may vote twice in a term. Jepsen calls such faults unsafe.

Opt-in too (``--faults poison``, combinable with any other kind):

- ``poison``: a committed entry that no replica can apply. The brokers run through
  ``tests.chaos.buggy.poison_broker``, whose writer stores a message for ``ChaosPoisonTrigger``
  under ``%DLQ%orders.v1`` (a name no ConsumeQueue can have, past the doors' checks); the
  nemesis sends one to the master. Every replica must quarantine it and go on (README
  "Operations"): the run checks that every replica reports the same quarantined entries, at
  least one per poison committed, and the group must go on serving and recover as usual (a
  group that fail-stopped on it, as before issue 25, never elects again). Not a held fault:
  there is nothing to heal.

Opt-in too (``--faults replace``, one group, combinable with the others but ``disk-full``):

- ``replace``: the operator's replacement of a replica, online (issue 27): a new replica
  (``n3``, ``n4``, ...: ``ChaosCluster.spare_replica``) is added through the master
  (REPLICA_ADD, as ``ledgermq admin replica-add``), started with the members plus itself as
  ``dLegerPeers``, and, once the master has promoted it to voter, the picked replica (any of
  the group's, the master included) is removed (REPLICA_REMOVE) and stopped for good. A learner
  not promoted within ``_PROMOTE_S`` is removed instead (the change is abandoned). The
  replicas read at the end are the members then; kill -9 and partitions hit the new ones as
  any other. Membership changes must lose nothing acknowledged.

The network kinds and ``disk-full`` need namespaces (root); on loopback only ``kill9``,
``pause``, the NameServer's, ``wipe`` and ``poison`` are possible.
``random.Random(seed)`` picks the kinds, targets, hold and quiet times, so a seed replays the
same schedule (which replica is master at a given moment is up to the cluster).
"""

from __future__ import annotations

import json
import random
import shutil
import signal
import time
from typing import TYPE_CHECKING, Final

from ledgermq.errors import LedgerMQError
from ledgermq.testing.chaos.cluster import replica_name
from ledgermq.testing.chaos.history import FaultRecord
from ledgermq.testing.child_process import ProcessStartError
from ledgermq.wire import MQRequestCode, MQResponseCode

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ledgermq.testing.chaos.cluster import ChaosCluster

__all__ = [
    "ALL_KINDS",
    "CONTENT_KINDS",
    "DEFAULT_KINDS",
    "DISK_KINDS",
    "MEMBERSHIP_KINDS",
    "NAMESRV_KINDS",
    "NETWORK_KINDS",
    "POISON_TOPIC",
    "PROCESS_KINDS",
    "TRIGGER_TOPIC",
    "UNSAFE_KINDS",
    "Nemesis",
]

NETWORK_KINDS: Final = (
    "partition-master",
    "partition-minority",
    "bridge",
    "link-down",
    "link-flap",
    "bridge-cut",
)
PROCESS_KINDS: Final = ("kill9", "pause")
NAMESRV_KINDS: Final = ("namesrv-kill9", "namesrv-pause")
DISK_KINDS: Final = ("disk-full",)
"""Need root (loop mounts): only with namespaces."""
DEFAULT_KINDS: Final = (*NETWORK_KINDS, *PROCESS_KINDS, *DISK_KINDS, *NAMESRV_KINDS)
"""Survivable faults: one replica of three at a time, or the NameServer.

``namesrv-kill9`` joined the default set once the client kept its routes across a NameServer
that restarts empty (before: seed 5, 40 s, namesrv faults only, 19.9 s without an
acknowledgement; after: none)."""
UNSAFE_KINDS: Final = ("wipe",)
CONTENT_KINDS: Final = ("poison",)
"""A committed entry no replica can apply (opt-in; the brokers run ``poison_broker``)."""
TRIGGER_TOPIC: Final = "ChaosPoisonTrigger"
"""The poison broker (``tests/chaos/buggy/poison_broker.py``, in a clone) commits the messages
sent here under ``POISON_TOPIC``; the nemesis sends them."""
POISON_TOPIC: Final = "%DLQ%orders.v1"
"""Fits a record (14 bytes) but not a ConsumeQueue directory: every replica rejects it alike."""
MEMBERSHIP_KINDS: Final = ("replace",)
"""A replica replaced online (opt-in; one group)."""
ALL_KINDS: Final = (*DEFAULT_KINDS, *UNSAFE_KINDS, *CONTENT_KINDS, *MEMBERSHIP_KINDS)
_PROMOTE_S: Final = 30.0
"""How long a replacement waits for the master to promote the new replica."""
_MASTER_S: Final = 15.0
"""How long a membership request is retried while the group has no master (or refuses)."""
_FLAP_S: Final = (0.2, 1.0)
_SUPERVISE_S: Final = 0.5
_HOLD_S: Final = (2.0, 6.0)
_QUIET_S: Final = (1.0, 4.0)
_TICK_S: Final = 0.05
_OVERLAP_P: Final = 1 / 3
_CUT_OFF: Final = ("partition-master", "partition-minority", "link-down", "bridge-cut")
_SAME_REPLICA: Final = {
    **dict.fromkeys(_CUT_OFF, ("kill9", "pause", "disk-full")),
    "kill9": ("partition-minority", "link-down", "bridge-cut"),
    "pause": ("partition-minority", "link-down", "bridge-cut", "disk-full"),
    "disk-full": ("partition-minority", "link-down", "bridge-cut"),
}
"""First fault -> second faults that may hit the same replica during it. Not a second network
fault (one ``heal_cuts`` heals every cut), not a pause after kill9 or disk-full (a dead
process, or one that stopped on its full disk, cannot be stopped), not kill9 with disk-full
(the kill's restart would meet a full disk)."""


class Nemesis:
    """Injects ``kinds`` into ``cluster`` until ``run``'s deadline (module docstring).

    ``faults`` is the record: one ``FaultRecord`` per fault, with times in ms since ``origin``.
    ``monotonic`` and ``sleep`` are the clock (a test passes a fake one). ``unsafe``: a
    fault may hit two replicas of three at once (a majority: the group stops accepting writes
    until healed, and must still lose nothing acknowledged).
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
        unsafe: bool = False,
        overlap: bool = True,
    ) -> None:
        unknown = set(kinds) - set(ALL_KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {ALL_KINDS}")
        if set(kinds) & set(DISK_KINDS) and getattr(cluster, "disks", None) is None:
            raise ValueError("disk-full needs the cluster's stores on loop disks (root)")
        if cluster.lab is None and set(kinds) & set(NETWORK_KINDS):
            raise ValueError("network faults need namespaces; on loopback use kill9, pause, wipe")
        if not kinds:
            raise ValueError("the nemesis needs at least one fault kind")
        if "replace" in kinds and (len(cluster.groups) != 1 or "disk-full" in kinds):
            raise ValueError("replace needs one broker group, and not disk-full (no loop disk "
                             "for a new replica)")  # fmt: skip
        self.cluster = cluster
        self.rng = random.Random(seed)
        self.kinds = list(kinds)
        self.unsafe = unsafe
        self.overlap = overlap
        self.origin = origin
        self.log = log
        self.faults: list[FaultRecord] = []
        self._monotonic = monotonic
        self._sleep = sleep
        self._heals: list[Callable[[], None]] = []
        self._held: set[str] = set()
        """Replicas whose fault is in force (killed, disk full): the supervisor waits for the
        heal before it restarts them."""
        self.exits: list[str] = []
        """Replicas that exited on their own (a fail-stop) and were restarted, as sentences."""
        self.poisoned = 0
        """Poison entries committed (``poison``: sends the master acknowledged)."""

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
                self._wait(quiet)
                kind = self.rng.choice(self.kinds)
                hold = min(self.rng.uniform(*_HOLD_S), max(0.0, deadline - self._monotonic()))
                self._inject(kind, hold)
            self._wait(max(0.0, deadline - self._monotonic()))
        finally:
            self.heal()
        self.supervise()

    def _wait(self, seconds: float) -> None:
        """Sleep ``seconds``, restarting replicas that exit meanwhile (``supervise``)."""
        end = self._monotonic() + seconds
        while (left := end - self._monotonic()) > 0:
            self._sleep(min(left, _SUPERVISE_S))
            self.supervise()

    def supervise(self) -> None:
        """Restart every replica that exited by itself, as a supervisor would: a broker
        whose store fails (a full disk) stops for good and expects one (README
        "Operations"). Recorded in ``exits``; killed replicas wait for their fault to heal."""
        for group in self.cluster.groups:
            for node in self.cluster.nodes:
                self._supervise(group, node)

    def _supervise(self, group: str, node: str) -> None:
        name = replica_name(group, node)
        if name in self._held or self.cluster.is_running(group, node):
            return
        code = self.cluster.returncode(group, node)
        self.exits.append(f"{self.now_ms() / 1000:.1f} s: {name} exited with code {code}")
        self.log(f"{self.now_ms() / 1000:7.1f} s  {name} exited (code {code}): restarting")
        try:
            self.cluster.start_replica(group, node)
        except ProcessStartError as exc:  # tried again at the next check
            first = str(exc).splitlines()[0]
            self.exits.append(f"{self.now_ms() / 1000:.1f} s: {name} restart failed: {first}")
            self.log(f"{self.now_ms() / 1000:7.1f} s  {name} did not restart: {first}")

    def _replica(self, name: str) -> tuple[str, str]:
        """``(group, node)`` of the replica called ``name`` (``cluster.replica_name``)."""
        groups = self.cluster.groups
        return (groups[0], name) if len(groups) == 1 else self.cluster.locate(name)

    def _targets(self, kind: str) -> list[str]:
        """The replicas ``kind`` hits: one, or in unsafe mode one or two (a majority)."""
        if kind in NAMESRV_KINDS:  # one NameServer of one or two
            names = self.cluster.namesrv_nodes
            return [names[0] if len(names) == 1 else self.rng.choice(names)]
        groups = self.cluster.groups  # one group of one or two: drawn only if there are two
        group = groups[0] if len(groups) == 1 else self.rng.choice(groups)
        nodes = [replica_name(group, node) for node in self.cluster.nodes]
        if kind == "poison":  # sent to the master, wherever it is
            found = self.cluster.master(group)
            return [replica_name(group, found) if found is not None else self.rng.choice(nodes)]
        count = self.rng.choice((1, 2)) if self.unsafe and kind not in ("wipe", "bridge") else 1
        targets = self.rng.sample(nodes, count)
        if kind in ("partition-master", "wipe"):
            found = self.cluster.master(group)
            master = None if found is None else replica_name(group, found)
            if kind == "partition-master" and master is not None and master not in targets:
                targets[0] = master
            elif kind == "wipe" and master in targets:  # the master's log is the one to copy
                targets = [self.rng.choice([n for n in nodes if n != master])]
        return sorted(targets)

    def _inject(self, kind: str, hold_s: float) -> None:
        targets = self._targets(kind)
        shown = ",".join(targets)
        start = self.now_ms()
        self.log(f"{start / 1000:7.1f} s  {kind} {shown} for {hold_s:.1f} s")
        try:
            for target in targets:
                self._apply(kind, target)
            if kind == "link-flap":
                self._flap(targets, hold_s)
            else:
                self._hold(kind, targets, hold_s)
        finally:
            self.heal()
        self.faults.append(FaultRecord(kind, tuple(targets), start, self.now_ms()))
        self.log(f"{self.now_ms() / 1000:7.1f} s  healed {kind} {shown}")

    def _second(self, kind: str) -> str | None:
        """A fault to overlap with ``kind`` (module docstring), or None. The seeded generator
        is drawn from only when some fault could overlap, so a set of kinds where none can
        replays the schedules it had before overlaps existed."""
        if not self.overlap:
            return None
        if kind in NAMESRV_KINDS:
            options = [k for k in self.kinds if k not in (*NAMESRV_KINDS, "wipe", "link-flap")]
        else:
            options = [k for k in _SAME_REPLICA.get(kind, ()) if k in self.kinds]
            if kind != "bridge" and "namesrv-pause" in self.kinds:
                options.append("namesrv-pause")
        if not options or self.rng.random() >= _OVERLAP_P:
            return None
        return self.rng.choice(options)

    def _hold(self, kind: str, targets: list[str], hold_s: float) -> None:
        """Wait ``hold_s``, with a second fault inside that time if ``_second`` picks one."""
        second = self._second(kind)
        if second is None:
            self._wait(hold_s)
            return
        lead = self.rng.uniform(0.0, hold_s / 2)
        span = self.rng.uniform(min(0.5, hold_s - lead), hold_s - lead)
        self._wait(lead)
        if second in NAMESRV_KINDS or kind in NAMESRV_KINDS:
            where = self._targets(second)
        else:
            where = targets  # the same replica(s)
        shown = ",".join(where)
        start = self.now_ms()
        self.log(f"{start / 1000:7.1f} s  + {second} {shown} for {span:.1f} s (overlapping)")
        first_heals = len(self._heals)
        try:
            for target in where:
                self._apply(second, target)
            self._wait(span)
        finally:
            heals, self._heals = self._heals[first_heals:], self._heals[:first_heals]
            for heal in reversed(heals):
                heal()
        self.faults.append(FaultRecord(second, tuple(where), start, self.now_ms()))
        self.log(f"{self.now_ms() / 1000:7.1f} s  healed {second} {shown}")
        self._wait(max(0.0, hold_s - lead - span))

    def _apply(self, kind: str, target: str) -> None:
        """Inject ``kind`` on ``target`` and remember how to heal it."""
        cluster, lab = self.cluster, self.cluster.lab
        if kind in NAMESRV_KINDS:
            self._apply_namesrv(kind, cluster.namesrv_nodes.index(target))
            return
        group, node = self._replica(target)
        peers = [replica_name(group, n) for n in cluster.nodes if replica_name(group, n) != target]
        if kind in ("partition-master", "partition-minority"):
            assert lab is not None
            for other in peers:
                lab.cut(target, other)
            self._heals.append(lab.heal_cuts)
        elif kind == "bridge":  # ``target`` is the middle: the others lose each other only
            assert lab is not None
            sides = peers
            for index, a in enumerate(sides):
                for b in sides[index + 1 :]:
                    lab.cut(a, b)
            self._heals.append(lab.heal_cuts)
        elif kind in ("link-down", "link-flap"):
            assert lab is not None
            lab.link(target, up=False)
            self._heals.append(lambda: lab.link(target, up=True))
        elif kind == "bridge-cut":
            assert lab is not None
            lab.bridge_port(target, attached=False)
            self._heals.append(lambda: lab.bridge_port(target, attached=True))
        elif kind == "disk-full":
            disks = cluster.disks
            assert disks is not None
            self._held.add(target)
            disks.fill(target)

            def drain() -> None:
                disks.drain(target)
                self._held.discard(target)  # restarted by ``supervise`` if it stopped

            self._heals.append(drain)
        elif kind == "kill9":
            self._held.add(target)
            cluster.kill9(group, node)

            def restart() -> None:
                cluster.start_replica(group, node)
                self._held.discard(target)

            self._heals.append(restart)
        elif kind in ("poison", "replace"):  # nothing held, nothing to heal
            self._apply_unheld(kind, group, node, target)
        elif kind == "wipe":
            cluster.kill9(group, node)
            for ledger in cluster.store_dir(group, node).glob("dledger-*"):
                shutil.rmtree(ledger)
            cluster.start_replica(group, node)
        elif not cluster.is_running(group, node):  # exited by itself just now
            self.log(f"{self.now_ms() / 1000:7.1f} s  {target} is not running: not paused")
        else:
            cluster.sigstop(group, node)
            self._heals.append(lambda: cluster.sigcont(group, node))

    def _apply_unheld(self, kind: str, group: str, node: str, target: str) -> None:
        if kind == "poison":
            self._poison(group, node, target)
        else:
            self._replace(group, node)

    def _replace(self, group: str, old: str) -> None:
        """Add a new replica, wait for its promotion, remove ``old`` (module docstring)."""
        cluster = self.cluster
        new = cluster.spare_replica(group)
        if new is None:
            self.log(f"{self.now_ms() / 1000:7.1f} s  replace: no spare replica id left")
            return
        address = cluster.add_replica(group, new)
        name = replica_name(group, new)
        self._held.add(name)  # not started yet: the supervisor leaves it alone
        promoted = False
        try:
            if self._membership(group, MQRequestCode.REPLICA_ADD, {"peer": f"{new}-{address}"}):
                cluster.start_replica(group, new)
                self._held.discard(name)
                promoted = self._wait_promoted(group, new)
        finally:
            self._held.discard(name)
        leaving = old if promoted else new
        if not promoted:
            self.log(f"{self.now_ms() / 1000:7.1f} s  replace: {new} not promoted; removing it")
        if self._membership(group, MQRequestCode.REPLICA_REMOVE, {"id": leaving}):
            cluster.forget_replica(group, leaving)
            self.log(f"{self.now_ms() / 1000:7.1f} s  replace: {leaving} removed and stopped")

    def _membership(self, group: str, code: int, fields: dict[str, str]) -> bool:
        """One membership request to the master, retried while there is none or it refuses
        (a change not committed yet, an election); False if it never took it."""
        end = self._monotonic() + _MASTER_S
        last = ""
        while self._monotonic() < end:
            master = self.cluster.master(group)
            if master is not None:
                try:
                    answer = self.cluster.request(
                        self.cluster.address(group, master), code, fields, timeout_s=15.0
                    )
                except LedgerMQError as exc:
                    last = str(exc)
                else:
                    if answer.code == MQResponseCode.SUCCESS:
                        return True
                    last = f"{answer.code} {answer.remark}"
            self._wait(0.5)
        self.log(f"{self.now_ms() / 1000:7.1f} s  replace: {code} {fields} not taken: {last}")
        return False

    def _wait_promoted(self, group: str, new: str) -> bool:
        """Until the master lists ``new`` as a voter (REPLICA_LIST), at most ``_PROMOTE_S``."""
        end = self._monotonic() + _PROMOTE_S
        while self._monotonic() < end:
            master = self.cluster.master(group)
            if master is not None:
                try:
                    answer = self.cluster.request(
                        self.cluster.address(group, master), MQRequestCode.REPLICA_LIST
                    )
                    rows = json.loads(answer.body or b"{}").get("replicas", [])
                except (LedgerMQError, ValueError, AttributeError):
                    rows = []
                if any(r.get("id") == new and r.get("role") != "learner" for r in rows):
                    return True
            self._wait(0.5)
        return False

    def _poison(self, group: str, node: str, target: str) -> None:
        """Send one message to ``TRIGGER_TOPIC`` through ``target``: committed as a poison
        entry (``poison_broker``) when it is the master and the send succeeds."""
        fields = {
            "producerGroup": "chaos-poison", "topic": TRIGGER_TOPIC, "defaultTopic": "TBW102",
            "defaultTopicQueueNums": "1", "queueId": "0", "sysFlag": "0",
            "bornTimestamp": str(int(time.time() * 1000)), "flag": "0", "properties": "",
            "reconsumeTimes": "0", "unitMode": "false", "batch": "false",
        }  # fmt: skip
        try:
            answer = self.cluster.request(
                self.cluster.address(group, node), MQRequestCode.SEND_MESSAGE, fields, b"poison"
            )
        except LedgerMQError as exc:
            self.log(f"{self.now_ms() / 1000:7.1f} s  poison not sent to {target}: {exc}")
            return
        if answer.code == MQResponseCode.SUCCESS:
            self.poisoned += 1
        else:
            self.log(f"{self.now_ms() / 1000:7.1f} s  poison refused by {target}: "
                     f"{answer.code} {answer.remark}")  # fmt: skip

    def _apply_namesrv(self, kind: str, index: int) -> None:
        cluster = self.cluster
        if kind == "namesrv-kill9":
            cluster.namesrv_kill9(index)
            self._heals.append(lambda: cluster.start_namesrv(index))
        else:
            cluster.namesrv_signal(signal.SIGSTOP, index)
            self._heals.append(lambda: cluster.namesrv_signal(signal.SIGCONT, index))

    def _flap(self, targets: list[str], hold_s: float) -> None:
        lab = self.cluster.lab
        assert lab is not None
        end = self._monotonic() + hold_s
        up = False
        while self._monotonic() < end:
            self._sleep(min(self.rng.uniform(*_FLAP_S), max(0.0, end - self._monotonic())))
            up = not up
            for target in targets:
                lab.link(target, up=up)

    def heal(self) -> None:
        """Undo the faults in force, all of them even if one heal fails (idempotent)."""
        heals, self._heals = self._heals, []
        failure: BaseException | None = None
        for heal in heals:
            try:
                heal()
            except Exception as exc:  # noqa: BLE001 - heal the rest, then raise the first
                failure = failure or exc
        if failure is not None:
            raise failure
