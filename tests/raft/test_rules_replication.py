"""One test per replication rule (spec-replication-storage.md) and per transfer rule
(spec-election.md section 6), driving single cores by hand."""

from __future__ import annotations

import random

import pytest

from ledgermq.errors import LeaderPendingFullError, LeaderTransferringError, NotLeaderError
from ledgermq.raft import (
    HardState,
    HeartBeatRequest,
    LeadershipTransferRequest,
    LeadershipTransferResponse,
    ProposalResult,
    PushEntryRequest,
    PushEntryResponse,
    PushKind,
    RaftConfig,
    RaftCore,
    Ready,
    ResponseCode,
    Role,
    VoteRequest,
    VoteResponse,
    VoteResult,
)
from ledgermq.store import Entry, MemoryLedgerStore
from ledgermq.testing.memory_driver import apply_log_changes

PEERS = ("n0", "n1", "n2")


def follower(
    log_terms: tuple[int, ...] = (), term: int = 2, leader: str = "n1", **cfg: object
) -> tuple[RaftCore, MemoryLedgerStore]:
    """n0, following ``leader`` in ``term``, with a log of entries of ``log_terms``."""
    store = MemoryLedgerStore()
    for i, t in enumerate(log_terms):
        store.append(t, b"e%dt%d" % (i, t))
    config = RaftConfig(group="g", self_id="n0", peer_ids=PEERS, **cfg)  # type: ignore[arg-type]
    core = RaftCore(config, HardState(term), store, random.Random(1), now_ms=0)
    core.step(HeartBeatRequest("g", leader, "n0", 1, term, leader))
    settle(core, store)
    assert core.role is Role.FOLLOWER
    return core, store


def settle(core: RaftCore, store: MemoryLedgerStore) -> Ready:
    ready = core.ready()
    apply_log_changes(store, ready)
    if ready.committed_index is not None:
        store.set_committed_index(ready.committed_index)
    core.advance(ready)
    return ready


def leader_entries(terms: tuple[int, ...], first: int = 0) -> list[Entry]:
    """Entries as the leader's store would send them (same bodies as ``follower`` builds)."""
    store = MemoryLedgerStore()
    for i, t in enumerate(terms):
        store.append(t, b"e%dt%d" % (i, t))
    return store.read_range(first, 1 << 30)


def push(
    core: RaftCore,
    store: MemoryLedgerStore,
    kind: PushKind,
    index: int,
    *,
    term: int = 2,
    commit: int = -1,
    compare_term: int = -1,
    entries: tuple[Entry, ...] = (),
    leader: str = "n1",
) -> list[PushEntryResponse]:
    core.step(
        PushEntryRequest(
            "g", leader, "n0", 9, term, leader, kind, index, commit, compare_term, entries
        )
    )
    ready = settle(core, store)
    return [
        m for m in ready.messages + ready.messages_after_persist if isinstance(m, PushEntryResponse)
    ]


# ---------------------------------------------------------------- follower: EntryHandler


def test_compare_match_mismatch_and_beyond_the_end() -> None:
    """Section 4 (handleDoCompare) with G2's xTerm / xIndex on a mismatch."""
    core, store = follower((1, 1, 2, 2, 2))
    (hit,) = push(core, store, PushKind.COMPARE, 1, compare_term=1)
    (miss,) = push(core, store, PushKind.COMPARE, 4, compare_term=3)
    (beyond,) = push(core, store, PushKind.COMPARE, 9, compare_term=3)
    (empty,) = push(core, store, PushKind.COMPARE, -1)
    assert (hit.code, hit.end_index) == (ResponseCode.SUCCESS, 4)
    assert (miss.code, miss.x_term, miss.x_index) == (ResponseCode.INCONSISTENT_STATE, 2, 2)
    assert (beyond.code, beyond.end_index) == (ResponseCode.INCONSISTENT_STATE, 4)
    assert empty.code is ResponseCode.SUCCESS


def test_truncate_cuts_a_divergent_tail_but_keeps_committed_entries() -> None:
    core, store = follower((1, 1, 1, 1), term=3)
    store.set_committed_index(1)
    (ok,) = push(core, store, PushKind.TRUNCATE, 2, term=3)
    assert ok.code is ResponseCode.SUCCESS
    assert store.end_index == 1
    core2, store2 = follower((1, 1, 1), term=3)
    push(core2, store2, PushKind.COMPARE, 2, term=3, compare_term=1, commit=1)
    assert core2.committed_index == 1
    (kept,) = push(core2, store2, PushKind.TRUNCATE, 1, term=3)
    assert kept.code is ResponseCode.SUCCESS  # the leader re-sends; APPEND skips what matches
    assert (store2.end_index, kept.end_index) == (1, 1)  # cut above the commit index only


