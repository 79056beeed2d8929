"""A seeded, single-threaded simulation of a Raft group: the cores, a network, disks, faults.

Everything random comes from one ``random.Random(seed)``; the same seed replays the same run.
Each node is a real ``RaftCore`` over a ``MemoryLedgerStore``, driven by ``process_ready`` exactly
as the server drives it (persist the hard state, truncate and append, send, commit, advance).

Leadership moves too: in some runs a random node is the preferred leader (the leader hands over
to it every second when it can), in others the workload asks the leader to transfer to a random
node. These draws come from a second generator, so a seed without them replays the runs of the
versions before they existed (the regression seeds stay meaningful).

Disks: in most runs persisting a ``Ready`` takes simulated time (up to ``persist_ms``), as an
fsync does. Meanwhile the node has sent the Ready's "send now" messages but not the "after
persist" ones, takes no input (messages wait in its inbox) and a crash loses the whole Ready: the
hard state, the truncation and the entries. A core that put a vote or an acknowledgement in the
wrong list would be caught by the invariants. (``persist_ms`` 0 persists at once, as the versions
before it did; it is drawn from its own generator.)

Faults: per-message loss, duplication and random delay (which reorders), symmetric partitions
(a node isolated, or the group split), asymmetric link cuts, crashes (the node loses everything
not persisted; hard state and stored entries survive) and restarts. Two faults are drawn from
generators of their own, so seeds without them replay the runs of earlier versions: a *replaced
disk* (a crash that loses the node's whole log and hard state, as when an operator moves a corrupt
``dledger-<id>`` directory aside; at most one node at a time, while every other node holds data,
which is the failure a group of 2f+1 tolerates), and *retention* (a node deletes the old segments
of its committed log now and then, with small segments, so a leader must rebuild a follower that
needs entries it no longer has). After the fault phase the
network heals and every node restarts; the run must then elect a leader and finish every
proposal within a bounded simulated time (liveness).

Invariants are checked after every event (``SafetyLedger`` and ``check_node``): one leader per
term, log matching, committed entries never change or disappear, the commit index never moves
back, acknowledged proposals are stored on a majority with the proposed bodies.

Membership changes (drawn from a generator of their own, so seeds without them replay as before):
the operator adds a replica as a learner (starting the new node just before or just after the
change, with a peer list of the members plus itself, as ``replica-add`` documents; sometimes the
change is refused and the started node is one the group never admitted), removes a member
(sometimes the leader itself), or replaces one (add, wait for the promotion, remove an old
voter), during partitions, crashes and slow disks, so changes are also truncated. After every
event: no node leads that is not a voter of its configuration, and a node's configuration is the
latest CONFIG_CHANGE entry of its log (or its committed base); at the end every change has
completed or been abandoned cleanly (no learner left, no uncommitted change, every member of the
leader's configuration following it with the same configuration).

Apply: every node applies what it commits to a small state machine (``apply_model``), and in
some runs (drawn from a generator of its own, so other seeds replay as before) the workload
proposes *poison* entries, which that state machine rejects deterministically, as the broker's
dispatcher rejects a message for an invalid topic. After every event, every node must have
applied everything it has committed (apply never stops on a poison entry: it quarantines it) and
every node's state after each index must be the same (issue 25 item 1).
"""

from __future__ import annotations

import collections
import functools
import heapq
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ledgermq.errors import RaftError
from ledgermq.raft import (
    CONFIG_CHANGE_TYPE,
    HardState,
    Membership,
    MembershipRecord,
    Message,
    RaftConfig,
    RaftCore,
    Ready,
    ResponseCode,
    Role,
    TransferResult,
)
from ledgermq.store import MemoryLedgerStore
from ledgermq.testing.apply_model import Applier, ApplyLedger, poison
from ledgermq.testing.invariants import InvariantViolationError, SafetyLedger
from ledgermq.testing.memory_driver import apply_log_changes

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["FaultPlan", "SimCluster", "SimNode", "SimResult", "run_seed"]

TICK_MS = 10


