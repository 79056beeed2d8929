"""The nemesis on a fake cluster and a fake clock: a seed replays its schedule, one fault at a
time, each healed before the next (never a majority down), network faults refused on loopback."""

from __future__ import annotations

import itertools
import json
import signal
from pathlib import Path
from typing import ClassVar

import pytest

from ledgermq.testing.chaos.cluster import replica_name
from ledgermq.testing.chaos.history import FaultRecord
from ledgermq.testing.chaos.nemesis import DEFAULT_KINDS, Nemesis
from ledgermq.testing.child_process import ProcessStartError
from ledgermq.wire import MQRequestCode, MQResponseCode, RemotingCommand
from tests.chaos.buggy.poison_broker import TRIGGER_TOPIC


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class FakeLab:
    def __init__(self, journal: list[str]) -> None:
        self.journal = journal
        self.down: set[str] = set()
        self.cuts: set[tuple[str, str]] = set()

    def cut(self, a: str, b: str) -> None:
        self.cuts |= {(a, b), (b, a)}
        self.journal.append(f"cut {a} {b}")

    def heal_cuts(self) -> None:
        self.cuts.clear()
        self.journal.append("heal cuts")

    def bridge_port(self, node: str, *, attached: bool) -> None:
        self.link(node, up=attached)

    def link(self, node: str, *, up: bool) -> None:
        (self.down.discard if up else self.down.add)(node)
        self.journal.append(f"link {node} {'up' if up else 'down'}")


