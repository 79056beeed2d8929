"""Clients of a broker: heartbeats, consumer groups, their members, and orderly-consumption locks.

HEART_BEAT (34) tells the broker which producer and consumer groups a client belongs to and what
its consumers subscribe to; GET_CONSUMER_LIST_BY_GROUP (38) lets each member of a group compute
the same queue assignment; UNREGISTER_CLIENT (35) and a closed connection remove a member at once,
and a member silent for 120 s expires (RocketMQ's ``ConsumerManager``, ``ClientHousekeeping``).
When a group's membership changes the broker tells its members (NOTIFY_CONSUMER_IDS_CHANGED, 40,
one-way), so they rebalance now instead of at their next 10-20 s rebalance tick.

LOCK_BATCH_MQ / UNLOCK_BATCH_MQ (41 / 42) implement RocketMQ's ``RebalanceLockManager``: an
orderly consumer locks each queue it consumes; a lock held by another live client is refused;
locks expire after 60 s unless renewed (clients renew every 20 s).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from ledgermq.errors import BadRequestError
from ledgermq.wire import MQRequestCode, RemotingCommand
from ledgermq.wire.json_fields import check_json_budget

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from ledgermq.net import Connection

__all__ = [
    "ClientCheck",
    "ConsumerGroupInfo",
    "ConsumerManager",
    "LockRequest",
    "QueueLockManager",
    "parse_check_client_body",
    "parse_heartbeat",
    "parse_lock_body",
]

_log = logging.getLogger(__name__)

CLIENT_EXPIRY_MS: Final = 120_000
LOCK_EXPIRY_MS: Final = 60_000

_CONSUME_TYPES: Final = {0: "CONSUME_ACTIVELY", 1: "CONSUME_PASSIVELY", 2: "CONSUME_POP"}
_MESSAGE_MODELS: Final = {0: "BROADCASTING", 1: "CLUSTERING"}
_CONSUME_FROM: Final = {
    0: "CONSUME_FROM_LAST_OFFSET",
    1: "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
    2: "CONSUME_FROM_MIN_OFFSET",
    3: "CONSUME_FROM_MAX_OFFSET",
    4: "CONSUME_FROM_FIRST_OFFSET",
    5: "CONSUME_FROM_TIMESTAMP",
}


@dataclass(frozen=True, slots=True)
class ConsumerData:
    group: str
    consume_type: str
    message_model: str
    consume_from_where: str
    subscriptions: dict[str, str]
    """topic -> subscription expression."""
    expression_types: dict[str, str] = field(default_factory=dict)
    """topic -> ``expressionType`` of its subscription (``TAG`` or ``SQL92``)."""


@dataclass(frozen=True, slots=True)
class Heartbeat:
    client_id: str
    producer_groups: tuple[str, ...]
    consumers: tuple[ConsumerData, ...]


def _enum(value: object, names: dict[int, str], default: str) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return names.get(value, default)
    if isinstance(value, str) and value:
        return value
    return default


def parse_heartbeat(body: bytes) -> Heartbeat:
    """``HeartbeatData`` JSON: Java's enum names or the C++ client's integers, both accepted."""
    check_json_budget(body, "the heartbeat body")
    try:
        data = json.loads(body)
        client_id = data["clientID"]
        if not isinstance(client_id, str) or not client_id:
            raise TypeError("clientID must be a non-empty string")  # noqa: TRY301 - one handler for every malformation
        producers = tuple(str(p["groupName"]) for p in data.get("producerDataSet") or ())
        consumers = []
        for c in data.get("consumerDataSet") or ():
            subs = {}
            types = {}
            for s in c.get("subscriptionDataSet") or ():
                subs[str(s["topic"])] = str(s.get("subString") or "*")
                types[str(s["topic"])] = str(s.get("expressionType") or "TAG")
            consumers.append(
                ConsumerData(
                    group=str(c["groupName"]),
                    consume_type=_enum(c.get("consumeType"), _CONSUME_TYPES, "CONSUME_PASSIVELY"),
                    message_model=_enum(c.get("messageModel"), _MESSAGE_MODELS, "CLUSTERING"),
                    consume_from_where=_enum(
                        c.get("consumeFromWhere"), _CONSUME_FROM, "CONSUME_FROM_LAST_OFFSET"
                    ),
                    subscriptions=subs,
                    expression_types=types,
                )
            )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BadRequestError(
            f"the heartbeat body is not valid HeartbeatData JSON: {exc}"
        ) from None
    return Heartbeat(client_id, producers, tuple(consumers))


@dataclass
class _Member:
    connection: Connection | None
    last_seen_ms: int
    language: str
    version: int
    address: str = ""
    """The client's address when it has no connection here (a v5 client of the gRPC door)."""

    @property
    def client_address(self) -> str:
        return self.connection.address if self.connection is not None else self.address


