"""Where each broker group's master should be, and a survey of the groups to decide it from.

Several broker groups often share hosts (three machines, each running one replica of every
group). Left alone, the masters pile up on whichever host was up first, and that host then
takes every write. Two ways to spread them, as operators of Kafka and DLedger know them:

- a **preferred leader** per group (``preferredLeaderId``, as DLedger's ``preferredLeaderIds``):
  the group's leader hands over to it whenever it is caught up, checked every second; it is a
  ``broker.conf`` key of every replica, changed live by ``admin set-preferred-leader``;
- **balance-leaders** (Kafka's preferred-replica election, an explicit command): every group
  with a preference goes to its preferred replica; the others are spread so that no host leads
  more groups than it must (``plan_leaders``), moving as few masters as possible.

``survey`` asks every replica the NameServer knows for its runtime info (role, ledger peers,
preference): ``cluster-list``, ``set-preferred-leader``, ``transfer-leader`` and
``balance-leaders`` read the same picture, including the replicas that do not answer, the
members no replica registered and the replicas whose peer lists differ.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ledgermq.errors import LedgerMQError

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from ledgermq.client.admin import Admin

__all__ = [
    "GroupShape",
    "GroupSurvey",
    "ReplicaAnswer",
    "host_of",
    "plan_leaders",
    "survey",
]


def host_of(address: str) -> str:
    """The host part of ``host:port`` (``[v6]:port`` too): what "sharing a host" compares."""
    host = address.rpartition(":")[0] or address
    return host.strip("[]")


@dataclass(frozen=True, slots=True)
class ReplicaAnswer:
    """One registered replica and what it said of itself (``info``), or why it did not."""

    broker_id: int
    address: str
    info: Mapping[str, str] | None
    error: str | None = None

    @property
    def replica(self) -> str | None:
        """Its ledger id (``dLegerSelfId``) when it answered."""
        return None if self.info is None else self.info.get("dLegerSelfId") or None

    @property
    def is_master(self) -> bool:
        """``brokerRole`` is RocketMQ's: ``ASYNC_MASTER`` / ``SYNC_MASTER`` or ``SLAVE``."""
        return self.info is not None and self.info.get("brokerRole", "").endswith("MASTER")

    @property
    def peers(self) -> tuple[str, ...]:
        """The ledger peers it reports (``n0-host:port`` each), sorted."""
        raw = "" if self.info is None else self.info.get("dLegerPeers", "")
        return tuple(sorted(p for p in raw.split(";") if p))

    @property
    def preferred(self) -> str:
        return "" if self.info is None else self.info.get("preferredLeaderId", "")


@dataclass(frozen=True, slots=True)
class GroupSurvey:
    """One broker group as its registered replicas describe it."""

    cluster: str
    name: str
    answers: tuple[ReplicaAnswer, ...]

    @property
    def master(self) -> ReplicaAnswer | None:
        return next((a for a in self.answers if a.is_master), None)

    @property
    def members(self) -> dict[str, str]:
        """Every ledger member any replica reports: id -> ledger address."""
        members: dict[str, str] = {}
        for answer in self.answers:
            for peer in answer.peers:
                replica, _, address = peer.partition("-")
                members.setdefault(replica, address)
        return dict(sorted(members.items()))

    @property
    def missing(self) -> list[str]:
        """Members some replica lists that did not answer for themselves (not registered with
        the NameServer, or registered and unreachable)."""
        answered = {a.replica for a in self.answers if a.replica}
        return [m for m in self.members if m not in answered]

    @property
    def membership_differs(self) -> bool:
        """The replicas that answered do not all report the same peer list."""
        return len({a.peers for a in self.answers if a.info is not None and a.peers}) > 1

    @property
    def preferred(self) -> dict[str, str]:
        """Replica id -> its ``preferredLeaderId`` ('' for none), of those that answered."""
        return {a.replica: a.preferred for a in self.answers if a.replica}

    def hosts(self) -> dict[str, str]:
        """Replica id -> host, of the replicas that answered (where a master can go now)."""
        return {a.replica: host_of(a.address) for a in self.answers if a.replica}

    def address_of(self, replica: str) -> str | None:
        return next((a.address for a in self.answers if a.replica == replica), None)