class FakeDisks:
    """Loop disks that only say which replica's disk is full."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster

    def fill(self, node: str) -> int:
        self.cluster.full.add(node)
        self.cluster.journal.append(f"fill {node}")
        self.cluster._count()
        return 1

    def drain(self, node: str) -> None:
        self.cluster.full.discard(node)
        self.cluster.journal.append(f"drain {node}")


class FakeCluster:
    """Counts the replicas that are cut off, dead, paused or with a full disk after every step."""

    nodes: ClassVar[list[str]] = ["n0", "n1", "n2"]
    groups: ClassVar[list[str]] = ["broker-a"]

    def __init__(self, network: bool = True) -> None:
        self.journal: list[str] = []
        self.lab: FakeLab | None = FakeLab(self.journal) if network else None
        self.dead: set[str] = set()
        self.paused: set[str] = set()
        self.full: set[str] = set()
        self.disks: FakeDisks | None = FakeDisks(self) if network else None
        self.most_faulted = 0
        self.store = Path("/nonexistent")

    def _count(self) -> None:
        cut_off = set(self.lab.down) if self.lab else set()
        if self.lab:
            cut_off |= {
                a for a, _ in self.lab.cuts if sum(1 for x, _ in self.lab.cuts if x == a) > 1
            }
        self.most_faulted = max(
            self.most_faulted, len(cut_off | self.dead | self.paused | self.full)
        )

    def is_running(self, group: str, node: str) -> bool:
        return node not in self.dead

    def returncode(self, group: str, node: str) -> int | None:
        return None if node not in self.dead else -9

    def store_dir(self, group: str, node: str) -> Path:
        return self.store / node

    def master(self, group: str) -> str | None:
        return "n1"

    def kill9(self, group: str, node: str) -> None:
        self.dead.add(node)
        self.journal.append(f"kill9 {node}")
        self._count()

    def start_replica(self, group: str, node: str) -> None:
        self.dead.discard(node)
        self.journal.append(f"start {node}")

    def sigstop(self, group: str, node: str) -> None:
        self.paused.add(node)
        self.journal.append(f"stop {node}")
        self._count()

    def sigcont(self, group: str, node: str) -> None:
        self.paused.discard(node)
        self.journal.append(f"cont {node}")

    namesrv_nodes: ClassVar[list[str]] = ["ns"]

    def namesrv_kill9(self, index: int = 0) -> None:
        self.journal.append(f"kill9 {self.namesrv_nodes[index]}")

    def start_namesrv(self, index: int = 0) -> None:
        self.journal.append(f"start {self.namesrv_nodes[index]}")

    def namesrv_signal(self, sig: signal.Signals, index: int = 0) -> None:
        self.journal.append(f"{sig.name} {self.namesrv_nodes[index]}")


def run(
    seed: int,
    kinds: tuple[str, ...] = DEFAULT_KINDS,
    store: Path | None = None,
    *,
    unsafe: bool = False,
) -> tuple[FakeCluster, Nemesis]:
    cluster = FakeCluster()
    cluster.store = store or Path("/nonexistent")
    clock = FakeClock()
    nemesis = Nemesis(
        cluster,  # type: ignore[arg-type]
        seed,
        kinds,
        origin=clock.now,
        monotonic=clock.monotonic,
        sleep=clock.sleep,
        unsafe=unsafe,
    )
    original_cut = cluster.lab.cut  # type: ignore[union-attr]

    def cut_and_count(a: str, b: str) -> None:
        original_cut(a, b)
        cluster._count()

    cluster.lab.cut = cut_and_count  # type: ignore[union-attr, method-assign]
    nemesis.run(120.0)
    return cluster, nemesis


def test_a_seed_replays_its_schedule_and_another_seed_differs() -> None:
    first, nemesis = run(7)
    again, _ = run(7)
    other, _ = run(8)
    assert first.journal == again.journal
    assert first.journal != other.journal
    assert len(nemesis.faults) >= 10
    assert len({fault.kind for fault in nemesis.faults}) >= 3


def test_one_replica_at_most_is_faulted_and_everything_ends_healed() -> None:
    for seed in range(20):
        cluster, nemesis = run(seed)
        assert cluster.most_faulted == 1, seed
        assert not cluster.dead
        assert not cluster.paused
        assert not cluster.full
        assert cluster.lab is not None
        assert not cluster.lab.cuts
        assert not cluster.lab.down
        assert all(f.end_ms >= f.start_ms for f in nemesis.faults)


def test_partition_master_cuts_the_master() -> None:
    cluster, _ = run(3, ("partition-master",))
    assert cluster.journal[:2] == ["cut n1 n0", "cut n1 n2"]


def test_network_faults_need_namespaces() -> None:
    with pytest.raises(ValueError, match="need namespaces"):
        Nemesis(FakeCluster(network=False), 1, ["link-down"], origin=0.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown fault kinds"):
        Nemesis(FakeCluster(), 1, ["meteor"], origin=0.0)  # type: ignore[arg-type]


def test_wipe_deletes_a_followers_ledger_and_restarts_it(tmp_path: Path) -> None:
    for node in FakeCluster.nodes:
        (tmp_path / node / f"dledger-{node}" / "data").mkdir(parents=True)
        (tmp_path / node / "config").mkdir()
    cluster, nemesis = run(5, ("wipe",), store=tmp_path)
    wiped = {fault.nodes[0] for fault in nemesis.faults}
    assert wiped
    assert "n1" not in wiped  # the master is never wiped
    for node in wiped:
        assert not list((tmp_path / node).glob("dledger-*"))
        assert (tmp_path / node / "config").exists()
    assert cluster.journal[:2] == [f"kill9 {nemesis.faults[0].nodes[0]}",
                                   f"start {nemesis.faults[0].nodes[0]}"]  # fmt: skip


def test_a_flapping_link_ends_up() -> None:
    cluster, nemesis = run(9, ("link-flap",))
    assert len(nemesis.faults) > 5
    downs = [line for line in cluster.journal if line.endswith("down")]
    assert len(downs) > 2 * len(nemesis.faults)  # down and up several times per fault
    assert cluster.lab is not None
    assert not cluster.lab.down


def test_unsafe_mode_hits_a_majority_sometimes_and_still_heals_everything() -> None:
    most = 0
    for seed in range(10):
        cluster, nemesis = run(seed, unsafe=True)
        most = max(most, cluster.most_faulted)
        assert max(len(fault.nodes) for fault in nemesis.faults) <= 2
        assert not cluster.dead
        assert not cluster.paused
        assert cluster.lab is not None
        assert not cluster.lab.down
        assert not cluster.lab.cuts
    assert most >= 2  # two cut off each from all: no two replicas connected (3)


def test_a_replica_that_exits_by_itself_is_restarted() -> None:
    cluster = FakeCluster()
    clock = FakeClock()
    nemesis = Nemesis(
        cluster,  # type: ignore[arg-type]
        1,
        ["pause"],
        origin=clock.now,
        monotonic=clock.monotonic,
        sleep=clock.sleep,
    )
    cluster.dead.add("n2")  # a fail-stop: no fault of the nemesis killed it
    nemesis.run(5.0)
    assert "start n2" in cluster.journal
    assert len(nemesis.exits) == 1
    assert "n2 exited with code -9" in nemesis.exits[0]


def test_a_failed_restart_is_recorded_and_tried_again() -> None:
    cluster = FakeCluster()
    clock = FakeClock()
    real_start = cluster.start_replica
    attempts: list[str] = []

    def start_once_failing(group: str, node: str) -> None:
        attempts.append(node)
        if len(attempts) == 1:
            raise ProcessStartError(f"{node} exited with code 74 within 30 s; its log ends:\n...")
        real_start(group, node)

    cluster.start_replica = start_once_failing  # type: ignore[method-assign]
    nemesis = Nemesis(
        cluster,  # type: ignore[arg-type]
        1,
        ["pause"],
        origin=clock.now,
        monotonic=clock.monotonic,
        sleep=clock.sleep,
    )
    cluster.dead.add("n0")
    nemesis.run(3.0)
    assert attempts == ["n0", "n0"]
    assert "restart failed: n0 exited with code 74 within 30 s; its log ends:" in nemesis.exits[1]
    assert not cluster.dead


def test_the_supervisor_waits_for_a_disk_full_fault_to_heal() -> None:
    cluster = FakeCluster()
    clock = FakeClock()
    filled: list[str] = []

    class Disks:
        def fill(self, node: str) -> int:
            filled.append(node)
            cluster.dead.add(node)  # the replica fail-stops on the full disk at once
            cluster.journal.append(f"fill {node}")
            return 1

        def drain(self, node: str) -> None:
            cluster.journal.append(f"drain {node}")

    cluster.disks = Disks()  # type: ignore[assignment]
    nemesis = Nemesis(
        cluster,  # type: ignore[arg-type]
        2,
        ["disk-full"],
        origin=clock.now,
        monotonic=clock.monotonic,
        sleep=clock.sleep,
    )
    nemesis.run(20.0)
    assert filled
    for node in filled:
        fill = cluster.journal.index(f"fill {node}")
        drain = cluster.journal.index(f"drain {node}", fill)
        start = cluster.journal.index(f"start {node}", fill)
        assert drain < start  # never restarted onto a disk that is still full
    assert not cluster.dead


def test_a_bridge_cuts_the_sides_from_each_other_and_not_from_the_middle() -> None:
    cluster, nemesis = run(5, ("bridge",))
    assert nemesis.faults
    assert all(f.kind == "bridge" for f in nemesis.faults)
    cuts = [line.split()[1:] for line in cluster.journal if line.startswith("cut ")]
    assert len(cuts) == len(nemesis.faults)  # one pair per fault: the two sides
    for fault, pair in zip(nemesis.faults, cuts, strict=True):
        (middle,) = fault.nodes
        assert middle not in pair
        assert sorted([middle, *pair]) == ["n0", "n1", "n2"]
    assert cluster.most_faulted == 0  # nobody is cut off from a majority
    assert cluster.lab is not None
    assert not cluster.lab.cuts


def test_nameserver_faults_hit_the_nameserver_only_and_heal() -> None:
    cluster, nemesis = run(4, ("namesrv-kill9", "namesrv-pause"))
    assert {fault.kind for fault in nemesis.faults} == {"namesrv-kill9", "namesrv-pause"}
    assert all(fault.nodes == ("ns",) for fault in nemesis.faults)
    assert cluster.most_faulted == 0  # no replica was touched
    kills = cluster.journal.count("kill9 ns")
    assert kills == cluster.journal.count("start ns") > 0
    assert cluster.journal.count("SIGSTOP ns") == cluster.journal.count("SIGCONT ns") > 0
    for before, after in zip(cluster.journal, cluster.journal[1:], strict=False):
        if before == "kill9 ns":
            assert after == "start ns"
        if before == "SIGSTOP ns":
            assert after == "SIGCONT ns"


def overlapping(faults: list[FaultRecord]) -> list[tuple[FaultRecord, FaultRecord]]:
    ordered = sorted(faults, key=lambda f: f.start_ms)
    return [(a, b) for a, b in itertools.pairwise(ordered) if b.start_ms < a.end_ms]


def test_overlapping_faults_never_take_a_majority_and_nest() -> None:
    pairs = []
    for seed in range(20):
        cluster, nemesis = run(seed)
        assert cluster.most_faulted == 1, seed
        assert not (cluster.dead | cluster.paused | cluster.full), seed
        for first, second in overlapping(nemesis.faults):
            assert second.end_ms <= first.end_ms  # the second heals first
            assert first.nodes == second.nodes or "ns" in first.nodes + second.nodes
            pairs.append((first.kind, second.kind))
    assert len(pairs) > 20
    namesrv = {"namesrv-pause", "namesrv-kill9"}
    assert any(namesrv & set(pair) for pair in pairs)
    same_replica = [pair for pair in pairs if not namesrv & set(pair)]
    assert same_replica
    assert all("bridge" not in pair and "link-flap" not in pair for pair in same_replica)


def test_without_overlap_faults_come_one_at_a_time() -> None:
    cluster = FakeCluster()
    clock = FakeClock()
    nemesis = Nemesis(
        cluster,  # type: ignore[arg-type]
        3,
        DEFAULT_KINDS,
        origin=clock.now,
        monotonic=clock.monotonic,
        sleep=clock.sleep,
        overlap=False,
    )
    nemesis.run(120.0)
    assert len(nemesis.faults) > 10
    assert overlapping(nemesis.faults) == []


def test_with_two_nameservers_a_fault_hits_one_of_them() -> None:
    cluster = FakeCluster()
    cluster.namesrv_nodes = ["ns", "ns1"]  # type: ignore[misc]
    clock = FakeClock()
    nemesis = Nemesis(
        cluster,  # type: ignore[arg-type]
        6,
        ["namesrv-kill9", "namesrv-pause"],
        origin=clock.now,
        monotonic=clock.monotonic,
        sleep=clock.sleep,
    )
    nemesis.run(120.0)
    hit = {fault.nodes for fault in nemesis.faults}
    assert hit == {("ns",), ("ns1",)}
    for node in ("ns", "ns1"):
        assert cluster.journal.count(f"kill9 {node}") == cluster.journal.count(f"start {node}")
        assert cluster.journal.count(f"SIGSTOP {node}") == cluster.journal.count(f"SIGCONT {node}")


def test_a_replica_that_exited_is_not_paused() -> None:
    """A pause overlapping another fault could find its replica stopped on its own (a full
    disk); signalling it raises, which would end the run with a traceback."""
    cluster = FakeCluster()
    lines: list[str] = []
    nemesis = Nemesis(cluster, 1, ["pause"], origin=0.0, log=lines.append)  # type: ignore[arg-type]
    cluster.dead.add("n0")
    nemesis._apply("pause", "n0")
    nemesis.heal()
    assert "stop n0" not in cluster.journal
    assert "cont n0" not in cluster.journal
    assert lines[-1].endswith("n0 is not running: not paused")


class TwoGroups(FakeCluster):
    """Two broker groups: replicas are known by name (``n0`` of broker-a, ``bn0`` of broker-b)."""

    groups: ClassVar[list[str]] = ["broker-a", "broker-b"]

    def locate(self, name: str) -> tuple[str, str]:
        return ("broker-b", name[1:]) if name.startswith("b") else ("broker-a", name)

    def master(self, group: str) -> str | None:
        return "n1"

    def kill9(self, group: str, node: str) -> None:
        super().kill9(group, replica_name(group, node))

    def start_replica(self, group: str, node: str) -> None:
        super().start_replica(group, replica_name(group, node))

    def sigstop(self, group: str, node: str) -> None:
        super().sigstop(group, replica_name(group, node))

    def sigcont(self, group: str, node: str) -> None:
        super().sigcont(group, replica_name(group, node))

    def is_running(self, group: str, node: str) -> bool:
        return super().is_running(group, replica_name(group, node))


def test_with_two_groups_a_fault_stays_inside_one_group() -> None:
    hit = set()
    for seed in range(10):
        cluster = TwoGroups()
        clock = FakeClock()
        nemesis = Nemesis(
            cluster,  # type: ignore[arg-type]
            seed,
            DEFAULT_KINDS,
            origin=clock.now,
            monotonic=clock.monotonic,
            sleep=clock.sleep,
        )
        nemesis.run(60.0)
        assert cluster.most_faulted <= 1, seed
        assert not (cluster.dead | cluster.paused | cluster.full), seed
        for line in cluster.journal:
            if line.startswith("cut "):
                a, b = line.split()[1:]
                assert a.startswith("b") == b.startswith("b"), line  # same group
        hit |= {node for fault in nemesis.faults for node in fault.nodes}
    assert {"n0", "n1", "n2", "bn0", "bn1", "bn2"} <= hit


class PoisonCluster(FakeCluster):
    """Answers the nemesis's poison sends (``poison``: sent to the master)."""

    def __init__(self) -> None:
        super().__init__(network=False)
        self.sent: list[tuple[str, str]] = []

    def address(self, group: str, node: str) -> str:
        return f"{node}:10911"

    def request(
        self, address: str, code: int, fields: dict[str, str], body: bytes = b""
    ) -> RemotingCommand:
        self.sent.append((address, fields["topic"]))
        self.journal.append(f"poison {address}")
        return RemotingCommand(code=MQResponseCode.SUCCESS, opaque=0, flag=1)


