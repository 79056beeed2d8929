"""The NameServer's route table, as a pure object: no I/O, no clock (time comes in as ``now_ms``).

Theory of operation (RocketMQ's ``RouteInfoManager``; spec-broker.md sections 5.4 and 7):

- A *broker group* is one ``brokerName`` (in DLedger mode, one Raft group). Its members map a
  broker id to an address; id 0 is the master. In DLedger mode the leader registers as 0 and a
  follower as ``selfIdNumber + 1`` (``DLedgerCommitLog.id``), so ids change on failover.
- **Registration** (``register_broker``), in RocketMQ's order:
  1. every entry of the group with the *same address but another id* is removed ("switch slave
     to master: first remove <1, IP:PORT>, then add <0, IP:PORT>"), then ``id -> address`` is
     put, so a new master replaces the old master's id-0 entry;
  2. only the master's (id 0) topic configs update the topics' queue data; a slave's table is a
     copy of its master's and is ignored;
  3. the address's liveness record is refreshed (last heard, timeout, HA address);
  4. a non-master is answered with its group's master address and HA address, if that master is
     still live; a master is answered with nothing.
- **Liveness**: an address not heard from for longer than its heartbeat timeout (default
  120 s) is removed by ``scan_not_active``; a closed connection removes at once
  (``channel_closed``). Removing an address deletes every ``id -> address`` entry holding it;
  a group left empty disappears, with its queue data in every topic. A group whose master has
  gone but whose slaves remain keeps its queue data, so consumers can still read from slaves.
- **Routes** list, for a topic, the queue data of each group holding it and those groups'
  members. During failover a group may briefly have no id 0 (it is listed with its slaves) or a
  stale id 0 (the old master, until it expires or its connection closes).

Our improvement over RocketMQ: the master claim is ordered by the Raft term, and no single
unauthenticated registration can lock a group out (authentication comes later; until then any
client that reaches the NameServer can send REGISTER_BROKER). Every registration may carry the
sender's ledger ``term`` (LedgerMQ brokers send it with every registration, master or slave). The
table keeps, per group:

- the *reported term* of every live member address: the term of its last accepted registration
  (forgotten when the address leaves: expiry, closed connection, unregister);
- the *master epoch*: the term of the last accepted master claim, for as long as the group
  exists, even while it has no id 0.

A registration is refused (and changes nothing, topics included) when:

1. **its term is not credible**: more than ``MAX_TERM_LEAD`` above every term the rest of the
   group reported (the other members' reported terms and, unless it is the master itself, the
   master epoch), and not *confirmed*. Raft terms grow by one per election round, so a real
   new leader's term is usually close to what its followers and the old master reported;
   ``ledgerTerm=999999`` is not. But a real group can jump (an election livelock took one from
   term 7 to 359, issue 27), and then every replica's registration is far above what the table
   holds. So a claim is confirmed, and taken, when a majority of the group's members (the
   claimant and the live addresses with a reported term) have each claimed, within the last
   ``CLAIM_MEMORY_MS``, a term within ``MAX_TERM_LEAD`` of it (refused claims are remembered
   for this). The replicas of a group that jumped all register in the new term and
   retry a refused registration every second, so the real master is believed within about a
   second; a single forged registration is one address, never a majority. With no other
   member and no epoch there is nothing to judge by, and the claim is taken;
2. **it is a stale master claim**: a claim for id 0 from another address than the current
   master's, with a term below the epoch, while some *third* member (neither the claimant nor
   the current master) reported a term above the claim's. That is an ex-master that has not yet
   noticed it lost leadership: in Raft a new leader's followers are in its term, and a
   LedgerMQ follower re-registers as soon as it follows a new leader;
3. **it is a master claim without a term against a live master that has one** (a group's
   replicas run the same software, so a term-less claim in a group that reports terms is not
   one of its replicas; RocketMQ's last-writer-wins applies to groups that never send terms).

Otherwise it is taken; a master claim replaces the old master's id-0 entry and sets the epoch.
Re-registration from the current master's own address is taken (rule 1 still applies).

Why this keeps the real master in the route: a forged claim either carries an incredible term
(refused by rule 1) or a credible one; a credible forged claim may take id 0, but it cannot keep
it: the real master's next registration (at once on a role change, else every 30 s) has a term
no third member has gone past, so rule 2 does not apply and the real master takes id 0 back. A
stale ex-master is refused because the real master's followers have gone past its term. What
is *not* judged here: which address a claim names (there is no reliable replica list to check
it against: the NameServer is stateless and is refilled in any order after a restart, a
replica's remoting address is not in its ledger's peer list, and a broker may move); the
NameServer binds the current master's address to its connection instead (``server.py``).
The epoch is forgotten with the group (when its last member is removed), so a group rebuilt
from empty stores, whose terms start again from 0, is not locked out. Several coordinated
forged registrations (fake members reporting high terms, or claims in the names of a majority
of the members) can still mislead the table; only authentication prevents that.

Output is ordered (sorted by group and topic name), so answers do not depend on hash order.

**Route version** (ours, issue 27): ``version`` counts the changes of what any route answers
(a group's members or master, a topic's queue data or permission, a group or topic gone). A
re-registration that changes nothing leaves it alone, so clients that poll it (once a second,
``GET_ROUTE_VERSION``) fetch their routes again only when something changed: they learn a new
master, a transferred leader, new queues or a recovered group within about a second instead of
at their 30 s refresh.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from ledgermq.wire.route import (
    MASTER_ID,
    PERM_WRITE,
    BrokerData,
    ClusterInfo,
    DataVersion,
    QueueData,
    TopicList,
    TopicRouteData,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ledgermq.wire.route import TopicConfig

__all__ = [
    "DEFAULT_BROKER_TIMEOUT_MS",
    "MAX_TERM_LEAD",
    "RegisterResult",
    "RemovedBroker",
    "RouteTable",
]

DEFAULT_BROKER_TIMEOUT_MS: Final = 120_000
"""RocketMQ's ``BROKER_CHANNEL_EXPIRED_TIME``: a broker silent this long is dropped."""

