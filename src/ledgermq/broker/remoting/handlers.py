"""The remoting door's tables: request code -> translator (``broker.remoting``), over the services.

Two tables, because two kinds of request reach a translator: ``handler_table``'s codes are served
from the request as it came, ``typed_table``'s from the typed header the door parsed once before
the ACL (``ledgermq.wire.headers``; ``parse_once``), so that the ACL and the handler read the
same fields. Sends, heartbeats and locks are in neither: ``parse_once`` binds their handlers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from ledgermq.broker.remoting.admin import AdminProcessor, consumer_connections
from ledgermq.broker.remoting.clients import ClientProcessor
from ledgermq.broker.remoting.offsets import OffsetProcessor
from ledgermq.broker.remoting.pop import PopProcessor
from ledgermq.broker.remoting.producers import producer_connections
from ledgermq.broker.remoting.pull import PullProcessor
from ledgermq.broker.remoting.recall import RecallProcessor
from ledgermq.broker.remoting.running_info import consumer_running_info
from ledgermq.broker.remoting.send import SendProcessor
from ledgermq.broker.remoting.send_back import SendBackProcessor
from ledgermq.broker.remoting.transactions import EndTransactionProcessor
from ledgermq.errors import ConfigError
from ledgermq.wire import MQRequestCode, MQResponseCode

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ledgermq.broker.remoting.consumers import Registry
    from ledgermq.broker.remoting.house import House
    from ledgermq.broker.service.access import Access
    from ledgermq.broker.service.client_registry import QueueLockManager
    from ledgermq.broker.service.services import BrokerServices
    from ledgermq.net import Connection
    from ledgermq.wire import RemotingCommand

__all__ = ["Handler", "Processors", "Serve", "handler_table", "typed_table"]

Handler: TypeAlias = "Callable[[Connection, RemotingCommand], Awaitable[RemotingCommand | None]]"
Serve: TypeAlias = "Callable[[Connection, RemotingCommand, Any], Awaitable[RemotingCommand]]"
"""The handler of a typed header's code: served from the header the door parsed."""

AccessOf: TypeAlias = "Callable[[Connection, RemotingCommand], Access]"
"""A request's requester, for the checks a service makes once it has read a record."""


@dataclass(frozen=True, slots=True)
class Processors:
    """The translators of one replica's services, made once when its door opens."""

    send: SendProcessor
    send_back: SendBackProcessor
    pull: PullProcessor
    offsets: OffsetProcessor
    admin: AdminProcessor
    clients: ClientProcessor
    transactions: EndTransactionProcessor
    recall: RecallProcessor
    pop: PopProcessor

    @classmethod
    def over(cls, services: BrokerServices, locks: QueueLockManager) -> Processors:
        return cls(
            send=SendProcessor(services.send),
            send_back=SendBackProcessor(services.send_back),
            pull=PullProcessor(services.pull),
            offsets=OffsetProcessor(services.offsets),
            admin=AdminProcessor(services.admin),
            clients=ClientProcessor(services.clients, locks),
            transactions=EndTransactionProcessor(services.transactions),
            recall=RecallProcessor(services.timers),
            pop=PopProcessor(services.pop),
        )


def handler_table(
    processors: Processors, consumers: Registry, house: House, access: AccessOf
) -> dict[int, Handler]:
    """Request code -> translator of the requests served from the request as it came."""
    admin, clients = processors.admin, processors.clients

    def sync(fn: Callable[[RemotingCommand], RemotingCommand]) -> Handler:
        async def run(conn: Connection, command: RemotingCommand) -> RemotingCommand:
            return fn(command)

        return run

    def asynchronous(fn: Callable[[RemotingCommand], Awaitable[RemotingCommand]]) -> Handler:
        async def run(conn: Connection, command: RemotingCommand) -> RemotingCommand:
            return await fn(command)

        return run

    async def broker_config(conn: Connection, command: RemotingCommand) -> RemotingCommand:
        lines = [f"{k}={v}" for k, v in house.config.to_properties().items()]
        return command.response(MQResponseCode.SUCCESS, body="\n".join(lines).encode())

    async def update_config(conn: Connection, command: RemotingCommand) -> RemotingCommand:
        """UPDATE_BROKER_CONFIG: changed live and written to the config file, or refused whole
        with a remark naming what and why."""
        try:
            remark = await house.update_config(command.body or b"")
        except ConfigError as exc:
            return command.response(MQResponseCode.SYSTEM_ERROR, remark=str(exc))
        return command.response(MQResponseCode.SUCCESS, remark=remark)

    code = MQRequestCode
    return {
        code.CHECK_CLIENT_CONFIG: clients.check_client_config,
        code.GET_ALL_TOPIC_CONFIG: sync(admin.all_topics),
        code.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: asynchronous(admin.create_group),
        code.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: sync(admin.all_groups),
        code.GET_ALL_CONSUMER_OFFSET: sync(admin.all_offsets),
        code.GET_BROKER_RUNTIME_INFO: sync(admin.runtime_info),
        code.GET_BROKER_CONFIG: broker_config,
        code.UPDATE_BROKER_CONFIG: update_config,
        code.REPLICA_LIST: sync(admin.replica_list),
    }


