"""RouteTable: one test per rule of spec-broker.md section 5.4, plus the master-epoch guard."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given
from hypothesis import strategies as st

from ledgermq.namesrv.routes import RegisterResult, RemovedBroker, RouteTable
from ledgermq.wire.route import (
    PERM_READ,
    PERM_WRITE,
    BrokerData,
    DataVersion,
    QueueData,
    TopicConfig,
)

A, B, C = "10.0.0.1:10911", "10.0.0.2:10911", "10.0.0.3:10911"
TOPICS = {"T": TopicConfig("T", 4, 4), "U": TopicConfig("U", 2, 2, perm=4)}


def group_of_three(table: RouteTable, now_ms: int = 0, term: int | None = 1) -> None:
    """broker-a in DLedger mode: A leads (id 0); B and C follow as selfIdNumber + 1.

    Every replica reports its ledger term, as LedgerMQ brokers do."""
    table.register_broker("c1", "broker-a", A, 0, topic_configs=TOPICS, term=term, now_ms=now_ms)
    table.register_broker("c1", "broker-a", B, 2, topic_configs=TOPICS, term=term, now_ms=now_ms)
    table.register_broker("c1", "broker-a", C, 3, topic_configs=TOPICS, term=term, now_ms=now_ms)


def members(table: RouteTable, name: str = "broker-a") -> dict[int, str]:
    data = table.broker_data(name)
    return {} if data is None else dict(data.broker_addrs)


def test_register_then_route() -> None:
    table = RouteTable()
    group_of_three(table)
    route = table.route("T")
    assert route is not None
    assert route.queue_datas == (QueueData("broker-a", 4, 4, 6, 0),)
    assert route.broker_datas == (BrokerData("c1", "broker-a", {0: A, 2: B, 3: C}),)
    assert table.route("nope") is None


def test_only_the_masters_topic_configs_make_queue_data() -> None:
    table = RouteTable()
    table.register_broker("c1", "broker-a", B, 2, topic_configs=TOPICS, now_ms=0)
    assert table.route("T") is None
    assert table.topic_list().topics == ()
    table.register_broker("c1", "broker-a", A, 0, topic_configs={"T": TOPICS["T"]}, now_ms=0)
    assert table.topic_list().topics == ("T",)
    # a master's later table updates the queues of its topics
    table.register_broker(
        "c1", "broker-a", A, 0, topic_configs={"T": TopicConfig("T", 8, 8)}, now_ms=1
    )
    route = table.route("T")
    assert route is not None
    assert route.queue_datas[0].read_queue_nums == 8


def test_a_slave_is_told_its_live_master_and_a_master_nothing() -> None:
    table = RouteTable()
    assert table.register_broker(
        "c1", "broker-a", A, 0, ha_server_addr="10.0.0.1:10912", now_ms=0
    ) == RegisterResult(None, None)
    assert table.register_broker("c1", "broker-a", B, 2, now_ms=0) == RegisterResult(
        A, "10.0.0.1:10912"
    )


def test_a_slave_of_a_group_without_master_is_told_nothing() -> None:
    table = RouteTable()
    assert table.register_broker("c1", "broker-a", B, 2, now_ms=0) == RegisterResult(None, None)


def test_failover_remaps_ids() -> None:
    """spec-broker 5.4: old master 0 -> A; new leader registers 0 -> B and its old entry 2 -> B
    is removed; A, when it returns, registers as 1 -> A (DLedger: selfIdNumber 0, plus 1)."""
    table = RouteTable()
    group_of_three(table, term=1)
    assert members(table) == {0: A, 2: B, 3: C}
    table.register_broker("c1", "broker-a", B, 0, topic_configs=TOPICS, term=2, now_ms=10)
    assert members(table) == {0: B, 3: C}
    assert table.register_broker("c1", "broker-a", A, 1, now_ms=20) == RegisterResult(B, "")
    assert members(table) == {0: B, 1: A, 3: C}
    assert table.master_term("broker-a") == 2


def test_a_stale_master_with_a_lower_term_cannot_take_id_0() -> None:
    table = RouteTable()
    group_of_three(table, term=5)
    table.register_broker("c1", "broker-a", C, 3, term=6, now_ms=9)  # C follows B in term 6
    table.register_broker("c1", "broker-a", B, 0, term=6, now_ms=10)
    result = table.register_broker(
        "c1", "broker-a", A, 0, topic_configs={"X": TopicConfig("X")}, term=5, now_ms=20
    )
    assert not result.accepted
    assert (result.master_addr, result.ha_server_addr) == (B, "")
    assert "stale master claim" in result.refusal
    assert members(table) == {0: B, 3: C}
    assert table.route("X") is None  # the refused claim changed nothing, topics included
    assert table.master_term("broker-a") == 6


def test_the_epoch_outlives_the_master_entry_while_the_group_exists() -> None:
    table = RouteTable()
    group_of_three(table, term=5)
    table.register_broker("c1", "broker-a", B, 0, term=6, now_ms=0)
    table.register_broker("c1", "broker-a", C, 3, term=6, now_ms=0)
    table.channel_closed(B)  # the real master's connection drops; C is still a member
    assert members(table) == {3: C}
    assert not table.register_broker("c1", "broker-a", A, 0, term=5, now_ms=1).accepted
    assert members(table) == {3: C}


def test_the_epoch_is_forgotten_with_the_group() -> None:
    """A group rebuilt from empty stores starts its terms again; it must not be locked out."""
    table = RouteTable()
    table.register_broker("c1", "broker-a", A, 0, term=9, now_ms=0)
    table.channel_closed(A)
    assert table.broker_data("broker-a") is None
    assert table.register_broker("c1", "broker-a", B, 0, term=1, now_ms=1).accepted
    assert members(table) == {0: B}


def test_a_higher_term_claim_replaces_the_master() -> None:
    table = RouteTable()
    table.register_broker("c1", "broker-a", A, 0, term=3, now_ms=0)
    table.register_broker("c1", "broker-a", B, 0, term=4, now_ms=1)
    assert members(table) == {0: B}
    assert table.master_term("broker-a") == 4


def test_equal_terms_and_groups_without_terms_follow_rocketmq_last_writer_wins() -> None:
    table = RouteTable()
    table.register_broker("c1", "broker-a", A, 0, term=3, now_ms=0)
    assert table.register_broker("c1", "broker-a", B, 0, term=3, now_ms=1).accepted
    assert members(table) == {0: B}
    table.register_broker("c1", "broker-j", A, 0, now_ms=2)  # Java brokers send no term
    assert table.register_broker("c1", "broker-j", C, 0, now_ms=3).accepted
    assert members(table, "broker-j") == {0: C}
    assert table.master_term("broker-j") is None


def test_a_claim_without_term_cannot_displace_a_master_with_one() -> None:
    table = RouteTable()
    group_of_three(table, term=3)
    result = table.register_broker("c1", "broker-a", "6.6.6.6:1", 0, now_ms=1)
    assert not result.accepted
    assert "without a term" in result.refusal
    assert members(table) == {0: A, 2: B, 3: C}
    table.channel_closed(A)  # no live master: RocketMQ's rule again
    assert table.register_broker("c1", "broker-a", C, 0, now_ms=2).accepted


def test_the_current_master_re_registering_is_always_taken() -> None:
    table = RouteTable()
    table.register_broker("c1", "broker-a", A, 0, term=7, now_ms=0)
    assert table.register_broker("c1", "broker-a", A, 0, term=7, now_ms=1).accepted
    assert table.register_broker("c1", "broker-a", A, 0, now_ms=2).accepted  # no term: kept
    assert table.master_term("broker-a") == 7


X = "6.6.6.6:10911"  # an address no replica of broker-a has


def test_a_forged_claim_with_an_incredible_term_is_refused() -> None:
    """Issue 13 item 7: one REGISTER_BROKER claiming id 0 with ledgerTerm=999999 locked the group
    out (the real master's lower-term claims were refused). Now it is not believed, whoever's
    address it names, and the real master's route is kept."""
    table = RouteTable()
    group_of_three(table, term=5)
    for addr in (X, B):  # a new address, and a slave's
        result = table.register_broker(
            "c1", "broker-a", addr, 0, topic_configs={"X": TopicConfig("X")}, term=999999, now_ms=1
        )
        assert not result.accepted
        assert result.master_addr == A
        assert "not believed" in result.refusal
    assert not table.register_broker("c1", "broker-a", X, 2, term=999999, now_ms=1).accepted
    assert members(table) == {0: A, 2: B, 3: C}
    assert table.master_term("broker-a") == 5
    assert table.route("X") is None
    assert table.register_broker("c1", "broker-a", A, 0, term=5, now_ms=2).accepted


def test_a_legitimate_term_jump_is_believed_once_the_other_replicas_confirm_it() -> None:
    """Issue 27 item 5: after an election livelock took a group from term 7 to 359, both
    NameServers refused the real master for about 61 s ("term 359 is more than 100 above ...;
    not believed"). Now a jump that a majority of the group's members claim is believed: the
    replicas retry a refused registration every second, so the master is back within about a
    second. A single forged registration (or one member's) still is not believed."""
    table = RouteTable()
    group_of_three(table, term=7)
    # the group jumped: B won term 359, A and C follow it; every registration claims 359
    first = table.register_broker("c1", "broker-a", B, 0, topic_configs=TOPICS, term=359, now_ms=1)
    assert not first.accepted
    assert "not believed" in first.refusal
    assert table.register_broker("c1", "broker-a", C, 3, term=359, now_ms=2).accepted
    result = table.register_broker(
        "c1", "broker-a", B, 0, topic_configs=TOPICS, term=359, now_ms=1001
    )
    assert result.accepted
    assert members(table) == {0: B, 3: C}
    assert table.master_term("broker-a") == 359
    assert table.register_broker("c1", "broker-a", A, 1, term=359, now_ms=1002).accepted
    assert members(table) == {0: B, 1: A, 3: C}


def test_a_lone_forged_jump_is_not_confirmed_by_repeating_it_or_by_old_claims() -> None:
    """Confirmation needs other members: repeating a claim from one address, or a claim that
    the others made long ago (older than CLAIM_MEMORY_MS), does not make it credible."""
    table = RouteTable()
    group_of_three(table, term=5)
    for now in range(1, 6):
        assert not table.register_broker("c1", "broker-a", X, 0, term=999999, now_ms=now).accepted
        assert not table.register_broker("c1", "broker-a", B, 0, term=999999, now_ms=now).accepted
    assert members(table) == {0: A, 2: B, 3: C}
    for i in range(50):  # forged addresses are no members: nothing of theirs is kept
        table.register_broker("c1", "broker-a", f"6.6.6.{i}:1", 2, term=999999, now_ms=6)
    assert not table.register_broker("c1", "broker-a", X, 0, term=999999, now_ms=7).accepted
    table.register_broker("c1", "broker-a", C, 3, term=400, now_ms=10)
    result = table.register_broker("c1", "broker-a", A, 0, term=400, now_ms=10 + 30_001)
    assert not result.accepted
    assert table.master_term("broker-a") == 5


def test_a_claim_cannot_confirm_itself_when_its_claimant_is_the_only_member_left() -> None:
    """Found in review: the claimant counted as one backer of a majority sized from the
    members with a term, so once the master had left and one follower remained, one forged
    registration in that follower's name (id 0, a term far above the group's) was believed."""
    table = RouteTable()
    group_of_three(table, term=7)
    table.unregister_broker("c1", "broker-a", A, 0)
    table.unregister_broker("c1", "broker-a", C, 3)
    assert not table.register_broker("c1", "broker-a", B, 0, term=999999, now_ms=1).accepted
    assert table.master_term("broker-a") == 7


def test_a_forged_claim_with_a_credible_term_cannot_keep_id_0() -> None:
    """A forged claim one term ahead is believed for a moment, but the real master's next
    registration takes id 0 back (no third replica has gone past its term), and failover still
    works afterwards: a new leader with a higher term takes over, the old one is refused."""
    table = RouteTable()
    group_of_three(table, term=5)
    assert table.register_broker("c1", "broker-a", X, 0, term=6, now_ms=1).accepted
    assert members(table)[0] == X
    assert table.register_broker("c1", "broker-a", A, 0, term=5, now_ms=2).accepted
    assert members(table) == {0: A, 2: B, 3: C}
    assert table.master_term("broker-a") == 5
    # a real failover: C follows B in term 6, B takes id 0; A (term 5) comes back and is refused
    table.register_broker("c1", "broker-a", C, 3, term=6, now_ms=3)
    assert table.register_broker("c1", "broker-a", B, 0, term=6, now_ms=4).accepted
    assert not table.register_broker("c1", "broker-a", A, 0, term=5, now_ms=5).accepted
    assert members(table) == {0: B, 3: C}
    assert table.register_broker("c1", "broker-a", A, 1, term=6, now_ms=6).accepted
    assert members(table) == {0: B, 1: A, 3: C}


def test_a_forged_claim_made_before_the_group_registered_does_not_lock_it_out() -> None:
    table = RouteTable()
    assert table.register_broker("c1", "broker-a", X, 0, term=999999, now_ms=0).accepted
    table.register_broker("c1", "broker-a", B, 2, term=5, now_ms=1)
    table.register_broker("c1", "broker-a", C, 3, term=5, now_ms=1)
    result = table.register_broker("c1", "broker-a", A, 0, topic_configs=TOPICS, term=5, now_ms=2)
    assert result.accepted
    assert members(table) == {0: A, 2: B, 3: C}
    assert table.master_term("broker-a") == 5


def test_reported_terms_leave_with_their_address() -> None:
    table = RouteTable()
    group_of_three(table, term=5)
    assert table.reported_terms("broker-a") == {A: 5, B: 5, C: 5}
    table.channel_closed(B)
    table.unregister_broker("c1", "broker-a", C, 3)
    table.register_broker("c1", "broker-a", A, 0, now_ms=1)  # no term: nothing reported
    assert table.reported_terms("broker-a") == {}


def test_silent_brokers_expire_after_their_timeout() -> None:
    table = RouteTable()
    group_of_three(table, now_ms=0)
    table.register_broker("c1", "broker-a", C, 3, heartbeat_timeout_ms=121_000, now_ms=1_000)
    assert table.scan_not_active(120_000) == []  # silent exactly the timeout: still live
    assert table.scan_not_active(120_001) == [
        RemovedBroker("c1", "broker-a", 0, A),
        RemovedBroker("c1", "broker-a", 2, B),
    ]
    assert members(table) == {3: C}
    route = table.route("T")
    assert route is not None  # slaves keep the group's queue data readable
    assert route.broker_datas[0].master_addr is None
    assert table.scan_not_active(122_000) == []
    assert table.scan_not_active(122_001) == [RemovedBroker("c1", "broker-a", 3, C)]
    assert table.route("T") is None
    assert table.cluster_info().broker_addr_table == {}
    assert table.cluster_info().cluster_addr_table == {}
    assert table.topic_list().topics == ()


def test_a_refreshed_broker_does_not_expire() -> None:
    table = RouteTable()
    table.register_broker("c1", "broker-a", A, 0, now_ms=0)
    table.register_broker("c1", "broker-a", A, 0, now_ms=100_000)
    assert table.scan_not_active(200_000) == []
    assert table.is_live(A)


def test_a_closed_channel_removes_the_address_at_once() -> None:
    table = RouteTable()
    group_of_three(table)
    assert table.channel_closed(A) == [RemovedBroker("c1", "broker-a", 0, A)]
    assert members(table) == {2: B, 3: C}
    assert not table.is_live(A)
    assert table.channel_closed(A) == []


def test_unregister_removes_only_a_matching_entry() -> None:
    table = RouteTable()
    group_of_three(table)
    table.register_broker("c1", "broker-a", B, 0, term=2, now_ms=1)
    assert table.unregister_broker("c1", "broker-a", A, 0) == []  # a late goodbye from A
    assert members(table) == {0: B, 3: C}
    assert table.unregister_broker("c1", "broker-a", B, 0) == [
        RemovedBroker("c1", "broker-a", 0, B)
    ]
    table.unregister_broker("c1", "broker-a", C, 3)
    assert table.broker_data("broker-a") is None
    assert table.route("T") is None


def test_routes_span_groups_and_list_only_groups_holding_the_topic() -> None:
    table = RouteTable()
    table.register_broker(
        "c1", "broker-b", B, 0, topic_configs={"T": TopicConfig("T", 2, 2)}, now_ms=0
    )
    table.register_broker(
        "c1", "broker-a", A, 0, topic_configs={"T": TopicConfig("T", 4, 4)}, now_ms=0
    )
    table.register_broker("c2", "broker-c", C, 0, topic_configs={"V": TopicConfig("V")}, now_ms=0)
    route = table.route("T")
    assert route is not None
    assert [q.broker_name for q in route.queue_datas] == ["broker-a", "broker-b"]
    assert [b.broker_name for b in route.broker_datas] == ["broker-a", "broker-b"]
    info = table.cluster_info()
    assert info.cluster_addr_table == {"c1": ("broker-a", "broker-b"), "c2": ("broker-c",)}
    assert list(info.broker_addr_table) == ["broker-a", "broker-b", "broker-c"]
    assert table.topic_list().topics == ("T", "V")


def test_delete_topic_everywhere_or_in_one_cluster() -> None:
    table = RouteTable()
    table.register_broker("c1", "broker-a", A, 0, topic_configs={"T": TopicConfig("T")}, now_ms=0)
    table.register_broker("c2", "broker-c", C, 0, topic_configs={"T": TopicConfig("T")}, now_ms=0)
    assert table.delete_topic("T", "c1")
    route = table.route("T")
    assert route is not None
    assert [b.broker_name for b in route.broker_datas] == ["broker-c"]
    assert not table.delete_topic("T", "nope")
    assert table.delete_topic("T")
    assert table.route("T") is None
    assert not table.delete_topic("T")


def test_data_version_and_ha_address_are_kept_per_address() -> None:
    table = RouteTable()
    table.register_broker(
        "c1", "broker-a", A, 0, data_version=DataVersion(0, 1, 2), ha_server_addr="h:1", now_ms=0
    )
    assert table.register_broker("c1", "broker-a", B, 2, now_ms=0).ha_server_addr == "h:1"


# ---------------------------------------------------------------------------------- invariants
Operation = tuple[str, str, str, int, "int | None"]
"""(kind, broker name, address, broker id or ms to advance, term): one shape for every kind."""

operations = st.lists(
    st.tuples(
        st.sampled_from(["register", "register", "unregister", "closed", "scan"]),
        st.sampled_from(["broker-a", "broker-b"]),
        st.sampled_from([A, B, C, "10.0.0.4:10911"]),
        st.integers(0, 3),
        st.none() | st.integers(0, 5),
    ),
    max_size=40,
)


@given(operations)
def test_the_table_stays_consistent_under_any_operations(ops: list[Operation]) -> None:
    table = RouteTable()
    now = 0
    for kind, name, addr, number, term in ops:
        if kind == "register":
            now += 1_000
            topics = {f"T-{name}": TopicConfig(f"T-{name}")}
            table.register_broker(
                "c1", name, addr, number, topic_configs=topics, heartbeat_timeout_ms=5_000,
                term=term, now_ms=now,
            )  # fmt: skip
        elif kind == "unregister":
            table.unregister_broker("c1", name, addr, number)
        elif kind == "closed":
            table.channel_closed(addr)
        else:
            now += number * 2_000
            table.scan_not_active(now)
        info = table.cluster_info()
        for group, data in info.broker_addr_table.items():
            addrs = list(data.broker_addrs.values())
            assert addrs, f"{group} is listed without members"
            assert len(addrs) == len(set(addrs)), f"an address holds two ids in {group}"
            assert group in info.cluster_addr_table[data.cluster]
        for topic in table.topic_list().topics:
            route = table.route(topic)
            assert route is not None
            assert {q.broker_name for q in route.queue_datas} <= set(info.broker_addr_table)


def test_a_wiped_group_is_routed_read_only_until_write_is_added_back() -> None:
    table = RouteTable()
    group_of_three(table)
    assert table.wipe_write_perm("broker-a") == len(TOPICS)
    for topic in TOPICS:
        route = table.route(topic)
        assert route is not None
        assert all(not q.perm & PERM_WRITE and q.perm & PERM_READ for q in route.queue_datas)
    # the master's next registration (every 30 s) does not undo the operator's wipe
    table.register_broker("c1", "broker-a", A, 0, topic_configs=TOPICS, term=1, now_ms=5)
    route = table.route("T")
    assert route is not None
    assert not route.queue_datas[0].perm & PERM_WRITE
    assert table.add_write_perm("broker-a") == len(TOPICS)
    route = table.route("T")
    assert route is not None
    assert route.queue_datas[0].perm & PERM_WRITE
    assert table.wipe_write_perm("no-such-group") == 0


def test_the_route_version_moves_with_every_route_change_and_only_then() -> None:
    """Clients poll ``version`` every second and fetch routes when it moves (issue 27): a
    periodic re-registration that changes nothing must not move it; a new master, new queues,
    a wiped write permission, a lost member and a deleted topic must."""
    table = RouteTable()
    group_of_three(table)
    seen = table.version
    group_of_three(table)  # the 30 s re-registration
    assert table.version == seen
    changes: list[Callable[[], object]] = [
        lambda: table.register_broker("c1", "broker-a", B, 0, topic_configs=TOPICS, term=2,
                                      now_ms=1),  # a transferred leader
        lambda: table.register_broker("c1", "broker-a", B, 0, topic_configs={
            **TOPICS, "T": TopicConfig("T", 8, 8)}, term=2, now_ms=1),  # more queues
        lambda: table.wipe_write_perm("broker-a"),
        lambda: table.add_write_perm("broker-a"),
        lambda: table.channel_closed(C),
        lambda: table.delete_topic("U"),
    ]  # fmt: skip
    for change in changes:
        change()
        assert table.version > seen
        seen = table.version
