"""The preferred-leader check and transfers to replicas that are gone (issue 27 item 5).

A leader refuses appends (LEADER_TRANSFERRING) while a transfer runs, so a transfer to a replica
that will not take over costs the group its writes: before these rules a preferred replica that
had stopped (or was stopping) was still "live" to the leader, which handed over to it and then
refused appends until the transfer timed out, 2.2 s.
"""

from __future__ import annotations

from ledgermq.raft import (
    HeartBeatRequest,
    HeartBeatResponse,
    LeadershipTransferRequest,
    LeadershipTransferResponse,
    RaftCore,
    ResponseCode,
    Role,
)
from tests.raft.test_rules_election import leader_core


def _beat(core: RaftCore, now: int, answering: tuple[str, ...]) -> list[LeadershipTransferRequest]:
    """Tick to ``now``; the peers in ``answering`` answer its heartbeats with SUCCESS; the
    transfer requests the leader sent meanwhile."""
    core.tick(now)
    ready = core.ready()
    core.advance(ready)
    sent = list(ready.messages + ready.messages_after_persist)
    for m in sent:
        if isinstance(m, HeartBeatRequest) and m.remote_id in answering:
            core.step(HeartBeatResponse("g", m.remote_id, "n0", m.rid, ResponseCode.SUCCESS, -1))
    ready = core.ready()
    core.advance(ready)
    sent += ready.messages + ready.messages_after_persist
    return [m for m in sent if isinstance(m, LeadershipTransferRequest)]


def _transfers_over(core: RaftCore, until: int, answering: tuple[str, ...]) -> list[str]:
    asked: list[str] = []
    now = core._now
    while now < until:
        now += 50
        asked += [r.transferee_id for r in _beat(core, now, answering)]
    return asked


def test_a_preferred_replica_that_stopped_answering_is_not_handed_the_leadership() -> None:
    """Before: n1 had answered once, so it stayed live for ever and the leader transferred to
    it every few seconds although it had stopped."""
    core = leader_core()
    start = core._now
    _transfers_over(core, start + 1000, ("n1", "n2"))  # n1 answers: heard
    core.set_preferred_leader_ids(("n1",))
    assert core.transferee is None
    asked = _transfers_over(core, start + 5000, ("n2",))  # n1 is gone from now on
    assert asked == []
    assert core.role is Role.LEADER


def test_a_live_setting_of_the_preferred_leader_moves_the_leadership() -> None:
    core = leader_core()
    start = core._now
    assert _transfers_over(core, start + 2000, ("n1", "n2")) == []
    core.set_preferred_leader_ids(("n2",))
    assert _transfers_over(core, start + 3500, ("n1", "n2")) == ["n2"]
    assert core.transferee == "n2"


def test_a_transfer_to_a_silent_transferee_ends_after_the_lease_not_the_deadline() -> None:
    """Before: TIMEOUT after leadership_transfer_wait_timeout + 2 rpc timeouts (2.2 s), and
    appends were refused the whole time."""
    core = leader_core()
    start = core._now
    _transfers_over(core, start + 500, ("n1", "n2"))
    core.transfer_leadership("n1")
    asked_at = core._now
    done_at = None
    now = asked_at
    while done_at is None and now < asked_at + 3000:
        now += 50
        core.tick(now)
        first = core.ready()
        core.advance(first)
        for m in first.messages + first.messages_after_persist:
            if isinstance(m, HeartBeatRequest) and m.remote_id == "n2":
                core.step(HeartBeatResponse("g", "n2", "n0", m.rid, ResponseCode.SUCCESS, -1))
        second = core.ready()
        core.advance(second)
        for result in first.transfers + second.transfers:
            assert result.code is ResponseCode.NETWORK_ERROR
            done_at = now
    assert done_at is not None
    assert done_at - asked_at <= 1000
    assert core.transferee is None


def test_a_preferred_replica_that_refused_is_not_asked_again_at_once() -> None:
    """A replica that is stopping refuses to take over; the leader waits three checks before
    asking it again instead of refusing appends for a moment every second."""
    core = leader_core()
    start = core._now
    _transfers_over(core, start + 500, ("n1", "n2"))
    core.set_preferred_leader_ids(("n1",))
    now = core._now
    requests: list[LeadershipTransferRequest] = []
    while not requests:
        now += 50
        requests = _beat(core, now, ("n1", "n2"))
    (req,) = requests
    core.step(
        LeadershipTransferResponse(
            "g", "n1", "n0", req.rid, core.term, ResponseCode.TAKE_LEADERSHIP_FAILED
        )
    )
    core.advance(core.ready())
    assert core.transferee is None
    refused_at = core._now
    assert _transfers_over(core, refused_at + 2500, ("n1", "n2")) == []
    assert _transfers_over(core, refused_at + 4500, ("n1", "n2")) == ["n1"]