def test_stale_truncate_after_append_of_this_term_is_ignored() -> None:
    """Simulation seed 173: a duplicated TRUNCATE arriving after the APPEND that followed it must
    not erase entries of the current term (they can only have come from this leader)."""
    core, store = follower((1, 1), term=2)
    push(core, store, PushKind.TRUNCATE, 2)
    push(core, store, PushKind.APPEND, 2, entries=tuple(leader_entries((1, 1, 2, 2), 2)))
    assert store.end_index == 3
    (late,) = push(core, store, PushKind.TRUNCATE, 2)
    assert late.code is ResponseCode.SUCCESS
    assert store.end_index == 3


def test_out_of_order_appends_are_buffered_then_applied_in_order() -> None:
    """Section 4: pushes are applied strictly in index order; early ones wait in a buffer."""
    core, store = follower((1,))
    entries = leader_entries((1, 2, 2, 2))
    early = push(core, store, PushKind.APPEND, 3, entries=(entries[3],))
    assert early == []  # held, not answered yet
    replies = push(core, store, PushKind.APPEND, 1, entries=(entries[1], entries[2]))
    assert [(r.index, r.code) for r in replies] == [
        (1, ResponseCode.SUCCESS),
        (3, ResponseCode.SUCCESS),
    ]
    assert store.end_index == 3


def test_append_that_conflicts_with_the_log_asks_for_compare() -> None:
    core, store = follower((1, 1, 1))
    (reply,) = push(core, store, PushKind.APPEND, 1, entries=tuple(leader_entries((1, 2), 1)))
    assert (reply.code, reply.end_index) == (ResponseCode.INCONSISTENT_STATE, 2)
    assert store.end_index == 2  # nothing written


def test_malformed_appends_are_refused_not_crashed_on() -> None:
    """Bad input gets a clear error: no entries, entries not at the pushed index, a term above
    the leader's."""
    core, store = follower((), term=2)
    replies = push(core, store, PushKind.APPEND, 0)
    replies += push(core, store, PushKind.APPEND, 1, entries=tuple(leader_entries((2,))))
    replies += push(core, store, PushKind.APPEND, 0, entries=tuple(leader_entries((3,))))
    assert [r.code for r in replies] == [ResponseCode.UNEXPECTED_ARGUMENT] * 3
    assert store.end_index == -1


def test_append_is_acknowledged_only_after_it_is_stored() -> None:
    core, _ = follower(())
    core.step(
        PushEntryRequest(
            "g", "n1", "n0", 10, 2, "n1", PushKind.APPEND, 0, -1, -1, tuple(leader_entries((2,)))
        )
    )
    ready = core.ready()
    assert ready.entries
    assert not [m for m in ready.messages if isinstance(m, PushEntryResponse)]
    assert [m.code for m in ready.messages_after_persist] == [ResponseCode.SUCCESS]  # type: ignore[union-attr]


def test_push_term_and_leader_checks() -> None:
    """Section 9 #3: every push kind is checked for term and leader."""
    core, store = follower((1,), term=4)
    (low,) = push(core, store, PushKind.COMMIT, -1, term=3)
    (wrong,) = push(core, store, PushKind.COMMIT, -1, term=4, leader="n2")
    assert low.code is ResponseCode.EXPIRED_TERM
    assert wrong.code is ResponseCode.INCONSISTENT_LEADER
    (high,) = push(core, store, PushKind.COMMIT, -1, term=6)
    assert high.code is ResponseCode.TERM_NOT_READY
    assert core.role is Role.CANDIDATE
    (candidate,) = push(core, store, PushKind.COMMIT, -1, term=4)
    assert candidate.code is ResponseCode.NOT_FOLLOWER  # term 6 is adopted on the next tick


def test_not_a_follower() -> None:
    store = MemoryLedgerStore()
    core = RaftCore(
        RaftConfig(group="g", self_id="n0", peer_ids=PEERS),
        HardState(2),
        store,
        random.Random(1),
        0,
    )
    (reply,) = push(core, store, PushKind.COMMIT, -1, term=2)
    assert reply.code is ResponseCode.NOT_FOLLOWER


def test_follower_commit_is_bounded_by_what_it_verified() -> None:
    """Raft: commit = min(leaderCommit, last entry verified against this leader)."""
    core, store = follower((1, 1, 1, 1), term=2)
    push(core, store, PushKind.COMMIT, -1, commit=3)
    assert core.committed_index == -1  # nothing verified against this leader yet
    push(core, store, PushKind.COMPARE, 1, compare_term=1, commit=3)
    assert core.committed_index == 1


