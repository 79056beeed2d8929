"""What each page shows, gathered from the cluster through ``Admin``: plain data, no HTML.

Kept apart from the web layer so the numbers a page shows can be read (and tested) without a
browser, and so each page asks the cluster for exactly what it shows. Requests to many brokers
or topics run concurrently: a page of 50 topics costs one round trip, not 50.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from ledgermq.errors import LedgerMQError, TopicNotFoundError

if TYPE_CHECKING:
    from ledgermq.client import Admin, ConsumerConnection, ConsumerProgress, QueueStats

__all__ = [
    "SYSTEM_GROUPS",
    "BrokerGroupView",
    "GroupDetail",
    "GroupRow",
    "ReplicaRow",
    "SideTopic",
    "TopicConsumer",
    "TopicDetail",
    "TopicRow",
    "cluster_view",
    "group_detail",
    "group_rows",
    "is_system_topic",
    "topic_consumers",
    "topic_detail",
    "topic_rows",
]

_SYSTEM_TOPIC_PREFIXES: Final = ("%RETRY%", "%DLQ%", "RMQ_SYS_", "rmq_sys_", "%SYS%")
_SYSTEM_TOPICS: Final = frozenset(
    {
        "TBW102",
        "SCHEDULE_TOPIC_XXXX",
        "BenchmarkTest",
        "OFFSET_MOVED_EVENT",
        "SELF_TEST_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
    }
)
SYSTEM_GROUPS: Final = frozenset(
    {
        "TOOLS_CONSUMER",
        "FILTERSRV_CONSUMER",
        "__MONITOR_CONSUMER",
        "CLIENT_INNER_PRODUCER",
        "SELF_TEST_P_GROUP",
        "SELF_TEST_C_GROUP",
        "CID_ONS-HTTP-PROXY",
        "CID_ONSAPI_PERMISSION",
        "CID_ONSAPI_OWNER",
        "CID_ONSAPI_PULL",
    }
)
"""RocketMQ's built-in subscription groups (``MixAll``), which every broker creates."""


def is_system_topic(topic: str, cluster_names: frozenset[str] = frozenset()) -> bool:
    """A topic RocketMQ makes for itself: retry / DLQ topics, ``TBW102``, ``RMQ_SYS_*``, and
    the topics named after each cluster and broker group that brokers register."""
    return (
        topic in _SYSTEM_TOPICS
        or topic in cluster_names
        or topic.startswith(_SYSTEM_TOPIC_PREFIXES)
    )


# ------------------------------------------------------------------------------- cluster
@dataclass(frozen=True)
class ReplicaRow:
    """One broker replica as its runtime info describes it; ``error`` when it did not answer."""

    broker_id: int
    address: str
    role: str = "?"
    self_id: str = "?"
    term: int | None = None
    leader: str = ""
    end_index: int | None = None
    committed_index: int | None = None
    dispatched_index: int | None = None
    put_messages: int | None = None
    get_messages: int | None = None
    error: str | None = None

    @property
    def commit_lag(self) -> int | None:
        """Entries written to this replica's log but not known committed yet."""
        if self.end_index is None or self.committed_index is None:
            return None
        return max(self.end_index - self.committed_index, 0)

    @property
    def dispatch_lag(self) -> int | None:
        """Committed entries not yet in the consume queues (not visible to consumers)."""
        if self.committed_index is None or self.dispatched_index is None:
            return None
        return max(self.committed_index - self.dispatched_index, 0)

    @property
    def is_master(self) -> bool:
        """What the replica says of itself; the NameServer's id 0 only when it did not answer
        (just after a leadership change the NameServer may still list the old master as 0)."""
        if self.error is None and self.role != "?":
            return self.role.upper().endswith("MASTER")
        return self.broker_id == 0


@dataclass(frozen=True)
class BrokerGroupView:
    """A broker group (one Raft group) and its registered replicas, master first."""

    cluster: str
    name: str
    replicas: list[ReplicaRow]

    @property
    def leader(self) -> str | None:
        """The self id of the replica that leads, as the replicas say; None during an election."""
        for replica in self.replicas:
            if replica.is_master and replica.error is None:
                return replica.self_id
        return None

    @property
    def term(self) -> int | None:
        terms = [r.term for r in self.replicas if r.term is not None]
        return max(terms) if terms else None


def _int(table: dict[str, str], key: str) -> int | None:
    try:
        return int(table[key])
    except (KeyError, ValueError):
        return None