@dataclass
class FaultPlan:
    """How hostile a run is; drawn from the seed by ``FaultPlan.draw``."""

    loss: float = 0.0
    duplicate: float = 0.0
    max_delay_ms: int = 5
    partitions: bool = False
    crashes: bool = False
    fault_rate: float = 0.05
    """Chance of a fault in each 50 ms slot of the fault phase."""
    fault_ms: int = 6000
    heal_ms: int = 12000
    transfers: bool = False
    """The workload asks the leader to hand over to a random node now and then."""
    preferred: str | None = None
    """Every node is configured with this preferred leader."""
    persist_ms: int = 0
    """Persisting a Ready takes 0..persist_ms simulated ms (0: at once, in the same event)."""
    crash_while_persisting: float = 0.0
    """Chance that a node crashes before the Ready it is writing is durable (needs crashes)."""
    disk_loss: float = 0.0
    """Chance in each 50 ms slot of the fault phase that a node's disk is replaced."""
    retention: float = 0.0
    """Chance in each 50 ms slot that a node deletes the old segments of its committed log."""
    poison: float = 0.0
    """Chance that a proposed body is a poison entry (``apply_model``: its apply is refused)."""
    membership: float = 0.0
    """Chance in each 50 ms slot of the fault phase that the operator changes the membership."""

    @classmethod
    def draw(cls, rng: random.Random) -> FaultPlan:
        return cls(
            loss=rng.choice([0.0, 0.0, 0.01, 0.05, 0.15]),
            duplicate=rng.choice([0.0, 0.0, 0.02, 0.1]),
            max_delay_ms=rng.choice([2, 5, 20, 80]),
            partitions=rng.random() < 0.6,
            crashes=rng.random() < 0.6,
            fault_rate=rng.choice([0.02, 0.05, 0.1, 0.2]),
        )


@dataclass
class SimNode:
    node_id: str
    store: MemoryLedgerStore
    hard_state: HardState = field(default_factory=HardState)
    core: RaftCore | None = None
    max_commit_seen: int = -1
    persisting: Ready | None = None
    """The Ready being written; the core takes no input until it is done."""
    inbox: collections.deque[Message] = field(default_factory=collections.deque)
    """Messages that arrived while persisting."""
    lost_stores: list[MemoryLedgerStore] = field(default_factory=list)
    """The logs of its replaced disks: what it had acknowledged before each was lost."""
    applier: Applier | None = None
    """Its state machine over the committed log (``apply_model``)."""
    membership: MembershipRecord | None = None
    """The committed configuration it persisted (``Ready.membership``), lost with its disk."""


@dataclass
class SimResult:
    seed: int
    nodes: int
    events: int
    proposals: int
    committed: int
    terms: int
    violation: str | None
    transfers: int = 0
    """Leadership transfers that completed with SUCCESS."""
    quarantined: int = 0
    """Distinct poison entries committed and quarantined (by every node that applied them)."""
    membership_changes: int = 0
    """Distinct CONFIG_CHANGE entries committed (adds, promotions, removals)."""
    truncated_changes: int = 0
    """CONFIG_CHANGE entries cut from a log by a new leader (changes undone)."""
    leader_removals: int = 0
    """Removals a leader proposed of itself."""

    @property
    def ok(self) -> bool:
        return self.violation is None