# ---------------------------------------------------------------- leader


class Trio:
    """Three cores wired by hand: messages are delivered only when the test says so."""

    def __init__(self, **cfg: object) -> None:
        self.stores = {p: MemoryLedgerStore() for p in PEERS}
        self.cores = {
            p: RaftCore(
                RaftConfig(group="g", self_id=p, peer_ids=PEERS, **cfg),  # type: ignore[arg-type]
                HardState(),
                self.stores[p],
                random.Random(i),
                0,
            )
            for i, p in enumerate(PEERS)
        }
        self.now = 0
        self.outbox: list[object] = []
        self.down: set[str] = set()
        self.completed: list[ProposalResult] = []

    def settle(self, p: str) -> Ready:
        ready = settle(self.cores[p], self.stores[p])
        self.outbox += ready.messages + ready.messages_after_persist
        self.completed += ready.completed
        return ready

    def deliver_all(self) -> None:
        while self.outbox:
            m = self.outbox.pop(0)
            dst = m.remote_id  # type: ignore[attr-defined]
            if dst in self.down:
                continue
            self.cores[dst].step(m)  # type: ignore[arg-type]
            self.settle(dst)

    def run(self, ms: int) -> None:
        for _ in range(ms // 10):
            self.now += 10
            for p in PEERS:
                if p not in self.down:
                    self.cores[p].tick(self.now)
                    self.settle(p)
            self.deliver_all()

    def make_leader(self, p: str) -> RaftCore:
        """Elect ``p`` at term 1 with a vote round it starts itself."""
        core = self.cores[p]
        core.term = 1  # as after a WAIT_TO_VOTE_NEXT round
        core.voted_for = None
        core._start_vote_round(1)
        self.settle(p)
        self.deliver_all()
        self.run(30)
        assert core.role is Role.LEADER
        return core


def test_new_leader_appends_a_noop_and_commits_it() -> None:
    """Raft 5.4.2 (a deviation from DLedger's default): the NOOP of the new term commits
    everything before it."""
    trio = Trio()
    leader = trio.make_leader("n0")
    assert leader.committed_index == 0
    assert trio.stores["n0"].get(0).body == b""


def test_entries_of_an_older_term_are_not_committed_by_counting() -> None:
    """Raft 5.4.2: a quorum of replicas of an old-term entry is not enough."""
    store = MemoryLedgerStore()
    store.append(1, b"old")
    core = RaftCore(
        RaftConfig(group="g", self_id="n0", peer_ids=PEERS),
        HardState(3),
        store,
        random.Random(1),
        0,
    )
    core._start_vote_round(3)
    ready = settle(core, store)
    rids = {m.remote_id: m.rid for m in ready.messages_after_persist if isinstance(m, VoteRequest)}
    core.step(VoteResponse("g", "n1", "n0", rids["n1"], 3, VoteResult.ACCEPT))
    ready = core.ready()
    assert core.role is Role.LEADER
    d = core._dispatchers["n1"]
    d.state, d.match_index = PushKind.APPEND, 0  # n1 holds entry 0 (term 1)
    core._self_match_index = 0
    core._maybe_advance_commit()
    assert core.committed_index == -1  # not committed until the NOOP of term 3 is replicated
    apply_log_changes(store, ready)
    core.advance(ready)
    d.match_index = 1
    core._maybe_advance_commit()
    assert core.committed_index == 1


def test_proposals_complete_together_when_the_commit_index_passes_them() -> None:
    trio = Trio()
    leader = trio.make_leader("n0")
    first = leader.propose([b"a"])
    second = leader.propose([b"b", b"c"])
    trio.settle("n0")
    trio.run(50)
    assert [(r.proposal_id, r.last_index, r.code) for r in trio.completed] == [
        (first, 1, ResponseCode.SUCCESS),
        (second, 3, ResponseCode.SUCCESS),
    ]


def test_pending_full_and_ack_timeout_and_term_changed() -> None:
    trio = Trio(max_pending_requests_num=1, max_wait_ack_time_ms=100)
    leader = trio.make_leader("n0")
    trio.down = {"n1", "n2"}
    leader.propose([b"a"])
    leader.propose([b"b"])
    with pytest.raises(LeaderPendingFullError):
        leader.propose([b"c"])
    trio.settle("n0")
    trio.now += 150
    leader.tick(trio.now)
    ready = trio.settle("n0")
    assert {r.code for r in ready.completed} == {ResponseCode.WAIT_QUORUM_ACK_TIMEOUT}
    leader.propose([b"d"])
    trio.settle("n0")
    leader.step(HeartBeatRequest("g", "n1", "n0", 5, 9, "n1"))  # a higher term: step down
    ready = trio.settle("n0")
    assert [r.code for r in ready.completed] == [ResponseCode.TERM_CHANGED]
    with pytest.raises(NotLeaderError):
        leader.propose([b"e"])


def test_compare_skips_a_conflicting_term_with_x_index() -> None:
    """Section 3.6 (G2): one step below the follower's conflicting term, not one entry back."""
    trio = Trio()
    leader = trio.make_leader("n0")
    leader.propose([b"x"] * 50)
    trio.settle("n0")
    trio.run(30)
    d = leader._dispatchers["n1"]
    d.state, d.compare_index, d.control_rid = PushKind.COMPARE, 40, 77
    trio.outbox.clear()
    leader.step(
        PushEntryResponse(
            "g", "n1", "n0", 77, 1, ResponseCode.INCONSISTENT_STATE, PushKind.COMPARE, 40,
            end_index=50, x_term=0, x_index=12,
        )
    )  # fmt: skip
    trio.settle("n0")
    (probe,) = [m for m in trio.outbox if isinstance(m, PushEntryRequest)]
    assert (probe.kind, probe.index) == (PushKind.COMPARE, 11)


def test_timed_out_pushes_are_resent_from_the_first_unacknowledged() -> None:
    """Section 3.10: go-back-N after max_push_timeout_ms."""
    trio = Trio(max_push_timeout_ms=200)
    leader = trio.make_leader("n0")
    trio.down = {"n1"}
    leader.propose([b"a", b"b"])
    trio.settle("n0")
    trio.run(20)
    d = leader._dispatchers["n1"]
    assert d.in_flight
    trio.down = set()
    trio.run(300)
    assert d.match_index == leader.last_index


# ---------------------------------------------------------------- transfer (spec-election 6)


def test_appends_are_refused_while_leadership_moves() -> None:
    trio = Trio()
    leader = trio.make_leader("n0")
    leader.transfer_leadership("n1")
    with pytest.raises(LeaderTransferringError):
        leader.propose([b"x"])


def test_transferee_answers_once_even_if_the_request_is_duplicated() -> None:
    core, store = follower((1,), term=2)
    req = LeadershipTransferRequest("g", "n1", "n0", 5, 2, "n1", "n0", 0)
    core.step(req)
    core.step(req)
    settle(core, store)
    assert core.term == 3  # took over at term + 1 at once
    assert core.role is Role.CANDIDATE
    core.step(HeartBeatRequest("g", "n2", "n0", 6, 3, "n2"))  # someone else leads term 3
    ready = settle(core, store)
    answers = [m for m in ready.messages if isinstance(m, LeadershipTransferResponse)]
    assert [a.code for a in answers] == [ResponseCode.TAKE_LEADERSHIP_FAILED]


def test_take_leadership_expired_by_a_higher_term() -> None:
    """Section 6.5: a role change above the target term answers EXPIRED_TERM."""
    core, store = follower((1,), term=2)
    core.step(LeadershipTransferRequest("g", "n1", "n0", 5, 2, "n1", "n0", 0))
    settle(core, store)
    core.step(HeartBeatRequest("g", "n2", "n0", 6, 7, "n2"))
    ready = settle(core, store)
    answers = [m for m in ready.messages if isinstance(m, LeadershipTransferResponse)]
    assert [a.code for a in answers] == [ResponseCode.EXPIRED_TERM]


def test_transferee_refuses_equal_logs_while_taking_leadership() -> None:
    """Rule 9: REJECT_TAKING_LEADERSHIP to a peer whose log is not newer."""
    core, store = follower((1,), term=2)
    core.step(LeadershipTransferRequest("g", "n1", "n0", 5, 2, "n1", "n0", 0))
    settle(core, store)
    core.step(VoteRequest("g", "n2", "n0", 8, 3, "n2", 0, 1))
    ready = settle(core, store)
    (answer,) = [m for m in ready.messages if isinstance(m, VoteResponse)]
    assert answer.result is VoteResult.REJECT_TAKING_LEADERSHIP


def test_transfer_request_from_a_non_leader_is_refused() -> None:
    core, store = follower((1,), term=2)
    core.step(LeadershipTransferRequest("g", "n2", "n0", 5, 2, "n2", "n0", 0))
    ready = settle(core, store)
    (answer,) = [m for m in ready.messages if isinstance(m, LeadershipTransferResponse)]
    assert answer.code is ResponseCode.INCONSISTENT_LEADER
    assert core.term == 2