async def _replica(admin: Admin, broker_id: int, address: str) -> ReplicaRow:
    try:
        table = await admin.broker_runtime_info(address)
    except (LedgerMQError, OSError, TimeoutError) as exc:
        return ReplicaRow(broker_id, address, role="unreachable", error=str(exc))
    return ReplicaRow(
        broker_id,
        address,
        role=table.get("brokerRole", "?"),
        self_id=table.get("dLegerSelfId", "?"),
        term=_int(table, "dLegerTerm"),
        leader=table.get("dLegerLeader", ""),
        end_index=_int(table, "ledgerEndIndex"),
        committed_index=_int(table, "committedIndex"),
        dispatched_index=_int(table, "dispatchedIndex"),
        put_messages=_int(table, "putMessages"),
        get_messages=_int(table, "getMessages"),
    )


async def cluster_view(admin: Admin) -> list[BrokerGroupView]:
    """Every registered broker group with each replica's runtime info (asked concurrently)."""
    info = await admin.cluster_info()
    groups: list[tuple[str, str, list[tuple[int, str]]]] = []
    for cluster, names in sorted(info.cluster_addr_table.items()):
        for name in sorted(names):
            data = info.broker_addr_table.get(name)
            if data is not None:
                groups.append((cluster, name, sorted(data.broker_addrs.items())))
    asked = [
        asyncio.gather(*(_replica(admin, broker_id, addr) for broker_id, addr in replicas))
        for _, _, replicas in groups
    ]
    answers = await asyncio.gather(*asked)
    return [
        BrokerGroupView(cluster, name, list(rows))
        for (cluster, name, _), rows in zip(groups, answers, strict=True)
    ]


# ------------------------------------------------------------------------------- topics
@dataclass(frozen=True)
class TopicRow:
    """A topic and its queues per broker group (group -> read, write queues and perm)."""

    name: str
    system: bool
    queues: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    error: str | None = None
    stored: int | None = None
    """Messages ever stored in the topic (its queues' max offsets summed): the send TPS is
    its change over time. None when the offsets could not be read."""

    @property
    def total_write_queues(self) -> int:
        return sum(write for _, write, _ in self.queues.values())


async def _stored(admin: Admin, topic: str) -> int | None:
    """Messages stored in ``topic`` so far (its queues' max offsets), None if unreadable."""
    try:
        return sum(s.max_offset for s in await admin.topic_stats(topic))
    except (LedgerMQError, OSError, TimeoutError):
        return None


async def _topic_row(admin: Admin, topic: str, system: bool) -> TopicRow:
    try:
        route, stored = await asyncio.gather(admin.topic_route(topic), _stored(admin, topic))
    except (LedgerMQError, OSError, TimeoutError) as exc:
        return TopicRow(topic, system, error=str(exc))
    queues = {
        q.broker_name: (q.read_queue_nums, q.write_queue_nums, q.perm)
        for q in sorted(route.queue_datas, key=lambda q: q.broker_name)
    }
    return TopicRow(topic, system, queues, stored=stored)


async def topic_rows(admin: Admin, *, include_system: bool = False) -> list[TopicRow]:
    """Every topic the NameServer knows (system topics only when asked), with its route."""
    info = await admin.cluster_info()
    names = frozenset(info.cluster_addr_table) | frozenset(info.broker_addr_table)
    topics = [(t, is_system_topic(t, names)) for t in await admin.topic_list()]
    shown = [(t, system) for t, system in topics if include_system or not system]
    return list(await asyncio.gather(*(_topic_row(admin, t, s) for t, s in shown)))


@dataclass(frozen=True)
class TopicDetail:
    """A topic's route and the offsets of each of its queues."""

    row: TopicRow
    stats: list[QueueStats]

    @property
    def messages(self) -> int:
        """Messages held now (max - min offset, summed over the queues)."""
        return sum(max(s.max_offset - s.min_offset, 0) for s in self.stats)

    @property
    def stored(self) -> int:
        """Messages ever stored (max offsets summed), as ``TopicRow.stored``."""
        return sum(s.max_offset for s in self.stats)


async def topic_detail(admin: Admin, topic: str) -> TopicDetail:
    """Raises TopicNotFoundError when no NameServer routes ``topic``."""
    route, stats = await asyncio.gather(admin.topic_route(topic), admin.topic_stats(topic))
    queues = {
        q.broker_name: (q.read_queue_nums, q.write_queue_nums, q.perm)
        for q in sorted(route.queue_datas, key=lambda q: q.broker_name)
    }
    return TopicDetail(TopicRow(topic, is_system_topic(topic), queues), stats)


# ------------------------------------------------------------------------------- groups
@dataclass(frozen=True)
class GroupRow:
    """A subscription group: where it is configured, its settings, its clients and lag."""

    name: str
    settings: dict[str, dict[str, Any]]
    """broker group -> the group's config there (RocketMQ's field names)."""
    clients: int
    lag: int
    error: str | None = None
    consumed: int | None = None
    """The group's committed offsets summed over its queues: the consume TPS is their change
    over time (what ``admin stats-all`` measures). None when they could not be read."""

    @property
    def system(self) -> bool:
        return self.name in SYSTEM_GROUPS or self.name.startswith("CID_RMQ_SYS_")

    def setting(self, key: str, default: object) -> object:
        """The value of ``key`` on the first broker group (they agree unless edited apart)."""
        for config in self.settings.values():
            return config.get(key, default)
        return default


