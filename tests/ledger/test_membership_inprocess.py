"""Membership changes through ledger servers in one process (issue 27 item 1, the replica side):
a replica added as a learner at a new address is promoted and an old one removed, the
membership is persisted on every replica and wins over a broker.conf that disagrees (one
WARNING naming both), and a replica that was never added is refused with a log line on both
sides."""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING

import pytest

from ledgermq.ledger.config import LedgerConfig
from ledgermq.ledger.membership import ReplicaMembership, read_membership
from ledgermq.ledger.replica_view import replication_fields
from ledgermq.ledger.server import LedgerServer
from ledgermq.net import MemoryNetwork
from ledgermq.raft import Membership, MembershipRecord, MembershipState, Role

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from pathlib import Path

pytestmark = pytest.mark.timeout(60)

PEERS = {"n0": ("10.0.0.1", 40911), "n1": ("10.0.0.2", 40911), "n2": ("10.0.0.3", 40911)}
NEW = ("10.0.0.4", 40911)


def _server(
    tmp: Path, network: MemoryNetwork, node: str, peers: Mapping[str, tuple[str, int]]
) -> LedgerServer:
    config = LedgerConfig(
        group="g",
        self_id=node,
        peers=peers,
        store_base_dir=os.fspath(tmp),
        data_segment_bytes=1 << 20,
    )
    return LedgerServer(config, network=network)


async def _until(check: Callable[[], bool], what: str, timeout_s: float = 15) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while loop.time() < deadline:
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting until {what}")


def _leader(servers: Mapping[str, LedgerServer]) -> LedgerServer | None:
    leaders = [s for s in servers.values() if s.core.role is Role.LEADER]
    return leaders[0] if len(leaders) == 1 and leaders[0].store.committed_index >= 0 else None


