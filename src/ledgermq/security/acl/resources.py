"""What each request needs from the ACL (RocketMQ's ``PlainAccessValidator.parse``).

Sends and END_TRANSACTION need PUB on the topic (a send to a retry topic, SUB on its group);
pulls, POP (pop, ack, change invisible time), offsets and consumer bookkeeping need SUB on the
group and the topic; a group's clients (GET_CONSUMER_CONNECTION_LIST, GET_CONSUMER_RUNNING_INFO)
SUB on the group;
heartbeats SUB on every consumer group and subscribed topic; queue locks (LOCK_BATCH_MQ,
UNLOCK_BATCH_MQ) SUB on the body's group and on each queue's topic. Requests that change the
cluster (topics, groups, broker config, registrations, offsets resets, leadership) need an admin
account, a superset of RocketMQ's ``Permission.ADMIN_CODE``, and so does reading every group's
offsets (GET_ALL_CONSUMER_OFFSET). The rest (route lookups, cluster-wide lists) need a valid
account only. Groups are resources of their own (``%RETRY%<group>`` in RocketMQ's tables): a
``%RETRY%`` or ``%DLQ%`` topic is its group's. A code in none of the three sets needs an admin
account: a new code is refused to everyone else until it is classified.

Parse once, check that (issue 25): a door that parses a request (a send's header, a heartbeat's
or a lock's body) computes its needs from the parsed object (``send_needs``,
``heartbeat_needs``, ``lock_needs``) and hands the handler that same object, so the ACL and the
handler cannot read different fields. What only the stored record tells (its topic) is checked by
the handler after reading it, before answering or changing anything (``record_needs``):
VIEW_MESSAGE_BY_ID and CONSUMER_SEND_MSG_BACK need SUB on the record's topic, END_TRANSACTION
PUB on the half message's real topic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from ledgermq.errors import BadRequestError
from ledgermq.security.acl.permission import Perm
from ledgermq.wire.codes import MQRequestCode
from ledgermq.wire.ext_fields import send_v2_topic
from ledgermq.wire.headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ConsumerSendMsgBackRequestHeader,
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicRequestHeader,
    EndTransactionRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumeStatsRequestHeader,
    GetEarliestMsgStoretimeRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    GetProducerConnectionListRequestHeader,
    GetQuarantinedEntriesRequestHeader,
    GetTopicStatsInfoRequestHeader,
    PopMessageRequestHeader,
    PullMessageRequestHeader,
    QueryConsumerOffsetRequestHeader,
    QueryMessageRequestHeader,
    RecallMessageRequestHeader,
    ReplicaAddRequestHeader,
    ReplicaBackupRequestHeader,
    ReplicaRemoveRequestHeader,
    SearchOffsetRequestHeader,
    TransferLeadershipRequestHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    ViewMessageRequestHeader,
    parse_header,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from ledgermq.wire.headers import Header

__all__ = [
    "ACCOUNT_ONLY_CODES",
    "ADMIN_CODES",
    "HEADER_NEEDS",
    "RESOURCE_CODES",
    "Needs",
    "Resource",
    "header_needs",
    "heartbeat_needs",
    "lock_needs",
    "record_needs",
    "request_needs",
    "send_needs",
]

RETRY_PREFIX: Final = "%RETRY%"
DLQ_PREFIX: Final = "%DLQ%"

_C = MQRequestCode
ADMIN_CODES: Final = frozenset(
    {
        # RocketMQ's Permission.ADMIN_CODE
        _C.UPDATE_AND_CREATE_TOPIC,
        _C.UPDATE_BROKER_CONFIG,
        _C.DELETE_TOPIC_IN_BROKER,
        _C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        _C.DELETE_SUBSCRIPTIONGROUP,
        # and what else changes the cluster here
        _C.DELETE_TOPIC_IN_NAMESRV,
        _C.REGISTER_BROKER,
        _C.UNREGISTER_BROKER,
        _C.BROKER_HEARTBEAT,
        _C.RESET_CONSUMER_CLIENT_OFFSET,
        _C.TRANSFER_LEADERSHIP,
        # a producer group's clients (ids, addresses): producer groups are no resource of the
        # plain ACL, so only an admin may list another tenant's
        _C.GET_PRODUCER_CONNECTION_LIST,
        _C.GET_QUARANTINED_ENTRIES,  # names any tenant's topics
        _C.REPLICA_LIST,  # a group's replicas and their addresses
        _C.REPLICA_ADD,
        _C.REPLICA_REMOVE,
        _C.REPLICA_BACKUP,  # writes a directory on the replica's host
        _C.WIPE_WRITE_PERM_OF_BROKER,
        _C.ADD_WRITE_PERM_OF_BROKER,
        _C.GET_ALL_CONSUMER_OFFSET,  # every group's offsets: no one group to check
    }
)
"""Codes only an admin account may send."""
RESOURCE_CODES: Final = frozenset(
    {
        _C.SEND_MESSAGE,
        _C.SEND_MESSAGE_V2,
        _C.SEND_BATCH_MESSAGE,
        _C.RECALL_MESSAGE,
        _C.CONSUMER_SEND_MSG_BACK,
        _C.END_TRANSACTION,
        _C.PULL_MESSAGE,
        _C.POP_MESSAGE,
        _C.ACK_MESSAGE,
        _C.CHANGE_MESSAGE_INVISIBLETIME,
        _C.UPDATE_CONSUMER_OFFSET,
        _C.QUERY_CONSUMER_OFFSET,
        _C.UNREGISTER_CLIENT,
        _C.GET_CONSUMER_LIST_BY_GROUP,
        _C.QUERY_MESSAGE,
        _C.GET_MAX_OFFSET,
        _C.GET_MIN_OFFSET,
        _C.SEARCH_OFFSET_BY_TIMESTAMP,
        _C.GET_EARLIEST_MSG_STORETIME,
        _C.HEART_BEAT,
        _C.LOCK_BATCH_MQ,
        _C.UNLOCK_BATCH_MQ,
        _C.GET_CONSUME_STATS,
        _C.GET_TOPIC_STATS_INFO,
        _C.VIEW_MESSAGE_BY_ID,
        _C.GET_CONSUMER_CONNECTION_LIST,
        _C.GET_CONSUMER_RUNNING_INFO,
    }
)
"""Codes that need a permission on a topic or group (sends: ``send_needs``; HEART_BEAT:
``heartbeat_needs``; locks: ``lock_needs``; VIEW_MESSAGE_BY_ID: ``record_needs`` once read)."""
_PARSED_BY_THE_DOOR: Final = frozenset({_C.HEART_BEAT, _C.LOCK_BATCH_MQ, _C.UNLOCK_BATCH_MQ})
"""Codes whose needs only their parsed body tells, never ``request_needs`` (which asks an admin
account for them: a door that forgot to parse refuses, not allows)."""
ACCOUNT_ONLY_CODES: Final = frozenset(
    {
        _C.GET_ALL_TOPIC_CONFIG,
        _C.GET_BROKER_CONFIG,
        _C.GET_BROKER_RUNTIME_INFO,
        _C.CHECK_TRANSACTION_STATE,
        _C.NOTIFY_CONSUMER_IDS_CHANGED,
        _C.GET_ALL_DELAY_OFFSET,
        _C.CHECK_CLIENT_CONFIG,
        _C.GET_ROUTEINFO_BY_TOPIC,
        _C.GET_ROUTE_VERSION,  # ours: a number that moves with the routes
        _C.GET_BROKER_CLUSTER_INFO,
        _C.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
        _C.GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
    }
)
"""Codes any valid account may send: route and cluster lookups, cluster-wide lists, client
bookkeeping. tests/acl checks that every code is in exactly one of the three sets, so
a new code is classified on purpose."""


@dataclass(frozen=True, slots=True)
class Resource:
    """A topic or a consumer group, as the ACL file names it."""

    kind: str
    """``topic`` or ``group``."""
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.name!r}"


def topic_resource(topic: str) -> Resource:
    """A topic, or the group whose retry or dead-letter topic it is."""
    for prefix in (RETRY_PREFIX, DLQ_PREFIX):
        if topic.startswith(prefix):
            return Resource("group", topic[len(prefix) :])
    return Resource("topic", topic)


def group_resource(group: str) -> Resource:
    return Resource("group", group)


@dataclass(frozen=True, slots=True)
class Needs:
    """What a request needs: an admin account, and a permission on each resource."""

    admin: bool = False
    resources: Mapping[Resource, Perm] = field(default_factory=dict)


def _add(resources: dict[Resource, Perm], resource: Resource, perm: Perm) -> None:
    if resource.name:
        resources[resource] = resources.get(resource, Perm.NONE) | perm


def _send(resources: dict[Resource, Perm], topic: str | None) -> None:
    if topic is None:
        return
    target = topic_resource(topic)
    # a send to a retry or DLQ topic is a consumer's message back: SUB on the topic's group
    _add(resources, target, Perm.SUB if target.kind == "group" else Perm.PUB)


def send_needs(topic: str) -> Needs:
    """A send (SEND_MESSAGE, _V2, SEND_BATCH_MESSAGE) to ``topic``, as the door parsed its
    header: PUB on the topic (SUB on the group for its retry or dead-letter topic). A send that
    creates its topic (``autoCreateTopicEnable``) needs the same, as in RocketMQ: PUB on the
    topic it creates, which an account has only by name or by ``defaultTopicPerm``; no admin
    account is needed, and an account without PUB on the name creates nothing."""
    resources: dict[Resource, Perm] = {}
    _send(resources, topic)
    return Needs(resources=resources)


def record_needs(topic: str, perm: Perm) -> Needs:
    """``perm`` on a stored record's topic (its group for a retry or dead-letter topic): what a
    handler asks once it has read the record a request names by offset."""
    resources: dict[Resource, Perm] = {}
    _add(resources, topic_resource(topic), perm)
    return Needs(resources=resources)


def lock_needs(group: str, topics: Iterable[str]) -> Needs:
    """LOCK_BATCH_MQ / UNLOCK_BATCH_MQ, from the parsed body: SUB on its group and on each of
    its queues' topics."""
    resources: dict[Resource, Perm] = {}
    _add(resources, group_resource(group), Perm.SUB)
    for topic in topics:
        _add(resources, topic_resource(topic), Perm.SUB)
    return Needs(resources=resources)