async def _group_row(admin: Admin, group: str, settings: dict[str, dict[str, Any]]) -> GroupRow:
    try:
        progress, connections = await asyncio.gather(
            admin.consumer_progress(group), admin.consumer_connections(group)
        )
    except (LedgerMQError, OSError, TimeoutError) as exc:
        return GroupRow(group, settings, 0, 0, error=str(exc))
    consumed = sum(max(p.consumer_offset, 0) for p in progress)
    return GroupRow(
        group, settings, len(connections), sum(p.lag for p in progress), consumed=consumed
    )


async def group_rows(admin: Admin, *, include_system: bool = False) -> list[GroupRow]:
    """Every subscription group with its settings, online clients and total lag."""
    groups = await admin.consumer_groups()
    rows = await asyncio.gather(*(_group_row(admin, g, s) for g, s in groups.items()))
    return [r for r in rows if include_system or not r.system]


@dataclass(frozen=True)
class SideTopic:
    """A group's retry (``%RETRY%group``) or dead-letter (``%DLQ%group``) topic, which brokers
    make on first need; ``stats`` is None while it does not exist."""

    name: str
    kind: str
    stats: list[QueueStats] | None

    @property
    def messages(self) -> int:
        return sum(max(s.max_offset - s.min_offset, 0) for s in self.stats or [])


async def _side_topic(admin: Admin, name: str, kind: str) -> SideTopic:
    try:
        return SideTopic(name, kind, await admin.topic_stats(name))
    except TopicNotFoundError:
        return SideTopic(name, kind, None)


@dataclass(frozen=True)
class GroupDetail:
    """A group's settings, its online clients, its progress on every queue, and its retry and
    dead-letter topics."""

    name: str
    settings: dict[str, dict[str, Any]]
    connections: list[ConsumerConnection]
    progress: list[ConsumerProgress]
    side_topics: list[SideTopic]

    @property
    def lag(self) -> int:
        return sum(p.lag for p in self.progress)

    @property
    def consumed(self) -> int:
        """Committed offsets summed, as ``GroupRow.consumed``."""
        return sum(max(p.consumer_offset, 0) for p in self.progress)

    @property
    def exists(self) -> bool:
        return bool(self.settings)

    @property
    def subscriptions(self) -> list[str]:
        """The topics the group consumes: what its online clients subscribe to and where it
        has committed offsets; its own retry topic last (resetting it is rarely meant)."""
        topics = {t for c in self.connections for t in c.topics}
        topics |= {p.topic for p in self.progress}
        return sorted(topics, key=lambda t: (t.startswith(("%RETRY%", "%DLQ%")), t))


async def group_detail(admin: Admin, group: str) -> GroupDetail:
    groups, connections, progress, retry, dlq = await asyncio.gather(
        admin.consumer_groups(),
        admin.consumer_connections(group),
        admin.consumer_progress(group),
        _side_topic(admin, f"%RETRY%{group}", "retry"),
        _side_topic(admin, f"%DLQ%{group}", "dead-letter"),
    )
    return GroupDetail(group, groups.get(group, {}), connections, progress, [retry, dlq])


# ------------------------------------------------------------------------------- topic consumers
@dataclass(frozen=True)
class TopicConsumer:
    """A consumer group of a topic: its lag and committed offsets on the topic's queues, and
    its clients online that subscribe to the topic."""

    group: str
    lag: int
    consumed: int
    queues: int
    """Queues of the topic where the group has committed an offset."""
    clients: int


async def _topic_consumer(
    admin: Admin, topic: str, group: str, progress: list[ConsumerProgress]
) -> TopicConsumer | None:
    rows = [p for p in progress if p.topic == topic]
    try:
        connections = await admin.consumer_connections(group)
    except (LedgerMQError, OSError, TimeoutError):
        connections = []
    clients = sum(1 for c in connections if topic in c.topics)
    if not rows and not clients:
        return None
    lag = sum(p.lag for p in rows)
    consumed = sum(max(p.consumer_offset, 0) for p in rows)
    return TopicConsumer(group, lag, consumed, len(rows), clients)


async def topic_consumers(admin: Admin, topic: str) -> list[TopicConsumer]:
    """The groups consuming ``topic``, as RocketMQ's dashboard finds them: every group (a
    subscription group, or one with committed offsets) whose offsets name the topic or whose
    online clients subscribe to it."""
    lags = await admin.consumer_lags()
    found = await asyncio.gather(
        *(_topic_consumer(admin, topic, group, rows) for group, rows in lags.items())
    )
    return [c for c in found if c is not None]
