"""``apache.rocketmq.v2.MessagingService`` over the broker's service layer: translation only.

A ``proxy.door.DoorServicer`` over ``proxy.local_backend`` (which holds what the RPCs written
once ask of the replica); this class serves the RPCs not moved there yet. Each RPC reads its
request's fields, calls ``BrokerServices`` (or the route finder), and writes the response; what
an operation means lives in ``broker.service`` (DESIGN.md, "two front doors, one house"). Every
answer carries its outcome in ``status`` (the gRPC status stays OK, as the Java proxy answers):
a refusal's code comes from ``proxy.status``, and an RPC this broker does not serve yet answers
NOT_IMPLEMENTED the same way (for a server stream, one response with that status), never
gRPC's UNIMPLEMENTED and never a dropped stream. Spec
protocol-remoting-and-grpc.md section 3.3 lists what the official clients require of each
answer.

Served now (issue 16 section 1): QueryRoute, Heartbeat, SendMessage (normal and FIFO messages,
checked against the topic's message type: ``placement``),
QueryAssignment, Telemetry (settings exchange; the stream stays open until the client ends it)
and NotifyClientTermination; POP (ReceiveMessage, AckMessage, ChangeInvisibleDuration,
ForwardMessageToDeadLetterQueue) over ``broker.service.pop``, the same state the remoting POP
codes use; the PullConsumer set (PullMessage, UpdateOffset, GetOffset, QueryOffset) in
``proxy.door_pull`` over the pull and offset services; transactions (transactional sends,
EndTransaction, check-backs over Telemetry) over ``broker.service.transactions``
(``proxy.transactions``), RecallMessage over ``broker.service.timers``.

Authentication: with ``aclEnable`` every RPC that touches data passes ``_admit`` first
(``proxy.door``), which checks the ``authorization`` metadata (``ledgermq.acl.grpc_auth``)
against the broker's ACL.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ledgermq.broker.errors import ServiceError
from ledgermq.errors import LedgerMQError
from ledgermq.proxy.door import DoorServicer
from ledgermq.proxy.door_pull import consume_needs
from ledgermq.proxy.local_backend import LocalBackend
from ledgermq.proxy.master_link import MasterLink
from ledgermq.proxy.message_types import (
    TopicMessageType,
    accepted_message_types,
    topic_message_type,
)
from ledgermq.proxy.messages import Refusal, receive_request, send_request
from ledgermq.proxy.name_status import (
    consume_refusal,
    send_topic_refusal,
    topic_refusal,
)
from ledgermq.proxy.placement import place
from ledgermq.proxy.protocol import definition_pb2, service_pb2
from ledgermq.proxy.received import received_message
from ledgermq.proxy.route_answers import (
    broker_at,
    replica_route_queues,
    server_settings,
)
from ledgermq.proxy.routes import RouteFinder, TopicNotFound
from ledgermq.proxy.status import Code, error_status, ok, status
from ledgermq.proxy.transactions import TelemetryProducers, transaction_id

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    import grpc.aio

    from ledgermq.broker.service.services import BrokerServices
    from ledgermq.broker.state.broker_state import BrokerState
    from ledgermq.proxy.remote_backend import RemoteBackend
    from ledgermq.security import AclGate

    Context = grpc.aio.ServicerContext[Any, Any]

__all__ = ["MessagingServicer"]

_log = logging.getLogger(__name__)


class MessagingServicer(DoorServicer):
    """One replica's gRPC door (local mode)."""

    def __init__(
        self,
        services: BrokerServices,
        state: BrokerState,
        routes: RouteFinder,
        acl: AclGate | None = None,
        real_peer: Callable[[str], str] | None = None,
        link: MasterLink | None = None,
        remote: RemoteBackend | None = None,
    ) -> None:
        """``real_peer``: as ``DoorServicer``'s. ``link``: how a send reaches the group's
        master while this replica is not it (``proxy.master_link``); ``remote``: how the rest
        of the master's writes do (``proxy.local_backend``); default: none, the services
        answer."""
        super().__init__(
            LocalBackend(services, state, acl, remote), acl, real_peer, state.clock.wall_time_s
        )
        self._link = link or MasterLink(state, services, None)
        self._services = services
        self._state = state
        self._routes = routes
        self._producers = TelemetryProducers()
        """v5 producers' Telemetry streams: where check-backs of gRPC half messages go."""
        services.transactions.channels.append(self._producers)

    async def _route_queues(
        self, topic: str
    ) -> tuple[list[definition_pb2.MessageQueue], definition_pb2.Status]:
        if (refused := topic_refusal(topic)) is not None:
            return [], refused
        try:
            route = await self._routes.route(topic)
            endpoints = await self._routes.group_endpoints(route)
        except TopicNotFound as exc:
            return [], status(Code.TOPIC_NOT_FOUND, str(exc))
        except LedgerMQError as exc:
            return [], status(Code.INTERNAL_ERROR, f"route of {topic} not found: {exc}")
        local = self._state.topics.find(topic)
        # Every group of a topic has its attributes (admin creates it on every master alike);
        # this replica knows its own.
        kind = topic_message_type(local) if local is not None else TopicMessageType.MIXED
        if not self._state.config.enable_topic_message_type_check:
            kind = TopicMessageType.MIXED  # every type goes
        accepted = accepted_message_types(kind)

        def brokers_of(name: str) -> list[definition_pb2.Broker]:
            # Every replica's door, each as broker id 0: the official clients send only to a
            # queue of id 0, and a follower's door forwards the writes (proxy.master_link).
            return [broker_at(name, e.host, e.port) for e in endpoints.get(name, ())]

        queues = replica_route_queues(topic, route.queue_datas, brokers_of, accepted)
        if not queues:
            return [], status(
                Code.TOPIC_NOT_FOUND,
                f"topic {topic} has no broker group with a replica serving gRPC now "
                "(grpcServerPort=-1 on them, or none registered)",
            )
        return queues, ok()

    def _settings_limit(self) -> int:
        return self._state.config.heartbeat_max_subscriptions

    async def _server_settings(self, client: definition_pb2.Settings) -> definition_pb2.Settings:
        config = self._state.config
        # The Java proxy's mergeSubscriptionData: a group with consumeMessageOrderly is a FIFO
        # group (its PushConsumer then consumes each message group in order).
        group = self._state.metadata.groups.get(client.subscription.group.name)
        return server_settings(
            client,
            max_body_size=config.max_message_size,
            validate_message_type=config.enable_topic_message_type_check,
            fifo=group is not None and group.consume_message_orderly,
        )

    # ------------------------------------------------------------------ send
    async def _send_one(
        self, message: definition_pb2.Message, peer: str, deadline_s: float
    ) -> service_pb2.SendResultEntry:
        message_id = message.system_properties.message_id
        try:
            broker_config = self._state.config
            send, body = send_request(
                message, peer.rpartition(":")[0], broker_config.default_topic_queue_nums,
                broker_config.max_message_size,
            )  # fmt: skip
            if (refused := send_topic_refusal(send.topic)) is not None:
                raise Refusal(refused)  # noqa: TRY301 - answered below, as every refusal
            config = self._state.topics.find(send.topic)
            if self._state.is_master and config is None:
                # A v5 send never creates its topic (the Java proxy picks the queue from the
                # topic's route first, and answers TOPIC_NOT_FOUND when there is none). Only
                # the master's answer counts: a slave may not have applied a topic the master
                # just created, and its send service answers HA_NOT_AVAILABLE anyway, which
                # sends the client to the master instead of failing the send.
                return service_pb2.SendResultEntry(
                    status=status(Code.TOPIC_NOT_FOUND, f"topic {send.topic} does not exist"),
                    message_id=message_id,
                )
            if config is not None:
                send = place(
                    send, config, check_type=self._state.config.enable_topic_message_type_check
                )
            tracer = self._services.trace
            started_ms = tracer.now_ms() if tracer is not None else 0
            write_queues = config.write_queue_nums if config is not None else 0
            result = await self._link.send(send, body, peer, deadline_s, write_queues)
            if tracer is not None:
                system = message.system_properties
                tracer.pub(
                    timestamp_ms=started_ms, group=send.producer_group, topic=send.topic,
                    msg_id=message_id, tags=system.tag, keys=" ".join(system.keys),
                    body_length=len(message.body), cost_ms=tracer.now_ms() - started_ms,
                    offset_msg_id=result.msg_ids[0] if result.msg_ids else "",
                )  # fmt: skip
        except Refusal as refusal:
            return service_pb2.SendResultEntry(status=refusal.status, message_id=message_id)
        except ServiceError as exc:
            return service_pb2.SendResultEntry(status=error_status(exc), message_id=message_id)
        except LedgerMQError as exc:
            return service_pb2.SendResultEntry(
                status=status(Code.INTERNAL_ERROR, str(exc)), message_id=message_id
            )
        entry = service_pb2.SendResultEntry(
            status=ok(),
            message_id=message_id,
            offset=result.queue_offset,
            recall_handle=result.recall_handle or "",
        )
        if message.system_properties.message_type == definition_pb2.TRANSACTION:
            entry.transaction_id = transaction_id(result.msg_ids[0])
        return entry

    # ------------------------------------------------------------------ POP
    async def ReceiveMessage(  # noqa: N802
        self, request: service_pb2.ReceiveMessageRequest, context: Context
    ) -> AsyncIterator[service_pb2.ReceiveMessageResponse]:
        """POP: ``status`` first, then one ``message`` per message, then the
        ``delivery_timestamp`` (the Java proxy's ``ReceiveMessageResponseStreamWriter``); a
        single MESSAGE_NOT_FOUND when nothing came within the long-polling time."""
        group, topic = request.group.name, request.message_queue.topic.name
        needs = consume_needs(topic, group)
        if (refused := self._admit(context, "ReceiveMessage", needs)) is not None:
            yield service_pb2.ReceiveMessageResponse(status=refused)
            return
        if (refused := consume_refusal(topic, group)) is not None:
            yield service_pb2.ReceiveMessageResponse(status=refused)
            return
        try:
            pop = receive_request(request)
            result = await self._services.pop.receive(pop)
        except Refusal as refusal:
            yield service_pb2.ReceiveMessageResponse(status=refusal.status)
            return
        except ServiceError as exc:
            yield service_pb2.ReceiveMessageResponse(status=error_status(exc))
            return
        except Exception as exc:  # noqa: BLE001 - answered; the traceback is in the log
            _log.exception("gRPC ReceiveMessage failed")
            yield service_pb2.ReceiveMessageResponse(
                status=status(Code.INTERNAL_ERROR, f"internal error: {type(exc).__name__}")
            )
            return
        if not result.messages:
            yield service_pb2.ReceiveMessageResponse(
                status=status(Code.MESSAGE_NOT_FOUND, "no new message")
            )
            return
        yield service_pb2.ReceiveMessageResponse(status=ok())
        tracer = self._services.trace
        for popped in result.messages:
            if tracer is not None:
                tracer.delivered(group=group, popped=popped)
            yield service_pb2.ReceiveMessageResponse(message=received_message(popped))
        delivered = service_pb2.ReceiveMessageResponse()
        delivered.delivery_timestamp.FromMilliseconds(result.pop_time_ms)
        yield delivered
