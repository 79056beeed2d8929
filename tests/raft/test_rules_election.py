"""One test per DLedger election rule (spec-election.md), driving a single core by hand."""

from __future__ import annotations

import random

import pytest

from ledgermq.raft import (
    HardState,
    HeartBeatRequest,
    HeartBeatResponse,
    ParseResult,
    RaftConfig,
    RaftConfigError,
    RaftCore,
    ResponseCode,
    Role,
    VoteRequest,
    VoteResponse,
    VoteResult,
)
from ledgermq.raft.quorum import quorum_index
from ledgermq.store import MemoryLedgerStore

PEERS = ("n0", "n1", "n2")


def make_core(
    term: int = 0, voted_for: str | None = None, log_terms: tuple[int, ...] = (), **cfg: object
) -> tuple[RaftCore, MemoryLedgerStore]:
    store = MemoryLedgerStore()
    for t in log_terms:
        store.append(t, b"x")
    config = RaftConfig(group="g", self_id="n0", peer_ids=PEERS, **cfg)  # type: ignore[arg-type]
    core = RaftCore(config, HardState(term, voted_for), store, random.Random(1), now_ms=0)
    return core, store


def vote(
    core: RaftCore, *, term: int, candidate: str = "n1", end_index: int = -1, end_term: int = -1
) -> VoteResponse:
    core.step(VoteRequest("g", candidate, "n0", 7, term, candidate, end_index, end_term))
    ready = core.ready()
    core.advance(ready)
    (resp,) = [
        m for m in ready.messages + ready.messages_after_persist if isinstance(m, VoteResponse)
    ]
    return resp


def test_quorum_math() -> None:
    """Section 1.3 isQuorum; section 11 #16."""
    for size, need in [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3)]:
        ids = tuple(f"n{i}" for i in range(size))
        assert RaftConfig(group="g", self_id="n0", peer_ids=ids).quorum == need
    assert quorum_index([5, 3, 9], 2) == 5
    assert quorum_index([5, 3, 9, 1, 7], 3) == 5


def test_config_validation() -> None:
    """Section 11 #22."""
    with pytest.raises(RaftConfigError):
        RaftConfig(
            group="g", self_id="n0", peer_ids=PEERS, min_vote_interval_ms=5, max_vote_interval_ms=5
        )
    with pytest.raises(RaftConfigError):
        RaftConfig(group="g", self_id="n9", peer_ids=PEERS)


def test_every_node_starts_as_candidate() -> None:
    """Section 0."""
    core, _ = make_core(term=4)
    assert core.role is Role.CANDIDATE
    assert core.term == 4


def test_rule1_unknown_candidate() -> None:
    core, _ = make_core()
    assert vote(core, term=0, candidate="zz").result is VoteResult.REJECT_UNKNOWN_LEADER


def test_rule3_older_log_rejected_without_adopting_its_term() -> None:
    """Rules 3-4 come before the term checks: no step-down, no term adoption (section 3.3)."""
    core, _ = make_core(term=2, log_terms=(1, 2))
    resp = vote(core, term=9, end_index=5, end_term=1)
    assert resp.result is VoteResult.REJECT_EXPIRED_LEDGER_TERM
    assert core.term == 2
    assert core.known_max_term_in_group == -1


def test_rule4_shorter_log_rejected() -> None:
    core, _ = make_core(term=2, log_terms=(2, 2))
    assert (
        vote(core, term=3, end_index=0, end_term=2).result
        is VoteResult.REJECT_SMALL_LEDGER_END_INDEX
    )


def test_rule5_expired_vote_term() -> None:
    core, _ = make_core(term=5)
    resp = vote(core, term=4)
    assert resp.result is VoteResult.REJECT_EXPIRED_VOTE_TERM
    assert resp.term == 5


def test_rule6_repeat_vote_and_already_voted() -> None:
    core, _ = make_core(term=3, voted_for="n1")
    assert vote(core, term=3, candidate="n1").result is VoteResult.ACCEPT
    assert vote(core, term=3, candidate="n2").result is VoteResult.REJECT_ALREADY_VOTED


def test_rule7_higher_term_not_ready_then_term_adopted_on_next_tick() -> None:
    """Rule 7 and section 11 #10-11: candidate now, term adopted by nextTerm on the next tick."""
    core, _ = make_core(term=1)
    resp = vote(core, term=6)
    assert resp.result is VoteResult.REJECT_TERM_NOT_READY
    assert resp.term == 1  # still the old term
    assert core.role is Role.CANDIDATE
    assert core.known_max_term_in_group == 6
    core.tick(10)
    ready = core.ready()
    core.advance(ready)
    assert core.term == 6  # jumped, not +1
    assert core.voted_for is None
    assert ready.hard_state == HardState(6, None)
    assert vote(core, term=6).result is VoteResult.ACCEPT


