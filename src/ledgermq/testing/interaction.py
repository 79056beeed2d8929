"""Golden interaction tests: a small script of steps, and the trace it must produce.

In the style of etcd-io/raft's ``rafttest`` (STYLE.md 7.13): a test file is a list of commands,
each followed by ``----`` and the output it printed when the expected behaviour was last
confirmed by a person. ``run_script`` re-runs the commands and returns the file as it would be
now; a test compares the two, and ``LEDGERMQ_REWRITE_GOLDEN=1`` writes the new version for a
deliberate change (review the diff, then commit it).

The network here is tame on purpose: every message arrives after ``latency`` ms, in order, unless
a link is cut or a node is down. What varies between runs is only what the script does, and the
cores' randomised back-offs come from ``random.Random(seed)`` per node, so traces are stable.

Commands (``#`` starts a comment; arguments are ``key=value`` or bare words):

``cluster nodes=3 [preferred=n2] [latency=1] [n0=1,1,2 ...] [term=T]``
    fresh nodes; ``nX=...`` preloads node X's log with entries of those terms, ``term`` sets
    every node's persisted term (default: the highest preloaded entry term)
``run MS [trace=roles|messages|none]``
    advance the clock MS ms (ticks every 10 ms); prints role changes (default), every message,
    or nothing
``propose NODE BODY...`` or ``propose NODE count=N``  ``transfer NODE TO [term=T]``
``crash NODE``  ``restart NODE``  ``cut A B [oneway]``  ``isolate NODE``  ``heal``
``status``  ``log NODE``
``add LEADER NEW``  ``remove LEADER MEMBER``  ``promote LEADER LEARNER``
    propose a membership change on LEADER (single-server changes, ``raft.membership``)
``start NEW peers=n0,n1,...``
    start a fresh node (empty disk) whose peer list is ``peers`` (the operator's broker.conf)
``members``
    every node's configuration in effect and the index of the entry that made it
"""

from __future__ import annotations

import heapq
import random
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ledgermq.errors import RaftError
from ledgermq.raft import (
    HardState,
    HeartBeatRequest,
    HeartBeatResponse,
    LeadershipTransferRequest,
    LeadershipTransferResponse,
    Membership,
    MembershipRecord,
    Message,
    ProposalResult,
    PushEntryRequest,
    PushEntryResponse,
    PushKind,
    RaftConfig,
    RaftCore,
    VoteRequest,
    VoteResponse,
)
from ledgermq.store import EntryType, MemoryLedgerStore
from ledgermq.testing.memory_driver import apply_log_changes

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["InteractionEnv", "format_message", "run_script"]

TICK_MS = 10


@dataclass
class _Node:
    node_id: str
    store: MemoryLedgerStore
    hard_state: HardState
    core: RaftCore | None = None
    restarts: int = 0
    peers: tuple[str, ...] = ()
    """Its seed peer list (empty: the cluster's ids)."""
    membership: MembershipRecord | None = None
    """The committed configuration it persisted."""