def request_needs(code: int, fields: Mapping[str, str]) -> Needs:
    """What a request needs from its code and extFields alone, for a door that does not parse
    it first (the broker computes a send's needs from its parsed header, ``send_needs``). Codes
    with a body to parse (HEART_BEAT, locks: ``_PARSED_BY_THE_DOOR``) need an admin account
    here, so that forgetting to parse refuses. A field the request lacks adds no resource: the
    handler refuses the request. A code in no set needs an admin account."""
    if code in ADMIN_CODES or code in _PARSED_BY_THE_DOOR:
        return Needs(admin=True)
    if code not in RESOURCE_CODES and code not in ACCOUNT_ONLY_CODES:
        return Needs(admin=True)  # unclassified: refused to all but an admin
    resources: dict[Resource, Perm] = {}
    get = fields.get
    try:  # a header the handler would refuse needs an admin: nothing to allow
        header = parse_header(code, fields)
        if header is not None:
            return header_needs(header)
        v2_topic = (
            send_v2_topic(fields)  # the header parser's own rule
            if code in (_C.SEND_MESSAGE_V2, _C.SEND_BATCH_MESSAGE)
            else None
        )
    except BadRequestError:
        return Needs(admin=True)
    if v2_topic is not None:
        _send(resources, v2_topic)
    elif code == _C.SEND_MESSAGE:
        _send(resources, get("topic"))
    return Needs(resources=resources)


