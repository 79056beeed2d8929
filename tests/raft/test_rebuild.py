"""A follower that lost its log (a replaced disk) or fell behind the leader's retention point is
rebuilt by the leader; a node that may have forgotten its votes does not vote until it is safe.

Issue 13 items 1 and 2 (outside testing: a replica restarted with an empty ledger was never
rebuilt and the group ran on two copies without a word in any log).
"""

from __future__ import annotations

import random

from ledgermq.raft import (
    HardState,
    HeartBeatRequest,
    PushEntryRequest,
    PushEntryResponse,
    PushKind,
    RaftConfig,
    RaftCore,
    ResponseCode,
    VoteRequest,
    VoteResponse,
    VoteResult,
)
from ledgermq.store import MemoryLedgerStore
from tests.raft.test_rules_replication import PEERS, Trio, follower, leader_entries, push, settle


def _replace_disk(trio: Trio, node: str, segment_bytes: int = 1 << 20) -> None:
    """``node`` restarts with an empty log and no hard state."""
    trio.stores[node] = MemoryLedgerStore(data_segment_bytes=segment_bytes)
    trio.cores[node] = RaftCore(
        RaftConfig(group="g", self_id=node, peer_ids=PEERS, max_push_timeout_ms=200),
        HardState(),
        trio.stores[node],
        random.Random(7),
        trio.now,
    )


def _bodies(store: MemoryLedgerStore, first: int) -> list[bytes]:
    return [store.get(i).body for i in range(first, store.end_index + 1)]


def test_a_follower_that_lost_its_log_is_rebuilt_from_the_start() -> None:
    """Item 1: the leader still believes n1 holds everything; n1's pushes-ahead check answers
    INCONSISTENT_STATE and the leader walks COMPARE / TRUNCATE / APPEND from index 0.
    Before the fix n1 buffered the pushes forever and its log stayed empty."""
    trio = Trio(max_push_timeout_ms=200)
    leader = trio.make_leader("n0")
    for i in range(5):
        leader.propose([b"m%d" % i])
        trio.settle("n0")
    trio.run(100)
    assert trio.stores["n1"].end_index == leader.last_index == 5
    _replace_disk(trio, "n1")
    leader.propose([b"after"])
    trio.settle("n0")
    trio.run(1500)
    assert trio.stores["n1"].end_index == leader.last_index == 6
    assert _bodies(trio.stores["n1"], 0) == _bodies(trio.stores["n0"], 0)
    assert trio.cores["n1"].committed_index == leader.committed_index == 6
    assert leader._dispatchers["n1"].match_index == 6


def test_a_push_that_never_continues_the_log_is_answered_after_the_push_timeout() -> None:
    """DLedger's checkAbnormalFuture: a push ahead of the log end waits for reordered pushes,
    then, after max_push_timeout_ms, tells the leader where the log really ends."""
    core, store = follower((), term=2, max_push_timeout_ms=200)
    ahead = tuple(leader_entries((1, 1, 2, 2), 2))
    assert push(core, store, PushKind.APPEND, 2, entries=ahead) == []  # may be reordered
    core.tick(100)
    assert settle(core, store).messages == []
    core.tick(250)
    ready = settle(core, store)
    (reply,) = [m for m in ready.messages if isinstance(m, PushEntryResponse)]
    assert (reply.code, reply.index, reply.end_index) == (ResponseCode.INCONSISTENT_STATE, 2, -1)


def test_a_truncate_beyond_the_log_end_is_refused_not_taken_as_verified() -> None:
    """A leader whose view of the follower predates its lost disk sends TRUNCATE past the end:
    the follower must not claim to hold what it does not (simulation seed 17 with disk loss)."""
    core, store = follower((), term=2)
    (reply,) = push(core, store, PushKind.TRUNCATE, 14, commit=13)
    assert (reply.code, reply.end_index) == (ResponseCode.INCONSISTENT_STATE, -1)
    assert core.committed_index == -1


