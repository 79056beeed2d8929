"""Membership changes in the Raft core: single-server changes through the log, and learners.

The golden traces (``testdata/membership_*.txt``) show each change kind end to end; these tests
pin the rules one at a time (issue 27 item 1).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

import pytest

from ledgermq.errors import MembershipChangeBusyError, MembershipChangeError
from ledgermq.raft import (
    CONFIG_CHANGE_TYPE,
    HardState,
    Membership,
    MembershipError,
    MembershipRecord,
    RaftConfig,
    RaftCore,
    ResponseCode,
    Role,
)
from ledgermq.raft.membership import MembershipLog
from ledgermq.store import EntryType, MemoryLedgerStore
from ledgermq.testing.interaction import InteractionEnv

if TYPE_CHECKING:
    from collections.abc import Callable


def _env(nodes: int = 3) -> InteractionEnv:
    env = InteractionEnv()
    env.handle(f"cluster nodes={nodes}")
    env.handle("run 1000")  # n2 leads term 1 (see the golden traces)
    return env


def _core(env: InteractionEnv, nid: str) -> RaftCore:
    core = env.nodes[nid].core
    assert core is not None
    return core


# ---------------------------------------------------------------------- the value and its log
def test_membership_round_trips_and_validates() -> None:
    m = Membership(("n0", "n1", "n2")).with_learner("n3", "h3:40911")
    assert Membership.decode(m.encode()) == m
    assert m.address_of("n3") == "h3:40911"
    assert m.quorum == 2  # learners never count
    assert m.promoted("n3").quorum == 3
    bad_ones: list[Callable[[], object]] = [
        lambda: Membership(()),
        lambda: Membership(("n0", "n0")),
        lambda: Membership(("n-1",)),
        lambda: Membership(("n1", "n0")),
        lambda: Membership.decode(b"not json"),
        lambda: m.with_learner("n0"),
        lambda: m.without("n9"),
        lambda: m.promoted("n0"),
        lambda: Membership(("n0",)).without("n0"),
    ]
    for bad in bad_ones:
        with pytest.raises(MembershipError):
            bad()


def test_membership_log_undoes_a_truncated_change_and_commits_in_order() -> None:
    seed = Membership(("n0", "n1", "n2"))
    grown = seed.with_learner("n3")
    log = MembershipLog(MembershipRecord(-1, seed))
    assert log.append(5, 1, grown)
    assert log.effective.membership == grown
    assert log.pending == MembershipRecord(5, grown, 1)
    assert log.truncate(5)  # the entry was cut: the previous configuration is back
    assert log.effective.membership == seed
    assert log.configurations() == (MembershipRecord(-1, seed),)
    assert log.append(7, 2, grown)
    assert not log.commit(6)
    assert log.commit(7)
    assert log.committed == MembershipRecord(7, grown, 2)
    assert not log.truncate(8)
    assert not log.append(7, 2, seed)  # at or below the base: already reflected


# ---------------------------------------------------------------------- the leader's rules
def test_a_lone_voter_cannot_remove_itself() -> None:
    env = _env(1)
    with pytest.raises(MembershipChangeError, match="only voter"):
        _core(env, "n0").remove_member("n0")


def test_one_uncommitted_change_at_a_time_and_only_after_a_commit_of_the_term() -> None:
    env = InteractionEnv()
    env.handle("cluster nodes=3")
    env.handle("run 152")  # n2 has just become leader: its NOOP is not committed
    leader = _core(env, "n2")
    assert leader.role is Role.LEADER
    with pytest.raises(MembershipChangeBusyError, match="has not committed an entry of its term"):
        leader.add_learner("n3")
    env.handle("run 30")
    env.handle("isolate n2")  # nothing commits from now on
    leader.add_learner("n3")
    env.handle("run 1")
    with pytest.raises(MembershipChangeBusyError, match="not committed yet"):
        leader.add_learner("n4")


def test_a_learner_never_counts_for_commit() -> None:
    """Voters n0 n1 n2 and learner n3; with n0 and n1 down, n3's acknowledgement does not make
    a majority: nothing commits (before this, every peer in the list counted)."""
    env = _env()
    env.handle("add n2 n3")
    env.handle("start n3 peers=n0,n1,n2,n3")
    env.handle("run 300")
    leader = _core(env, "n2")
    assert leader.membership.learners == ("n3",)
    env.handle("crash n0")
    env.handle("crash n1")
    env.handle("propose n2 x")
    env.handle("run 500")
    assert leader.committed_index < leader.last_index
    assert env.nodes["n3"].store.end_index == leader.last_index  # it has the entry
    last = leader.last_index
    assert not [
        r for _, _, r in env.completed if r.code is ResponseCode.SUCCESS and r.last_index == last
    ]


def test_a_learner_is_promoted_only_after_catching_up_for_m_heartbeats() -> None:
    env = _env()
    env.handle("add n2 n3")
    env.handle("run 300")  # n3 is not running: never caught up, never promoted
    assert _core(env, "n2").membership.learners == ("n3",)
    env.handle("start n3 peers=n0,n1,n2,n3")
    env.handle("run 500")  # following, but fewer than 5 caught-up rounds of 200 ms
    assert _core(env, "n2").membership.learners == ("n3",)
    env.handle("run 1500")
    assert _core(env, "n2").membership.voters == ("n0", "n1", "n2", "n3")


def test_a_learner_or_a_removed_node_never_campaigns() -> None:
    env = _env()
    env.handle("remove n2 n0")
    env.handle("run 200")
    env.handle("crash n2")  # no leader at all now: only voters n1 (and n2, down) may campaign
    env.handle("run 3000")
    removed = _core(env, "n0")
    assert removed.role is Role.CANDIDATE
    assert removed.term == 1  # it never started a round of its own
    assert removed.voted_for == "n2"


def test_transfer_to_a_learner_is_refused() -> None:
    env = _env()
    env.handle("add n2 n3")
    out = env.handle("transfer n2 n3")
    assert "transfer 1 to n3 (term 1) UNKNOWN_MEMBER" in out
    assert _core(env, "n2").role is Role.LEADER


# ---------------------------------------------------------------------- recovery from the log
def _restarted(store: MemoryLedgerStore, record: MembershipRecord | None) -> RaftCore:
    config = RaftConfig(group="g", self_id="n0", peer_ids=("n0", "n1", "n2"))
    return RaftCore(config, HardState(1), store, random.Random(1), 0, store.committed_index, record)


def test_a_restart_takes_the_configuration_from_the_record_and_the_log() -> None:
    seed = Membership(("n0", "n1", "n2"))
    grown = seed.with_learner("n3")
    promoted = grown.promoted("n3")
    store = MemoryLedgerStore(flush="sync")
    store.append(1, b"")
    store.append(1, grown.encode(), entry_type=EntryType.CONFIG_CHANGE)
    store.append(1, b"x")
    store.append(1, promoted.encode(), entry_type=EntryType.CONFIG_CHANGE)
    store.set_committed_index(2)
    core = _restarted(store, MembershipRecord(1, grown, 1))
    state = core.membership_state
    assert state.committed == MembershipRecord(1, grown, 1)
    assert state.effective == MembershipRecord(3, promoted, 1)  # uncommitted, yet in effect
    assert int(EntryType.CONFIG_CHANGE) == CONFIG_CHANGE_TYPE


def test_without_a_record_the_seed_peer_list_is_the_base() -> None:
    store = MemoryLedgerStore(flush="sync")
    store.append(1, b"")
    core = _restarted(store, None)
    assert core.membership == Membership(("n0", "n1", "n2"))


# ---------------------------------------------------------------------- a malformed change
MALFORMED_CHANGES = [
    b"[" * 100_000 + b"]" * 100_000,  # RecursionError in json, not a ValueError
    b'{"voters":"n0n1"}',  # a string is not read as its characters
    b'{"voters":[1,2]}',
    b'{"voters":["n0"],"learners":"ab"}',
    b'{"voters":["n0"],"addresses":{"n0":[1]}}',
    b"\xff",
    b"[]",
    b'{"voters":["n0","n0"]}',
    b'{"voters":[]}',
]


@pytest.mark.parametrize("body", MALFORMED_CHANGES, ids=range(len(MALFORMED_CHANGES)))
def test_a_malformed_config_change_is_refused_the_same_way_on_every_replica(body: bytes) -> None:
    """Applying a committed entry never fails on every replica: an unreadable CONFIG_CHANGE is a
    ``MembershipError`` (logged and ignored by the core, at a restart as when it arrives), the
    configuration stays, and nothing else is raised. Before, deeply nested JSON raised
    RecursionError out of the core, and ``"voters":"n0n1"`` was read as voters 0, 1, n, n."""
    with pytest.raises(MembershipError, match=r"not a membership entry|listed twice|one voter"):
        Membership.decode(body)
    store = MemoryLedgerStore(flush="sync")
    store.append(1, b"")
    store.append(1, body, entry_type=EntryType.CONFIG_CHANGE)
    store.set_committed_index(1)
    assert _restarted(store, None).membership == Membership(("n0", "n1", "n2"))  # at a restart
    store.set_committed_index(0)  # after the commit index: read as it arrives, not yet committed
    assert _restarted(store, None).membership == Membership(("n0", "n1", "n2"))


def test_a_config_change_is_appended_only_through_the_checked_changes() -> None:
    """``propose`` with the CONFIG_CHANGE type is refused: a membership is validated (shape and
    single-server rule) before it is appended, by ``add_learner`` / ``remove_member`` /
    ``promote_learner``, never appended unchecked."""
    env = _env()
    leader = _core(env, "n2")
    with pytest.raises(ValueError, match="appended only by add_learner"):
        leader.propose([b'{"voters":["n9"]}'], entry_type=CONFIG_CHANGE_TYPE)
    assert leader.last_index == 0  # nothing appended
