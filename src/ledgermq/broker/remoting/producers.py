"""GET_PRODUCER_CONNECTION_LIST (204): the clients of a producer group online at this broker,
from the registry heartbeats keep (``ConsumerManager.producer_connections``, in
``broker.service.client_registry``); RocketMQ's
``mqadmin producerConnection``.

Kept apart from the consumer side (``admin.consumer_connections``) so the two registries can
change apart. Heartbeats carry no per-producer language or version here, so the answer has the
client id and address of each connection (Java's ``Connection`` reads the others as unset).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledgermq.broker.remoting.admin import json_body
from ledgermq.errors import RequestRejectedError
from ledgermq.wire import MQResponseCode

if TYPE_CHECKING:
    from ledgermq.broker.remoting.consumers import Registry
    from ledgermq.wire import RemotingCommand
    from ledgermq.wire.headers import GetProducerConnectionListRequestHeader

__all__ = ["producer_connections"]


def producer_connections(
    consumers: Registry,
    command: RemotingCommand,
    header: GetProducerConnectionListRequestHeader,
) -> RemotingCommand:
    """``{"connectionSet": [{"clientId", "clientAddr"}]}`` of the header's producer group; a
    group with no connection open is SYSTEM_ERROR with a sentence, as RocketMQ answers it."""
    group = header.producer_group
    live = sorted(
        (client_id, connection.address)
        for client_id, connection in consumers.producer_connections.get(group, {}).items()
        if not connection.closed
    )
    if not live:
        raise RequestRejectedError(
            f"the producer group [{group}] is not online", MQResponseCode.SYSTEM_ERROR
        )
    body = {"connectionSet": [{"clientId": cid, "clientAddr": addr} for cid, addr in live]}
    return command.response(MQResponseCode.SUCCESS, body=json_body(body))