def test_a_follower_behind_the_retention_point_begins_again_at_the_leaders_oldest_entry() -> None:
    """Item 2: n1 was down while the leader committed entries and deleted the old segments;
    the leader sends its oldest entry in a TRUNCATE and n1 rebuilds its log from there."""
    trio = Trio(max_push_timeout_ms=200)
    for p in PEERS:
        trio.stores[p] = MemoryLedgerStore(data_segment_bytes=4096)
        trio.cores[p] = RaftCore(
            RaftConfig(group="g", self_id=p, peer_ids=PEERS, max_push_timeout_ms=200),
            HardState(),
            trio.stores[p],
            random.Random(1),
            0,
        )
    leader = trio.make_leader("n0")
    leader.propose([b"early"])
    trio.settle("n0")
    trio.run(100)
    assert trio.stores["n1"].end_index == 1
    trio.down = {"n1"}
    for i in range(40):  # 40 x ~550 bytes: six 4 KiB segments
        leader.propose([b"%03d" % i + b"x" * 500])
        trio.settle("n0")
        trio.run(20)
    assert leader.committed_index == 41
    begin = trio.stores["n0"].reset_begin(leader.committed_index)
    assert begin > 2  # n1 needs entry 2 next: gone
    trio.down = set()
    trio.run(1500)
    n1 = trio.stores["n1"]
    assert (n1.begin_index, n1.end_index) == (begin, 41)
    assert _bodies(n1, begin) == _bodies(trio.stores["n0"], begin)
    assert trio.cores["n1"].committed_index == 41
    # and replication goes on from there
    leader.propose([b"later"])
    trio.settle("n0")
    trio.run(100)
    assert n1.get(42).body == b"later"


def test_a_restart_truncate_that_the_log_already_holds_only_cuts_the_tail() -> None:
    core, store = follower((1, 1, 1), term=3)
    first = leader_entries((1, 1, 1))[1]
    (reply,) = push(core, store, PushKind.TRUNCATE, 1, term=3, entries=(first,))
    assert (reply.code, store.begin_index, store.end_index) == (ResponseCode.SUCCESS, 0, 1)


def test_a_follower_cut_by_retention_keeps_its_first_entry_when_a_new_leader_truncates() -> None:
    """Issue 25 item 23 (simulation seed 910062): n0's log begins at B > 0 (retention) and its
    commit index was lost with a crash; its tail is of an old term. The new leader's COMPARE
    skips the conflicting term back to B (G2 xIndex), compares at B - 1 (deleted here, so
    committed: SUCCESS) and sends TRUNCATE at B. Entry B is committed (retention keeps the
    newest committed entry), so only what follows it may go. Before the fix the core asked the
    store to remove every entry ("cannot remove every entry of a log that begins at B") and the
    replica died."""
    store = MemoryLedgerStore(data_segment_bytes=4096)
    for i in range(20):  # ~550 bytes each: several 4 KiB segments
        store.append(1, b"%03d" % i + b"x" * 500)
    store.flush()  # the entries are durable, the commit index below is not
    store.set_committed_index(12)
    begin = store.reset_begin(10)
    store = store.crashed()  # the commit index was never flushed: lost
    assert (store.begin_index, store.end_index, store.committed_index) == (begin, 19, -1)
    assert begin > 0
    core = RaftCore(
        RaftConfig(group="g", self_id="n0", peer_ids=PEERS),
        HardState(3),
        store,
        random.Random(1),
        0,
        store.committed_index,
    )
    core.step(HeartBeatRequest("g", "n1", "n0", 1, 3, "n1"))
    settle(core, store)
    (miss,) = push(core, store, PushKind.COMPARE, 19, term=3, compare_term=2)
    assert (miss.code, miss.x_index) == (ResponseCode.INCONSISTENT_STATE, begin)
    (hit,) = push(core, store, PushKind.COMPARE, begin - 1, term=3, compare_term=1)
    assert hit.code is ResponseCode.SUCCESS
    (cut,) = push(core, store, PushKind.TRUNCATE, begin, term=3)
    assert (cut.code, cut.end_index) == (ResponseCode.SUCCESS, begin)
    assert (store.begin_index, store.end_index) == (begin, begin)
    assert core.committed_index >= begin


def test_a_malformed_restart_truncate_is_refused() -> None:
    core, store = follower((), term=2)
    two = tuple(leader_entries((1, 1)))
    replies = push(core, store, PushKind.TRUNCATE, 0, entries=two)
    replies += push(core, store, PushKind.TRUNCATE, 1, entries=two[:1])
    assert [r.code for r in replies] == [ResponseCode.UNEXPECTED_ARGUMENT] * 2
    assert store.end_index == -1


# ---------------------------------------------------------------- votes of a node that forgot


def _blank(node: str = "n0") -> tuple[RaftCore, MemoryLedgerStore]:
    store = MemoryLedgerStore()
    core = RaftCore(
        RaftConfig(group="g", self_id=node, peer_ids=PEERS), HardState(), store, random.Random(3), 0
    )
    return core, store


def _vote(core: RaftCore, store: MemoryLedgerStore, req: VoteRequest) -> VoteResponse:
    core.step(req)
    ready = settle(core, store)
    (reply,) = [
        m for m in ready.messages + ready.messages_after_persist if isinstance(m, VoteResponse)
    ]
    return reply