def test_poison_sends_one_trigger_message_to_the_master_and_counts_it() -> None:
    """``--faults poison`` (issue 25 item 1): the nemesis commits poison entries through the
    master (the brokers run ``poison_broker``); nothing to heal, nobody killed."""
    cluster = PoisonCluster()
    clock = FakeClock()
    nemesis = Nemesis(
        cluster,  # type: ignore[arg-type]
        3, ("poison", "kill9"), origin=clock.now, monotonic=clock.monotonic, sleep=clock.sleep,
    )  # fmt: skip
    nemesis.run(60.0)
    poisons = [f for f in nemesis.faults if f.kind == "poison"]
    assert poisons
    assert all(f.nodes == ("n1",) for f in poisons)  # the master of FakeCluster
    assert nemesis.poisoned == len(poisons) == len(cluster.sent)
    assert {topic for _, topic in cluster.sent} == {TRIGGER_TOPIC}
    assert not cluster.dead


def test_replace_needs_one_group_and_no_loop_disks() -> None:
    """``replace`` adds replicas as processes of one group: refused with two groups (a new
    replica's group would be ambiguous) and beside ``disk-full`` (it would have no loop disk)."""
    clock = FakeClock()
    for cluster, kinds in (
        (TwoGroups(), ("replace", "kill9")),
        (FakeCluster(), ("replace", "disk-full")),
    ):
        with pytest.raises(ValueError, match="replace needs one broker group"):
            Nemesis(cluster, 1, kinds, origin=clock.now)  # type: ignore[arg-type]