MAX_TERM_LEAD: Final = 100
"""How far (in terms) a registration's term may be above every term the rest of its group
reported before it is not believed (rule 1 of the module docstring). Each election round adds
one, so a real leader is a few terms ahead at most; 100 leaves room for a long run of split
votes and still refuses a forged ``ledgerTerm=999999``."""

CLAIM_MEMORY_MS: Final = 30_000
"""How long a refused claim's term is remembered to confirm the claims of the group's other
members (rule 1). Brokers retry a refused registration every second, so 30 s is ample."""


@dataclass(frozen=True, slots=True)
class RegisterResult:
    """What a registering broker is told (``RegisterBrokerResult``).

    ``master_addr`` and ``ha_server_addr`` are its group's live master, for a slave; None for a
    master or when the group has no live master. ``accepted`` is False for a refused
    registration (see the module docstring); ``master_addr`` then names the current master and
    ``refusal`` says why, in a sentence.
    """

    master_addr: str | None
    ha_server_addr: str | None
    accepted: bool = True
    refusal: str = ""


@dataclass(frozen=True, slots=True)
class RemovedBroker:
    """One ``id -> address`` entry taken out of a group (expiry, closed connection, unregister)."""

    cluster: str
    broker_name: str
    broker_id: int
    broker_addr: str


@dataclass(slots=True)
class _Group:
    cluster: str
    # broker id -> address; id 0 is the master. Invariant: an address appears at most once.
    addrs: dict[int, str] = field(default_factory=dict)
    # Term of the last accepted master claim that carried one; None if none did (or the last
    # accepted claim from another address had no term). Lives as long as the group.
    master_term: int | None = None
    # Member address -> the term its last accepted registration reported (live addresses only).
    terms: dict[str, int] = field(default_factory=dict)
    # Member address -> (term, when) of its last registration refused (rule 1): what confirms
    # a jump in term that every member makes. Only members' (bounded by the group's size).
    claims: dict[str, tuple[int, int]] = field(default_factory=dict)