@dataclass
class InteractionEnv:
    """A group of cores on a fixed-latency network, driven by script commands."""

    ids: tuple[str, ...] = ()
    seed: int = 0
    """Mixed into every node's random generator (0 keeps the golden files' traces)."""
    latency: int = 1
    preferred: tuple[str, ...] = ()
    now: int = 0
    nodes: dict[str, _Node] = field(default_factory=dict)
    cut: set[tuple[str, str]] = field(default_factory=set)
    _queue: list[tuple[int, int, Message]] = field(default_factory=list)
    _seq: int = 0
    _out: list[str] = field(default_factory=list)
    _trace: str = "roles"
    completed: list[tuple[int, str, ProposalResult]] = field(default_factory=list)
    """(time, node, result) of every finished proposal, for measurements."""

    # ------------------------------------------------------------------ commands
    def handle(self, line: str) -> str:
        words = shlex.split(line)
        command, args = words[0], words[1:]
        handler: Callable[[list[str]], None] | None = getattr(
            self, "cmd_" + command.replace("-", "_"), None
        )
        if handler is None:
            raise ValueError(f"unknown command {command!r}")
        self._out = []
        handler(args)
        return "\n".join(self._out)

    def cmd_cluster(self, args: list[str]) -> None:
        opts = _options(args)
        count = int(opts.pop("nodes", "3"))
        self.ids = tuple(f"n{i}" for i in range(count))
        self.latency = int(opts.pop("latency", "1"))
        self.preferred = tuple(p for p in opts.pop("preferred", "").split(";") if p)
        logs = {nid: [int(t) for t in opts.pop(nid).split(",")] for nid in self.ids if nid in opts}
        top = max((max(t) for t in logs.values() if t), default=0)
        term = int(opts.pop("term", str(top)))
        if opts:
            raise ValueError(f"unknown cluster options {sorted(opts)}")
        for nid in self.ids:
            store = MemoryLedgerStore(data_segment_bytes=1 << 20, flush="sync")
            for i, entry_term in enumerate(logs.get(nid, [])):
                store.append(
                    entry_term, f"e{i}t{entry_term}".encode()
                )  # same index+term, same body
            self.nodes[nid] = _Node(nid, store, HardState(term))
            self._start(nid)
        self.cmd_status([])

    def cmd_run(self, args: list[str]) -> None:
        opts = _options(args[1:])
        self._trace = opts.get("trace", "roles")
        end = self.now + int(args[0])
        while True:
            next_tick = (self.now // TICK_MS + 1) * TICK_MS
            next_message = self._queue[0][0] if self._queue else next_tick
            at = min(next_tick, next_message)
            if at > end:
                break
            self.now = at
            while self._queue and self._queue[0][0] <= self.now:
                _, _, message = heapq.heappop(self._queue)
                self._deliver(message)
            if self.now == next_tick:
                for node in self.nodes.values():
                    if node.core is not None:
                        node.core.tick(self.now)
                        self._process(node)
        self.now = end
        self._trace = "roles"

    def cmd_propose(self, args: list[str]) -> None:
        node = self._live(args[0])
        assert node.core is not None
        if args[1].startswith("count="):
            bodies = [b"b%d" % i for i in range(int(args[1].removeprefix("count=")))]
        else:
            bodies = [body.encode() for body in args[1:]]
        try:
            pid = node.core.propose(bodies)
        except RaftError as exc:
            self._emit(f"{node.node_id}: propose refused: {type(exc).__name__}: {exc}")
            return
        self._emit(f"{node.node_id}: proposal {pid} at index {node.core.last_index}")
        self._process(node)

    def cmd_transfer(self, args: list[str]) -> None:
        node = self._live(args[0])
        assert node.core is not None
        opts = _options(args[2:])
        term = int(opts["term"]) if "term" in opts else None
        tid = node.core.transfer_leadership(args[1], term)
        self._emit(f"{node.node_id}: transfer {tid} to {args[1]}")
        self._process(node)

    def cmd_add(self, args: list[str]) -> None:
        self._change(args[0], args[1], "add")

    def cmd_remove(self, args: list[str]) -> None:
        self._change(args[0], args[1], "remove")

    def cmd_promote(self, args: list[str]) -> None:
        self._change(args[0], args[1], "promote")

    def _change(self, nid: str, member: str, kind: str) -> None:
        node = self._live(nid)
        core = node.core
        assert core is not None
        try:
            if kind == "add":
                pid = core.add_learner(member, f"{member}-host:40911")
            elif kind == "remove":
                pid = core.remove_member(member)
            else:
                pid = core.promote_learner(member)
        except RaftError as exc:
            self._emit(f"{nid}: {kind} {member} refused: {type(exc).__name__}: {exc}")
            return
        self._emit(f"{nid}: {kind} {member}: proposal {pid} at index {core.last_index}")
        self._process(node)

    def cmd_start(self, args: list[str]) -> None:
        nid = args[0]
        opts = _options(args[1:])
        peers = tuple(sorted(opts["peers"].split(",")))
        store = MemoryLedgerStore(data_segment_bytes=1 << 20, flush="sync")
        self.nodes[nid] = _Node(nid, store, HardState(), peers=peers)
        if nid not in self.ids:
            self.ids = (*self.ids, nid)
        self._start(nid)
        self._emit(f"{nid}: started empty with peers {','.join(peers)}")

    def cmd_members(self, args: list[str]) -> None:
        del args
        for node in self.nodes.values():
            if node.core is None:
                self._out.append(f"{node.node_id}: down")
                continue
            state = node.core.membership_state
            pending = (
                ""
                if state.effective == state.committed
                else f" (uncommitted; committed {state.committed.index})"
            )
            self._out.append(
                f"{node.node_id}: {state.effective.membership.describe()} "
                f"from index {state.effective.index}{pending}"
            )

    def cmd_crash(self, args: list[str]) -> None:
        node = self.nodes[args[0]]
        node.core = None
        node.store = node.store.crashed()
        self._emit(f"{node.node_id}: crashed")

    def cmd_restart(self, args: list[str]) -> None:
        node = self.nodes[args[0]]
        if node.core is None:
            node.restarts += 1
            self._start(node.node_id)
            hard = node.hard_state
            self._emit(f"{node.node_id}: restarted with term {hard.term} vote {hard.voted_for}")

    def cmd_cut(self, args: list[str]) -> None:
        a, b, *oneway = args
        self.cut |= {(a, b)} if oneway == ["oneway"] else {(a, b), (b, a)}

    def cmd_isolate(self, args: list[str]) -> None:
        (lonely,) = args
        self.cut |= {(lonely, o) for o in self.ids} | {(o, lonely) for o in self.ids}

    def cmd_heal(self, args: list[str]) -> None:
        del args
        self.cut.clear()

    def cmd_status(self, args: list[str]) -> None:
        del args
        for node in self.nodes.values():
            core = node.core
            store = node.store
            if core is None:
                self._out.append(f"{node.node_id}: down  log {store.end_index}/{store.end_term}")
                continue
            self._out.append(
                f"{node.node_id}: {core.role.name:<9} term {core.term} leader {core.leader_id} "
                f"vote {core.voted_for} log {store.end_index}/{store.end_term} "
                f"commit {core.committed_index}"
            )

    def cmd_log(self, args: list[str]) -> None:
        store = self.nodes[args[0]].store
        if store.end_index < 0:
            self._out.append("(empty)")
        for entry in store.read_range(max(store.begin_index, 0), 1 << 40):
            if entry.entry_type is EntryType.CONFIG_CHANGE:
                kind = "CONFIG " + Membership.decode(entry.body).describe()
            else:
                kind = "NOOP" if entry.entry_type is EntryType.NOOP else entry.body.decode()
            self._out.append(f"{entry.index}@{entry.term} {kind}")

    # ------------------------------------------------------------------ plumbing
    def _start(self, nid: str) -> None:
        node = self.nodes[nid]
        config = RaftConfig(
            group="g",
            self_id=nid,
            peer_ids=node.peers or self.ids,
            preferred_leader_ids=self.preferred,
        )
        salt = f"{self.seed}-" if self.seed else ""
        rng = random.Random(f"{salt}{nid}-{node.restarts}")
        node.core = RaftCore(
            config,
            node.hard_state,
            node.store,
            rng,
            self.now,
            node.store.committed_index,
            node.membership,
        )

    def _live(self, nid: str) -> _Node:
        node = self.nodes[nid]
        if node.core is None:
            raise ValueError(f"{nid} is down")
        return node

    def _emit(self, text: str) -> None:
        self._out.append(f"{self.now:>6} {text}")

    def _process(self, node: _Node) -> None:
        core = node.core
        assert core is not None
        while core.has_ready():
            ready = core.ready()
            if ready.hard_state is not None:
                node.hard_state = ready.hard_state
            if ready.membership is not None:
                node.membership = ready.membership.committed
                if self._trace != "none":
                    state = ready.membership
                    self._emit(
                        f"{node.node_id}: membership {state.effective.membership.describe()} "
                        f"(index {state.effective.index}, committed {state.committed.index})"
                    )
            apply_log_changes(node.store, ready)
            for message in ready.messages + ready.messages_after_persist:
                self._send(message)
            if ready.committed_index is not None:
                node.store.set_committed_index(ready.committed_index)
            for change in ready.role_changes:
                if self._trace != "none":
                    leader = f" leader {change.leader_id}" if change.leader_id else ""
                    self._emit(f"{node.node_id}: {change.role.name} term {change.term}{leader}")
            for result in ready.completed:
                self.completed.append((self.now, node.node_id, result))
                self._emit(
                    f"{node.node_id}: proposal {result.proposal_id} "
                    f"[{result.first_index}..{result.last_index}] {result.code.name}"
                )
            for transfer in ready.transfers:
                self._emit(
                    f"{node.node_id}: transfer {transfer.transfer_id} to {transfer.transferee} "
                    f"(term {transfer.term}) {transfer.code.name}"
                )
            core.advance(ready)

    def _send(self, message: Message) -> None:
        if self._trace == "messages":
            self._emit(format_message(message))
        if (message.local_id, message.remote_id) in self.cut:
            return
        self._seq += 1
        heapq.heappush(self._queue, (self.now + self.latency, self._seq, message))

    def _deliver(self, message: Message) -> None:
        node = self.nodes.get(message.remote_id)
        if node is None or node.core is None:
            return
        node.core.step(message)
        self._process(node)


def format_message(m: Message) -> str:
    """One line per message, the fields a reader needs to follow the protocol."""
    head = f"{m.local_id}->{m.remote_id}"
    if isinstance(m, VoteRequest):
        return f"{head} VOTE term {m.term} end {m.ledger_end_index}@{m.ledger_end_term}"
    if isinstance(m, VoteResponse):
        return f"{head} VOTE-RESP {m.result.name} term {m.term}"
    if isinstance(m, HeartBeatRequest):
        return f"{head} HEARTBEAT term {m.term}"
    if isinstance(m, HeartBeatResponse):
        term = f" term {m.term}" if m.term >= 0 else ""
        return f"{head} HEARTBEAT-RESP {m.code.name}{term}"
    if isinstance(m, PushEntryRequest):
        text = f"{head} PUSH {m.kind.name} term {m.term} index {m.index} commit {m.commit_index}"
        if m.kind is PushKind.COMPARE:
            text += f" compare-term {m.compare_term}"
        if m.entries:
            text += f" entries {m.entries[0].index}..{m.entries[-1].index}"
        return text
    if isinstance(m, PushEntryResponse):
        text = f"{head} PUSH-RESP {m.kind.name} {m.code.name} index {m.index} end {m.end_index}"
        if m.count:
            text += f" count {m.count}"
        if m.x_index >= 0:
            text += f" x {m.x_index}@{m.x_term}"
        return text
    if isinstance(m, LeadershipTransferRequest):
        return (
            f"{head} TAKE-LEADERSHIP term {m.term} from {m.transfer_id} "
            f"wait-index {m.take_leadership_ledger_index}"
        )
    assert isinstance(m, LeadershipTransferResponse)
    return f"{head} TAKE-LEADERSHIP-RESP {m.code.name} term {m.term}"


def _options(args: list[str]) -> dict[str, str]:
    opts = {}
    for arg in args:
        key, sep, value = arg.partition("=")
        if not sep:
            raise ValueError(f"expected key=value, got {arg!r}")
        opts[key] = value
    return opts


def run_script(text: str) -> str:
    """Run every command of a golden file; return the file with fresh outputs."""
    env = InteractionEnv()
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip() or line.startswith("#"):
            out.append(line)
            continue
        out.append(line)
        out.append("----")
        if i < len(lines) and lines[i] == "----":  # skip the old output up to a blank line
            i += 1
            while i < len(lines) and lines[i].strip():
                i += 1
        result = env.handle(line)
        if result:
            out.append(result)
        out.append("")
        while i < len(lines) and not lines[i].strip():
            i += 1
    return "\n".join(out).rstrip("\n") + "\n"