def heartbeat_needs(consumers: Iterable[tuple[str, Iterable[str]]]) -> Needs:
    """HEART_BEAT: SUB on each consumer group and on each topic it subscribes to (producer
    groups need nothing, as in RocketMQ)."""
    resources: dict[Resource, Perm] = {}
    for group, topics in consumers:
        _add(resources, group_resource(group), Perm.SUB)
        for topic in topics:
            _add(resources, topic_resource(topic), Perm.SUB)
    return Needs(resources=resources)


def _topic_and_group(header: Any) -> Needs:
    """SUB on the header's topic and consumer group (pulls, POP, a group's offsets)."""
    resources: dict[Resource, Perm] = {}
    _add(resources, topic_resource(header.topic), Perm.SUB)
    _add(resources, group_resource(header.consumer_group), Perm.SUB)
    return Needs(resources=resources)


def _topic(header: Any) -> Needs:
    """SUB on the header's topic (a queue's offsets, a topic's statistics, its messages)."""
    return record_needs(header.topic, Perm.SUB)


def _consumer_group(header: Any) -> Needs:
    """SUB on the header's consumer group (its clients, what one of them holds)."""
    return Needs(resources={group_resource(header.consumer_group): Perm.SUB})


def _consume_stats(header: GetConsumeStatsRequestHeader) -> Needs:
    """SUB on the group, and on the topic when one is named."""
    resources: dict[Resource, Perm] = {}
    _add(resources, topic_resource(header.topic or ""), Perm.SUB)
    _add(resources, group_resource(header.consumer_group), Perm.SUB)
    return Needs(resources=resources)


