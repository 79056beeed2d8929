"""``plan_leaders``: where each group's master should be (issue 27 item 4), and the survey's
views of a group (no master, missing members, differing peer lists) that ``cluster-list``
shows."""

from __future__ import annotations

from collections import Counter

from ledgermq.cli.leader_commands import _group_rows
from ledgermq.client.leader_balance import (
    GroupShape,
    GroupSurvey,
    ReplicaAnswer,
    host_of,
    plan_leaders,
)

HOSTS = {"n0": "10.0.0.1", "n1": "10.0.0.2", "n2": "10.0.0.3"}


def _load(plan: dict[str, str]) -> Counter[str]:
    return Counter(HOSTS[r] for r in plan.values())


def test_masters_piled_on_one_host_spread_over_the_hosts() -> None:
    groups: list[GroupShape] = [(g, HOSTS, "n0", "") for g in ("a", "b", "c")]
    plan = plan_leaders(groups)
    assert sorted(_load(plan).values()) == [1, 1, 1]
    assert sum(plan[g] != "n0" for g in plan) == 2  # as few moves as possible


def test_two_groups_sharing_hosts_do_not_share_a_master_host() -> None:
    plan = plan_leaders([("a", HOSTS, "n1", ""), ("b", HOSTS, "n1", "")])
    assert max(_load(plan).values()) == 1
    assert sorted(plan.values()).count("n1") == 1  # one master moves, the other stays


def test_a_balanced_cluster_moves_nothing() -> None:
    groups: list[GroupShape] = [("a", HOSTS, "n0", ""), ("b", HOSTS, "n1", ""),
                                ("c", HOSTS, "n2", "")]  # fmt: skip
    assert plan_leaders(groups) == {"a": "n0", "b": "n1", "c": "n2"}


def test_a_preferred_leader_wins_and_the_others_avoid_its_host() -> None:
    plan = plan_leaders([("a", HOSTS, "n0", "n2"), ("b", HOSTS, "n2", "")])
    assert plan["a"] == "n2"
    assert plan["b"] != "n2"


def test_a_preferred_leader_that_did_not_answer_is_not_planned() -> None:
    answering = {"n0": "10.0.0.1", "n1": "10.0.0.2"}
    assert plan_leaders([("a", answering, "n0", "n2")]) == {"a": "n0"}


def test_a_group_without_a_master_is_left_out() -> None:
    assert plan_leaders([("a", HOSTS, None, ""), ("b", HOSTS, "n0", "")]) == {"b": "n0"}


def test_groups_on_hosts_of_their_own_stay_where_they_are() -> None:
    other = {"n0": "10.0.1.1", "n1": "10.0.1.2", "n2": "10.0.1.3"}
    assert plan_leaders([("a", HOSTS, "n0", ""), ("b", other, "n0", "")]) == {
        "a": "n0",
        "b": "n0",
    }


def test_host_of_addresses() -> None:
    assert host_of("10.0.0.1:10911") == "10.0.0.1"
    assert host_of("[::1]:10911") == "::1"


def _answer(broker_id: int, replica: str, role: str, peers: str) -> ReplicaAnswer:
    info = {"dLegerSelfId": replica, "brokerRole": role, "dLegerPeers": peers,
            "preferredLeaderId": ""}  # fmt: skip
    return ReplicaAnswer(broker_id, f"10.0.0.{broker_id + 1}:10911", info)


PEERS3 = "n0-10.0.0.1:40911;n1-10.0.0.2:40911;n2-10.0.0.3:40911"


def test_a_survey_shows_no_master_missing_members_and_differing_peers() -> None:
    group = GroupSurvey(
        "c",
        "a",
        (
            _answer(2, "n1", "SLAVE", PEERS3),
            ReplicaAnswer(3, "10.0.0.3:10911", None, "ConnectError: refused"),
        ),
    )
    assert group.master is None
    assert group.missing == ["n0", "n2"]
    assert not group.membership_differs
    differing = GroupSurvey(
        "c",
        "a",
        (_answer(0, "n0", "SYNC_MASTER", PEERS3), _answer(2, "n1", "SLAVE", PEERS3 + ";n3-h:1")),
    )
    assert differing.membership_differs
    assert differing.master is not None
    assert list(differing.members) == ["n0", "n1", "n2", "n3"]


def test_cluster_list_rows_name_a_differing_membership_and_a_missing_master() -> None:
    group = GroupSurvey(
        "c",
        "a",
        (_answer(1, "n0", "SLAVE", PEERS3), _answer(2, "n1", "SLAVE", PEERS3 + ";n3-h:1")),
    )
    rows = _group_rows(group)
    notes = [str(r[-1]) for r in rows]
    assert "membership differs: this replica's peers are n0,n1,n2" in notes
    assert "membership differs: this replica's peers are n0,n1,n2,n3" in notes
    assert [r[4] for r in rows] == ["SLAVE", "SLAVE", "missing", "missing", "NO MASTER"]
    assert [r[5] for r in rows if r[4] == "missing"] == ["n2", "n3"]
