"""``MessagingService`` of the stand-alone proxy (RocketMQ's "cluster" mode): v5 RPCs forwarded
to the brokers' masters over remoting (``proxy.forward``), translation only.

A ``proxy.door.DoorServicer`` over ``proxy.remote_backend`` (which holds what the RPCs written
once ask of the masters); this class serves the RPCs not moved there yet.

Routes answer the topic's queues with the broker group names kept and **this proxy's endpoint**
for every group (as the Java proxy does in cluster mode), so a client never needs a new route
after a failover: the proxy finds the new master and the client's address stays good. The
v5 message <-> RocketMQ message mappings are the in-replica door's (``proxy.messages``,
``proxy.received``); the statuses of remoting failures are ``proxy.remote_status``'s.

Served: QueryRoute, QueryAssignment, Heartbeat, NotifyClientTermination, Telemetry (settings
exchange), SendMessage (the properties ``proxy.messages`` makes pass through to the remoting
send as they are), and POP's ReceiveMessage over the remoting POP code 200050. A receipt handle
is the broker's ``POP_CK``, which names its broker group, so an ack goes to that group's master
whichever proxy or master handed the message out (``proxy.remote_backend``: AckMessage,
ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue, EndTransaction, RecallMessage, and
the PullConsumer set). Elsewhere: transactional sends and the masters' check-backs relayed to
a producer's Telemetry stream (``proxy.cluster_transactions``). SyncLiteSubscription answers
NOT_IMPLEMENTED in its status (never a dropped stream).

Sends are at-least-once: a send whose outcome is unknown (the master died with the request in
flight) is sent again to the new master, as our ``Producer`` does, so a message acknowledged to
the client is stored, and may be stored twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
from typing import TYPE_CHECKING, Any, Final

from ledgermq.errors import LedgerMQError, TopicNotFoundError
from ledgermq.proxy.cluster_topic_types import TopicTypes
from ledgermq.proxy.cluster_transactions import (
    ClusterProducers,
    orphaned_command,
    transaction_id,
)
from ledgermq.proxy.door import DoorServicer
from ledgermq.proxy.door_pull import consume_needs
from ledgermq.proxy.forward import write_queues
from ledgermq.proxy.message_groups import queue_of_group
from ledgermq.proxy.message_types import accepted_message_types, message_type_of, type_conflict
from ledgermq.proxy.messages import GRPC_PRODUCER_GROUP, Refusal, receive_request, send_request
from ledgermq.proxy.name_status import (
    consume_refusal,
    send_topic_refusal,
    topic_refusal,
)
from ledgermq.proxy.protocol import definition_pb2, service_pb2
from ledgermq.proxy.received import stored_message
from ledgermq.proxy.remote_backend import RemoteBackend
from ledgermq.proxy.remote_status import remote_status
from ledgermq.proxy.route_answers import (
    broker_at,
    peer_address,
    route_queues,
    server_settings,
)
from ledgermq.proxy.status import Code, ok, status
from ledgermq.wire import MQRequestCode, MQResponseCode
from ledgermq.wire.message import DEFAULT_MAX_MESSAGE_BYTES, decode_properties, decode_records
from ledgermq.wire.route import is_readable

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    import grpc.aio

    from ledgermq.net import Connection
    from ledgermq.proxy.forward import Forwarder
    from ledgermq.proxy.routes import Endpoint
    from ledgermq.security import AclGate
    from ledgermq.wire import RemotingCommand
    from ledgermq.wire.route import TopicRouteData

    Context = grpc.aio.ServicerContext[Any, Any]

__all__ = ["ClusterServicer"]

_log = logging.getLogger(__name__)

POP_CK: Final = "POP_CK"
"""``MessageConst.PROPERTY_POP_CK``: where a popped record carries its receipt handle."""
_DEFAULT_TOPIC: Final = "TBW102"
_ALL_TYPES: Final = (
    definition_pb2.NORMAL,
    definition_pb2.FIFO,
    definition_pb2.DELAY,
    definition_pb2.TRANSACTION,
)


class ClusterServicer(DoorServicer):
    """The stand-alone proxy's servicer (module docstring)."""

    _producers: ClusterProducers

    def __init__(
        self,
        forwarder: Forwarder,
        endpoint: Endpoint,
        acl: AclGate | None = None,
        real_peer: Callable[[str], str] | None = None,
        *,
        check_message_type: bool = True,
        max_body_size: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        """``acl``: check the clients' ``authorization`` metadata (``aclEnable``);
        ``real_peer``: the client behind a peer address grpcio reports (``permissive`` TLS,
        where connections reach grpcio through the proxy's own front)."""
        clock = lambda: forwarder.client.clock.wall_time_s()  # noqa: E731, PLW0108 - read when asked
        super().__init__(RemoteBackend(forwarder), acl, real_peer, clock)
        self._forward = forwarder
        self._endpoint = endpoint
        self._check_type = check_message_type
        """``enableTopicMessageTypeCheck``: a send must match its topic's ``message.type``."""
        self._max_body = max_body_size
        """``maxMessageSize``: the largest body a send may carry (checked here and by the
        broker; told to the clients in their settings)."""
        self._types = TopicTypes(forwarder)
        self._counter = itertools.count()
        self._producers = ClusterProducers()
        """v5 producers' Telemetry streams: where the masters' check-backs go."""
        self._tasks: set[asyncio.Task[None]] = set()
        forwarder.client.on_check_transaction = self._on_check
        forwarder.after_failover = self._heartbeat_soon

    def _heartbeat_soon(self) -> None:
        """Tell the masters now that this proxy is a producer of ``GRPC_PRODUCER_GROUP`` (the
        client's own heartbeat comes every 30 s): after a producer's settings, and after a
        failover, so that the new master's check-backs find the proxy."""
        client = self._forward.client
        if not client.producer_groups:
            return
        task = asyncio.get_running_loop().create_task(self._heartbeat())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _heartbeat(self) -> None:
        client = self._forward.client
        for topic in sorted(client.producer_topics):
            with contextlib.suppress(LedgerMQError):
                await client.topic_route(topic, refresh=True)
        with contextlib.suppress(LedgerMQError):
            await client.send_heartbeat()

    def _on_check(self, conn: Connection, command: RemotingCommand) -> None:
        """A master's CHECK_TRANSACTION_STATE, to a producer's Telemetry stream; one-way, so
        a check that finds no producer is simply not answered (the master asks again)."""
        orphan = orphaned_command(command)
        if orphan is None:
            _log.warning("a check-back from %s holds no half message", conn.address)
            return
        topic = orphan.recover_orphaned_transaction_command.message.topic.name
        if not self._producers.relay(topic, orphan):
            _log.info("no producer of %s is connected for a check-back from %s",
                      topic, conn.address)  # fmt: skip

    # ------------------------------------------------------------------ routes
    async def _route(self, topic: str) -> TopicRouteData:
        """A NameServer's route now, else the cached one (a NameServer restart)."""
        try:
            return await self._forward.route(topic, refresh=True)
        except TopicNotFoundError:
            cached = self._forward.client.cached_route(topic)
            if cached is None:
                raise
            return cached

    async def _route_queues(
        self, topic: str
    ) -> tuple[list[definition_pb2.MessageQueue], definition_pb2.Status]:
        if not topic:
            return [], status(Code.ILLEGAL_TOPIC, "the request names no topic")
        if (refused := topic_refusal(topic)) is not None:
            return [], refused
        try:
            route = await self._route(topic)
        except TopicNotFoundError:
            return [], status(Code.TOPIC_NOT_FOUND, f"topic {topic} does not exist")
        except LedgerMQError as exc:
            return [], status(Code.INTERNAL_ERROR, f"route of {topic} not found: {exc}")
        accepted = (
            accepted_message_types(await self._types.kind(topic))
            if self._check_type
            else _ALL_TYPES
        )
        queues = route_queues(
            topic,
            sorted(route.queue_datas, key=lambda q: q.broker_name),
            self._broker,
            accepted,
        )
        if not queues:
            return [], status(Code.TOPIC_NOT_FOUND, f"topic {topic} has no queue on any broker")
        return queues, ok()

    def _broker(self, name: str) -> definition_pb2.Broker:
        """Every broker group is reached through this proxy (cluster mode)."""
        return broker_at(name, self._endpoint.host, self._endpoint.port)

    async def _server_settings(self, client: definition_pb2.Settings) -> definition_pb2.Settings:
        fifo = False
        if client.HasField("subscription"):
            topics = [e.topic.name for e in client.subscription.subscriptions if e.topic.name]
            group = client.subscription.group.name
            fifo = bool(topics and group) and await self._orderly(group, topics[0])
        return server_settings(
            client, max_body_size=self._max_body, validate_message_type=True, fifo=fifo
        )

    async def _orderly(self, group: str, topic: str) -> bool:
        """Whether subscription group ``group`` consumes in order (``consumeMessageOrderly``,
        the Java proxy's ``mergeSubscriptionData``: its PushConsumer then consumes each
        message group in order), as the master of a broker group of ``topic`` holds it
        (GET_ALL_SUBSCRIPTIONGROUP_CONFIG); False when no master says so."""
        try:
            route = await self._route(topic)
            brokers = sorted(d.broker_name for d in route.queue_datas)
            if not brokers:
                return False
            forwarded = await self._forward.call(
                topic, brokers[0], MQRequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, {},
                deadline_s=3.0,
            )  # fmt: skip
            table = json.loads(forwarded.response.body or b"{}").get("subscriptionGroupTable")
        except (LedgerMQError, ValueError) as exc:
            _log.info("cannot tell whether group %s is orderly: %s", group, exc)
            return False
        config = table.get(group) if isinstance(table, dict) else None
        return isinstance(config, dict) and config.get("consumeMessageOrderly") is True

    def _on_settings(self, key: int, settings: definition_pb2.Settings) -> None:
        if settings.client_type != definition_pb2.PRODUCER:
            return
        topics = [t.name for t in settings.publishing.topics if t.name]
        self._producers.publishes(key, topics)
        client = self._forward.client
        if topics and not set(topics) <= client.producer_topics:
            client.producer_groups.add(GRPC_PRODUCER_GROUP)
            client.producer_topics.update(topics)
            self._heartbeat_soon()

    # ------------------------------------------------------------------ send
    def _send_peer(self, context: Context) -> str:
        """The client's host, as grpcio reports it."""
        return peer_address(context).rpartition(":")[0]

    async def _send_one(
        self, message: definition_pb2.Message, peer: str, deadline_s: float
    ) -> service_pb2.SendResultEntry:
        message_id = message.system_properties.message_id
        try:
            send, body = send_request(message, peer, 4, self._max_body)
            if (refused := send_topic_refusal(send.topic)) is not None:
                raise Refusal(refused)  # noqa: TRY301 - answered below, as every refusal
            route = await self._route(send.topic)
            if self._check_type:
                await self._check_message_type(send.topic, send.properties)
            queues = write_queues(route)
            if not queues:
                return service_pb2.SendResultEntry(
                    status=status(Code.FORBIDDEN, f"topic {send.topic} has no writable queue"),
                    message_id=message_id,
                )
            group = message.system_properties.message_group
            # a message group keeps its queue (FIFO: the Java proxy's hash, as the replicas'
            # doors place it, the same queue for one broker group); others go round the queues
            index = queue_of_group(group, len(queues)) if group else next(self._counter)
            chosen = queues[index % len(queues)]
            broker_name, queue_id = chosen.broker_name, chosen.queue_id
            fields = {
                "a": send.producer_group, "b": send.topic, "c": _DEFAULT_TOPIC,
                "d": str(send.default_topic_queue_nums), "e": str(queue_id),
                "f": str(send.sys_flag), "g": str(send.born_timestamp), "h": str(send.flag),
                "i": send.properties, "j": str(send.reconsume_times), "k": "false",
                "m": "false", "n": broker_name,
            }  # fmt: skip
            forwarded = await self._forward.call(
                send.topic, broker_name, MQRequestCode.SEND_MESSAGE_V2, fields, body,
                deadline_s=deadline_s,
                expect=(MQResponseCode.SUCCESS, MQResponseCode.FLUSH_DISK_TIMEOUT,
                        MQResponseCode.FLUSH_SLAVE_TIMEOUT, MQResponseCode.SLAVE_NOT_AVAILABLE),
            )  # fmt: skip
        except Refusal as refusal:
            return service_pb2.SendResultEntry(status=refusal.status, message_id=message_id)
        except TopicNotFoundError:
            return service_pb2.SendResultEntry(
                status=status(Code.TOPIC_NOT_FOUND, f"topic {message.topic.name} does not exist"),
                message_id=message_id,
            )
        except LedgerMQError as exc:
            return service_pb2.SendResultEntry(status=remote_status(exc), message_id=message_id)
        if forwarded.unknown_before:
            _log.warning("message %s was sent again after a failover; it may be stored twice",
                         message_id)  # fmt: skip
        ext = forwarded.response.ext_fields
        offset = int(ext.get("queueOffset", "0") or 0)
        entry = service_pb2.SendResultEntry(status=ok(), message_id=message_id, offset=offset)
        if message.system_properties.message_type == definition_pb2.TRANSACTION:
            entry.transaction_id = transaction_id(broker_name, ext.get("msgId", ""))
        if ext.get("recallHandle"):
            entry.recall_handle = ext["recallHandle"]  # a timer message (RocketMQ 5.3)
        return entry

    async def _check_message_type(self, topic: str, properties: str) -> None:
        """``Refusal`` (MESSAGE_PROPERTY_CONFLICT_WITH_TYPE) when the message's type is not
        its topic's (the Java proxy's ``DefaultTopicMessageTypeValidator``)."""
        kind = message_type_of(decode_properties(properties))
        problem = type_conflict(topic, await self._types.kind(topic), kind)
        if problem is not None:
            raise Refusal(status(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, problem))

    # ------------------------------------------------------------------ POP
    async def ReceiveMessage(  # noqa: N802
        self, request: service_pb2.ReceiveMessageRequest, context: Context
    ) -> AsyncIterator[service_pb2.ReceiveMessageResponse]:
        """POP_MESSAGE to the assignment's broker group: ``status``, the messages, then the
        ``delivery_timestamp``; one MESSAGE_NOT_FOUND when nothing came in the polling time."""
        needs = consume_needs(request.message_queue.topic.name, request.group.name)
        if (refused := self._admit(context, "ReceiveMessage", needs)) is not None:
            yield service_pb2.ReceiveMessageResponse(status=refused)
            return
        refused = consume_refusal(request.message_queue.topic.name, request.group.name)
        if refused is not None:
            yield service_pb2.ReceiveMessageResponse(status=refused)
            return
        try:
            pop = receive_request(request)
            broker_name = request.message_queue.broker.name or await self._any_readable(pop.topic)
            fields = {
                "consumerGroup": pop.group, "topic": pop.topic,
                "queueId": str(-1 if pop.queue_id is None else pop.queue_id),
                "maxMsgNums": str(pop.max_messages), "invisibleTime": str(pop.invisible_ms),
                "pollTime": str(pop.poll_ms), "bornTime": "0", "initMode": "0",
                "expType": pop.subscription[1] or "TAG", "exp": pop.subscription[0],
                "order": "false",
            }  # fmt: skip
            deadline_s = max(self._deadline_s(context), pop.poll_ms / 1000)
            forwarded = await self._forward.call(
                pop.topic, broker_name, MQRequestCode.POP_MESSAGE, fields,
                deadline_s=deadline_s, timeout_s=pop.poll_ms / 1000 + 3.0,
                expect=(MQResponseCode.SUCCESS, MQResponseCode.PULL_NOT_FOUND),
            )  # fmt: skip
        except Refusal as refusal:
            yield service_pb2.ReceiveMessageResponse(status=refusal.status)
            return
        except TopicNotFoundError:
            yield service_pb2.ReceiveMessageResponse(
                status=status(Code.TOPIC_NOT_FOUND, f"topic {request.message_queue.topic.name} "
                              "does not exist")
            )  # fmt: skip
            return
        except LedgerMQError as exc:
            yield service_pb2.ReceiveMessageResponse(status=remote_status(exc))
            return
        response = forwarded.response
        records = decode_records(response.body) if response.code == MQResponseCode.SUCCESS else []
        if not records:
            yield service_pb2.ReceiveMessageResponse(
                status=status(Code.MESSAGE_NOT_FOUND, "no new message")
            )
            return
        yield service_pb2.ReceiveMessageResponse(status=ok())
        invisible_ms = int(response.ext_fields.get("invisibleTime") or pop.invisible_ms)
        for record in records:
            message = stored_message(record)
            message.user_properties.pop(POP_CK, None)
            system = message.system_properties
            system.receipt_handle = record.properties.get(POP_CK, "")
            system.delivery_attempt = record.reconsume_times + 1
            system.invisible_duration.FromMilliseconds(invisible_ms)
            yield service_pb2.ReceiveMessageResponse(message=message)
        delivered = service_pb2.ReceiveMessageResponse()
        delivered.delivery_timestamp.FromMilliseconds(int(response.ext_fields.get("popTime", 0)))
        yield delivered

    async def _any_readable(self, topic: str) -> str:
        route = await self._route(topic)
        for data in sorted(route.queue_datas, key=lambda q: q.broker_name):
            if is_readable(data.perm):
                return data.broker_name
        raise Refusal(status(Code.FORBIDDEN, f"topic {topic} has no readable queue"))