def test_rule8_term_smaller_than_ledger() -> None:
    core, _ = make_core(term=1, log_terms=(3,))
    resp = vote(core, term=1, end_index=0, end_term=3)
    assert resp.result is VoteResult.REJECT_TERM_SMALL_THAN_LEDGER
    assert resp.term == 3


def test_rule10_accept_persists_the_vote_before_replying() -> None:
    core, _ = make_core(term=2)
    core.step(VoteRequest("g", "n1", "n0", 7, 2, "n1", -1, -1))
    ready = core.ready()
    core.advance(ready)
    assert ready.hard_state == HardState(2, "n1")
    assert ready.messages == []
    assert [m.result for m in ready.messages_after_persist] == [VoteResult.ACCEPT]  # type: ignore[union-attr]


def test_wrapper_checks_member_and_group() -> None:
    """Section 3.2."""
    core, _ = make_core()
    core.step(VoteRequest("other", "n1", "n0", 7, 0, "n1", -1, -1))
    core.step(VoteRequest("g", "n1", "n9", 8, 0, "n1", -1, -1))
    ready = core.ready()
    codes = [m.code for m in ready.messages]  # type: ignore[union-attr]
    assert codes == [ResponseCode.UNKNOWN_GROUP, ResponseCode.UNKNOWN_MEMBER]


def drive_round(
    core: RaftCore, answers: dict[str, VoteResult], answer_term: int = 0
) -> ParseResult:
    """Start a vote round on the next tick and answer it; return the parse result."""
    core.tick(
        core._next_time_to_request_vote_ms + 1 if core._next_time_to_request_vote_ms > 0 else 1
    )
    ready = core.ready()
    core.advance(ready)
    requests = [
        m for m in ready.messages + ready.messages_after_persist if isinstance(m, VoteRequest)
    ]
    for request in requests:
        result = answers.get(request.remote_id)
        if result is not None:
            core.step(
                VoteResponse(
                    "g", request.remote_id, "n0", request.rid, answer_term or request.term, result
                )
            )
    if core._vote_round is not None:  # not decided yet: unanswered requests fail at the deadline
        core.tick(core._vote_round.deadline_ms)
        core.advance(core.ready())
    return core.last_parse_result


def test_round_passed_becomes_leader_in_the_same_term() -> None:
    """Section 8 (a): a fresh node can win in term 0; no increment before the first round."""
    core, _ = make_core()
    drive_round(core, {"n1": VoteResult.ACCEPT})
    assert core.role is Role.LEADER
    assert core.term == 0


def test_round_split_vote_waits_for_the_next_term() -> None:
    core, _ = make_core()
    result = drive_round(
        core, {"n1": VoteResult.REJECT_ALREADY_VOTED, "n2": VoteResult.REJECT_ALREADY_VOTED}
    )
    assert result is ParseResult.WAIT_TO_VOTE_NEXT
    assert 100 <= core._next_time_to_request_vote_ms - core._now < 300  # min/max vote interval
    core.tick(core._next_time_to_request_vote_ms)
    core.advance(core.ready())
    assert core.term == 1  # the next round runs in a new term


def test_isolated_candidate_never_inflates_its_term() -> None:
    """Section 11 #7: no quorum of valid answers -> WAIT_TO_REVOTE in the same term."""
    core, _ = make_core(term=3)
    for _ in range(5):
        assert drive_round(core, {}) is ParseResult.WAIT_TO_REVOTE
    assert core.term == 3


def test_round_with_not_ready_votes_revotes_immediately() -> None:
    core, _ = make_core()
    result = drive_round(
        core, {"n1": VoteResult.REJECT_TERM_NOT_READY, "n2": VoteResult.REJECT_TERM_NOT_READY}
    )
    assert result is ParseResult.REVOTE_IMMEDIATELY


def test_heartbeat_turns_candidate_into_follower() -> None:
    """Section 4.4: same term, no known leader -> FOLLOWER; parse result reset (PR #37)."""
    core, _ = make_core(term=2)
    core.step(HeartBeatRequest("g", "n1", "n0", 3, 2, "n1"))
    ready = core.ready()
    core.advance(ready)
    assert core.role is Role.FOLLOWER
    assert core.leader_id == "n1"
    sent = ready.messages + ready.messages_after_persist  # after: a blank node records its vote
    assert [m.code for m in sent] == [ResponseCode.SUCCESS]  # type: ignore[union-attr]
    assert ready.role_changes[-1].role is Role.FOLLOWER