def test_a_new_cluster_of_empty_logs_elects_as_raft_says() -> None:
    core, store = _blank()
    reply = _vote(core, store, VoteRequest("g", "n1", "n0", 1, 0, "n1", -1, -1))
    assert reply.result is VoteResult.ACCEPT


def test_a_blank_node_does_not_vote_for_a_log_it_cannot_judge() -> None:
    """A blank node that meets a candidate with entries may have voted in this term, or held a
    copy of a committed entry the candidate lacks, before its disk was replaced: it refuses
    until every peer has asked with its log, then votes only above the vote floor and only
    for a log at least as up to date as every peer's."""
    core, store = _blank()

    def ask(candidate: str, term: int, end: int) -> VoteResult:
        reply = _vote(core, store, VoteRequest("g", candidate, "n0", 1, term, candidate, end, 2))
        if reply.result is VoteResult.REJECT_TERM_NOT_READY:  # rule 7: adopt it, ask again
            core.tick(0)
            settle(core, store)
            reply = _vote(
                core, store, VoteRequest("g", candidate, "n0", 2, term, candidate, end, 2)
            )
        return reply.result

    # n2 not heard from yet: a refusal that a higher term would not change (issue 27)
    assert ask("n1", 3, 10) is VoteResult.REJECT_SMALL_LEDGER_END_INDEX
    assert core._rebuilding
    assert ask("n2", 3, 7) is VoteResult.REJECT_ALREADY_VOTED  # term 3 is the vote floor
    assert ask("n2", 4, 7) is VoteResult.REJECT_SMALL_LEDGER_END_INDEX  # n1 has more
    assert ask("n1", 4, 10) is VoteResult.ACCEPT


def test_a_blank_node_that_follows_before_its_first_push_keeps_out_of_the_leaders_term() -> None:
    """Issue 25 item 23's sweep (simulation seed 1010809): n0 voted for n2 in term 2, lost its
    disk, restarted blank and followed n2 on a heartbeat, before any push made it rebuilding,
    so it recorded no vote; once caught up it voted for n1 in term 2 and, with n1's own vote,
    elected a second leader of the term. Following a leader, a blank node records its vote
    for it, as a rebuilding one does."""
    core, store = _blank()
    core.step(HeartBeatRequest("g", "n2", "n0", 1, 2, "n2"))  # a higher term: adopt it
    settle(core, store)
    core.tick(0)
    settle(core, store)
    assert core.term == 2
    core.step(HeartBeatRequest("g", "n2", "n0", 2, 2, "n2"))
    ready = settle(core, store)
    assert core.leader_id == "n2"
    assert ready.hard_state is not None
    assert ready.hard_state.voted_for == "n2"
    # it catches up with n2 (an entry of term 2 committed), then n1 campaigns in term 2
    push(core, store, PushKind.COMPARE, -1, leader="n2")
    push(core, store, PushKind.TRUNCATE, 0, leader="n2")
    push(
        core,
        store,
        PushKind.APPEND,
        0,
        entries=tuple(leader_entries((1, 2))),
        commit=1,
        leader="n2",
    )
    assert (core._blank, core._rebuilding, core.committed_index) == (False, False, 1)
    reply = _vote(core, store, VoteRequest("g", "n1", "n0", 3, 2, "n1", 1, 2))
    assert reply.result is VoteResult.REJECT_ALREADY_HAS_LEADER


def test_the_rebuilding_mark_survives_a_restart_until_the_node_has_caught_up() -> None:
    core, store = _blank()
    core.step(
        PushEntryRequest("g", "n1", "n0", 1, 2, "n1", PushKind.COMPARE, 5, 5, 2, ())
    )  # a leader with a log: the group is older than this node
    ready = settle(core, store)
    assert ready.hard_state is not None
    assert ready.hard_state.rebuilding
    restarted = RaftCore(
        RaftConfig(group="g", self_id="n0", peer_ids=PEERS),
        ready.hard_state,
        store,
        random.Random(3),
        0,
    )
    assert restarted._rebuilding
    # caught up: it commits an entry of the leader's term
    f, fstore = follower((), term=2)
    f._rebuilding = True
    push(f, fstore, PushKind.COMPARE, -1)
    push(f, fstore, PushKind.TRUNCATE, 0)
    push(f, fstore, PushKind.APPEND, 0, entries=tuple(leader_entries((1, 2))), commit=1)
    assert not f._rebuilding
    assert settle(f, fstore).hard_state is None  # already written with the append's ready