def test_replace_a_replica_then_restart_with_a_stale_config(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def test() -> None:
        network = MemoryNetwork()
        servers = {n: _server(tmp_path, network, n, PEERS) for n in PEERS}
        for server in servers.values():
            await server.start()
        try:
            await _until(lambda: _leader(servers) is not None, "a leader")
            leader = _leader(servers)
            assert leader is not None
            await leader.append([b"before"])
            # replica-add: a learner at a new address; it starts with the members plus itself
            index = await leader.change_membership("add", "n3", f"{NEW[0]}:{NEW[1]}")
            servers["n3"] = _server(tmp_path, network, "n3", {**PEERS, "n3": NEW})
            await servers["n3"].start()
            rows = {r["id"]: r for r in leader.member_rows()}
            assert rows["n3"]["role"] == "learner"
            assert rows["n3"]["address"] == "10.0.0.4:40911"
            await _until(lambda: "n3" in leader.core.membership.voters, "n3 is promoted")
            # replica-remove of a follower that is not the leader
            old = next(n for n in PEERS if n != leader.config.self_id)
            await _until(lambda: leader.core.membership_change_refusal() is None, "a change may go")
            await leader.change_membership("remove", old)
            await leader.append([b"after"])
            survivors = [n for n in servers if n != old]
            await _until(
                lambda: all(
                    read_membership(servers[n].config.store_dir) is not None
                    and old not in servers[n].core.membership.members
                    for n in survivors
                ),
                "every member persisted the change",
            )
            record = read_membership(servers["n3"].config.store_dir)
            assert record is not None
            assert record.index > index
            assert record.membership.address_of("n3") == "10.0.0.4:40911"
            after = {str(r["id"]): r for r in leader.member_rows()}
            assert sorted(after) == sorted(survivors)
            assert {r["role"] for r in after.values()} == {"leader", "follower"}
            # a restart with the old broker.conf (n0 n1 n2): one WARNING, the persisted wins
            restarted = next(n for n in survivors if n != "n3")
            await servers[restarted].close()
            caplog.clear()
            with caplog.at_level(logging.WARNING, logger="ledgermq.ledger"):
                servers[restarted] = _server(tmp_path, network, restarted, PEERS)
                await servers[restarted].start()
            warnings = [r.getMessage() for r in caplog.records if "differs" in r.getMessage()]
            assert len(warnings) == 1
            assert "n1-10.0.0.2:40911" in warnings[0]
            assert "n3-10.0.0.4:40911" in warnings[0]
            assert servers[restarted].core.membership.members == tuple(sorted(survivors))
        finally:
            for server in servers.values():
                await server.close()

    asyncio.run(asyncio.wait_for(test(), 50))


def test_a_replica_never_added_is_refused_with_a_log_line_on_both_sides(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def test() -> None:
        network = MemoryNetwork()
        servers = {n: _server(tmp_path, network, n, PEERS) for n in PEERS}
        for server in servers.values():
            await server.start()
        try:
            await _until(lambda: _leader(servers) is not None, "a leader")
            with caplog.at_level(logging.WARNING, logger="ledgermq.ledger"):
                stranger = _server(tmp_path, network, "n9", {**PEERS, "n9": NEW})
                servers["n9"] = stranger
                await stranger.start()

                def logged() -> bool:
                    text = caplog.text
                    return "n9 asked for votes but is not a member" in text and (
                        "refused this replica (n9) as not a member" in text
                    )

                await _until(logged, "both sides logged the refusal")
            assert stranger.core.role is not Role.LEADER
            assert all(
                "n9" not in s.core.membership.members for n, s in servers.items() if n != "n9"
            )
        finally:
            for server in servers.values():
                await server.close()

    asyncio.run(asyncio.wait_for(test(), 50))


def test_an_address_with_non_ascii_digits_is_ignored_not_raised() -> None:
    """A committed CONFIG_CHANGE is read on every replica: an address whose port is digits
    Python's ``int`` refuses (``"²"`` is ``isdigit``) is skipped, never raised out of the
    server's Ready loop on all of them (before: ValueError)."""
    replica = ReplicaMembership("g", "n0", PEERS, None)
    odd = Membership(("n0", "n1", "n2")).with_learner("n3", "10.0.0.4:4²")
    record = MembershipRecord(1, odd, 1)
    replica.persist(MembershipState(record, record))
    assert "n3" not in replica.addresses
    assert replica.addresses["n1"] == PEERS["n1"]


def test_metrics_and_the_replica_view_follow_a_membership_change(tmp_path: Path) -> None:
    """``ledgermq_raft_members{role}``, the learner's catch-up lag, the changes counter and the
    runtime-info fields ``dLegerPeerIds`` / ``dLegerLearnerIds`` follow an add (a learner),
    its promotion and a removal; a removed member's lag series is gone. Before, the view
    listed the ``dLegerPeers`` a replica started with and the lag series only those."""

    async def test() -> None:
        network = MemoryNetwork()
        servers = {n: _server(tmp_path, network, n, PEERS) for n in PEERS}
        for server in servers.values():
            await server.start()
        try:
            await _until(lambda: _leader(servers) is not None, "a leader")
            leader = _leader(servers)
            assert leader is not None
            me = leader.config.self_id
            labels = {"cluster": "", "broker": "g", "replica": me}

            def sample(name: str, **extra: str) -> float | None:
                return leader.metrics.registry.get_sample_value(name, {**labels, **extra})

            def members(role: str) -> float | None:
                return sample("ledgermq_raft_members", role=role)

            await leader.change_membership("add", "n3", f"{NEW[0]}:{NEW[1]}")
            await _until(lambda: members("learner") == 1, "one learner in the metrics")
            assert members("voter") == 3
            assert sample("ledgermq_raft_learner_lag_entries", learner="n3") is not None
            assert sample("ledgermq_raft_membership_changes_total") == 1
            view = replication_fields(leader.core)
            assert view["dLegerLearnerIds"] == "n3"
            assert view["dLegerPeerIds"] == "n0,n1,n2"
            servers["n3"] = _server(tmp_path, network, "n3", {**PEERS, "n3": NEW})
            await servers["n3"].start()
            await _until(lambda: members("voter") == 4, "n3 promoted in the metrics")
            assert members("learner") == 0
            assert sample("ledgermq_raft_learner_lag_entries", learner="n3") is None
            assert replication_fields(leader.core)["dLegerPeerIds"] == "n0,n1,n2,n3"
            old = next(n for n in PEERS if n != me)
            await _until(lambda: leader.core.membership_change_refusal() is None, "a change may go")
            await leader.change_membership("remove", old)
            await _until(lambda: members("voter") == 3, "the removal in the metrics")
            await _until(
                lambda: sample("ledgermq_replication_lag_entries", follower=old) is None,
                "the removed member's lag series gone",
            )
            assert sample("ledgermq_replication_lag_entries", follower="n3") is not None
            assert sample("ledgermq_raft_membership_changes_total") == 3
            assert old not in replication_fields(leader.core)["dLegerPeerIds"].split(",")
        finally:
            for server in servers.values():
                await server.close()

    asyncio.run(asyncio.wait_for(test(), 50))
