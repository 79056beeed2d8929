"""``client.readiness.assess``: the rule ``admin replica-status --ready`` applies (issue 27
item 6), on runtime-info tables made by hand: every voter caught up, the target too, and a
sentence naming what is missing otherwise."""

from __future__ import annotations

from ledgermq.client.readiness import assess


def _table(
    node: str,
    *,
    role: str = "FOLLOWER",
    end: int = 100,
    committed: int = 100,
    dispatched: int = 100,
    term: int = 3,
    leader: str = "n0",
    lags: str = "",
    live: str = "",
) -> dict[str, str]:
    return {
        "brokerName": "broker-a",
        "brokerRole": "SYNC_MASTER" if role == "LEADER" else "SLAVE",
        "dLegerSelfId": node,
        "dLegerRole": role,
        "dLegerTerm": str(term),
        "dLegerLeader": leader,
        "ledgerEndIndex": str(end),
        "committedIndex": str(committed),
        "dispatchedIndex": str(dispatched),
        "dLegerPeerIds": "n0,n1,n2",
        "dLegerFollowerLags": lags,
        "dLegerFollowersLive": live,
    }


def _group(**changes: dict[str, str] | str) -> dict[str, dict[str, str] | str]:
    tables: dict[str, dict[str, str] | str] = {
        "h:1": _table("n0", role="LEADER", lags="n1=0,n2=2", live="n1,n2"),
        "h:2": _table("n1"),
        "h:3": _table("n2", end=98, committed=98, dispatched=97),
    }
    for address, table in changes.items():
        tables[address.replace("_", ":")] = table
    return tables


def test_a_group_whose_voters_are_all_caught_up_is_ready() -> None:
    verdict = assess("broker-a", _group(), target="n1")
    assert verdict.ready, verdict.reasons
    assert verdict.leader == "n0"
    assert verdict.commit_index == 100
    assert [r.behind for r in verdict.replicas] == [0, 0, 3]
    assert verdict.sentence().startswith("ready: replica n1 of broker-a has caught up")


def test_a_voter_that_does_not_answer_makes_the_group_not_ready() -> None:
    verdict = assess("broker-a", _group(h_3="h:3: connection refused"), target="n1")
    assert not verdict.ready
    assert verdict.reasons == [
        "voter n2 did not answer: it is down or not registered yet (h:3: connection refused)"
    ]
    assert verdict.sentence().startswith("not ready: replica n1 of broker-a: voter n2")


def test_a_target_far_behind_the_leader_is_not_caught_up() -> None:
    behind = _table("n2", end=5000, committed=3000, dispatched=3000, term=3)
    leader = _table("n0", role="LEADER", end=5000, committed=5000, dispatched=5000,
                    lags="n1=0,n2=0", live="n1,n2")  # fmt: skip
    caught = _table("n1", end=5000, committed=5000, dispatched=5000)
    verdict = assess("broker-a", {"h:1": leader, "h:2": caught, "h:3": behind}, target="n2")
    assert verdict.reasons == [
        "n2's committed index is 2000 entries behind the leader's commit 5000"
    ]
    assert assess(
        "broker-a", {"h:1": leader, "h:2": caught, "h:3": behind}, target="n2", max_lag=2000
    ).ready


def test_dispatch_counts_not_only_the_log() -> None:
    lagging = _table("n1", end=100, committed=100, dispatched=10)
    verdict = assess("broker-a", _group(h_2=lagging), max_lag=50)
    assert verdict.reasons == ["n1's dispatched index is 90 entries behind the leader's commit 100"]


def test_the_leaders_view_counts_a_follower_it_does_not_hear_from() -> None:
    leader = _table("n0", role="LEADER", lags="n1=0,n2=0", live="n1")
    verdict = assess("broker-a", _group(h_1=leader))
    assert verdict.reasons == ["leader n0 did not hear from n2 in its last heartbeat round"]
    leader = _table("n0", role="LEADER", lags="n1=0,n2=5000", live="n1,n2")
    verdict = assess("broker-a", _group(h_1=leader))
    assert verdict.reasons == ["n2 has not acknowledged the leader's last 5000 entries"]


def test_a_restarted_replica_that_follows_no_leader_yet_is_not_ready() -> None:
    fresh = _table("n2", leader="", term=2)
    verdict = assess("broker-a", _group(h_3=fresh), target="n2")
    assert verdict.reasons == ["n2 does not follow leader n0 in term 3 yet"]


def test_no_leader_or_a_leader_not_yet_master_is_not_ready() -> None:
    tables = {a: _table(n, leader="") for a, n in (("h:1", "n0"), ("h:2", "n1"), ("h:3", "n2"))}
    verdict = assess("broker-a", tables)
    assert verdict.reasons == ["no replica that answered is the leader (an election may be on)"]
    leader = _table("n0", role="LEADER", lags="n1=0,n2=0", live="n1,n2")
    leader["brokerRole"] = "SLAVE"
    verdict = assess("broker-a", _group(h_1=leader))
    assert verdict.reasons == ["leader n0 is not master yet (it is still applying its log)"]


def test_an_unknown_target_is_named() -> None:
    verdict = assess("broker-a", _group(), target="n7")
    assert verdict.reasons == ["no replica n7 answered and the leader knows none"]
    assert verdict.as_json()["ready"] is False


def test_a_table_without_indexes_is_not_caught_up_and_does_not_fail() -> None:
    bare = {k: v for k, v in _table("n1").items() if not k.endswith("Index")}
    verdict = assess("broker-a", _group(h_2=bare))
    assert verdict.reasons == ["n1's log end is unknown behind the leader's commit 100"]
    assert verdict.replicas[1].behind is None