@dataclass(slots=True)
class _Live:
    """Liveness of one broker address (``BrokerLiveInfo``)."""

    last_update_ms: int
    timeout_ms: int
    data_version: DataVersion
    ha_server_addr: str


class RouteTable:
    """Broker groups, their members, topics' queue data and liveness (see the module docstring)."""

    def __init__(self) -> None:
        self._groups: dict[str, _Group] = {}  # brokerName -> group
        self._clusters: dict[str, set[str]] = {}  # cluster -> brokerNames
        self._topics: dict[str, dict[str, QueueData]] = {}  # topic -> brokerName -> queues
        self._live: dict[str, _Live] = {}  # broker address -> liveness
        # Broker groups whose write permission an operator wiped (``wipe_write_perm``): their
        # queues are routed read-only, whatever their registrations say, until
        # ``add_write_perm``. Not persisted: a restarted NameServer routes them writable again.
        self._write_wiped: set[str] = set()
        self.version = 0
        """Bumped by every change of what ``route`` answers (see the module docstring)."""

    # ------------------------------------------------------------------ registration
    def register_broker(
        self,
        cluster: str,
        broker_name: str,
        broker_addr: str,
        broker_id: int,
        *,
        topic_configs: Mapping[str, TopicConfig] | None = None,
        data_version: DataVersion | None = None,
        ha_server_addr: str = "",
        heartbeat_timeout_ms: int = DEFAULT_BROKER_TIMEOUT_MS,
        term: int | None = None,
        now_ms: int,
    ) -> RegisterResult:
        """Record a broker's (re-)registration at ``now_ms``; RocketMQ's rules plus the epoch.

        ``topic_configs`` count only from the master (``broker_id`` 0). ``term`` is the ledger
        term a master claim is made in (ignored for other ids).
        """
        group = self._groups.get(broker_name)
        refusal = None
        if group is not None:
            refusal = _refusal(group, broker_addr, broker_id, term, now_ms)
        if group is not None and refusal is not None:
            if term is not None and broker_addr in group.terms:  # only members confirm
                group.claims[broker_addr] = (term, now_ms)
            master = group.addrs.get(MASTER_ID)
            return RegisterResult(master, self._ha_addr(master), accepted=False, refusal=refusal)
        changed = group is None
        if group is None:
            group = self._groups[broker_name] = _Group(cluster)
        old_addrs = dict(group.addrs)
        self._clusters.setdefault(group.cluster, set()).add(broker_name)

        if broker_id == MASTER_ID and (term is not None or group.addrs.get(0) != broker_addr):
            group.master_term = term
        for other_id, addr in list(group.addrs.items()):
            if addr == broker_addr and other_id != broker_id:
                del group.addrs[other_id]
        group.addrs[broker_id] = broker_addr
        changed = changed or group.addrs != old_addrs
        group.claims.pop(broker_addr, None)
        if term is None:
            group.terms.pop(broker_addr, None)
        else:
            group.terms[broker_addr] = term

        if broker_id == MASTER_ID and topic_configs:
            for config in topic_configs.values():
                queues = self._topics.setdefault(config.topic_name, {})
                data = QueueData.of_topic(broker_name, config)
                if queues.get(broker_name) != data:
                    queues[broker_name] = data
                    changed = True
        if changed:
            self.version += 1

        self._live[broker_addr] = _Live(
            now_ms, heartbeat_timeout_ms, data_version or DataVersion(), ha_server_addr
        )
        if broker_id == MASTER_ID:
            return RegisterResult(None, None)
        master = group.addrs.get(MASTER_ID)
        if master is None or master not in self._live:
            return RegisterResult(None, None)
        return RegisterResult(master, self._ha_addr(master))

    def unregister_broker(
        self, cluster: str, broker_name: str, broker_addr: str, broker_id: int
    ) -> list[RemovedBroker]:
        """A broker says it is leaving: drop its liveness and its ``id -> address`` entry.

        RocketMQ removes whatever holds ``broker_id``; we remove it only if it still holds
        ``broker_addr``, so a late unregister from an ex-master cannot delete its successor's
        id-0 entry.
        """
        del cluster  # the group knows its cluster; kept for the request's shape
        self._live.pop(broker_addr, None)
        group = self._groups.get(broker_name)
        if group is None or group.addrs.get(broker_id) != broker_addr:
            return []
        group.terms.pop(broker_addr, None)
        group.claims.pop(broker_addr, None)
        del group.addrs[broker_id]
        self.version += 1
        removed = [RemovedBroker(group.cluster, broker_name, broker_id, broker_addr)]
        if not group.addrs:
            self._drop_group(broker_name)
        return removed

    # ------------------------------------------------------------------ liveness
    def scan_not_active(self, now_ms: int) -> list[RemovedBroker]:
        """Remove every address silent for longer than its timeout; return the entries removed."""
        expired = [
            addr
            for addr, live in self._live.items()
            if live.last_update_ms + live.timeout_ms < now_ms
        ]
        removed: list[RemovedBroker] = []
        for addr in sorted(expired):
            removed += self.channel_closed(addr)
        return removed

    def channel_closed(self, broker_addr: str) -> list[RemovedBroker]:
        """The connection ``broker_addr`` registered over closed: remove that address at once."""
        self._live.pop(broker_addr, None)
        removed: list[RemovedBroker] = []
        for name in sorted(self._groups):
            group = self._groups[name]
            group.terms.pop(broker_addr, None)
            group.claims.pop(broker_addr, None)
            for broker_id, addr in sorted(group.addrs.items()):
                if addr == broker_addr:
                    del group.addrs[broker_id]
                    self.version += 1
                    removed.append(RemovedBroker(group.cluster, name, broker_id, addr))
            if not group.addrs:
                self._drop_group(name)
        return removed

    def is_live(self, broker_addr: str) -> bool:
        return broker_addr in self._live

    # ------------------------------------------------------------------ queries
    def route(self, topic: str) -> TopicRouteData | None:
        """The route of ``topic``, or None when no live group holds it."""
        queues = self._topics.get(topic)
        if not queues:
            return None
        queue_datas: list[QueueData] = []
        broker_datas: list[BrokerData] = []
        for name in sorted(queues):
            data = self.broker_data(name)
            if data is not None:
                queue = queues[name]
                if name in self._write_wiped:
                    queue = dataclasses.replace(queue, perm=queue.perm & ~PERM_WRITE)
                queue_datas.append(queue)
                broker_datas.append(data)
        if not broker_datas:
            return None
        return TopicRouteData(tuple(queue_datas), tuple(broker_datas))

    def broker_data(self, broker_name: str) -> BrokerData | None:
        """A group's members (a copy), or None if no such group is registered."""
        group = self._groups.get(broker_name)
        if group is None:
            return None
        return BrokerData(group.cluster, broker_name, dict(sorted(group.addrs.items())))

    def master_term(self, broker_name: str) -> int | None:
        """The group's master epoch (term of the last accepted master claim), if known."""
        group = self._groups.get(broker_name)
        return None if group is None else group.master_term

    def reported_terms(self, broker_name: str) -> dict[str, int]:
        """The term each live member of the group last reported (a copy; empty if none)."""
        group = self._groups.get(broker_name)
        return {} if group is None else dict(sorted(group.terms.items()))

    def cluster_info(self) -> ClusterInfo:
        brokers = {name: data for name in sorted(self._groups) if (data := self.broker_data(name))}
        clusters = {name: tuple(sorted(self._clusters[name])) for name in sorted(self._clusters)}
        return ClusterInfo(brokers, clusters)

    def topic_list(self) -> TopicList:
        return TopicList(tuple(sorted(self._topics)))

    # ------------------------------------------------------------------ admin
    def wipe_write_perm(self, broker_name: str) -> int:
        """Route ``broker_name``'s queues read-only (drain it before maintenance: producers go
        to the other groups, consumers still read it); how many topics it serves."""
        if broker_name not in self._write_wiped:
            self._write_wiped.add(broker_name)
            self.version += 1
        return self._topics_of(broker_name)

    def add_write_perm(self, broker_name: str) -> int:
        """Undo ``wipe_write_perm``; how many topics it serves."""
        if broker_name in self._write_wiped:
            self._write_wiped.discard(broker_name)
            self.version += 1
        return self._topics_of(broker_name)

    def write_wiped(self, broker_name: str) -> bool:
        return broker_name in self._write_wiped

    def _topics_of(self, broker_name: str) -> int:
        return sum(1 for queues in self._topics.values() if broker_name in queues)

    def delete_topic(self, topic: str, cluster: str | None = None) -> bool:
        """Forget ``topic`` (only its queues on ``cluster``'s groups, if given); True if any."""
        queues = self._topics.get(topic)
        if queues is None:
            return False
        self.version += 1
        if cluster is None:
            del self._topics[topic]
            return True
        names = self._clusters.get(cluster, set())
        hits = [name for name in queues if name in names]
        for name in hits:
            del queues[name]
        if not queues:
            del self._topics[topic]
        return bool(hits)

    # ------------------------------------------------------------------ internals
    def _ha_addr(self, broker_addr: str | None) -> str | None:
        live = self._live.get(broker_addr) if broker_addr is not None else None
        return None if live is None else live.ha_server_addr

    def _drop_group(self, broker_name: str) -> None:
        """The group's last member is gone: forget it, its cluster entry and its queue data."""
        group = self._groups.pop(broker_name)
        names = self._clusters.get(group.cluster)
        if names is not None:
            names.discard(broker_name)
            if not names:
                del self._clusters[group.cluster]
        for topic in list(self._topics):
            queues = self._topics[topic]
            if queues.pop(broker_name, None) is not None and not queues:
                del self._topics[topic]


