"""What each request needs from the ACL (RocketMQ's ``PlainAccessValidator.parse``).

Sends and END_TRANSACTION need PUB on the topic (a send to a retry topic, SUB on its group);
pulls, POP (pop, ack, change invisible time), offsets and consumer bookkeeping need SUB on the
group and the topic;
heartbeats SUB on every consumer group and subscribed topic. Requests that change the cluster
(topics, groups, broker config, registrations, offsets resets, leadership) need an admin
account, a superset of RocketMQ's ``Permission.ADMIN_CODE``. The rest (route lookups,
statistics) need a valid account only. Groups are resources of their own (``%RETRY%<group>`` in
RocketMQ's tables): a ``%RETRY%`` or ``%DLQ%`` topic is its group's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from ledgermq.acl.permission import Perm
from ledgermq.wire.codes import MQRequestCode

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = [
    "ACCOUNT_ONLY_CODES",
    "ADMIN_CODES",
    "RESOURCE_CODES",
    "Needs",
    "Resource",
    "heartbeat_needs",
    "request_needs",
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
        _C.GET_QUARANTINED_ENTRIES,  # names any tenant's topics
        _C.WIPE_WRITE_PERM_OF_BROKER,
        _C.ADD_WRITE_PERM_OF_BROKER,
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
    }
)
"""Codes that need a permission on a topic or group (HEART_BEAT: ``heartbeat_needs``)."""
ACCOUNT_ONLY_CODES: Final = frozenset(
    {
        _C.GET_ALL_TOPIC_CONFIG,
        _C.GET_BROKER_CONFIG,
        _C.GET_BROKER_RUNTIME_INFO,
        _C.VIEW_MESSAGE_BY_ID,
        _C.CHECK_TRANSACTION_STATE,
        _C.NOTIFY_CONSUMER_IDS_CHANGED,
        _C.LOCK_BATCH_MQ,
        _C.UNLOCK_BATCH_MQ,
        _C.GET_ALL_CONSUMER_OFFSET,
        _C.GET_ALL_DELAY_OFFSET,
        _C.CHECK_CLIENT_CONFIG,
        _C.GET_ROUTEINFO_BY_TOPIC,
        _C.GET_BROKER_CLUSTER_INFO,
        _C.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
        _C.GET_TOPIC_STATS_INFO,
        _C.GET_CONSUMER_CONNECTION_LIST,
        _C.GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
        _C.GET_CONSUME_STATS,
        _C.GET_CONSUMER_RUNNING_INFO,
    }
)
"""Codes any valid account may send: route and cluster lookups, statistics, message views by
id, client bookkeeping. tests/acl checks that every code is in exactly one of the three sets, so
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


def request_needs(code: int, fields: Mapping[str, str]) -> Needs:
    """What a request (other than HEART_BEAT, see ``heartbeat_needs``) needs, from its code and
    extFields. A field the request lacks adds no resource: the handler refuses the request."""
    if code in ADMIN_CODES:
        return Needs(admin=True)
    resources: dict[Resource, Perm] = {}
    get = fields.get
    if code in (_C.SEND_MESSAGE, _C.RECALL_MESSAGE):  # a recall needs PUB, as RocketMQ's
        _send(resources, get("topic"))
    elif code in (_C.SEND_MESSAGE_V2, _C.SEND_BATCH_MESSAGE):
        _send(resources, get("b"))
    elif code == _C.END_TRANSACTION:
        # ending a transaction publishes (or drops) a message of the topic: PUB on it. RocketMQ
        # 4's header has no topic (its ACL asks for an account only); the broker checks a
        # topic given against the half message's real topic.
        _send(resources, get("topic"))
    elif code == _C.CONSUMER_SEND_MSG_BACK:
        _add(resources, group_resource(get("group") or ""), Perm.SUB)
    elif code in (
        _C.PULL_MESSAGE,
        _C.POP_MESSAGE,
        _C.ACK_MESSAGE,
        _C.CHANGE_MESSAGE_INVISIBLETIME,
        _C.UPDATE_CONSUMER_OFFSET,
        _C.QUERY_CONSUMER_OFFSET,
    ):
        _add(resources, topic_resource(get("topic") or ""), Perm.SUB)
        _add(resources, group_resource(get("consumerGroup") or ""), Perm.SUB)
    elif code in (_C.UNREGISTER_CLIENT, _C.GET_CONSUMER_LIST_BY_GROUP):
        _add(resources, group_resource(get("consumerGroup") or ""), Perm.SUB)
    elif code in (
        _C.QUERY_MESSAGE,
        _C.GET_MAX_OFFSET,
        _C.GET_MIN_OFFSET,
        _C.SEARCH_OFFSET_BY_TIMESTAMP,
        _C.GET_EARLIEST_MSG_STORETIME,
    ):
        _add(resources, topic_resource(get("topic") or ""), Perm.SUB)
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