@dataclass
class ConsumerGroupInfo:
    group: str
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    subscriptions: dict[str, str] = field(default_factory=dict)
    expression_types: dict[str, str] = field(default_factory=dict)
    members: dict[str, _Member] = field(default_factory=dict)

    def client_ids(self) -> list[str]:
        return sorted(self.members)


class ConsumerManager:
    def __init__(self) -> None:
        self.groups: dict[str, ConsumerGroupInfo] = {}
        self.producer_groups: dict[str, dict[str, int]] = {}
        """producer group -> client id -> last seen (ms)."""
        self.producer_connections: dict[str, dict[str, Connection]] = {}
        """producer group -> client id -> its connection (where check-backs go)."""

    def heartbeat(
        self,
        heartbeat: Heartbeat,
        connection: Connection | None,
        command: RemotingCommand,
        now_ms: int,
    ) -> list[str]:
        """Record a heartbeat; returns the consumer groups whose membership changed."""
        return self.register(heartbeat, connection, command.language, command.version, now_ms)

    def register(
        self,
        heartbeat: Heartbeat,
        connection: Connection | None,
        language: str,
        version: int,
        now_ms: int,
        address: str = "",
    ) -> list[str]:
        """Record a client's groups: a remoting heartbeat's (``connection``: where it came
        from) or a v5 client's session at a gRPC door (no connection here, its ``address``;
        it expires as a silent remoting client does); the consumer groups whose membership
        changed."""
        changed = []
        for group in heartbeat.producer_groups:
            self.producer_groups.setdefault(group, {})[heartbeat.client_id] = now_ms
            if connection is not None:
                self.producer_connections.setdefault(group, {})[heartbeat.client_id] = connection
        for data in heartbeat.consumers:
            info = self.groups.setdefault(data.group, ConsumerGroupInfo(data.group))
            info.consume_type = data.consume_type
            info.message_model = data.message_model
            info.consume_from_where = data.consume_from_where
            info.subscriptions = dict(data.subscriptions)
            info.expression_types = dict(data.expression_types)
            member = info.members.get(heartbeat.client_id)
            if member is None or member.connection is not connection:
                changed.append(data.group)
            info.members[heartbeat.client_id] = _Member(
                connection, now_ms, language, version, address
            )
        return changed

    def groups_of(self, client_id: str) -> set[str]:
        """The consumer groups ``client_id`` is a member of now."""
        return {name for name, info in self.groups.items() if client_id in info.members}

    def unregister(self, client_id: str, consumer_group: str | None) -> list[str]:
        """Remove ``client_id`` from ``consumer_group`` (None: from no consumer group) and
        from every producer group; the consumer groups it left."""
        changed = []
        for name, info in list(self.groups.items()):
            if name != consumer_group:
                continue
            if info.members.pop(client_id, None) is not None:
                changed.append(name)
            if not info.members:
                del self.groups[name]
        for clients in self.producer_groups.values():
            clients.pop(client_id, None)
        for connections in self.producer_connections.values():
            connections.pop(client_id, None)
        return changed

    def connection_closed(self, connection: Connection) -> list[str]:
        changed = []
        for name, info in list(self.groups.items()):
            gone = [cid for cid, m in info.members.items() if m.connection is connection]
            for cid in gone:
                del info.members[cid]
            if gone:
                changed.append(name)
            if not info.members:
                del self.groups[name]
        return changed

    def expire(self, now_ms: int) -> list[str]:
        changed = []
        for name, info in list(self.groups.items()):
            gone = [
                c for c, m in info.members.items() if now_ms - m.last_seen_ms > CLIENT_EXPIRY_MS
            ]
            for cid in gone:
                _log.info("consumer %s of group %s expired (silent %d s)", cid, name,
                          CLIENT_EXPIRY_MS // 1000)  # fmt: skip
                del info.members[cid]
            if gone:
                changed.append(name)
            if not info.members:
                del self.groups[name]
        for clients in self.producer_groups.values():
            for cid in [c for c, seen in clients.items() if now_ms - seen > CLIENT_EXPIRY_MS]:
                del clients[cid]
        for group, connections in self.producer_connections.items():
            alive = self.producer_groups.get(group, {})
            for cid in [c for c in connections if c not in alive]:
                del connections[cid]
        return changed

    def producer_connection(
        self, group: str, accept: Callable[[Connection], bool] | None = None
    ) -> Connection | None:
        """An open connection of a producer of ``group`` (the newest first) that ``accept``s
        (None: any), None if none: where the broker sends a check-back (RocketMQ's
        ``ProducerManager.getAvailableChannel``; ``accept``: the ACL's say, since anyone may
        claim a producer group)."""
        connections = self.producer_connections.get(group, {})
        for cid in reversed(list(connections)):
            conn = connections[cid]
            if conn.closed:
                del connections[cid]
            elif accept is None or accept(conn):
                return conn
        return None

    def client_ids(self, group: str) -> list[str]:
        info = self.groups.get(group)
        return info.client_ids() if info is not None else []

    def subscription(self, group: str, topic: str) -> tuple[str, str] | None:
        """(expression, expression type) the group's members last registered for ``topic``
        by heartbeat; None if the group is not online or does not subscribe to it."""
        info = self.groups.get(group)
        if info is None or topic not in info.subscriptions:
            return None
        return info.subscriptions[topic], info.expression_types.get(topic, "TAG")

    def notify_changed(self, groups: Iterable[str]) -> None:
        """NOTIFY_CONSUMER_IDS_CHANGED (one-way) to every member of each group."""
        for group in set(groups):
            info = self.groups.get(group)
            if info is None:
                continue
            for member in info.members.values():
                conn = member.connection
                if conn is None or conn.closed:
                    continue
                try:
                    conn.send_oneway(
                        RemotingCommand(
                            code=MQRequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
                            opaque=0,
                            ext_fields={"consumerGroup": group},
                        )
                    )
                except Exception:  # noqa: BLE001 - a notification is a hint; rebalance ticks anyway
                    _log.debug("could not notify a member of %s", group)


@dataclass(frozen=True, slots=True)
class QueueId:
    topic: str
    broker_name: str
    queue_id: int

    def to_object(self) -> dict[str, Any]:
        return {"topic": self.topic, "brokerName": self.broker_name, "queueId": self.queue_id}

    @classmethod
    def from_object(cls, value: Any) -> QueueId:
        return cls(str(value["topic"]), str(value["brokerName"]), int(value["queueId"]))


LockRequest: TypeAlias = "tuple[str, str, list[QueueId]]"
"""A LOCK_BATCH_MQ / UNLOCK_BATCH_MQ body: (clientId, consumerGroup, its queues)."""


def parse_lock_body(body: bytes) -> LockRequest:
    """``LockBatchRequestBody`` / ``UnlockBatchRequestBody``: (clientId, group, queues)."""
    check_json_budget(body, "the lock request body")
    try:
        data = json.loads(body)
        queues = [QueueId.from_object(q) for q in data.get("mqSet") or ()]
        return str(data["clientId"]), str(data["consumerGroup"]), queues
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BadRequestError(f"the lock request body is not valid JSON: {exc}") from None


class QueueLockManager:
    """Which client of a group may consume each queue in order (``RebalanceLockManager``)."""

    def __init__(self) -> None:
        self._locks: dict[str, dict[QueueId, tuple[str, int]]] = {}

    def lock(
        self, group: str, client_id: str, queues: Iterable[QueueId], now_ms: int
    ) -> list[QueueId]:
        """Lock (or renew) what is free or expired or already ours; returns what we hold."""
        table = self._locks.setdefault(group, {})
        held = []
        for queue in queues:
            owner = table.get(queue)
            if owner is None or owner[0] == client_id or now_ms - owner[1] > LOCK_EXPIRY_MS:
                if owner is not None and owner[0] != client_id:
                    _log.info("queue lock %s of %s moves from %s to %s (expired)", queue, group,
                              owner[0], client_id)  # fmt: skip
                table[queue] = (client_id, now_ms)
                held.append(queue)
        return held

    def unlock(self, group: str, client_id: str, queues: Iterable[QueueId]) -> None:
        table = self._locks.get(group, {})
        for queue in queues:
            owner = table.get(queue)
            if owner is not None and owner[0] == client_id:
                del table[queue]

    def release_client(self, client_id: str, group: str) -> None:
        """Release the queues ``client_id`` holds for ``group``."""
        table = self._locks.get(group, {})
        for queue in [q for q, (c, _) in table.items() if c == client_id]:
            del table[queue]


@dataclass(frozen=True, slots=True)
class ClientCheck:
    """``CheckClientRequestBody``: a consumer asks whether the broker takes its subscription."""

    client_id: str
    group: str
    topic: str
    expression: str
    expression_type: str | None


def parse_check_client_body(body: bytes) -> ClientCheck | None:
    """The JSON body of CHECK_CLIENT_CONFIG; None when it carries no ``subscriptionData``
    (RocketMQ answers SUCCESS then).

    Raises:
        BadRequestError: the body is not that JSON object.
    """
    check_json_budget(body, "the client check body")
    try:
        data = json.loads(body or b"{}")
        if not isinstance(data, dict):
            raise TypeError("the body is not a JSON object")  # noqa: TRY301 - one handler
        sub = data.get("subscriptionData")
        if sub is None:
            return None
        if not isinstance(sub, dict):
            raise TypeError("subscriptionData is not an object")  # noqa: TRY301
        expression_type = sub.get("expressionType")
        return ClientCheck(
            client_id=str(data.get("clientId") or ""),
            group=str(data.get("group") or ""),
            topic=str(sub.get("topic") or ""),
            expression=str(sub.get("subString") or ""),
            expression_type=None if expression_type is None else str(expression_type),
        )
    except (ValueError, TypeError) as exc:
        raise BadRequestError(
            f"the CHECK_CLIENT_CONFIG body is not valid CheckClientRequestBody JSON: {exc}"
        ) from None