def _refusal(
    group: _Group, broker_addr: str, broker_id: int, term: int | None, now_ms: int
) -> str | None:
    """Why this registration is refused (rules 1 to 3 of the module docstring), or None."""
    master = group.addrs.get(MASTER_ID)
    epoch = group.master_term
    if term is not None:
        reference = [t for addr, t in group.terms.items() if addr != broker_addr]
        if epoch is not None and master != broker_addr:
            reference.append(epoch)
        if (
            reference
            and term > max(reference) + MAX_TERM_LEAD
            and not _confirmed(group, broker_addr, term, now_ms)
        ):
            return (
                f"term {term} is more than {MAX_TERM_LEAD} above every term the rest of the "
                f"group reported (highest {max(reference)}); not believed"
            )
    if broker_id != MASTER_ID or master == broker_addr:
        return None  # not a master claim, or the current master re-registering
    if term is None:
        if master is not None and epoch is not None:
            return f"a master claim without a term, while master {master} holds term {epoch}"
        return None
    if epoch is None or term >= epoch:
        return None
    ahead = sorted(
        addr for addr, t in group.terms.items() if addr not in (broker_addr, master) and t > term
    )
    if ahead:
        return (
            f"stale master claim: term {term} is below the group's master term {epoch}, and "
            f"{', '.join(ahead)} reported a later term"
        )
    return None


def _confirmed(group: _Group, broker_addr: str, term: int, now_ms: int) -> bool:
    """A majority of the group's members recently claimed terms near ``term`` (rule 1), and
    at least one of them is not the claimant: a claim never confirms itself, even when its
    claimant is the only member with a term left."""
    members = set(group.terms) | {broker_addr}
    backers = 1  # the claimant
    for addr in members - {broker_addr}:
        claim = group.claims.get(addr)
        if claim is not None and now_ms - claim[1] <= CLAIM_MEMORY_MS:
            backers += abs(claim[0] - term) <= MAX_TERM_LEAD
    return backers >= 2 and backers > len(members) // 2