class MembersCluster(FakeCluster):
    """A group whose master (``n1`` while it is a member) takes REPLICA_ADD / REPLICA_REMOVE
    and answers REPLICA_LIST; ``promote`` False: a new replica stays a learner."""

    def __init__(self, *, promote: bool = True) -> None:
        super().__init__(network=False)
        self.nodes = ["n0", "n1", "n2"]  # type: ignore[misc]  # its own: replicas come and go
        self.members = {"n0": "follower", "n1": "leader", "n2": "follower"}
        self.promote = promote

    def master(self, group: str) -> str | None:
        return next(n for n, role in self.members.items() if role == "leader")

    def address(self, group: str, node: str) -> str:
        return f"{node}:10911"

    def spare_replica(self, group: str) -> str | None:
        used = {*self.nodes, *self.journal_ids()}
        return next((f"n{i}" for i in range(3, 7) if f"n{i}" not in used), None)

    def journal_ids(self) -> set[str]:
        return {line.split()[1] for line in self.journal if line.startswith("add ")}

    def add_replica(self, group: str, node: str) -> str:
        self.nodes.append(node)
        self.journal.append(f"add {node}")
        return f"{node}:40911"

    def forget_replica(self, group: str, node: str) -> None:
        self.nodes.remove(node)
        self.journal.append(f"forget {node}")

    def request(
        self, address: str, code: int, fields: dict[str, str] | None = None, body: bytes = b"",
        timeout_s: float = 3.0,
    ) -> RemotingCommand:  # fmt: skip
        fields = fields or {}
        if code == MQRequestCode.REPLICA_ADD:
            self.members[fields["peer"].partition("-")[0]] = "learner"
        elif code == MQRequestCode.REPLICA_REMOVE:
            gone = self.members.pop(fields["id"])
            if gone == "leader":  # the master removed itself: another takes over
                self.members[next(iter(self.members))] = "leader"
        elif code == MQRequestCode.REPLICA_LIST:
            if self.promote:
                self.members = {
                    n: "follower" if r == "learner" else r for n, r in self.members.items()
                }
            rows = [{"id": n, "role": r} for n, r in self.members.items()]
            body = json.dumps({"replicas": rows}).encode()
        return RemotingCommand(code=MQResponseCode.SUCCESS, opaque=0, flag=1, body=body)