def _publishes(header: RecallMessageRequestHeader | EndTransactionRequestHeader) -> Needs:
    """PUB on the topic named, if any (a recall, as RocketMQ's; ending a transaction publishes
    or drops a message of the topic, checked again by the handler on the half message's real
    topic)."""
    resources: dict[Resource, Perm] = {}
    _send(resources, header.topic)
    return Needs(resources=resources)


def _unregister(header: UnregisterClientRequestHeader) -> Needs:
    """A consumer leaves only the group named (producers need nothing, as in RocketMQ)."""
    if header.consumer_group is None:
        return Needs()
    return Needs(resources={group_resource(header.consumer_group): Perm.SUB})


def _send_back(header: ConsumerSendMsgBackRequestHeader) -> Needs:
    """SUB on the group, and, once the record is read, on its topic (``record_needs``)."""
    return Needs(resources={group_resource(header.group): Perm.SUB})


def _record_only(header: ViewMessageRequestHeader) -> Needs:
    """Nothing yet: SUB on the record's topic, asked by the handler once it is read."""
    return Needs()


def _admin(header: object) -> Needs:
    return Needs(admin=True)


HEADER_NEEDS: Final[Mapping[type, Callable[[Any], Needs]]] = {
    PullMessageRequestHeader: _topic_and_group,
    QueryConsumerOffsetRequestHeader: _topic_and_group,
    UpdateConsumerOffsetRequestHeader: _topic_and_group,
    PopMessageRequestHeader: _topic_and_group,
    AckMessageRequestHeader: _topic_and_group,
    ChangeInvisibleTimeRequestHeader: _topic_and_group,
    GetMaxOffsetRequestHeader: _topic,
    GetMinOffsetRequestHeader: _topic,
    GetEarliestMsgStoretimeRequestHeader: _topic,
    SearchOffsetRequestHeader: _topic,
    GetTopicStatsInfoRequestHeader: _topic,
    QueryMessageRequestHeader: _topic,
    GetConsumeStatsRequestHeader: _consume_stats,
    RecallMessageRequestHeader: _publishes,
    EndTransactionRequestHeader: _publishes,
    UnregisterClientRequestHeader: _unregister,
    GetConsumerConnectionListRequestHeader: _consumer_group,
    GetConsumerRunningInfoRequestHeader: _consumer_group,
    GetConsumerListByGroupRequestHeader: _consumer_group,
    ConsumerSendMsgBackRequestHeader: _send_back,
    ViewMessageRequestHeader: _record_only,
    GetProducerConnectionListRequestHeader: _admin,
    CreateTopicRequestHeader: _admin,
    DeleteTopicRequestHeader: _admin,
    DeleteSubscriptionGroupRequestHeader: _admin,
    TransferLeadershipRequestHeader: _admin,
    GetQuarantinedEntriesRequestHeader: _admin,
    ReplicaAddRequestHeader: _admin,
    ReplicaRemoveRequestHeader: _admin,
    ReplicaBackupRequestHeader: _admin,
}
"""The one table of what a typed header (``ledgermq.wire.headers``) needs, computed from the
parsed header the handler executes. tests/acl checks that every registered header has its
entry, and that the entry agrees with the code's list (``ADMIN_CODES``, ``RESOURCE_CODES``)."""


def header_needs(header: Header) -> Needs:
    """What a typed header needs (``HEADER_NEEDS``). A header missing from the table needs an
    admin account: refused to all but an admin, never allowed."""
    needs_of = HEADER_NEEDS.get(type(header))
    return Needs(admin=True) if needs_of is None else needs_of(header)
