"""Cluster administration: topics, routes, consumer progress, broker state, leadership, messages.

Requests go to the NameServer (routes, cluster info, topic list) or to every master of the
groups concerned (topic creation, stats, consumer progress); RocketMQ's ``MQAdminExt`` calls.
Writes that span several groups (create / delete a topic) are not atomic: each group is asked in
turn and the first failure is raised, naming the group; asking again is safe (both are
idempotent).

Commands that span groups can instead work for the groups that answer: given an ``absent``
dict, a group without a master, or whose master does not answer, is recorded there (broker
group -> why) and the others are served; only when no group answered at all is NoRouteError
raised, naming each group and why (issue 27: during one group's lost majority,
``consumer-progress`` failed for every group and ``topic-create`` unless narrowed to the others).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from ledgermq.client._queue_api import PullStatus, QueueApi
from ledgermq.client._remoting import ClientInstance
from ledgermq.client._routing import (
    DEFAULT_TOPIC,
    MessageQueue,
    master_address,
    publish_info,
    subscribe_queues,
)
from ledgermq.client.consumer_status import ClientStatus, queue_statuses
from ledgermq.client.producer import Producer, SendResult
from ledgermq.client.trace import TRACE_TOPIC, TraceEvent, decode_trace
from ledgermq.errors import (
    ConfigError,
    LedgerMQError,
    MessageFormatError,
    MQResponseError,
    NetworkError,
    NoRouteError,
    TopicNotFoundError,
)
from ledgermq.wire import (
    MessageProperty,
    MQRequestCode,
    MQResponseCode,
    decode_offset_message_id,
    decode_records,
    read_message_id,
    validate_topic,
)
from ledgermq.wire.headers import (
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumeStatsRequestHeader,
    GetProducerConnectionListRequestHeader,
    GetQuarantinedEntriesRequestHeader,
    GetTopicStatsInfoRequestHeader,
    QueryMessageRequestHeader,
    ReplicaAddRequestHeader,
    ReplicaBackupRequestHeader,
    ReplicaRemoveRequestHeader,
    TransferLeadershipRequestHeader,
    ViewMessageRequestHeader,
)
from ledgermq.wire.names import GROUP_MAX_LENGTH
from ledgermq.wire.namesrv_headers import (
    AddWritePermOfBrokerRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetRouteInfoRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
)
from ledgermq.wire.route import PERM_READ, PERM_WRITE, ClusterInfo, TopicList, TopicRouteData
from ledgermq.wire.running_info import ConsumerRunningInfo
from ledgermq.wire.topic_attributes import format_changes, parse_changes

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from ledgermq.client.credentials import Credentials
    from ledgermq.clock import Clock
    from ledgermq.net import Network, TlsClientConfig
    from ledgermq.wire import MessageExt

__all__ = [
    "Admin",
    "ConsumerConnection",
    "ConsumerProgress",
    "OffsetReset",
    "ProducerConnection",
    "QuarantinedEntry",
    "QueueStats",
    "TopicGroupStats",
]

_NOT_RESENT_PROPERTIES: Final = frozenset(
    {
        MessageProperty.UNIQ_KEY,
        MessageProperty.REAL_TOPIC,
        MessageProperty.REAL_QID,
        MessageProperty.DELAY,
        MessageProperty.MIN_OFFSET,
        MessageProperty.MAX_OFFSET,
        MessageProperty.RECONSUME_TIME,
        MessageProperty.MAX_RECONSUME_TIMES,
        MessageProperty.CONSUME_START_TIME,
    }
)
"""Properties the broker or the producer set for one storing of a message: a resent message
gets its own (a new msgId, no delay level, a fresh reconsume count)."""

TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
"""RocketMQ's ``MixAll.TOOLS_CONSUMER_GROUP``: the group admin tools read messages as."""

_POLL_S = 0.05
"""How often a wait for groups or routes asks the NameServers again."""

Absent = dict[str, str]
"""Broker group -> why it was left out of a command that spans groups (no master, no answer)."""


def _none_answered(what: str, absent: Mapping[str, str]) -> NoRouteError:
    shown = "; ".join(f"{name}: {why}" for name, why in sorted(absent.items()))
    return NoRouteError(f"{what}: no broker group answered ({shown})")


@dataclass(frozen=True, slots=True, order=True)
class QuarantinedEntry:
    """A committed record (or entry, ``record == -1``) that a replica skipped because no
    replica can apply it (GET_QUARANTINED_ENTRIES; README "Operations")."""

    index: int
    """Its ledger index."""
    record: int
    """Which record of the entry, 0-based; -1 for the whole entry (a metadata op)."""
    topic: str
    reason: str
    time_ms: int
    """When that replica first skipped it, ms since the epoch."""


@dataclass(frozen=True, slots=True, order=True)
class QueueStats:
    """A queue's offsets (GET_TOPIC_STATS_INFO): it holds ``min_offset`` .. ``max_offset - 1``."""

    topic: str
    broker_name: str
    queue_id: int
    min_offset: int
    max_offset: int


@dataclass(frozen=True, slots=True, order=True)
class ConsumerProgress:
    """How far a group has consumed a queue (GET_CONSUME_STATS); ``lag`` messages remain."""

    topic: str
    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int

    @property
    def lag(self) -> int:
        return max(self.broker_offset - self.consumer_offset, 0)


_ADMIN_PROBE_TOPIC: Final = "ledgermq console sign-in check"
"""``check_admin_account``'s topic: spaces make it a name every broker refuses to create."""


@dataclass(frozen=True)
class TopicGroupStats:
    """One row of ``Admin.stats_all``: a topic and one of its consumer groups (empty: none)."""

    topic: str
    group: str
    backlog: int
    """Messages the group has not committed yet."""
    in_tps: float
    """Messages stored in the topic per second, over the window."""
    out_tps: float
    """Messages the group committed per second, over the window."""


def _is_system_topic(topic: str) -> bool:
    return topic.startswith(("%RETRY%", "%DLQ%", "RMQ_SYS_", "rmq_sys_")) or topic in (
        "TBW102",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
        "SCHEDULE_TOPIC_XXXX",
    )


@dataclass(frozen=True)
class OffsetReset:
    """One queue's committed offset before and after ``Admin.reset_offset`` (None: none)."""

    broker_name: str
    queue_id: int
    before: int | None
    after: int


@dataclass(frozen=True, order=True)
class ProducerConnection:
    """One client of a producer group connected to a broker group's master (heartbeats)."""

    broker_name: str
    client_id: str
    client_addr: str


@dataclass(frozen=True, order=True)
class ConsumerConnection:
    """One client of a consumer group, as a broker group's master sees it (heartbeats)."""

    broker_name: str
    client_id: str
    client_addr: str
    language: str
    version: int
    message_model: str
    consume_type: str
    topics: tuple[str, ...]


_UNIQUE_KEY_QUERY: Final = "_UNIQUE_KEY_QUERY"
"""RocketMQ's ``MixAll.UNIQUE_MSG_QUERY_FLAG``: QUERY_MESSAGE's key is a UNIQ_KEY."""


class _UniqueKeySearch(NamedTuple):
    """What ``Admin._by_unique_key`` found, and what it could not search."""

    found: list[MessageExt]
    refused: int
    """Lookups the ACL refused (NO_PERMISSION)."""
    unreachable: list[str]
    """Masters that did not answer."""
    refusal: MQResponseError | None
    """One of the refusals, when every lookup was refused."""


