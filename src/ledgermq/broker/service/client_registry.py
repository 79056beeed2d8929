"""The broker's clients: consumer groups and their members, producer groups, and queue locks.

The broker's registry of live clients, fed by every door alike (issue 26 item 5): a remoting
client's HEART_BEAT and a v5 client's Heartbeat or Telemetry settings both register here
(``messaging.sessions``' ``Heartbeat``), checked by ``broker.service.clients.ClientService``;
every view (admin's ``consumer-connection``, the console, the metrics, the transaction
check-backs) reads it. It is in-memory state (not replicated: each replica knows the clients
that reach it); it lives in the service room, which the doors may name, rather than in
``broker.state``, which the remoting door may not reach (pyproject.toml's import contracts).
GET_CONSUMER_LIST_BY_GROUP lets each member of a group compute the same queue assignment;
UNREGISTER_CLIENT and a closed connection remove a member at once, and a member silent for
120 s expires (RocketMQ's ``ConsumerManager``, ``ClientHousekeeping``). When a group's
membership changes the broker tells its members (the ``notify`` a door gives: remoting's
NOTIFY_CONSUMER_IDS_CHANGED, one-way), so they rebalance now instead of at their next 10-20 s
rebalance tick.

A member is reached through its ``ClientChannel``: the remoting door's connection, which the
registry only stores and hands back (it never writes to it); a v5 client of the gRPC door has
none here, only its address. ``QueueLockManager`` is RocketMQ's ``RebalanceLockManager``: an
orderly consumer locks each queue it consumes; a lock held by another live client is refused;
locks expire after 60 s unless renewed (clients renew every 20 s).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from ledgermq.messaging.sessions import Heartbeat

__all__ = [
    "CLIENT_EXPIRY_MS",
    "LOCK_EXPIRY_MS",
    "ClientChannel",
    "ConsumerGroupInfo",
    "ConsumerManager",
    "QueueId",
    "QueueLockManager",
]

_log = logging.getLogger(__name__)

CLIENT_EXPIRY_MS: Final = 120_000
LOCK_EXPIRY_MS: Final = 60_000


class ClientChannel(Protocol):
    """Where a client is reached (the remoting door's ``net.Connection``): the registry reads
    only its address and whether it is closed."""

    @property
    def address(self) -> str: ...

    @property
    def closed(self) -> bool: ...


C = TypeVar("C", bound=ClientChannel)
"""The channel type of a registry's door (``net.Connection`` in a broker)."""


@dataclass
class _Member(Generic[C]):
    connection: C | None
    last_seen_ms: int
    language: str
    version: int
    address: str = ""
    """The client's address when it has no connection here (a v5 client of the gRPC door)."""

    @property
    def client_address(self) -> str:
        return self.connection.address if self.connection is not None else self.address


@dataclass
class ConsumerGroupInfo(Generic[C]):
    group: str
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    subscriptions: dict[str, str] = field(default_factory=dict)
    expression_types: dict[str, str] = field(default_factory=dict)
    members: dict[str, _Member[C]] = field(default_factory=dict)

    def client_ids(self) -> list[str]:
        return sorted(self.members)


class ConsumerManager(Generic[C]):
    """The registry (module docstring). ``notify(channel, group)``: tell one member that its
    group changed (None: nobody is told)."""

    def __init__(self, notify: Callable[[C, str], None] | None = None) -> None:
        self._notify = notify
        self.groups: dict[str, ConsumerGroupInfo[C]] = {}
        self.producer_groups: dict[str, dict[str, int]] = {}
        """producer group -> client id -> last seen (ms)."""
        self.producer_connections: dict[str, dict[str, C]] = {}
        """producer group -> client id -> its connection (where check-backs go)."""

    def register(
        self,
        heartbeat: Heartbeat,
        connection: C | None,
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

    def connection_closed(self, connection: C) -> list[str]:
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
        self, group: str, accept: Callable[[C], bool] | None = None
    ) -> C | None:
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
        """Tell every member of each group that has a channel here (the door's ``notify``)."""
        notify = self._notify
        if notify is None:
            return
        for group in set(groups):
            info = self.groups.get(group)
            if info is None:
                continue
            for member in info.members.values():
                conn = member.connection
                if conn is None or conn.closed:
                    continue
                try:
                    notify(conn, group)
                except Exception:  # noqa: BLE001 - a notification is a hint; rebalance ticks anyway
                    _log.debug("could not notify a member of %s", group)


@dataclass(frozen=True, slots=True)
class QueueId:
    """A queue an orderly consumer locks (RocketMQ's ``MessageQueue``)."""

    topic: str
    broker_name: str
    queue_id: int


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