def typed_table(processors: Processors, consumers: Registry, access: AccessOf) -> dict[int, Serve]:
    """Request code -> translator of its typed header (``ledgermq.wire.headers``): every
    code of ``HEADER_TYPES``, served from the header the door parsed and checked. ``access``:
    the requester, for the handlers that check what only the record they read tells."""
    pull, offsets, clients, admin = (
        processors.pull, processors.offsets, processors.clients, processors.admin
    )  # fmt: skip
    recall, pop = processors.recall, processors.pop
    send_back, transactions = processors.send_back, processors.transactions

    def sync(fn: Callable[[RemotingCommand, Any], RemotingCommand]) -> Serve:
        async def run(conn: Connection, command: RemotingCommand, header: Any) -> RemotingCommand:
            return fn(command, header)

        return run

    def asynchronous(fn: Callable[[RemotingCommand, Any], Awaitable[RemotingCommand]]) -> Serve:
        async def run(conn: Connection, command: RemotingCommand, header: Any) -> RemotingCommand:
            return await fn(command, header)

        return run

    async def connections(
        conn: Connection, command: RemotingCommand, header: Any
    ) -> RemotingCommand:
        return consumer_connections(consumers, command, header)

    async def running_info(
        conn: Connection, command: RemotingCommand, header: Any
    ) -> RemotingCommand:
        return await consumer_running_info(consumers, command, header)

    async def view(conn: Connection, command: RemotingCommand, header: Any) -> RemotingCommand:
        return admin.view_message(command, header, access(conn, command))

    async def send_back_one(
        conn: Connection, command: RemotingCommand, header: Any
    ) -> RemotingCommand:
        return await send_back.process(command, header, access(conn, command))

    async def end(conn: Connection, command: RemotingCommand, header: Any) -> RemotingCommand:
        return await transactions.end(command, header, access(conn, command))

    async def producers(conn: Connection, command: RemotingCommand, header: Any) -> RemotingCommand:
        return producer_connections(consumers, command, header)

    code = MQRequestCode
    return {
        code.PULL_MESSAGE: asynchronous(pull.process),
        code.QUERY_CONSUMER_OFFSET: sync(offsets.query_consumer_offset),
        code.UPDATE_CONSUMER_OFFSET: asynchronous(offsets.update_consumer_offset),
        code.GET_MAX_OFFSET: sync(offsets.max_offset),
        code.GET_MIN_OFFSET: sync(offsets.min_offset),
        code.GET_EARLIEST_MSG_STORETIME: sync(offsets.earliest_store_time),
        code.SEARCH_OFFSET_BY_TIMESTAMP: sync(offsets.search_offset_by_timestamp),
        code.RECALL_MESSAGE: asynchronous(recall.process),
        code.POP_MESSAGE: asynchronous(pop.pop),
        code.ACK_MESSAGE: asynchronous(pop.ack),
        code.CHANGE_MESSAGE_INVISIBLETIME: asynchronous(pop.change_invisible_time),
        code.UNREGISTER_CLIENT: clients.unregister,
        code.GET_CONSUMER_LIST_BY_GROUP: clients.consumer_list,
        code.GET_TOPIC_STATS_INFO: sync(admin.topic_stats),
        code.GET_CONSUME_STATS: sync(admin.consume_stats),
        code.QUERY_MESSAGE: sync(admin.query_message),
        code.GET_CONSUMER_CONNECTION_LIST: connections,
        code.GET_CONSUMER_RUNNING_INFO: running_info,
        code.CONSUMER_SEND_MSG_BACK: send_back_one,
        code.END_TRANSACTION: end,
        code.VIEW_MESSAGE_BY_ID: view,
        code.GET_PRODUCER_CONNECTION_LIST: producers,
        code.UPDATE_AND_CREATE_TOPIC: asynchronous(admin.create_topic),
        code.DELETE_TOPIC_IN_BROKER: asynchronous(admin.delete_topic),
        code.DELETE_SUBSCRIPTIONGROUP: asynchronous(admin.delete_group),
        code.TRANSFER_LEADERSHIP: asynchronous(admin.transfer_leadership),
        code.GET_QUARANTINED_ENTRIES: sync(admin.quarantined_entries),
        code.REPLICA_ADD: asynchronous(admin.replica_add),
        code.REPLICA_REMOVE: asynchronous(admin.replica_remove),
        code.REPLICA_BACKUP: asynchronous(admin.replica_backup),
    }
