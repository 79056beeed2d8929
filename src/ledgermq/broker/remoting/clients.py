"""Client management requests, over ``ClientService`` (broker.service.clients) and the broker's
client registry it keeps (``broker.service.client_registry``), which the gRPC door's sessions
feed too.

HEART_BEAT (34), UNREGISTER_CLIENT (35), GET_CONSUMER_LIST_BY_GROUP (38), LOCK_BATCH_MQ (41),
UNLOCK_BATCH_MQ (42) and CHECK_CLIENT_CONFIG (46). Translators: bodies in (parsed by
``broker.remoting.consumers``), the service or the queue locks, bodies out. The registry's
channel here is the client's connection, and ``notify_consumer_ids_changed`` is how the
registry tells a member that its group changed (NOTIFY_CONSUMER_IDS_CHANGED, 40, one-way).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ledgermq.broker.errors import ServiceError
from ledgermq.broker.remoting.admin import json_body
from ledgermq.broker.remoting.consumers import parse_check_client_body, queue_object
from ledgermq.errors import RequestRejectedError
from ledgermq.wire import MQResponseCode, RemotingCommand
from ledgermq.wire.headers import NotifyConsumerIdsChangedRequestHeader

if TYPE_CHECKING:
    from ledgermq.broker.remoting.consumers import Heartbeat, LockRequest
    from ledgermq.broker.service.client_registry import QueueLockManager
    from ledgermq.broker.service.clients import ClientService
    from ledgermq.net import Connection
    from ledgermq.wire.headers import (
        GetConsumerListByGroupRequestHeader,
        UnregisterClientRequestHeader,
    )

__all__ = ["ClientProcessor", "notify_consumer_ids_changed"]

_log = logging.getLogger(__name__)


def notify_consumer_ids_changed(conn: Connection, group: str) -> None:
    """NOTIFY_CONSUMER_IDS_CHANGED (one-way) to a member of ``group``: rebalance now."""
    header = NotifyConsumerIdsChangedRequestHeader(group)
    conn.send_oneway(RemotingCommand(header.CODE, 0, ext_fields=header.to_ext_fields()))


class ClientProcessor:
    def __init__(self, service: ClientService, locks: QueueLockManager) -> None:
        self._service = service
        self._locks = locks
        self._watched: set[Connection] = set()
        """Connections whose closing removes their clients (one close callback each)."""

    async def heartbeat(
        self, conn: Connection, command: RemotingCommand, heartbeat: Heartbeat
    ) -> RemotingCommand:
        """HEART_BEAT, from the body the door parsed (and checked) once; the connection is
        watched first, so that its closing removes what the heartbeat registers."""
        if conn not in self._watched:
            self._watched.add(conn)
            conn.add_close_callback(self._connection_closed)
        await self._service.client_alive(heartbeat, conn, command.language, command.version)
        return command.response(MQResponseCode.SUCCESS)

    def _connection_closed(self, conn: Connection) -> None:
        self._watched.discard(conn)
        registry = self._service.registry
        registry.notify_changed(registry.connection_closed(conn))

    async def unregister(
        self, conn: Connection, command: RemotingCommand, header: UnregisterClientRequestHeader
    ) -> RemotingCommand:
        """UNREGISTER_CLIENT: the client leaves the consumer group the header names (the ACL
        checked SUB on it) and its locks there go; without one, only its producer
        registrations go, as in RocketMQ's broker (issue 26: an unregister without a group
        removed a client from every group and released all its locks, for any account)."""
        client_id, group = header.client_id, header.consumer_group
        if group is not None:
            self._locks.release_client(client_id, group)
        self._service.client_gone(client_id, group)
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
        ids = self._service.registry.client_ids(group)
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
        body = json_body({"lockOKMQSet": [queue_object(q) for q in held]})
        return command.response(MQResponseCode.SUCCESS, body=body)

    def unlock(self, command: RemotingCommand, request: LockRequest) -> RemotingCommand:
        """UNLOCK_BATCH_MQ, as ``lock``."""
        client_id, group, queues = request
        self._locks.unlock(group, client_id, queues)
        return command.response(MQResponseCode.SUCCESS)