def test_heartbeat_codes() -> None:
    core, _ = make_core(term=5)
    core.step(HeartBeatRequest("g", "n1", "n0", 1, 4, "n1"))  # lower term
    core.step(HeartBeatRequest("g", "n1", "n0", 2, 5, "n1"))  # becomes follower of n1
    core.step(HeartBeatRequest("g", "n2", "n0", 3, 5, "n2"))  # another leader, same term
    core.step(HeartBeatRequest("g", "n0", "n0", 4, 5, "n0"))  # my own id
    ready = core.ready()
    core.advance(ready)
    sent = ready.messages + ready.messages_after_persist  # after: a blank node records its vote
    got = [(m.code, m.term) for m in sent if isinstance(m, HeartBeatResponse)]
    assert got == [
        (ResponseCode.EXPIRED_TERM, 5),
        (ResponseCode.SUCCESS, -1),
        (ResponseCode.INCONSISTENT_LEADER, -1),
        (ResponseCode.UNEXPECTED_MEMBER, 5),
    ]


def test_higher_term_heartbeat_handshake() -> None:
    """Section 11 #18: TERM_NOT_READY, term adopted on the next tick, then FOLLOWER."""
    core, _ = make_core(term=1)
    core.step(HeartBeatRequest("g", "n1", "n0", 1, 4, "n1"))
    ready = core.ready()
    core.advance(ready)
    assert ready.messages[0].code is ResponseCode.TERM_NOT_READY  # type: ignore[union-attr]
    core.tick(10)
    core.advance(core.ready())
    assert core.term == 4
    core.step(HeartBeatRequest("g", "n1", "n0", 2, 4, "n1"))
    core.advance(core.ready())
    assert core.role is Role.FOLLOWER


def test_follower_times_out_to_candidate_without_bumping_the_term() -> None:
    """Section 2.4: deterministic leak x interval timeout, same term."""
    core, _ = make_core(term=2)
    core.step(HeartBeatRequest("g", "n1", "n0", 1, 2, "n1"))
    core.advance(core.ready())
    core.tick(599)
    roles = [core.role]
    core.tick(601)
    roles.append(core.role)
    assert roles == [Role.FOLLOWER, Role.CANDIDATE]
    assert core.term == 2


def test_rule2_a_peer_claiming_my_id_is_rejected() -> None:
    core, _ = make_core()
    assert vote(core, term=0, candidate="n0").result is VoteResult.REJECT_UNEXPECTED_LEADER


def test_round_already_has_leader_backs_off_a_whole_lease() -> None:
    """Section 3.5 row 2 and 11 #12: [now + min + lease, now + max + lease)."""
    core, _ = make_core()
    drive_round(core, {"n1": VoteResult.REJECT_ALREADY_HAS_LEADER})
    wait = core._next_time_to_request_vote_ms - core._now
    assert core.last_parse_result is ParseResult.WAIT_TO_REVOTE
    assert 100 + 600 <= wait < 300 + 600


def test_round_with_bigger_ledgers_pays_a_penalty() -> None:
    """Section 3.5 row 4: valid minus bigger-ledger below quorum -> + maxVoteIntervalMs."""
    core, _ = make_core()
    drive_round(
        core,
        {
            "n1": VoteResult.REJECT_SMALL_LEDGER_END_INDEX,
            "n2": VoteResult.REJECT_EXPIRED_LEDGER_TERM,
        },
    )
    wait = core._next_time_to_request_vote_ms - core._now
    assert core.last_parse_result is ParseResult.WAIT_TO_REVOTE
    assert 100 + 300 <= wait < 300 + 300
    assert core.term == 0


def test_round_refused_as_unknown_member_waits_in_its_term() -> None:
    """Deviation (issue 27 item 5): a peer that answers REJECT_UNKNOWN_LEADER (its peer list
    does not have this node) refuses it in every term, so it counts with the bigger ledgers
    (row 4: wait in the same term, + maxVoteIntervalMs). DLedger counted it as a valid vote not
    given and moved to the next term every round: a replica started at a new address while
    the others still had the old list ran its term from 7 to 359, and every leader that heard
    that term stepped down (78 s of livelock)."""
    core, _ = make_core(term=7, log_terms=(1, 2))
    answers = {
        "n1": VoteResult.REJECT_UNKNOWN_LEADER,
        "n2": VoteResult.REJECT_SMALL_LEDGER_END_INDEX,
    }
    for _ in range(20):
        assert drive_round(core, answers) is ParseResult.WAIT_TO_REVOTE
        assert core._next_time_to_request_vote_ms - core._now >= 100 + 300
    assert core.term == 7