async def survey(admin: Admin, cluster: str | None = None) -> list[GroupSurvey]:
    """Every broker group of ``cluster`` (None: all) the NameServer knows, each registered
    replica asked at once for its runtime info; one that does not answer is kept with the
    reason (``ReplicaAnswer.error``), never raised."""
    info = await admin.cluster_info()

    async def ask(broker_id: int, address: str) -> ReplicaAnswer:
        try:
            return ReplicaAnswer(broker_id, address, await admin.broker_runtime_info(address))
        except (LedgerMQError, OSError) as exc:
            return ReplicaAnswer(broker_id, address, None, f"{type(exc).__name__}: {exc}")

    groups: list[GroupSurvey] = []
    for cluster_name, names in sorted(info.cluster_addr_table.items()):
        if cluster is not None and cluster_name != cluster:
            continue
        for name in sorted(names):
            data = info.broker_addr_table.get(name)
            if data is None:
                continue
            answers = await asyncio.gather(
                *(ask(i, a) for i, a in sorted(data.broker_addrs.items()))
            )
            groups.append(GroupSurvey(cluster_name, name, tuple(answers)))
    return groups


@dataclass(slots=True)
class _Choice:
    group: str
    hosts: dict[str, str]
    target: str
    fixed: bool


GroupShape = tuple[str, "Mapping[str, str]", "str | None", str]
"""``(group, {replica: host}, leader or None, preferred)``: a group as ``plan_leaders`` sees it."""


def plan_leaders(groups: Iterable[GroupSurvey | GroupShape]) -> dict[str, str]:
    """Group -> the replica that should lead it; groups without a master are left out.

    Accepts surveys or plain ``(group, {replica: host}, leader or None, preferred)`` tuples
    (the pure form the unit tests use). The rule:

    1. a group whose replicas answer and that has a preferred leader among them goes there;
    2. every other group starts where its master is, and a master moves to a replica on a
       host that leads at least two groups fewer than its own, the least loaded first (ties:
       by replica id), until no move helps. So masters spread as evenly as the replicas'
       hosts allow, and a group moves only when its host leads more than its share; the
       order of the groups does not change the outcome's counts.
    """
    choices: list[_Choice] = []
    for item in groups:
        if isinstance(item, GroupSurvey):
            master = item.master
            name, hosts = item.name, item.hosts()
            leader = master.replica if master is not None else None
            prefs = [p for p in item.preferred.values() if p]
            preferred = prefs[0].split(";")[0] if prefs else ""
        else:
            name, hosts_map, leader, preferred = item
            hosts = dict(hosts_map)
            preferred = preferred.split(";")[0] if preferred else ""
        if leader is None or leader not in hosts:
            continue
        if preferred and preferred in hosts:
            choices.append(_Choice(name, hosts, preferred, fixed=True))
        else:
            choices.append(_Choice(name, hosts, leader, fixed=False))
    load: dict[str, int] = {}
    for choice in choices:
        for host in choice.hosts.values():
            load.setdefault(host, 0)
        host = choice.hosts[choice.target]
        load[host] += 1
    moved = True
    while moved:
        moved = False
        for choice in sorted(choices, key=lambda c: c.group):
            if choice.fixed:
                continue
            here = choice.hosts[choice.target]
            best = min(choice.hosts, key=lambda r: (load[choice.hosts[r]], r))
            there = choice.hosts[best]
            if load[there] + 1 < load[here]:
                load[here] -= 1
                load[there] += 1
                choice.target = best
                moved = True
    return {c.group: c.target for c in sorted(choices, key=lambda c: c.group)}