def _is_absent(exc: LedgerMQError) -> bool:
    """Whether a VIEW_MESSAGE_BY_ID failure only says nothing is stored there (no broker at
    that address, or no record at that offset): then the id was not an offset msgId."""
    if isinstance(exc, NetworkError):
        return True
    return isinstance(exc, MQResponseError) and exc.code != MQResponseCode.NO_PERMISSION


def _rows(body: bytes) -> list[dict[str, Any]]:
    data = json.loads(body or b"{}")
    rows = data.get("offsetTable") or []
    if isinstance(rows, dict):  # a Java-style map keyed by queue
        rows = list(rows.values())
    return [r for r in rows if isinstance(r, dict)]


class Admin:
    """Administrative requests (see the module docstring).

    Args:
        namesrv_addr: ``"host:port;host:port"``.
        request_timeout_s: timeout of one request (default 5 s).
        network, client_id, clock: see ``ClientInstance``.
        credentials: sign every request with this ACL account (``aclEnable=true`` clusters).
        tls: dial the NameServers and brokers with TLS (``TlsClientConfig``: the CA to
            trust, a client certificate for mutual TLS); None: plain connections.
    """

    def __init__(
        self,
        namesrv_addr: str,
        *,
        request_timeout_s: float = 5.0,
        network: Network | None = None,
        client_id: str | None = None,
        clock: Clock | None = None,
        credentials: Credentials | None = None,
        tls: TlsClientConfig | None = None,
    ) -> None:
        self._client = ClientInstance(
            namesrv_addr,
            credentials=credentials,
            tls=tls,
            client_id=client_id,
            network=network,
            clock=clock,
            request_timeout_s=request_timeout_s,
        )

    async def start(self) -> None:
        await self._client.start(background=False)

    async def close(self) -> None:
        await self._client.close()

    async def __aenter__(self) -> Admin:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ NameServer views
    async def cluster_info(self) -> ClusterInfo:
        response = await self._client.invoke_namesrv(MQRequestCode.GET_BROKER_CLUSTER_INFO)
        return ClusterInfo.from_json(response.body)

    async def topic_route(self, topic: str) -> TopicRouteData:
        """The route of ``topic``; TopicNotFoundError if no NameServer knows it."""
        return await self._client.topic_route(topic, refresh=True)

    async def auto_create_queue_nums(self) -> dict[str, int]:
        """Where a producer's first send to a new topic would create it: broker group -> the
        queue count it gets there; empty when the cluster does not create topics on first send.

        The producer's rule (RocketMQ's): a topic without a route borrows the route of
        ``TBW102``, which a master offers only with ``autoCreateTopicEnable=true``, and each
        group creates ``min(4, TBW102's writeQueueNums)`` queues.
        """
        try:
            route = await self.topic_route(DEFAULT_TOPIC)
        except TopicNotFoundError:
            return {}
        counts: dict[str, int] = {}
        for mq in publish_info(DEFAULT_TOPIC, route, borrowed=True).queues:
            counts[mq.broker_name] = counts.get(mq.broker_name, 0) + 1
        return counts

    async def topic_list(self) -> list[str]:
        response = await self._client.invoke_namesrv(
            MQRequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER
        )
        return sorted(TopicList.from_json(response.body).topics)

    async def _masters(
        self,
        cluster: str | None = None,
        broker_names: Iterable[str] | None = None,
        absent: Absent | None = None,
    ) -> dict[str, str]:
        """broker name -> master address, of ``cluster`` (all when None) or of the names given.

        NoRouteError if a group named is unknown, or one of them has no master now (with
        ``absent``: that group is recorded there and left out)."""
        info = await self.cluster_info()
        names: set[str]
        if broker_names is not None:
            names = set(broker_names)
            unknown = names - set(info.broker_addr_table)
            if unknown:
                raise NoRouteError(f"unknown broker group(s): {', '.join(sorted(unknown))}")
        elif cluster is not None:
            if cluster not in info.cluster_addr_table:
                raise NoRouteError(
                    f"cluster {cluster!r} is unknown; known: {sorted(info.cluster_addr_table)}"
                )
            names = set(info.cluster_addr_table[cluster])
        else:
            names = set(info.broker_addr_table)
        masters: dict[str, str] = {}
        for name in sorted(names):
            data = info.broker_addr_table.get(name)
            address = data.master_addr if data is not None else None
            if address is None:
                if absent is None:
                    raise NoRouteError(f"broker group {name} has no master now; retry shortly")
                absent[name] = "no master now"
                continue
            masters[name] = address
        return masters

    async def _wait_masters(
        self,
        cluster: str | None,
        broker_names: Iterable[str] | None,
        wait_s: float,
        absent: Absent | None = None,
    ) -> dict[str, str]:
        """``_masters``, asked again for up to ``wait_s`` while it finds no group or no master
        (a cluster that has just started registers within seconds). With ``absent``, once
        ``wait_s`` has passed the groups that have a master are returned and the others
        recorded there (NoRouteError still when none has one)."""
        names = None if broker_names is None else sorted(set(broker_names))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        while True:
            try:
                masters = await self._masters(cluster, names)
                if not masters:
                    raise NoRouteError(  # noqa: TRY301 - retried like the others
                        "no broker group is registered with the NameServers "
                        f"({';'.join(self._client.namesrv_addrs)}): start a broker (is its "
                        "namesrvAddr this list?) or wait for one to register"
                    )
                return masters  # noqa: TRY300 - the loop retries on the except branch
            except NoRouteError as exc:
                if loop.time() >= deadline:
                    if absent is not None:
                        left: Absent = {}
                        with contextlib.suppress(NoRouteError):
                            masters = await self._masters(cluster, names, left)
                            if masters:
                                absent.update(left)
                                return masters
                    if wait_s > 0:
                        raise NoRouteError(f"{exc} (waited {wait_s:g} s)") from None
                    raise
            await asyncio.sleep(min(_POLL_S, max(deadline - loop.time(), 0.0)))

    async def _wait_routed(
        self, topic: str, queue_nums: tuple[int, int], names: Iterable[str], timeout_s: float
    ) -> None:
        """Until every NameServer that answers routes ``topic`` with ``queue_nums`` (read,
        write) queues to
        a master of each group in ``names``; NoRouteError naming what is missing after
        ``timeout_s``. A NameServer that cannot be reached is not waited for (clients use the
        others), unless none can be."""
        wanted = sorted(names)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            missing: dict[str, list[str]] = {}
            reached = 0
            for address in self._client.namesrv_addrs:
                try:
                    response = await self._client.invoke(
                        address,
                        MQRequestCode.GET_ROUTEINFO_BY_TOPIC,
                        GetRouteInfoRequestHeader(topic).to_ext_fields(),
                        expect=(MQResponseCode.SUCCESS, MQResponseCode.TOPIC_NOT_EXIST),
                    )
                except NetworkError:
                    continue
                reached += 1
                routed: set[str] = set()
                if response.code == MQResponseCode.SUCCESS:
                    route = TopicRouteData.from_json(response.body)
                    routed = {
                        q.broker_name
                        for q in route.queue_datas
                        if (q.read_queue_nums, q.write_queue_nums) == queue_nums
                        and master_address(route, q.broker_name) is not None
                    }
                if lacking := [name for name in wanted if name not in routed]:
                    missing[address] = lacking
            if reached and not missing:
                self._client.forget_route(topic)
                return
            if loop.time() >= deadline:
                if not reached:
                    raise NoRouteError(
                        f"topic {topic!r} was created on {', '.join(wanted)}, but no NameServer "
                        f"({';'.join(self._client.namesrv_addrs)}) could be asked for its route"
                    )
                shown = "; ".join(f"{a} lacks {', '.join(n)}" for a, n in sorted(missing.items()))
                raise NoRouteError(
                    f"topic {topic!r} was created on {', '.join(wanted)}, but after "
                    f"{timeout_s:g} s not every NameServer routes it there ({shown}); "
                    "the brokers register it within seconds, check their logs"
                )
            await asyncio.sleep(_POLL_S)

    # ------------------------------------------------------------------ topics
    async def create_topic(
        self,
        topic: str,
        queue_nums: int = 8,
        *,
        cluster: str | None = None,
        broker_names: Iterable[str] | None = None,
        perm: int = PERM_READ | PERM_WRITE,
        order: bool = False,
        attributes: str | None = None,
        wait_s: float = 0.0,
        route_timeout_s: float = 10.0,
        read_queue_nums: int | None = None,
        write_queue_nums: int | None = None,
        absent: Absent | None = None,
    ) -> list[str]:
        """Create (or update) ``topic`` with ``queue_nums`` queues on every master of
        ``cluster`` or of ``broker_names`` (default: every group); the group names it was
        created on.

        ``read_queue_nums`` / ``write_queue_nums`` set the two counts apart (RocketMQ's
        ``readQueueNums`` / ``writeQueueNums``; each defaults to ``queue_nums``). A shrink
        drains first: lower the write count, let the consumers drain the queues above it,
        then lower the read count; a broker refuses an update that would strand messages
        (``MQResponseError`` naming the queue and the groups behind, INVALID_PARAMETER).

        With no such group (none registered yet, as right after a cluster starts) or a group
        without master, it asks again for up to ``wait_s`` seconds, then raises NoRouteError;
        it never creates a topic on zero groups. It returns only once every NameServer routes
        the topic to those groups (at most ``route_timeout_s``, else NoRouteError), so a send
        made right after it finds the topic.

        ``attributes``: RocketMQ's attribute changes (``"+message.type=FIFO"``; ``-key``
        removes), checked here first (ValueError), applied to the attributes the topic has.

        ``absent``: create it on the groups that have a master and answer, record the others
        there (see the module docstring); NoRouteError when it was created on none."""
        validate_topic(topic)
        changes = parse_changes(attributes or "")
        reads = queue_nums if read_queue_nums is None else read_queue_nums
        writes = queue_nums if write_queue_nums is None else write_queue_nums
        if min(reads, writes) < 1:
            raise ValueError(f"a topic needs at least one queue, not {min(reads, writes)}")
        if writes > reads:
            raise ValueError(
                f"writeQueueNums {writes} is above readQueueNums {reads}: messages written to "
                f"queues {reads}..{writes - 1} would be read by no consumer"
            )
        masters = await self._wait_masters(cluster, broker_names, wait_s, absent)
        ext = CreateTopicRequestHeader(
            topic, DEFAULT_TOPIC, reads, writes, perm, order=order
        ).to_ext_fields()
        if changes:
            ext["attributes"] = format_changes(changes)
        created = []
        for name, address in masters.items():
            try:
                await self._client.invoke(address, MQRequestCode.UPDATE_AND_CREATE_TOPIC, ext)
            except LedgerMQError as exc:
                if absent is None:
                    exc.add_note(f"(creating topic {topic!r} on broker group {name})")
                    raise
                absent[name] = f"its master {address} refused or did not answer: {exc}"
                continue
            created.append(name)
        if not created:
            raise _none_answered(f"topic {topic!r} was created nowhere", absent or {})
        await self._wait_routed(topic, (reads, writes), created, route_timeout_s)
        return created

    async def wait_for_route(
        self, topic: str, broker_names: Iterable[str] = (), timeout_s: float = 10.0
    ) -> TopicRouteData:
        """Wait until the NameServer routes ``topic`` to (at least) ``broker_names``."""
        wanted = set(broker_names)
        async with asyncio.timeout(timeout_s):
            while True:
                try:
                    route = await self.topic_route(topic)
                except TopicNotFoundError:
                    pass
                else:
                    if wanted <= {q.broker_name for q in route.queue_datas}:
                        return route
                await asyncio.sleep(0.05)

    async def delete_topic(
        self, topic: str, *, cluster: str | None = None, absent: Absent | None = None
    ) -> None:
        """Delete ``topic`` on every master of ``cluster`` (default all), then on NameServers.

        ``absent``: delete it on the groups that answer, record the others there (they still
        hold it, and register it again once they have a master: delete again then)."""
        masters = await self._masters(cluster, absent=absent)
        for name, address in masters.items():
            try:
                await self._client.invoke(
                    address,
                    MQRequestCode.DELETE_TOPIC_IN_BROKER,
                    DeleteTopicRequestHeader(topic).to_ext_fields(),
                )
            except LedgerMQError as exc:
                if absent is None:
                    raise
                absent[name] = f"its master {address} refused or did not answer: {exc}"
        if absent is not None and set(masters) <= set(absent):
            raise _none_answered(f"topic {topic!r} was deleted nowhere", absent)
        ext = DeleteTopicFromNamesrvRequestHeader(topic, cluster or None).to_ext_fields()
        for address in self._client.namesrv_addrs:
            await self._client.invoke(address, MQRequestCode.DELETE_TOPIC_IN_NAMESRV, ext)
        self._client.forget_route(topic)

    async def topic_stats(self, topic: str, *, absent: Absent | None = None) -> list[QueueStats]:
        """Every queue of ``topic`` with its min and max offsets; a group without a master is
        left out (recorded in ``absent`` when given, with a master that does not answer)."""
        route = await self.topic_route(topic)
        rows: list[QueueStats] = []
        for data in route.broker_datas:
            address = master_address(route, data.broker_name)
            if address is None:
                if absent is not None:
                    absent[data.broker_name] = "no master now"
                continue
            try:
                response = await self._client.invoke(
                    address,
                    MQRequestCode.GET_TOPIC_STATS_INFO,
                    GetTopicStatsInfoRequestHeader(topic).to_ext_fields(),
                )
            except LedgerMQError as exc:
                if absent is None:
                    raise
                absent[data.broker_name] = f"its master {address} did not answer: {exc}"
                continue
            rows.extend(
                QueueStats(
                    str(r.get("topic", topic)),
                    str(r.get("brokerName", data.broker_name)),
                    int(r["queueId"]),
                    int(r.get("minOffset", 0)),
                    int(r.get("maxOffset", 0)),
                )
                for r in _rows(response.body)
            )
        named = {d.broker_name for d in route.broker_datas}
        if absent is not None and named and named <= set(absent):
            raise _none_answered(f"statistics of topic {topic}", absent)
        return sorted(rows)

    async def stats_all(
        self, *, window_s: float = 1.0, include_system: bool = False
    ) -> list[TopicGroupStats]:
        """RocketMQ's ``statsAll``: per topic, and per consumer group of it, the backlog and
        the messages in and out per second, measured over ``window_s`` from two readings of
        the queues' max offsets and the groups' committed offsets. A topic no group consumes
        has one row with an empty group. System topics (``%RETRY%``, ``%DLQ%``, ``TBW102``,
        ``RMQ_SYS_*``) only with ``include_system``."""
        topics = [t for t in await self.topic_list() if include_system or not _is_system_topic(t)]
        groups = sorted(set(await self.consumer_groups()) | await self._groups_with_offsets())

        async def reading() -> tuple[dict[str, int], dict[tuple[str, str], tuple[int, int]]]:
            ends: dict[str, int] = {}
            for topic in topics:
                with contextlib.suppress(LedgerMQError):  # deleted meanwhile, no master now
                    ends[topic] = sum(q.max_offset for q in await self.topic_stats(topic))
            consumed: dict[tuple[str, str], tuple[int, int]] = {}
            for group in groups:
                with contextlib.suppress(LedgerMQError):
                    for row in await self.consumer_progress(group):
                        done, lag = consumed.get((row.topic, group), (0, 0))
                        consumed[row.topic, group] = (
                            done + max(row.consumer_offset, 0),
                            lag + row.lag,
                        )
            return ends, consumed

        loop = asyncio.get_running_loop()
        started = loop.time()
        ends0, consumed0 = await reading()
        await asyncio.sleep(max(window_s - (loop.time() - started), 0.0))
        ends1, consumed1 = await reading()
        elapsed = max(loop.time() - started, 1e-3)
        rows: list[TopicGroupStats] = []
        for topic in sorted(ends1):
            in_tps = (ends1[topic] - ends0.get(topic, ends1[topic])) / elapsed
            readers = sorted(g for (t, g) in consumed1 if t == topic)
            if not readers:
                rows.append(TopicGroupStats(topic, "", 0, in_tps, 0.0))
            for group in readers:
                done1, lag = consumed1[topic, group]
                done0, _ = consumed0.get((topic, group), (done1, 0))
                rows.append(TopicGroupStats(topic, group, lag, in_tps, (done1 - done0) / elapsed))
        return rows

    async def _groups_with_offsets(self, absent: Absent | None = None) -> set[str]:
        """Groups with committed offsets on some master (GET_ALL_CONSUMER_OFFSET): a group
        consumes without a subscription group of its own where the broker creates none."""
        groups: set[str] = set()
        for name, address in (await self._masters(absent=absent)).items():
            try:
                response = await self._client.invoke(address, MQRequestCode.GET_ALL_CONSUMER_OFFSET)
            except LedgerMQError as exc:
                if absent is None:
                    raise
                absent[name] = f"its master {address} did not answer: {exc}"
                continue
            table = json.loads(response.body or b"{}").get("offsetTable") or {}
            groups.update(key.rpartition("@")[2] for key in table if "@" in key)
        return groups

    # ------------------------------------------------------------------ consumers
    async def consumer_progress(
        self, group: str, topic: str | None = None, *, absent: Absent | None = None
    ) -> list[ConsumerProgress]:
        """Broker offset, consumer offset and lag of every queue ``group`` consumes; with
        ``absent``, of the broker groups that answer (module docstring)."""
        masters = await self._masters(absent=absent)
        ext = GetConsumeStatsRequestHeader(group, topic or None).to_ext_fields()
        rows: list[ConsumerProgress] = []
        for name, address in masters.items():
            try:
                response = await self._client.invoke(
                    address,
                    MQRequestCode.GET_CONSUME_STATS,
                    ext,
                    expect=(MQResponseCode.SUCCESS, MQResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST),
                )
            except LedgerMQError as exc:
                if absent is None:
                    raise
                absent[name] = f"its master {address} did not answer: {exc}"
                continue
            if response.code != MQResponseCode.SUCCESS:
                continue
            rows.extend(
                ConsumerProgress(
                    str(r["topic"]),
                    str(r.get("brokerName", name)),
                    int(r["queueId"]),
                    int(r.get("brokerOffset", 0)),
                    int(r.get("consumerOffset", 0)),
                )
                for r in _rows(response.body)
            )
        if absent is not None and set(masters) <= set(absent):  # none answered
            raise _none_answered(f"progress of consumer group {group}", absent)
        return sorted(rows)

    async def consumer_lags(
        self, *, absent: Absent | None = None
    ) -> dict[str, list[ConsumerProgress]]:
        """Every consumer group (a subscription group, or one with committed offsets) and its
        progress, as mqadmin's ``consumerProgress`` without ``-g`` lists them; a group that
        consumes nothing now has an empty list. With ``absent``: of the broker groups that
        answer (module docstring)."""
        groups = set(await self.consumer_groups(absent=absent))
        groups |= await self._groups_with_offsets(absent)
        return {
            group: await self.consumer_progress(group, absent=absent) for group in sorted(groups)
        }

    # ------------------------------------------------------------------ consumer groups
    async def consumer_groups(
        self, *, cluster: str | None = None, absent: Absent | None = None
    ) -> dict[str, dict[str, dict[str, Any]]]:
        """Every subscription group: name -> broker group -> its config (RocketMQ's JSON fields:
        ``consumeEnable``, ``retryMaxTimes``, ...), as each master holds it; with ``absent``,
        of the broker groups that answer (module docstring)."""
        groups: dict[str, dict[str, dict[str, Any]]] = {}
        masters = await self._masters(cluster, absent=absent)
        for name, address in masters.items():
            try:
                response = await self._client.invoke(
                    address, MQRequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG
                )
            except LedgerMQError as exc:
                if absent is None:
                    raise
                absent[name] = f"its master {address} did not answer: {exc}"
                continue
            table = json.loads(response.body or b"{}").get("subscriptionGroupTable") or {}
            for group, config in table.items():
                if isinstance(config, dict):
                    groups.setdefault(str(group), {})[name] = config
        if absent is not None and set(masters) <= set(absent):  # none answered
            raise _none_answered("subscription groups", absent)
        return dict(sorted(groups.items()))

    async def update_group(
        self,
        group: str,
        *,
        cluster: str | None = None,
        broker_names: Iterable[str] | None = None,
        absent: Absent | None = None,
        **settings: object,
    ) -> list[str]:
        """Create or update subscription group ``group`` on every master (of ``cluster``, or of
        ``broker_names``); ``settings`` are RocketMQ's field names (``retryMaxTimes=3``,
        ``consumeEnable=False``, ...), merged over what the group has now. Returns the broker
        groups that took it."""
        if not group:
            raise LedgerMQError("the consumer group name must not be empty")
        masters = await self._masters(cluster, broker_names, absent)
        current = await self.consumer_groups(cluster=cluster, absent=absent)
        done = []
        for name, address in masters.items():
            if absent is not None and name in absent:
                continue  # its current settings are unknown: do not overwrite them
            config: dict[str, Any] = dict(current.get(group, {}).get(name, {}))
            config.update(settings)
            config["groupName"] = group
            try:
                await self._client.invoke(
                    address,
                    MQRequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                    body=json.dumps(config).encode(),
                )
            except LedgerMQError as exc:
                if absent is None:
                    raise
                absent[name] = f"its master {address} refused or did not answer: {exc}"
                continue
            done.append(name)
        if absent is not None and not done:
            raise _none_answered(f"subscription group {group} was updated nowhere", absent)
        return done

    async def delete_group(
        self,
        group: str,
        *,
        cluster: str | None = None,
        broker_names: Iterable[str] | None = None,
        absent: Absent | None = None,
    ) -> list[str]:
        """Delete subscription group ``group`` (its config; offsets stay) on every master
        (``absent``: on those that answer, the others recorded there)."""
        done = []
        for name, address in (await self._masters(cluster, broker_names, absent)).items():
            try:
                await self._client.invoke(
                    address,
                    MQRequestCode.DELETE_SUBSCRIPTIONGROUP,
                    DeleteSubscriptionGroupRequestHeader(group).to_ext_fields(),
                )
            except LedgerMQError as exc:
                if absent is None:
                    raise
                absent[name] = f"its master {address} refused or did not answer: {exc}"
                continue
            done.append(name)
        if absent is not None and not done:
            raise _none_answered(f"subscription group {group} was deleted nowhere", absent)
        return done

    async def reset_offset(
        self, group: str, topic: str, to: str | int, *, force: bool = False
    ) -> list[OffsetReset]:
        """Move ``group``'s committed offsets of every queue of ``topic`` to ``"earliest"``,
        ``"latest"`` or a time (epoch ms: the first message stored at or after it), and return
        each queue's old and new offset. RocketMQ's ``resetOffsetByTime`` for a group whose
        consumers are stopped: a running consumer keeps its own offsets and would write over
        the reset at its next commit, so a group with clients online is refused unless
        ``force``.

        Raises:
            LedgerMQError: clients of the group are online (without ``force``), or ``to`` is
                neither a time nor ``earliest`` / ``latest``.
        """
        if not (isinstance(to, int) or to in ("earliest", "latest")):
            raise LedgerMQError(f"reset offsets to 'earliest', 'latest' or a time, not {to!r}")
        if not force:
            online = await self.consumer_connections(group)
            if online:
                clients = ", ".join(sorted({c.client_id for c in online}))
                raise LedgerMQError(
                    f"consumer group {group} has {len(online)} client(s) online ({clients}): "
                    "they keep their own offsets and would write over the reset; stop them "
                    "first (force=True / --force resets anyway)"
                )
        api = QueueApi(self._client, group)
        route = await self.topic_route(topic)
        rows = []
        for mq in subscribe_queues(topic, route):
            if to == "earliest":
                target = await api.min_offset(mq)
            elif to == "latest":
                target = await api.max_offset(mq)
            else:
                target = await api.search_offset(mq, int(to))
            before = await api.committed_offset(mq)
            await api.commit_offset(mq, target)
            rows.append(OffsetReset(mq.broker_name, mq.queue_id, before, target))
        return rows

    async def consumer_connections(self, group: str) -> list[ConsumerConnection]:
        """The clients of consumer group ``group`` online at each master (heartbeats)."""
        rows: list[ConsumerConnection] = []
        for name, address in (await self._masters()).items():
            response = await self._client.invoke(
                address,
                MQRequestCode.GET_CONSUMER_CONNECTION_LIST,
                GetConsumerConnectionListRequestHeader(group).to_ext_fields(),
                expect=(MQResponseCode.SUCCESS, MQResponseCode.SYSTEM_ERROR),
            )
            if response.code != MQResponseCode.SUCCESS:
                continue  # not online at that group
            data = json.loads(response.body or b"{}")
            topics = sorted((data.get("subscriptionTable") or {}).keys())
            rows.extend(
                ConsumerConnection(
                    broker_name=name,
                    client_id=str(c.get("clientId", "")),
                    client_addr=str(c.get("clientAddr", "")),
                    language=str(c.get("language", "")),
                    version=int(c.get("version", 0) or 0),
                    message_model=str(data.get("messageModel", "")),
                    consume_type=str(data.get("consumeType", "")),
                    topics=tuple(topics),
                )
                for c in data.get("connectionSet") or []
                if isinstance(c, dict)
            )
        return sorted(rows)

    async def producer_connections(self, group: str) -> list[ProducerConnection]:
        """The clients of producer group ``group`` connected to each master now (RocketMQ's
        ``examineProducerConnectionInfo``: heartbeats name the groups a client produces for)."""
        rows: list[ProducerConnection] = []
        for name, address in (await self._masters()).items():
            response = await self._client.invoke(
                address,
                MQRequestCode.GET_PRODUCER_CONNECTION_LIST,
                GetProducerConnectionListRequestHeader(group).to_ext_fields(),
                expect=(MQResponseCode.SUCCESS, MQResponseCode.SYSTEM_ERROR),
            )
            if response.code != MQResponseCode.SUCCESS:
                continue  # no producer of the group at that broker group
            data = json.loads(response.body or b"{}")
            rows.extend(
                ProducerConnection(
                    broker_name=name,
                    client_id=str(c.get("clientId", "")),
                    client_addr=str(c.get("clientAddr", "")),
                )
                for c in data.get("connectionSet") or []
                if isinstance(c, dict)
            )
        return sorted(rows)

    async def consumer_running_info(
        self, group: str, client_id: str, broker_address: str
    ) -> ConsumerRunningInfo:
        """What client ``client_id`` of ``group`` says of itself (GET_CONSUMER_RUNNING_INFO,
        307): the broker at ``broker_address``, where the client is connected, asks it.

        Raises:
            LedgerMQError: the client is not online there, did not answer, or answered nothing
                readable (the remark says which).
        """
        response = await self._client.invoke(
            broker_address,
            MQRequestCode.GET_CONSUMER_RUNNING_INFO,
            GetConsumerRunningInfoRequestHeader(group, client_id).to_ext_fields(),
            # the broker waits up to 5 s for the client: wait for the broker's answer
            timeout_s=max(self._client.request_timeout_s, 8.0),
            expect=(MQResponseCode.SUCCESS, MQResponseCode.SYSTEM_ERROR),
        )
        if response.code != MQResponseCode.SUCCESS:
            raise MQResponseError(response.remark or "no answer", response.code, broker_address)
        return ConsumerRunningInfo.decode(response.body)

    async def consumer_status(self, group: str, client_id: str | None = None) -> list[ClientStatus]:
        """Every online client of ``group`` (or only ``client_id``) as it describes itself, each
        queue's lag against its master's max offset (``mqadmin consumerStatus``). An empty list:
        no client of the group is online.

        Raises:
            LedgerMQError: ``client_id`` is not an online client of the group.
        """
        masters = await self._masters()
        connections: dict[str, ConsumerConnection] = {}
        for c in await self.consumer_connections(group):
            connections.setdefault(c.client_id, c)
        if client_id is not None:
            if client_id not in connections:
                online = ", ".join(sorted(connections)) or "none"
                raise LedgerMQError(
                    f"client {client_id} of consumer group {group} is not online; online: {online}"
                )
            connections = {client_id: connections[client_id]}
        answers: dict[str, ConsumerRunningInfo | LedgerMQError] = {}
        for cid, c in sorted(connections.items()):
            try:
                answers[cid] = await self.consumer_running_info(group, cid, masters[c.broker_name])
            except LedgerMQError as exc:
                answers[cid] = exc
        topics = {q.topic for a in answers.values() if not isinstance(a, Exception)
                  for q in a.queues}  # fmt: skip
        offsets: dict[tuple[str, str, int], int] = {}
        for topic in sorted(topics):
            with contextlib.suppress(LedgerMQError):  # lag unknown rather than no status
                for q in await self.topic_stats(topic):
                    offsets[(q.topic, q.broker_name, q.queue_id)] = q.max_offset
        rows = []
        for cid, c in sorted(connections.items()):
            answer = answers[cid]
            info = None if isinstance(answer, Exception) else answer
            rows.append(
                ClientStatus(
                    client_id=cid,
                    client_addr=c.client_addr,
                    language=c.language,
                    version=c.version,
                    broker_name=c.broker_name,
                    info=info,
                    queues=queue_statuses(info, offsets) if info is not None else (),
                    error=str(answer) if info is None else "",
                )
            )
        return rows

    # ------------------------------------------------------------------ brokers
    async def wipe_write_perm(self, broker_name: str) -> dict[str, int]:
        """Route broker group ``broker_name`` read-only on every NameServer (drain it: producers
        go elsewhere, consumers finish reading it). NameServer -> topics it serves."""
        return await self._write_perm(
            WipeWritePermOfBrokerRequestHeader(broker_name), "wipeTopicCount"
        )

    async def add_write_perm(self, broker_name: str) -> dict[str, int]:
        """Undo ``wipe_write_perm`` on every NameServer."""
        return await self._write_perm(
            AddWritePermOfBrokerRequestHeader(broker_name), "addTopicCount"
        )

    async def _write_perm(
        self,
        header: WipeWritePermOfBrokerRequestHeader | AddWritePermOfBrokerRequestHeader,
        field: str,
    ) -> dict[str, int]:
        """``header`` sent to every NameServer; NameServer -> its answer's count ``field``."""
        counts: dict[str, int] = {}
        fields = header.to_ext_fields()
        for address in self._client.namesrv_addrs:  # every one: clients may ask any of them
            response = await self._client.invoke(address, header.CODE, fields)
            counts[address] = int(response.ext_fields.get(field, "0"))
        return counts

    async def broker_config(self, address: str) -> dict[str, str]:
        """The broker's settings (GET_BROKER_CONFIG), name -> value."""
        response = await self._client.invoke(address, MQRequestCode.GET_BROKER_CONFIG)
        settings: dict[str, str] = {}
        for line in (response.body or b"").decode("utf-8", "replace").splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip() and not key.lstrip().startswith("#"):
                settings[key.strip()] = value.strip()
        return settings

    async def update_broker_config(self, address: str, settings: Mapping[str, str]) -> str:
        """Change ``broker.conf`` keys on one replica while it runs (UPDATE_BROKER_CONFIG, 25);
        the body is the keys as Java properties text, as RocketMQ's ``updateBrokerConfig``
        sends it. Returns the broker's remark (what changed, where it was written).

        Raises:
            LedgerMQError: the broker refused (a key that needs a restart, a bad value; nothing
                was changed) or could not be reached.
        """
        for key, value in settings.items():
            if not key or any(c in key for c in "=\n\r:#!") or any(c in value for c in "\n\r"):
                raise ConfigError(f"bad setting {key!r}: one key=value, no line breaks")
        body = "".join(f"{key}={value}\n" for key, value in settings.items()).encode()
        response = await self._client.invoke(
            address,
            MQRequestCode.UPDATE_BROKER_CONFIG,
            body=body,
            expect=(MQResponseCode.SUCCESS, MQResponseCode.SYSTEM_ERROR),
        )
        if response.code != MQResponseCode.SUCCESS:
            # The remark alone: it names the keys and why, and callers list it per replica.
            raise MQResponseError(response.remark or "refused", response.code, address)
        return response.remark or ""

    async def broker_addresses(self, cluster: str | None = None) -> dict[str, dict[int, str]]:
        """broker group -> replica id (0 = master) -> address, from the NameServer."""
        info = await self.cluster_info()
        names: Iterable[str] = (
            info.cluster_addr_table.get(cluster, ()) if cluster else info.broker_addr_table
        )
        return {
            name: dict(sorted(info.broker_addr_table[name].broker_addrs.items()))
            for name in sorted(names)
            if name in info.broker_addr_table
        }

    async def check_admin_account(self) -> None:
        """Prove, without changing anything, that this ``Admin``'s credentials are an admin
        account of an ACL cluster (the web console's sign-in).

        It sends one master an admin request that the ACL checks before anything else and
        that the broker then refuses on its own: creating a topic whose name has spaces,
        which LedgerMQ's and RocketMQ 4.9's brokers reject before storing anything (a broker
        that creates it anyway has it deleted again at once). The answer NO_PERMISSION (16)
        means the ACL refused the account (its remark says whether the keys are wrong or the
        account is not an admin); any other answer means the ACL let it through.

        Raises:
            MQResponseError: code NO_PERMISSION when the account may not administer.
            NoRouteError / NetworkError: no master to ask.
        """
        address = next(iter((await self._masters()).values()), None)
        if address is None:
            raise NoRouteError("no broker group is registered with the NameServers yet")
        ext = CreateTopicRequestHeader(_ADMIN_PROBE_TOPIC, DEFAULT_TOPIC, 1, 1).to_ext_fields()
        try:
            await self._client.invoke(address, MQRequestCode.UPDATE_AND_CREATE_TOPIC, ext)
        except MQResponseError as exc:
            if exc.code == MQResponseCode.NO_PERMISSION:
                raise
            return  # refused for its name, after the ACL let it through
        # created: a broker that does not check names on this path. The ACL let an admin
        # request through all the same, so the account is an admin; take the topic away.
        with contextlib.suppress(LedgerMQError):
            await self.delete_topic(_ADMIN_PROBE_TOPIC)

    async def broker_runtime_info(self, address: str) -> dict[str, str]:
        response = await self._client.invoke(address, MQRequestCode.GET_BROKER_RUNTIME_INFO)
        table = json.loads(response.body or b"{}").get("table") or {}
        return {str(k): str(v) for k, v in table.items()}

    async def quarantined_entries(
        self, address: str, since_index: int = 0, limit: int = 1000
    ) -> tuple[int, list[QuarantinedEntry]]:
        """The entries the replica at ``address`` quarantined (from ledger index
        ``since_index`` on, oldest first, at most ``limit``) and how many it has in all."""
        response = await self._client.invoke(
            address,
            MQRequestCode.GET_QUARANTINED_ENTRIES,
            GetQuarantinedEntriesRequestHeader(since_index, limit).to_ext_fields(),
        )
        try:
            body = json.loads(response.body or b"{}")
            entries = [
                QuarantinedEntry(
                    int(e["index"]),
                    int(e["record"]),
                    str(e["topic"]),
                    str(e["reason"]),
                    int(e["timeMs"]),
                )
                for e in body.get("entries", [])
            ]
            return int(body.get("total", len(entries))), entries
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise MessageFormatError(
                f"{address} answered GET_QUARANTINED_ENTRIES with a malformed body: {exc}"
            ) from None

    async def replica_list(self, broker_name: str) -> list[dict[str, object]]:
        """``broker_name``'s ledger members as its master sees them: one dict per member with
        ``id``, ``address``, ``role`` (leader / follower / learner), ``logEnd``, ``lag`` and
        ``lastContactMs`` (None where unknown)."""
        (address,) = (await self._masters(broker_names=[broker_name])).values()
        response = await self._client.invoke(address, MQRequestCode.REPLICA_LIST, timeout_s=10.0)
        try:
            replicas = json.loads(response.body or b"{}")["replicas"]
            return [dict(r) for r in replicas]
        except (ValueError, KeyError, TypeError) as exc:
            raise MessageFormatError(
                f"{address} answered REPLICA_LIST with a malformed body: {exc}"
            ) from None

    async def replica_add(self, broker_name: str, peer: str) -> int:
        """Add ``peer`` (``nX-HOST:PORT``, its ledger address) to ``broker_name`` as a learner;
        the log index of the change, once committed. Start the new replica next, with a
        ``dLegerPeers`` that lists the members (``replica_list``) plus itself."""
        header = ReplicaAddRequestHeader(peer)
        return await self._membership(broker_name, header.CODE, header.to_ext_fields())

    async def replica_remove(self, broker_name: str, member: str) -> int:
        """Remove replica ``member`` from ``broker_name``; the change's log index."""
        header = ReplicaRemoveRequestHeader(member)
        return await self._membership(broker_name, header.CODE, header.to_ext_fields())

    async def replica_backup(
        self, broker_name: str, replica: str, destination: str
    ) -> dict[str, object]:
        """Ask replica ``replica`` (its ``dLegerSelfId``) of ``broker_name`` to copy its data,
        while it serves, into ``destination``: an absolute path on *that replica's* host, new
        or empty. The backup's manifest (``backup.json``'s keys: ``selfId``, ``beginIndex``,
        ``endIndex``, ``committedIndex``, ``metadataAppliedIndex``, ``diskBytes``, ...).

        Raises:
            ConfigError: no registered replica of ``broker_name`` says it is ``replica``.
        """
        info = await self.cluster_info()
        data = info.broker_addr_table.get(broker_name)
        addresses = sorted(data.broker_addrs.values()) if data is not None else []
        tables = await asyncio.gather(
            *(self.broker_runtime_info(a) for a in addresses), return_exceptions=True
        )
        found = [
            a
            for a, t in zip(addresses, tables, strict=True)
            if isinstance(t, dict) and t.get("dLegerSelfId") == replica
        ]
        if not found:
            raise ConfigError(
                f"no registered replica of broker group {broker_name!r} is {replica!r} "
                f"(asked {', '.join(addresses) or 'none: the group is not registered'})"
            )
        response = await self._client.invoke(
            found[0],
            MQRequestCode.REPLICA_BACKUP,
            ReplicaBackupRequestHeader(destination).to_ext_fields(),
            timeout_s=600.0,
        )
        try:
            return dict(json.loads(response.body or b"{}"))
        except (ValueError, TypeError) as exc:
            raise MessageFormatError(
                f"{found[0]} answered REPLICA_BACKUP with a malformed body: {exc}"
            ) from None

    async def _membership(self, broker_name: str, code: int, fields: dict[str, str]) -> int:
        (address,) = (await self._masters(broker_names=[broker_name])).values()
        response = await self._client.invoke(address, code, fields, timeout_s=15.0)
        return int(response.ext_fields.get("index", "-1"))

    async def transfer_leadership(self, broker_name: str, to_self_id: str) -> None:
        """Ask ``broker_name``'s master to hand its ledger leadership to replica ``to_self_id``."""
        (address,) = (await self._masters(broker_names=[broker_name])).values()
        header = TransferLeadershipRequestHeader(to_self_id)
        await self._client.invoke(address, header.CODE, header.to_ext_fields(), timeout_s=10.0)

    # ------------------------------------------------------------------ messages
    async def resend_from_dlq(self, group: str, offset_msg_id: str) -> SendResult:
        """Give a dead-lettered message of ``group`` (named by either of its ids,
        ``find_message``) back to that group: it is stored again in
        ``%RETRY%<group>``, which only that group consumes, with its original topic, tags,
        keys and properties, so the group's consumers see it as they first did (RocketMQ
        Dashboard's "resend" of a DLQ message). Its reconsume count starts again.

        Raises:
            LedgerMQError: the message is not in ``%DLQ%<group>``.
        """
        found = await self.find_message(offset_msg_id)
        dead = [m for m in found if m.topic == f"%DLQ%{group}"]
        if not dead:
            raise LedgerMQError(
                f"message {offset_msg_id} is in {found[0].topic}, not in the dead-letter topic "
                f"of {group} (%DLQ%{group})"
            )
        message = dead[-1]
        properties = {
            k: v for k, v in message.properties.items() if k not in _NOT_RESENT_PROPERTIES
        }
        original = message.properties.get(MessageProperty.RETRY_TOPIC) or message.topic
        properties[MessageProperty.RETRY_TOPIC] = original
        client = self._client
        producer = Producer(
            # a valid group name however long the group's (wire.names: at most 120)
            f"ledgermq-admin-resend-{group}"[:GROUP_MAX_LENGTH],
            ";".join(client.namesrv_addrs),
            network=client.network_given,
            clock=client.clock,
            credentials=client.credentials,
            tls=client.tls,
        )
        await producer.start()
        try:
            return await producer.send(f"%RETRY%{group}", message.body, properties=properties)
        finally:
            await producer.shutdown()

    async def find_message(
        self, msg_id: str, *, topic: str | None = None, max_num: int = 32
    ) -> list[MessageExt]:
        """The messages ``msg_id`` names, whichever of the two ids it is (RocketMQ's
        ``viewMessage`` then ``queryMsgByUniqueKey``), oldest first:

        - an offset msgId (``offsetMsgId``): the record is read where it is stored;
        - a producer's ``UNIQ_KEY`` (the ``msgId`` a send returns and consumers see): looked
          up in the key index of ``topic``, or of every topic when None. A retried or
          dead-lettered message keeps its UNIQ_KEY, so there may be several.

        Both ids are 32 hex digits (IPv4); an id that reads as an offset msgId is tried as one
        first, and as a UNIQ_KEY when that finds nothing.

        Raises:
            MessageFormatError: ``msg_id`` can be neither kind of id (a sentence says why).
            MQResponseError: QUERY_NOT_FOUND when no message has that id; NO_PERMISSION when
                the ACL refused every lookup.
        """
        forms = read_message_id(msg_id)
        offset_error: LedgerMQError | None = None
        if forms.offset is not None:
            try:
                message = await self.view_message(forms.text)
            except LedgerMQError as exc:  # not stored there, or no broker at that address
                offset_error = exc
            else:
                if topic is None or message.topic == topic:
                    return [message]
        search = await self._by_unique_key(forms.text, topic, max_num)
        if search.found:
            return search.found
        if search.refusal is not None:
            raise search.refusal
        if offset_error is not None and not _is_absent(offset_error):
            raise offset_error
        where = f"topic {topic}" if topic is not None else "any topic"
        unsearched = "".join(
            (
                f"; {search.refused} lookup(s) refused (NO_PERMISSION: the account lacks SUB)"
                if search.refused
                else "",
                f"; not reached: {', '.join(search.unreachable)}" if search.unreachable else "",
            )
        )
        raise MQResponseError(
            f"no message of {where} has the id {forms.text} (neither as the msgId a producer "
            f"printed nor as an offsetMsgId){unsearched}",
            MQResponseCode.QUERY_NOT_FOUND,
        )

    async def _by_unique_key(self, key: str, topic: str | None, max_num: int) -> _UniqueKeySearch:
        """Messages whose UNIQ_KEY is ``key`` in ``topic`` (every topic when None), asked of
        every master with RocketMQ's unique-key flag. Topics a master does not hold answer
        QUERY_NOT_FOUND; an ACL refusal or an unreachable master is counted, not raised, so
        that what the others hold is still found."""
        topics = [topic] if topic is not None else await self.topic_list()
        info = await self.cluster_info()
        masters = sorted(
            address
            for data in info.broker_addr_table.values()
            if (address := data.master_addr) is not None
        )
        gate = asyncio.Semaphore(8)
        found: dict[str, MessageExt] = {}
        refusals: list[MQResponseError] = []
        unreachable: set[str] = set()
        asked = 0

        async def ask(address: str, name: str) -> None:
            nonlocal asked
            ext = QueryMessageRequestHeader(name, key, max_num, 0, 1 << 62).to_ext_fields()
            ext[_UNIQUE_KEY_QUERY] = "true"
            async with gate:
                try:
                    response = await self._client.invoke(
                        address,
                        MQRequestCode.QUERY_MESSAGE,
                        ext,
                        expect=(MQResponseCode.SUCCESS, MQResponseCode.QUERY_NOT_FOUND),
                    )
                except MQResponseError as exc:
                    if exc.code == MQResponseCode.NO_PERMISSION:
                        refusals.append(exc)
                    return
                except NetworkError:
                    unreachable.add(address)
                    return
            asked += 1
            for message in decode_records(response.body) if response.body else []:
                if message.properties.get(MessageProperty.UNIQ_KEY) == key:
                    found.setdefault(message.offset_msg_id, message)

        await asyncio.gather(*(ask(a, t) for a in masters for t in topics))
        ordered = sorted(found.values(), key=lambda m: (m.store_timestamp, m.commit_log_offset))
        return _UniqueKeySearch(
            ordered[:max_num],
            len(refusals),
            sorted(unreachable),
            refusals[0] if refusals and not asked else None,
        )

    async def view_message(self, offset_msg_id: str) -> MessageExt:
        """The message an offset msgId names (any replica of its group holds it)."""
        ip, port, offset = decode_offset_message_id(offset_msg_id)
        address = f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"
        response = await self._client.invoke(
            address,
            MQRequestCode.VIEW_MESSAGE_BY_ID,
            ViewMessageRequestHeader(offset).to_ext_fields(),
        )
        messages = decode_records(response.body)
        if not messages:
            raise LedgerMQError(f"{address} returned no message for {offset_msg_id}")
        return messages[0]

    async def message_at(
        self, topic: str, broker_name: str, queue_id: int, offset: int
    ) -> MessageExt:
        """The message at ``offset`` of queue ``queue_id`` of ``topic`` on ``broker_name``
        (RocketMQ's ``queryMsgByOffset``), read as the tools consumer without committing.

        Raises:
            MQResponseError: QUERY_NOT_FOUND with the queue's offsets when none is there.
        """
        route = await self.topic_route(topic)
        queues = {q.broker_name: q.read_queue_nums for q in route.queue_datas}
        if broker_name not in queues:
            raise NoRouteError(
                f"topic {topic} is not on broker group {broker_name}; it is on "
                f"{', '.join(sorted(queues)) or 'none'}"
            )
        if not 0 <= queue_id < queues[broker_name]:
            raise MQResponseError(
                f"topic {topic} has queues 0 to {queues[broker_name] - 1} on {broker_name}, "
                f"not {queue_id}",
                MQResponseCode.QUERY_NOT_FOUND,
            )
        api = QueueApi(self._client, TOOLS_CONSUMER_GROUP)
        mq = MessageQueue(topic, broker_name, queue_id)
        result = await api.pull(mq, offset, 1, "*")
        found = [m for m in result.messages if m.queue_offset == offset]
        if result.status != PullStatus.FOUND or not found:
            raise MQResponseError(
                f"no message at offset {offset} of {mq}: the queue holds offsets "
                f"{result.min_offset} to {result.max_offset - 1}",
                MQResponseCode.QUERY_NOT_FOUND,
            )
        return found[0]

    async def messages_between(
        self, topic: str, begin_ms: int, end_ms: int, *, max_messages: int = 100
    ) -> list[MessageExt]:
        """Messages of ``topic`` stored from ``begin_ms`` to ``end_ms`` (epoch ms, both
        included), oldest first, at most ``max_messages`` (the oldest ones). Each queue is read
        from the offset its broker finds for ``begin_ms`` (SEARCH_OFFSET_BY_TIMESTAMP), as
        RocketMQ's tools consumer (group ``TOOLS_CONSUMER``) does, without committing offsets."""
        if end_ms < begin_ms:
            raise LedgerMQError(f"the time range ends ({end_ms}) before it begins ({begin_ms})")
        api = QueueApi(self._client, TOOLS_CONSUMER_GROUP)
        route = await self.topic_route(topic)
        found: list[MessageExt] = []
        for mq in subscribe_queues(topic, route):
            offset = await api.search_offset(mq, begin_ms)
            end = await api.max_offset(mq)
            taken = 0
            while offset < end and taken < max_messages:
                result = await api.pull(mq, offset, min(32, max_messages - taken), "*")
                if result.status != PullStatus.FOUND or result.next_begin_offset <= offset:
                    break
                offset = result.next_begin_offset
                inside = [m for m in result.messages if begin_ms <= m.store_timestamp <= end_ms]
                found.extend(inside)
                taken += len(inside)
                if result.messages and result.messages[-1].store_timestamp > end_ms:
                    break  # past the range (store times grow along a queue)
        found.sort(key=lambda m: (m.store_timestamp, m.commit_log_offset))
        return found[:max_messages]

    async def message_trace(
        self, msg_id: str, *, trace_topic: str = TRACE_TOPIC, max_messages: int = 64
    ) -> list[TraceEvent]:
        """The trace of message ``msg_id`` (its UNIQ_KEY msgId): who sent it and who consumed
        it, when and how long it took, oldest first; empty when nothing traced it (tracing is
        off, or the trace topic does not exist)."""
        try:
            traces = await self.query_message(trace_topic, msg_id, max_num=max_messages)
        except TopicNotFoundError:
            return []
        events = [
            event
            for message in traces
            for event in decode_trace(message.body.decode("utf-8", "replace"))
            if event.msg_id == msg_id
        ]
        return sorted(events, key=lambda e: (e.timestamp_ms, e.kind != "Pub"))

    async def query_message(
        self, topic: str, key: str, *, max_num: int = 32, begin_ms: int = 0, end_ms: int = 1 << 62
    ) -> list[MessageExt]:
        """Messages of ``topic`` whose KEYS (or UNIQ_KEY) include ``key``, from every group."""
        route = await self.topic_route(topic)
        ext = QueryMessageRequestHeader(topic, key, max_num, begin_ms, end_ms).to_ext_fields()
        found: dict[str, MessageExt] = {}
        for data in route.broker_datas:
            address = master_address(route, data.broker_name)
            if address is None:
                continue
            response = await self._client.invoke(
                address,
                MQRequestCode.QUERY_MESSAGE,
                ext,
                expect=(MQResponseCode.SUCCESS, MQResponseCode.QUERY_NOT_FOUND),
            )
            for message in decode_records(response.body) if response.body else []:
                found.setdefault(message.offset_msg_id, message)
        return sorted(found.values(), key=lambda m: (m.store_timestamp, m.commit_log_offset))