def _replacing(cluster: MembersCluster, seconds: float) -> Nemesis:
    clock = FakeClock()
    nemesis = Nemesis(
        cluster,  # type: ignore[arg-type]
        2, ("replace",), origin=clock.now, monotonic=clock.monotonic, sleep=clock.sleep,
    )  # fmt: skip
    nemesis.run(seconds)
    return nemesis


def test_replace_adds_a_replica_then_removes_the_old_one_until_no_spare_is_left() -> None:
    """Each replacement: REPLICA_ADD of a new id, start, promotion seen in REPLICA_LIST, then
    REPLICA_REMOVE of the picked replica (the master too) and its process stopped; the group
    keeps three members throughout, and with the four spare ids used up it stops replacing."""
    cluster = MembersCluster()
    nemesis = _replacing(cluster, 120.0)
    assert [line for line in cluster.journal if line.startswith("add ")] == [
        "add n3", "add n4", "add n5", "add n6",
    ]  # fmt: skip
    assert sum(line.startswith("forget ") for line in cluster.journal) == 4
    assert len(cluster.nodes) == 3
    assert sorted(cluster.members) == sorted(cluster.nodes)
    assert {"start n3", "start n4", "start n5", "start n6"} <= set(cluster.journal)
    assert len(nemesis.faults) > 4  # the later ones found no spare id


def test_a_new_replica_never_promoted_is_removed_instead() -> None:
    """A learner that is not promoted within the bound is the one removed (the replacement is
    abandoned): the group keeps its three voters."""
    cluster = MembersCluster(promote=False)
    _replacing(cluster, 12.0)
    assert cluster.journal[:3] == ["add n3", "start n3", "forget n3"]
    assert cluster.nodes == ["n0", "n1", "n2"]