class SimCluster:
    def __init__(
        self,
        seed: int,
        node_count: int,
        plan: FaultPlan | None = None,
        *,
        leadership_moves: bool = True,
        quarantine_poison: bool = True,
        membership_changes: bool = True,
    ) -> None:
        """``quarantine_poison`` False makes a poison entry stop apply, as the dispatcher's
        fail-stop did (for the test that shows the invariant catches it)."""
        self.seed = seed
        self.rng = random.Random(seed)
        self.plan = plan or FaultPlan.draw(self.rng)
        self.ids = tuple(f"n{i}" for i in range(node_count))
        self.transfer_rng = random.Random(f"transfer-{seed}")
        self.persist_rng = random.Random(f"persist-{seed}")
        if plan is None and leadership_moves:
            self.plan.transfers = self.transfer_rng.random() < 0.4
            if self.transfer_rng.random() < 0.3:
                self.plan.preferred = self.transfer_rng.choice(self.ids)
            self.plan.persist_ms = self.persist_rng.choice([0, 1, 3, 8])
            self.plan.crash_while_persisting = self.persist_rng.choice([0.0, 0.002, 0.01])
        self.disk_rng = random.Random(f"disk-{seed}")
        segment_bytes = 1 << 20
        if plan is None and leadership_moves:
            if self.disk_rng.random() < 0.3:
                self.plan.disk_loss = self.disk_rng.choice([0.005, 0.01, 0.03])
            if self.disk_rng.random() < 0.3:
                self.plan.retention = self.disk_rng.choice([0.02, 0.1])
                segment_bytes = 4096  # about 16 entries of 250 bytes: retention deletes some
        self.body_padding = b"." * 200 if self.plan.retention else b""
        self.apply_rng = random.Random(f"apply-{seed}")
        if plan is None and leadership_moves and self.apply_rng.random() < 0.5:
            self.plan.poison = self.apply_rng.choice([0.02, 0.1, 0.3])
        self._init_membership_changes(
            node_count, draw=plan is None and leadership_moves and membership_changes
        )
        self.applied = ApplyLedger()
        self.quarantine_poison = quarantine_poison
        self.transfers_ok = 0
        self.restarts_from_begin = 0
        """Followers that began their log again at a leader's oldest entry (retention)."""
        self.now = 0
        self.events = 0
        self._queue: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = 0
        self.safety = SafetyLedger()
        self.nodes = {
            nid: SimNode(nid, MemoryLedgerStore(data_segment_bytes=segment_bytes, flush="sync"))
            for nid in self.ids
        }
        self.cut: set[tuple[str, str]] = set()
        """Directed links that drop everything (partitions, asymmetric cuts)."""
        self.proposals: dict[tuple[str, int], list[bytes]] = {}
        self.outstanding: set[tuple[str, int]] = set()
        self.proposal_count = 0
        self.committed_ok = 0
        for node in self.nodes.values():
            node.applier = self._applier(node.node_id)
        for nid in self.ids:
            self._start(nid)

    def _init_membership_changes(self, node_count: int, *, draw: bool) -> None:
        self.members_rng = random.Random(f"members-{self.seed}")
        if draw and self.members_rng.random() < 0.5:
            self.plan.membership = self.members_rng.choice([0.02, 0.05, 0.1])
        self.initial_ids = tuple(f"n{i}" for i in range(node_count))
        self.spare_ids = [f"n{i}" for i in range(node_count, node_count + 4)]
        """Ids of replicas the operator may add (at most four per run)."""
        self.seed_peers: dict[str, tuple[str, ...]] = {}
        """The peer list a replica added during the run was started with."""
        self.retired: set[str] = set()
        """Removed replicas the operator stopped for good (never restarted)."""
        self.config_commits: set[int] = set()
        self.truncated_changes = 0
        self.leader_removals = 0

    def _applier(self, nid: str) -> Applier:
        return Applier(nid, self.applied, quarantine_poison=self.quarantine_poison)

    # ------------------------------------------------------------------ plumbing
    def config(self, nid: str) -> RaftConfig:
        preferred = (self.plan.preferred,) if self.plan.preferred else ()
        return RaftConfig(
            group="sim",
            self_id=nid,
            peer_ids=self.seed_peers.get(nid, self.initial_ids),
            preferred_leader_ids=preferred,
        )

    def schedule(self, at_ms: int, action: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (at_ms, self._seq, action))

    def _start(self, nid: str) -> None:
        node = self.nodes[nid]
        node.core = RaftCore(
            self.config(nid),
            node.hard_state,
            node.store,
            random.Random(self.rng.getrandbits(64)),
            self.now,
            node.store.committed_index,
            node.membership,
        )
        self.schedule(self.now + self.rng.randrange(TICK_MS), lambda: self._tick(nid, node.core))

    def _tick(self, nid: str, core: RaftCore | None) -> None:
        node = self.nodes[nid]
        if node.core is not core or core is None:
            return  # crashed meanwhile
        if node.persisting is None:  # else the tick is late: the next one catches up
            core.tick(self.now)
            self._process_ready(node)
        self.schedule(self.now + TICK_MS, lambda: self._tick(nid, core))

    def _deliver_later(self, at_ms: int, message: Message) -> None:
        self.schedule(at_ms, lambda: self._deliver(message))

    def _deliver(self, message: Message) -> None:
        node = self.nodes[message.remote_id]
        if node.core is None:
            return
        if node.persisting is not None:
            node.inbox.append(message)
            return
        node.core.step(message)
        self._process_ready(node)

    def _send(self, message: Message) -> None:
        src, dst = message.local_id, message.remote_id
        if (src, dst) in self.cut or self.rng.random() < self.plan.loss:
            return
        copies = 2 if self.rng.random() < self.plan.duplicate else 1
        for _ in range(copies):
            delay = 1 + self.rng.randrange(self.plan.max_delay_ms)
            self._deliver_later(self.now + delay, message)

    def _process_ready(self, node: SimNode) -> None:
        """The driver's loop (what the ledger server does with a Ready), plus the checks."""
        core = node.core
        assert core is not None
        while node.persisting is None and core.has_ready():
            ready = core.ready()
            for change in ready.role_changes:  # roles change in memory, before any write
                if change.role is Role.LEADER:
                    self.safety.leader_elected(change.term, node.node_id)
                    state = core.membership_state
                    if core.role is Role.LEADER and not (
                        state.effective.membership.is_voter(node.node_id)
                        or state.committed.membership.is_voter(node.node_id)
                    ):
                        raise InvariantViolationError(
                            f"{node.node_id} leads term {change.term} but is not a voter of "
                            f"its configuration ({core.membership.describe()})"
                        )
            writes = (
                ready.hard_state is not None or ready.truncate_from is not None or ready.entries
            )
            if self.plan.persist_ms and writes:
                for message in ready.messages:
                    self._send(message)
                node.persisting = ready
                delay = self.persist_rng.randrange(self.plan.persist_ms + 1)
                # Votes and term changes are rare and matter most: crash around them far more.
                chance = self.plan.crash_while_persisting * (30 if ready.hard_state else 1)
                if (
                    self.plan.crashes
                    and self.now < self.plan.fault_ms
                    and self.persist_rng.random() < chance
                ):
                    self._crash_before(node.node_id, self.now + delay)
                self.schedule(
                    self.now + delay, functools.partial(self._persisted, node, core, ready)
                )
                return
            self._apply_ready(node, core, ready, send_now=True)

    def _crash_before(self, nid: str, write_done_ms: int) -> None:
        """Crash ``nid`` before its pending write completes; restart it a little later."""
        self.schedule(write_done_ms, lambda: self._crash(nid))  # scheduled first: runs first
        back = write_done_ms + self.persist_rng.randrange(20, 500)
        self.schedule(back, lambda: self._restart(nid))

    def _persisted(self, node: SimNode, core: RaftCore, ready: Ready) -> None:
        if node.core is not core:
            return  # crashed first: none of this Ready reached the disk
        node.persisting = None
        self._apply_ready(node, core, ready, send_now=False)
        while node.inbox and node.persisting is None:
            core.step(node.inbox.popleft())
            self._process_ready(node)
        self._process_ready(node)

    def _apply_ready(self, node: SimNode, core: RaftCore, ready: Ready, *, send_now: bool) -> None:
        if ready.hard_state is not None:
            node.hard_state = ready.hard_state
        if ready.membership is not None:  # persisted before any commit index past it
            node.membership = ready.membership.committed
        store = node.store
        if ready.truncate_from is not None and ready.truncate_from <= store.end_index:
            self.truncated_changes += sum(
                e.entry_type == CONFIG_CHANGE_TYPE
                for e in store.read_range(ready.truncate_from, 1 << 40)
            )
        appended = apply_log_changes(node.store, ready)
        self.restarts_from_begin += ready.restart_from is not None
        store = node.store
        for entry in store.read_range(store.end_index - appended + 1, 1 << 40) if appended else ():
            self.safety.entry_stored(node.node_id, entry.index, entry.term, entry.chain_crc)
        if send_now:
            for message in ready.messages:
                self._send(message)
        for message in ready.messages_after_persist:
            self._send(message)
        if ready.committed_index is not None:
            self._commit(node, ready.committed_index)
        for result in ready.completed:
            self._proposal_done(node, result.proposal_id, result.code, result.first_index)
        for transfer in ready.transfers:
            self._transfer_done(transfer)
        core.advance(ready)
        self._check_node(node)
        if (
            ready.truncate_from is not None
            or ready.restart_from is not None
            or any(e.entry_type == CONFIG_CHANGE_TYPE for e in ready.entries)
        ):
            self._check_configuration(node, core)

    def _commit(self, node: SimNode, index: int) -> None:
        if index < node.max_commit_seen:
            raise InvariantViolationError(f"{node.node_id}: commit index moved back to {index}")
        store = node.store
        start = max(node.max_commit_seen + 1, store.begin_index)
        for entry in store.read_range(start, 1 << 40) if start <= index else []:
            if entry.index > index:
                break
            term = node.core.term if node.core is not None else -1
            self.safety.entry_committed(node.node_id, entry.index, entry.chain_crc, term)
            if entry.entry_type == CONFIG_CHANGE_TYPE:
                self.config_commits.add(entry.index)
        node.max_commit_seen = index
        store.set_committed_index(index)
        assert node.applier is not None
        node.applier.catch_up(store, index)

    def _proposal_done(self, node: SimNode, pid: int, code: ResponseCode, first: int) -> None:
        key = (node.node_id, pid)
        self.outstanding.discard(key)
        if code is not ResponseCode.SUCCESS:
            return
        self.committed_ok += 1
        bodies = self.proposals[key]
        holding: set[str] = set()
        for other in self.nodes.values():
            if any(_holds(lost, first, bodies) for lost in other.lost_stores):
                holding.add(other.node_id)  # it acknowledged them, then its disk was replaced
            elif other.store.begin_index > first:
                # Retention deleted them, so they were committed on this node; the checker saw
                # them stored and committed (entry_stored / entry_committed) when they were.
                if other.store.end_index >= first + len(bodies) - 1:
                    holding.add(other.node_id)
            elif other.store.end_index >= first + len(bodies) - 1:
                got = [other.store.get(first + i).body for i in range(len(bodies))]
                if got == bodies:
                    holding.add(other.node_id)
        # A majority of the voters of the configuration the leader counted with: the one in
        # effect, or the committed one before a change that followed the commit.
        assert node.core is not None
        state = node.core.membership_state
        configs = {state.effective.membership.voters, state.committed.membership.voters}
        if not any(
            sum(holder in voters for holder in holding) >= len(voters) // 2 + 1
            for voters in configs
        ):
            raise InvariantViolationError(
                f"proposal {pid} of {node.node_id} acknowledged but stored on {sorted(holding)} "
                f"only, not a majority of {sorted(configs)}"
            )

    def _transfer_done(self, result: TransferResult) -> None:
        """A transfer reported as done must have made the transferee leader of the next term."""
        if result.code is not ResponseCode.SUCCESS or result.transferee == self._leader_of(
            result.term
        ):
            return
        leader = self._leader_of(result.term + 1)
        if leader != result.transferee:
            raise InvariantViolationError(
                f"transfer to {result.transferee} in term {result.term} reported SUCCESS but "
                f"term {result.term + 1} was led by {leader}"
            )
        self.transfers_ok += 1

    def _leader_of(self, term: int) -> str | None:
        return self.safety.leaders.get(term)

    def _check_node(self, node: SimNode) -> None:
        store = node.store
        if store.committed_index > store.end_index:
            raise InvariantViolationError(f"{node.node_id}: committed past its log end")
        assert node.applier is not None
        node.applier.check(store.committed_index)
        core = node.core
        top = self.safety.committed_before_term(core.term) if core is not None else -1
        if core is not None and core.role is Role.LEADER and top >= 0:  # noqa: SIM102
            # Leader completeness: a leader holds every entry committed in an earlier term
            # (the chain CRC at the highest one covers all before it; below the log's begin,
            # retention deleted committed entries, and the chain at the begin covers them).
            if store.end_index < top or (
                top >= store.begin_index and store.get(top).chain_crc != self.safety.committed[top]
            ):
                raise InvariantViolationError(
                    f"{node.node_id} leads term {core.term} without committed entry {top}"
                )

    # ------------------------------------------------------------------ workload and faults
    def _propose(self) -> None:
        leaders = [n for n in self.nodes.values() if n.core and n.core.role is Role.LEADER]
        target = self.rng.choice(leaders or list(self.nodes.values()))
        if target.core is None or target.persisting is not None:
            return
        bodies = [
            b"%d-%d-%d" % (self.seed, self.proposal_count, i) + self.body_padding
            for i in range(1 + self.rng.randrange(4))
        ]
        if self.plan.poison:
            bodies = [
                poison(b) if self.apply_rng.random() < self.plan.poison else b for b in bodies
            ]
        try:
            pid = target.core.propose(bodies)
        except RaftError:
            return
        self.proposal_count += 1
        self.proposals[(target.node_id, pid)] = bodies
        self.outstanding.add((target.node_id, pid))
        self._process_ready(target)

    def _transfer(self) -> None:
        leaders = [n for n in self.nodes.values() if n.core and n.core.role is Role.LEADER]
        if not leaders:
            return
        node = self.transfer_rng.choice(leaders)
        assert node.core is not None
        if node.persisting is not None:
            return
        node.core.transfer_leadership(self.transfer_rng.choice(self.ids))
        self._process_ready(node)

    def _crash(self, nid: str) -> None:
        node = self.nodes[nid]
        if node.core is None:
            return
        node.core = None
        node.persisting = None
        node.inbox.clear()
        node.store = node.store.crashed()
        node.max_commit_seen = node.store.committed_index
        self.outstanding = {k for k in self.outstanding if k[0] != nid}

    def _replace_disk(self) -> None:
        """Crash a node and give it an empty disk: no log, no hard state (a replaced disk).

        Only while every other node holds data and has voted or followed (its hard state has a
        term): a group of 2f+1 survives f lost disks, not a lost disk while a majority has none.
        """
        nid = self.disk_rng.choice(self.ids)
        others = [n for n in self.nodes.values() if n.node_id != nid]
        if any(n.store.end_index < 0 or n.hard_state.term == 0 for n in others):
            return
        self._crash(nid)
        node = self.nodes[nid]
        node.lost_stores.append(node.store)
        node.store = MemoryLedgerStore(
            data_segment_bytes=node.store.data_segment_bytes, flush="sync"
        )
        node.hard_state = HardState()
        node.membership = None
        node.max_commit_seen = -1
        node.applier = self._applier(nid)  # its applied state was on that disk too
        self.schedule(self.now + self.disk_rng.randrange(20, 2000), lambda: self._restart(nid))

    def _apply_retention(self) -> None:
        """A node deletes the segments before a random committed index (its maintenance)."""
        node = self.nodes[self.disk_rng.choice(self.ids)]
        store = node.store
        if node.core is None or store.committed_index <= store.begin_index:
            return
        store.reset_begin(self.disk_rng.randint(store.begin_index, store.committed_index))

    def _restart(self, nid: str) -> None:
        if self.nodes[nid].core is None and nid not in self.retired:
            self._start(nid)

    def _fault(self) -> None:
        plan, rng = self.plan, self.rng
        choice = rng.random()
        if plan.crashes and choice < 0.4:
            nid = rng.choice(self.ids)
            self._crash(nid)
            self.schedule(self.now + rng.randrange(20, 2000), lambda: self._restart(nid))
        elif plan.partitions and choice < 0.6:
            self.cut.clear()
            kind = rng.random()
            if kind < 0.4:  # isolate one node
                lonely = rng.choice(self.ids)
                self.cut = {(lonely, o) for o in self.ids} | {(o, lonely) for o in self.ids}
            elif kind < 0.7:  # split the group
                side = set(rng.sample(self.ids, len(self.ids) // 2))
                self.cut = {
                    (a, b) for a in self.ids for b in self.ids if (a in side) != (b in side)
                }
            else:  # asymmetric: some directed links drop
                self.cut = {
                    (a, b) for a in self.ids for b in self.ids if a != b and rng.random() < 0.3
                }
        elif choice < 0.8:
            self.cut.clear()

    # ------------------------------------------------------------------ running
    def run(self) -> SimResult:
        plan = self.plan
        for t in range(0, plan.fault_ms, 50):
            if self.rng.random() < 0.4:
                self.schedule(t, self._propose)
            if self.rng.random() < plan.fault_rate:
                self.schedule(t, self._fault)
            if plan.transfers and self.transfer_rng.random() < 0.05:
                self.schedule(t, self._transfer)
            if plan.disk_loss and self.disk_rng.random() < plan.disk_loss:
                self.schedule(t, self._replace_disk)
            if plan.retention and self.disk_rng.random() < plan.retention:
                self.schedule(t, self._apply_retention)
            if plan.membership and self.members_rng.random() < plan.membership:
                self.schedule(t, self._change_membership)
        heal_at = plan.fault_ms
        self.schedule(heal_at, self._heal)
        deadline = heal_at + plan.heal_ms
        violation = None
        try:
            self._run_until(heal_at, deadline)
        except InvariantViolationError as exc:
            violation = f"{exc} (at {self.now} ms)"
        return SimResult(
            self.seed,
            len(self.ids),
            self.events,
            self.proposal_count,
            self.committed_ok,
            len(self.safety.leaders),
            violation,
            self.transfers_ok,
            len(self.applied.quarantined),
            len(self.config_commits),
            self.truncated_changes,
            self.leader_removals,
        )

    def _run_until(self, heal_at: int, deadline: int) -> None:
        while self._queue and self.now <= deadline:
            at, _, action = heapq.heappop(self._queue)
            self.now = at
            action()
            self.events += 1
            if self.now > heal_at + 2000 and self._settled():
                return
        if not self._settled():
            raise InvariantViolationError(
                f"liveness: no settled leader with all proposals done {self.plan.heal_ms} ms "
                f"after healing (outstanding {len(self.outstanding)})"
            )

    def _heal(self) -> None:
        self.plan.loss = 0.0
        self.plan.duplicate = 0.0
        self.cut.clear()
        for nid in self.ids:
            self._restart(nid)
        for i in range(5):  # proposals after healing must commit
            self.schedule(self.now + 500 + 300 * i, self._propose)

    def _settled(self) -> bool:
        """One leader, every proposal done, every change completed or abandoned: no uncommitted
        change, no learner left to promote, every member following with the same membership."""
        cores = [n.core for n in self.nodes.values()]
        leaders = [c for c in cores if c is not None and c.role is Role.LEADER]
        if len(leaders) != 1 or self.outstanding:
            return False
        leader = leaders[0]
        state = leader.membership_state
        members = state.effective.membership
        if state.effective != state.committed or members.learners:
            return False
        for nid in members.members:
            core = self.nodes[nid].core
            if core is None or core.term != leader.term or core.membership != members:
                return False
            if core is not leader and core.role is not Role.FOLLOWER:
                return False
        return leader.committed_index == leader.last_index

    # ------------------------------------------------------------------ membership changes
    def _live_leader(self) -> SimNode | None:
        for node in self.nodes.values():
            if node.core is not None and node.core.role is Role.LEADER and node.persisting is None:
                return node
        return None

    def _change_membership(self) -> None:
        """The operator changes the group, as ``replica-add`` / ``replica-remove`` do."""
        leader = self._live_leader()
        if leader is None:
            return
        assert leader.core is not None
        members = leader.core.membership
        rng = self.members_rng
        kind = rng.random()
        if kind < 0.5 and self.spare_ids:
            self._add(leader, replace=rng.random() < 0.4)
            return
        # Never below the initial number of voters: the faults assume a group of 2f+1.
        removable = list(members.learners)
        if len(members.voters) > len(self.initial_ids):
            removable += list(members.voters)
        if not removable:
            return
        if leader.node_id in removable and rng.random() < 0.5:
            self._remove(leader, leader.node_id)  # the leader removes itself
        else:
            self._remove(leader, rng.choice(removable))

    def _add(self, leader: SimNode, *, replace: bool) -> None:
        assert leader.core is not None
        new = self.spare_ids.pop(0)
        peers = tuple(sorted((*leader.core.membership.members, new)))
        self.seed_peers[new] = peers
        self.ids = (*self.ids, new)
        self.nodes[new] = SimNode(
            new, MemoryLedgerStore(data_segment_bytes=leader.store.data_segment_bytes, flush="sync")
        )
        self.nodes[new].applier = self._applier(new)
        start_at = self.now + self.members_rng.randrange(-300, 300)
        self.schedule(max(self.now, start_at), lambda: self._restart(new))
        try:
            pid = leader.core.add_learner(new, f"{new}-host:1")
        except RaftError:
            return  # the group never admits it: it runs, is refused, and never leads
        self._track_change(leader, pid)
        if replace:
            old = self.members_rng.choice(leader.core.membership.voters)
            self.schedule(self.now + 200, lambda: self._finish_replace(new, old, 25))

    def _finish_replace(self, new: str, old: str, tries: int) -> None:
        """Remove ``old`` once ``new`` is a committed voter (replace = add, promote, remove)."""
        leader = self._live_leader()
        core = leader.core if leader is not None else None
        if (
            leader is None
            or core is None
            or not core.membership_state.committed.membership.is_voter(new)
            or core.membership_change_refusal() is not None
        ):
            if tries > 0:
                self.schedule(self.now + 200, lambda: self._finish_replace(new, old, tries - 1))
            return  # abandoned: the learner is promoted in the end, nothing is removed
        voters = core.membership.voters
        if old in voters and old != new and len(voters) > len(self.initial_ids):
            self._remove(leader, old)

    def _remove(self, leader: SimNode, victim: str) -> None:
        assert leader.core is not None
        try:
            pid = leader.core.remove_member(victim)
        except RaftError:
            return
        self.leader_removals += victim == leader.node_id
        self._track_change(leader, pid)
        if self.members_rng.random() < 0.5:
            self.schedule(self.now + 1500, lambda: self._retire(victim))

    def _retire(self, victim: str) -> None:
        """The operator stops a removed replica for good, once its removal is committed."""
        leader = self._live_leader()
        if leader is None or leader.core is None:
            return
        if not leader.core.membership_state.committed.membership.is_member(victim):
            self.retired.add(victim)
            self._crash(victim)

    def _track_change(self, leader: SimNode, pid: int) -> None:
        assert leader.core is not None
        self.proposal_count += 1
        self.proposals[(leader.node_id, pid)] = [leader.core.membership.encode()]
        self.outstanding.add((leader.node_id, pid))
        self._process_ready(leader)
        if self.now < self.plan.fault_ms and self.members_rng.random() < 0.2:
            # The leader is cut off right after proposing: the change is usually truncated by
            # the next leader (and undone), or committed later if the next leader has it.
            lonely = leader.node_id
            self.cut = {(lonely, o) for o in self.ids} | {(o, lonely) for o in self.ids}

    def _check_configuration(self, node: SimNode, core: RaftCore) -> None:
        """A node's configuration is the latest CONFIG_CHANGE entry in its log, else its base:
        a truncated change is undone, a new one in effect as soon as it is stored. (A log begun
        again at a leader's oldest entry has the leader's committed configuration as its base,
        labelled with that entry's index.)"""
        state = core.membership_state
        store = node.store
        effective = state.effective
        rebuilt_base = effective == state.committed and effective.index <= store.begin_index
        if effective.index >= max(store.begin_index, 0) and not rebuilt_base:
            if effective.index > store.end_index:
                raise InvariantViolationError(
                    f"{node.node_id}: configuration of index {effective.index} beyond its log "
                    f"end {store.end_index}"
                )
            entry = store.get(effective.index)
            if entry.entry_type != CONFIG_CHANGE_TYPE or (
                Membership.decode(entry.body) != effective.membership
            ):
                raise InvariantViolationError(
                    f"{node.node_id}: configuration of index {effective.index} is not the entry "
                    "stored there"
                )
        start = max(effective.index + 1, store.begin_index, 0)
        for entry in store.read_range(start, 1 << 40) if start <= store.end_index else ():
            if entry.entry_type == CONFIG_CHANGE_TYPE:
                raise InvariantViolationError(
                    f"{node.node_id}: CONFIG_CHANGE at {entry.index} is in its log but its "
                    f"configuration is still that of index {effective.index}"
                )


def _holds(store: MemoryLedgerStore, first: int, bodies: list[bytes]) -> bool:
    last = first + len(bodies) - 1
    if store.begin_index > first or store.end_index < last:
        return False
    return [store.get(first + i).body for i in range(len(bodies))] == bodies


def run_seed(
    seed: int,
    nodes: int,
    *,
    leadership_moves: bool = True,
    quarantine_poison: bool = True,
    membership_changes: bool = True,
) -> SimResult:
    return SimCluster(
        seed,
        nodes,
        leadership_moves=leadership_moves,
        quarantine_poison=quarantine_poison,
        membership_changes=membership_changes,
    ).run()
