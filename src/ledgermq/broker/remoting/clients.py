"""Client management requests: the remoting door's client registry, and ``ClientService``
(broker.service.clients) for what a heartbeat or a subscription check means.

HEART_BEAT (34), UNREGISTER_CLIENT (35), GET_CONSUMER_LIST_BY_GROUP (38), LOCK_BATCH_MQ (41),
UNLOCK_BATCH_MQ (42) and CHECK_CLIENT_CONFIG (46). Translators: bodies in, the registry
(``broker.remoting.consumers``) or the service, bodies out.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ledgermq.broker.errors import ServiceError
from ledgermq.broker.remoting.admin import json_body
from ledgermq.broker.remoting.consumers import parse_check_client_body
from ledgermq.errors import RequestRejectedError
from ledgermq.wire import MQResponseCode

if TYPE_CHECKING:
    from ledgermq.broker.remoting.consumers import (
        ConsumerManager,
        Heartbeat,
        LockRequest,
        QueueLockManager,
    )
    from ledgermq.broker.service.clients import ClientService
    from ledgermq.net import Connection
    from ledgermq.wire import RemotingCommand
    from ledgermq.wire.headers import (
        GetConsumerListByGroupRequestHeader,
        UnregisterClientRequestHeader,
    )

__all__ = ["ClientProcessor"]

_log = logging.getLogger(__name__)


class ClientProcessor:
    def __init__(
        self, service: ClientService, consumers: ConsumerManager, locks: QueueLockManager
    ) -> None:
        self._service = service
        self._consumers = consumers
        self._locks = locks
        self._watched: set[Connection] = set()
        """Connections whose closing removes their clients (one close callback each)."""

    async def heartbeat(
        self, conn: Connection, command: RemotingCommand, heartbeat: Heartbeat
    ) -> RemotingCommand:
        """HEART_BEAT, from the body the door parsed (and checked) once."""
        self._service.check_heartbeat(
            heartbeat.producer_groups,
            [(data.group, data.subscriptions.keys()) for data in heartbeat.consumers],
        )
        wanted = {data.group for data in heartbeat.consumers}
        self._service.check_registry(
            client_groups=len(self._consumers.groups_of(heartbeat.client_id) | wanted),
            new_groups=len(wanted - self._consumers.groups.keys()),
            online_groups=len(self._consumers.groups),
        )
        if conn not in self._watched:
            self._watched.add(conn)
            conn.add_close_callback(self._connection_closed)
        consumers = self._consumers
        changed = consumers.heartbeat(heartbeat, conn, command, self._service.now_ms())
        for data in heartbeat.consumers:
            await self._service.consumer_group_seen(data.group)
        consumers.notify_changed(changed)
        return command.response(MQResponseCode.SUCCESS)

    def _connection_closed(self, conn: Connection) -> None:
        self._watched.discard(conn)
        changed = self._consumers.connection_closed(conn)
        self._consumers.notify_changed(changed)

    async def unregister(
        self, conn: Connection, command: RemotingCommand, header: UnregisterClientRequestHeader
    ) -> RemotingCommand:
        """UNREGISTER_CLIENT: the client leaves the consumer group the header names (the ACL
        checked SUB on it) and its locks there go; without one, only its producer
        registrations go, as in RocketMQ's broker (issue 26: an unregister without a group
        removed a client from every group and released all its locks, for any account)."""
        client_id, group = header.client_id, header.consumer_group
        changed = self._consumers.unregister(client_id, group)
        if group is not None:
            self._locks.release_client(client_id, group)
        self._consumers.notify_changed(changed)
        return command.response(MQResponseCode.SUCCESS)

    async def check_client_config(
        self, conn: Connection, command: RemotingCommand
    ) -> RemotingCommand:
        """CHECK_CLIENT_CONFIG (46): would this broker take the consumer's subscription?
        (``ClientManageProcessor.checkClientConfig``; Java clients ask before a SQL92
        consumer starts.)"""
        check = parse_check_client_body(command.body)
        if check is not None:
            try:
                self._service.check_subscription(check.expression, check.expression_type)
            except ServiceError as exc:
                _log.warning("client %s of group %s: subscription to %s refused: %s",
                             check.client_id, check.group, check.topic, exc)  # fmt: skip
                raise
        return command.response(MQResponseCode.SUCCESS)

    async def consumer_list(
        self,
        conn: Connection,
        command: RemotingCommand,
        header: GetConsumerListByGroupRequestHeader,
    ) -> RemotingCommand:
        group = header.consumer_group
        ids = self._consumers.client_ids(group)
        if not ids:
            raise RequestRejectedError(
                f"no consumer of group {group} is online", MQResponseCode.SYSTEM_ERROR
            )
        body = json_body({"consumerIdList": ids})
        return command.response(MQResponseCode.SUCCESS, body=body)

    def lock(self, command: RemotingCommand, request: LockRequest) -> RemotingCommand:
        """LOCK_BATCH_MQ; ``request``: its body as ``parse_lock_body`` read it, the object the
        ACL checked (``acl.lock_needs``)."""
        client_id, group, queues = request
        held = self._locks.lock(group, client_id, queues, self._service.now_ms())
        body = json_body({"lockOKMQSet": [q.to_object() for q in held]})
        return command.response(MQResponseCode.SUCCESS, body=body)

    def unlock(self, command: RemotingCommand, request: LockRequest) -> RemotingCommand:
        """UNLOCK_BATCH_MQ, as ``lock``."""
        client_id, group, queues = request
        self._locks.unlock(group, client_id, queues)
        return command.response(MQResponseCode.SUCCESS)