def test_blank_candidate_behind_a_peers_log_stays_in_its_term() -> None:
    """Deviation (issue 27 item 5): a candidate with an empty log that a peer refused because
    that peer's log is longer does not move to the next term (it waits with the row-4
    back-off and takes the group's term from the group). A candidate with a log, or a blank
    one that no peer showed a log (a new cluster), still moves on as DLedger does."""
    answers = {"n1": VoteResult.REJECT_EXPIRED_LEDGER_TERM, "n2": VoteResult.REJECT_ALREADY_VOTED}
    blank, _ = make_core(term=7)
    for _ in range(20):
        assert drive_round(blank, answers) is ParseResult.WAIT_TO_REVOTE
    assert blank.term == 7
    with_log, _ = make_core(term=7, log_terms=(1,))
    assert drive_round(with_log, answers) is ParseResult.WAIT_TO_VOTE_NEXT
    new_cluster, _ = make_core()
    split = {"n1": VoteResult.REJECT_ALREADY_VOTED, "n2": VoteResult.REJECT_ALREADY_VOTED}
    assert drive_round(new_cluster, split) is ParseResult.WAIT_TO_VOTE_NEXT
    new_cluster.tick(new_cluster._next_time_to_request_vote_ms)
    assert new_cluster.term == 1


def test_round_learning_a_higher_term_waits_for_it() -> None:
    """Section 3.5 row 1: knownMaxTerm above the round's term -> WAIT_TO_VOTE_NEXT, then jump."""
    core, _ = make_core()
    drive_round(core, {"n1": VoteResult.REJECT_EXPIRED_VOTE_TERM}, answer_term=7)
    assert core.last_parse_result is ParseResult.WAIT_TO_VOTE_NEXT
    core.tick(core._next_time_to_request_vote_ms)
    core.advance(core.ready())
    assert core.term == 7


def leader_core() -> RaftCore:
    core, _ = make_core()
    drive_round(core, {"n1": VoteResult.ACCEPT})
    assert core.role is Role.LEADER
    return core


def heartbeat_round(core: RaftCore, answers: dict[str, tuple[ResponseCode, int]]) -> None:
    core.tick(core._now + 1000)
    ready = core.ready()
    core.advance(ready)
    for m in ready.messages + ready.messages_after_persist:
        if isinstance(m, HeartBeatRequest) and m.remote_id in answers:
            code, term = answers[m.remote_id]
            core.step(HeartBeatResponse("g", m.remote_id, "n0", m.rid, code, term))
    core.advance(core.ready())


def test_heartbeat_expired_term_makes_the_leader_step_down() -> None:
    """Section 4.2 version B: any EXPIRED_TERM steps down, even with a quorum of SUCCESS."""
    core = leader_core()
    heartbeat_round(core, {"n1": (ResponseCode.SUCCESS, -1), "n2": (ResponseCode.EXPIRED_TERM, 9)})
    assert core.role is Role.CANDIDATE
    assert core.known_max_term_in_group == 9


def test_heartbeat_not_ready_quorum_resends_at_once() -> None:
    """Section 4.2: succ + notReady reaching quorum -> lastSendHeartBeatTime = -1."""
    core = leader_core()
    heartbeat_round(
        core, {"n1": (ResponseCode.TERM_NOT_READY, -1), "n2": (ResponseCode.TERM_NOT_READY, -1)}
    )
    core.tick(core._now + 10)
    ready = core.ready()
    core.advance(ready)
    assert [m for m in ready.messages if isinstance(m, HeartBeatRequest)]
    assert core.role is Role.LEADER


def test_heartbeat_inconsistent_leader_without_quorum_steps_down() -> None:
    core = leader_core()
    heartbeat_round(
        core,
        {"n1": (ResponseCode.INCONSISTENT_LEADER, -1), "n2": (ResponseCode.NETWORK_ERROR, -1)},
    )
    assert core.role is Role.CANDIDATE
    assert core.peers_live == {"n1": True, "n2": False}


def test_leader_without_quorum_for_a_lease_steps_down_in_the_same_term() -> None:
    """Section 4.3 / 11 #6: no quorum for leak x interval -> CANDIDATE, term unchanged."""
    core = leader_core()
    term = core.term
    for _ in range(3):
        heartbeat_round(core, {})
    assert core.role is Role.CANDIDATE
    assert core.term == term


def test_restart_after_voting_for_itself_campaigns_in_a_new_term() -> None:
    """Deviation from section 11 #1: never lead the same term twice (log matching)."""
    core, _ = make_core(term=4, voted_for="n0")
    core.tick(10)
    ready = core.ready()
    core.advance(ready)
    assert core.term == 5
    assert ready.hard_state == HardState(5, "n0")
    other, _ = make_core(term=4, voted_for="n1")
    other.tick(10)
    other.advance(other.ready())
    assert other.term == 4  # only its own vote forces the new term
