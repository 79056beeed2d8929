"""``apache.rocketmq.v2.MessagingService`` over the broker's service layer: translation only.

Each RPC reads its request's fields, calls ``BrokerServices`` (or the route finder), and writes
the response; what an operation means lives in ``broker.service`` (DESIGN.md, "two front
doors, one house"). Every answer carries its outcome in ``status`` (the gRPC status stays OK,
as the Java proxy answers): a refusal's code comes from ``proxy.status``, and an RPC this broker
does not serve yet answers NOT_IMPLEMENTED the same way (for a server stream, one response with
that status), never gRPC's UNIMPLEMENTED and never a dropped stream. Spec
protocol-remoting-and-grpc.md section 3.3 lists what the official clients require of each
answer.

Served now (issue 16 section 1): QueryRoute, Heartbeat, SendMessage (normal and FIFO messages,
checked against the topic's message type: ``placement``),
QueryAssignment, Telemetry (settings exchange; the stream stays open until the client ends it)
and NotifyClientTermination; POP (ReceiveMessage, AckMessage, ChangeInvisibleDuration,
ForwardMessageToDeadLetterQueue) over ``broker.service.pop``, the same state the remoting POP
codes use; the PullConsumer set (PullMessage, UpdateOffset, GetOffset, QueryOffset) in
``proxy.pull_rpcs`` over the pull and offset services; transactions (transactional sends,
EndTransaction, check-backs over Telemetry) over ``broker.service.transactions``
(``proxy.transactions``). RecallMessage answers NOT_IMPLEMENTED until the service has it.

Authentication: with ``aclEnable`` every RPC that touches data passes ``_admit`` first, which
checks the ``authorization`` metadata (``ledgermq.acl.grpc_auth``) against the broker's ACL.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from typing import TYPE_CHECKING, Any, Concatenate, Final, ParamSpec, Protocol, TypeVar

from ledgermq.acl import Needs, Perm
from ledgermq.acl.resources import topic_resource
from ledgermq.broker.errors import ServiceError
from ledgermq.broker.service.access import OPEN_ACCESS
from ledgermq.broker.service.timers import RecallHandle
from ledgermq.errors import LedgerMQError
from ledgermq.proxy.grpc_access import signed_in_publisher
from ledgermq.proxy.master_link import MasterLink
from ledgermq.proxy.message_types import (
    TopicMessageType,
    accepted_message_types,
    topic_message_type,
)
from ledgermq.proxy.messages import GRPC_PRODUCER_GROUP, Refusal, receive_request, send_request
from ledgermq.proxy.name_status import (
    consume_refusal,
    group_refusal,
    send_topic_refusal,
    settings_refusal,
    topic_refusal,
)
from ledgermq.proxy.placement import place
from ledgermq.proxy.protocol import definition_pb2, service_pb2, service_pb2_grpc
from ledgermq.proxy.pull_rpcs import PullConsumerRpcs, consume_needs
from ledgermq.proxy.received import received_message
from ledgermq.proxy.replica_access import GrpcAccess
from ledgermq.proxy.route_answers import (
    assignments,
    broker_at,
    peer_address,
    replica_route_queues,
    server_settings,
)
from ledgermq.proxy.routes import RouteFinder, TopicNotFound
from ledgermq.proxy.status import Code, error_status, not_implemented, ok, status
from ledgermq.proxy.timestamps import duration_ms
from ledgermq.proxy.transactions import TelemetryProducers, end_request, transaction_id
from ledgermq.wire import MQRequestCode, MQResponseCode

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

    import grpc.aio

    from ledgermq.broker.service.access import Access
    from ledgermq.broker.service.services import BrokerServices
    from ledgermq.broker.state.broker_state import BrokerState
    from ledgermq.security import AclGate

    Context = grpc.aio.ServicerContext[Any, Any]

__all__ = ["MessagingServicer"]

_log = logging.getLogger(__name__)


class _Answer(Protocol):
    def __init__(self, *, status: definition_pb2.Status) -> None: ...


_P = ParamSpec("_P")
_R = TypeVar("_R", bound=_Answer)
_S = TypeVar("_S")


def _internal_error_answered(
    response: type[_R],
) -> Callable[
    [Callable[Concatenate[_S, _P], Awaitable[_R]]], Callable[Concatenate[_S, _P], Awaitable[_R]]
]:
    """An unexpected failure of a unary RPC is logged and answered INTERNAL_ERROR in the
    response's status (as the Java proxy does), never a bare gRPC UNKNOWN."""

    def wrap(
        method: Callable[Concatenate[_S, _P], Awaitable[_R]],
    ) -> Callable[Concatenate[_S, _P], Awaitable[_R]]:
        @functools.wraps(method)
        async def guarded(self: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
            try:
                return await method(self, *args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - answered; the traceback is in the log
                _log.exception("gRPC %s failed", method.__name__)
                return response(
                    status=status(Code.INTERNAL_ERROR, f"internal error: {type(exc).__name__}")
                )

        return guarded

    return wrap


_PRODUCERS: Final = frozenset({definition_pb2.PRODUCER})
_DEFAULT_DEADLINE_S: Final = 3.0
"""How long a write forwarded to the master may take when the client set no deadline."""
_MARGIN_S: Final = 0.2
"""A forwarded write is answered this long before the client's deadline, so the client reads
the status instead of a deadline error."""


def _deadline_s(context: Context) -> float:
    """Seconds a write forwarded to the master may take (``proxy.master_link``)."""
    left: float | None = context.time_remaining()  # None: the client set no deadline
    return _DEFAULT_DEADLINE_S if left is None else max(0.1, left - _MARGIN_S)


class MessagingServicer(PullConsumerRpcs, service_pb2_grpc.MessagingServiceServicer):
    """One replica's gRPC door (local mode)."""

    def __init__(
        self,
        services: BrokerServices,
        state: BrokerState,
        routes: RouteFinder,
        acl: AclGate | None = None,
        real_peer: Callable[[str], str] | None = None,
        link: MasterLink | None = None,
    ) -> None:
        """``real_peer``: the client behind a peer address grpcio reports, when connections
        reach grpcio through the door's own front (``tls.server.mode=permissive``,
        ``proxy.unify``); the ACL's white addresses and born hosts must see the client.
        ``link``: how a send or an EndTransaction reaches the group's master while this
        replica is not it (``proxy.master_link``; default: none, the services answer)."""
        self._real_peer = real_peer or (lambda address: address)
        self._acl = acl
        self._link = link or MasterLink(state, services, None)
        self._services = services
        self._state = state
        self._routes = routes
        self._producers = TelemetryProducers()
        """v5 producers' Telemetry streams: where check-backs of gRPC half messages go."""
        services.transactions.channels.append(self._producers)

    def _admit(
        self, context: Context, request: str, needs: Needs | None = None
    ) -> definition_pb2.Status | None:
        """None if the call may go on, else the status to answer it with: with ``aclEnable``,
        the RocketMQ 5 clients' ``authorization`` metadata is checked against the broker's ACL
        (the same accounts and permissions as remoting): UNAUTHORIZED when the credentials are
        missing or wrong, FORBIDDEN when a permission is."""
        if self._acl is None:
            return None
        metadata = {
            k.lower(): v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)
        }
        decision = self._acl.check_grpc(
            self._real_peer(peer_address(context)),
            metadata,
            request,
            needs or Needs(),
            self._state.clock.wall_time_s(),
        )
        if decision.allowed:
            return None
        code = Code.FORBIDDEN if decision.authenticated else Code.UNAUTHORIZED
        return status(code, decision.remark)

    def _metadata(self, context: Context) -> dict[str, str]:
        return {
            k.lower(): v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)
        }

    def _access(self, context: Context, request: str) -> Access:
        """The admitted call's requester, for the checks a service makes once it has read a
        record (``broker.service.access``)."""
        if self._acl is None:
            return OPEN_ACCESS
        address = self._real_peer(peer_address(context))
        clock = self._state.clock
        return GrpcAccess(self._acl, address, self._metadata(context), request, clock.wall_time_s)

    def _may_publish(self, context: Context) -> Callable[[str], bool] | None:
        """For a Telemetry stream: whether its account may publish a topic (None: no ACL)."""
        if self._acl is None:
            return None
        address = self._real_peer(peer_address(context))
        return signed_in_publisher(self._acl, address, self._metadata(context))

    # ------------------------------------------------------------------ routes
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

    @_internal_error_answered(service_pb2.QueryRouteResponse)
    async def QueryRoute(  # noqa: N802 - the generated servicer's names
        self, request: service_pb2.QueryRouteRequest, context: Context
    ) -> service_pb2.QueryRouteResponse:
        if (refused := self._admit(context, "QueryRoute")) is not None:
            return service_pb2.QueryRouteResponse(status=refused)
        queues, answer = await self._route_queues(request.topic.name)
        return service_pb2.QueryRouteResponse(status=answer, message_queues=queues)

    @_internal_error_answered(service_pb2.QueryAssignmentResponse)
    async def QueryAssignment(  # noqa: N802
        self, request: service_pb2.QueryAssignmentRequest, context: Context
    ) -> service_pb2.QueryAssignmentResponse:
        """One assignment per broker group with readable queues, queue id -1 ("any queue of
        this broker", POP), as the Java proxy answers."""
        if (refused := self._admit(context, "QueryAssignment")) is not None:
            return service_pb2.QueryAssignmentResponse(status=refused)
        if request.HasField("group") and (refused := group_refusal(request.group.name)):
            return service_pb2.QueryAssignmentResponse(status=refused)
        queues, answer = await self._route_queues(request.topic.name)
        if answer.code != Code.OK:
            return service_pb2.QueryAssignmentResponse(status=answer)
        return assignments(request.topic.name, queues)

    # ------------------------------------------------------------------ clients
    async def Heartbeat(  # noqa: N802
        self, request: service_pb2.HeartbeatRequest, context: Context
    ) -> service_pb2.HeartbeatResponse:
        if (refused := self._admit(context, "Heartbeat")) is not None:
            return service_pb2.HeartbeatResponse(status=refused)
        if request.HasField("group") and (refused := group_refusal(request.group.name)):
            return service_pb2.HeartbeatResponse(status=refused)
        return service_pb2.HeartbeatResponse(status=ok())

    async def NotifyClientTermination(  # noqa: N802
        self, request: service_pb2.NotifyClientTerminationRequest, context: Context
    ) -> service_pb2.NotifyClientTerminationResponse:
        if (refused := self._admit(context, "NotifyClientTermination")) is not None:
            return service_pb2.NotifyClientTerminationResponse(status=refused)
        return service_pb2.NotifyClientTerminationResponse(status=ok())

    async def Telemetry(  # noqa: N802
        self,
        request_iterator: AsyncIterator[service_pb2.TelemetryCommand]
        | Iterator[service_pb2.TelemetryCommand],
        context: Context,
    ) -> AsyncIterator[service_pb2.TelemetryCommand]:
        """Each client ``settings`` is answered with the settings merged with the server's
        (the Java proxy's ``GrpcClientSettingsManager``); the stream stays open until the
        client closes it. A producer's stream also carries the broker's check-backs of its
        topics' half messages (``RecoverOrphanedTransactionCommand``, ``proxy.transactions``).
        Other commands (thread stack traces, verification results) need no answer."""
        if (refused := self._admit(context, "Telemetry")) is not None:
            yield service_pb2.TelemetryCommand(status=refused)
            return
        assert hasattr(request_iterator, "__aiter__"), "grpc.aio passes an async iterator"
        outbox: asyncio.Queue[service_pb2.TelemetryCommand | None] = asyncio.Queue()
        key = self._producers.open(outbox, self._may_publish(context))

        async def read() -> None:
            try:
                async for command in request_iterator:
                    if command.HasField("settings"):
                        settings = command.settings
                        limit = self._state.config.heartbeat_max_subscriptions
                        if (refused := settings_refusal(settings, limit)) is not None:
                            outbox.put_nowait(service_pb2.TelemetryCommand(status=refused))
                            continue
                        if settings.client_type in _PRODUCERS:
                            topics = [t.name for t in settings.publishing.topics]
                            self._producers.publishes(key, topics)
                        outbox.put_nowait(
                            service_pb2.TelemetryCommand(
                                status=ok(), settings=self._server_settings(settings)
                            )
                        )
            finally:
                outbox.put_nowait(None)

        reader = asyncio.get_running_loop().create_task(read())
        try:
            while (command := await outbox.get()) is not None:
                yield command
        finally:
            self._producers.close(key)
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader

    def _server_settings(self, client: definition_pb2.Settings) -> definition_pb2.Settings:
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
    @_internal_error_answered(service_pb2.SendMessageResponse)
    async def SendMessage(  # noqa: N802
        self, request: service_pb2.SendMessageRequest, context: Context
    ) -> service_pb2.SendMessageResponse:
        """One entry per message, in order (the client checks there is exactly one per
        message it sent); the response's status is the first failure's, else OK."""
        needs = Needs(resources={topic_resource(m.topic.name): Perm.PUB for m in request.messages})
        if (refused := self._admit(context, "SendMessage", needs)) is not None:
            return service_pb2.SendMessageResponse(status=refused)
        if not request.messages:
            return service_pb2.SendMessageResponse(
                status=status(Code.BAD_REQUEST, "the request holds no message")
            )
        peer = self._real_peer(peer_address(context))
        deadline_s = _deadline_s(context)
        entries = []
        first_failure: definition_pb2.Status | None = None
        for message in request.messages:
            entry = await self._send_one(message, peer, deadline_s)
            if first_failure is None and entry.status.code != Code.OK:
                first_failure = entry.status
            entries.append(entry)
        return service_pb2.SendMessageResponse(status=first_failure or ok(), entries=entries)

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

    # ------------------------------------------------------------------ transactions
    @_internal_error_answered(service_pb2.EndTransactionResponse)
    async def EndTransaction(  # noqa: N802
        self, request: service_pb2.EndTransactionRequest, context: Context
    ) -> service_pb2.EndTransactionResponse:
        """Commit or roll back a half message (``broker.service.transactions``); PUB on the
        topic, as a send."""
        needs = Needs(resources={topic_resource(request.topic.name): Perm.PUB})
        if (refused := self._admit(context, "EndTransaction", needs)) is not None:
            return service_pb2.EndTransactionResponse(status=refused)
        try:
            access = self._access(context, "EndTransaction")
            await self._link.end(end_request(request), access, _deadline_s(context))
        except Refusal as refusal:
            return service_pb2.EndTransactionResponse(status=refusal.status)
        except ServiceError as exc:
            return service_pb2.EndTransactionResponse(status=error_status(exc))
        return service_pb2.EndTransactionResponse(status=ok())

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

    @_internal_error_answered(service_pb2.AckMessageResponse)
    async def AckMessage(  # noqa: N802
        self, request: service_pb2.AckMessageRequest, context: Context
    ) -> service_pb2.AckMessageResponse:
        """One result per entry, in order; the response's status is the entries' common one,
        else MULTIPLE_RESULTS (the Java proxy's ``AckMessageActivity``)."""
        group, topic = request.group.name, request.topic.name
        needs = consume_needs(topic, group)
        if (refused := self._admit(context, "AckMessage", needs)) is not None:
            return service_pb2.AckMessageResponse(status=refused)
        if (refused := consume_refusal(topic, group)) is not None:
            return service_pb2.AckMessageResponse(status=refused)
        if not request.entries:
            return service_pb2.AckMessageResponse(
                status=status(Code.BAD_REQUEST, "the request holds no entry")
            )
        entries = []
        tracer = self._services.trace
        # one replicated op per queue for the whole batch (PopService.ack_many)
        errors = await self._services.pop.ack_many(
            group, topic, [entry.receipt_handle for entry in request.entries]
        )
        for entry, error in zip(request.entries, errors, strict=True):
            if error is None:
                answer = ok()
                if tracer is not None:
                    tracer.acked(group=group, msg_id=entry.message_id, handle=entry.receipt_handle)
            else:
                answer = error_status(error)
            entries.append(
                service_pb2.AckMessageResultEntry(
                    message_id=entry.message_id, receipt_handle=entry.receipt_handle, status=answer
                )
            )
        codes = {e.status.code for e in entries}
        overall = (
            entries[0].status
            if len(codes) == 1
            else status(Code.MULTIPLE_RESULTS, "the entries have different results")
        )
        return service_pb2.AckMessageResponse(status=overall, entries=entries)

    @_internal_error_answered(service_pb2.ChangeInvisibleDurationResponse)
    async def ChangeInvisibleDuration(  # noqa: N802
        self, request: service_pb2.ChangeInvisibleDurationRequest, context: Context
    ) -> service_pb2.ChangeInvisibleDurationResponse:
        group, topic = request.group.name, request.topic.name
        needs = consume_needs(topic, group)
        if (refused := self._admit(context, "ChangeInvisibleDuration", needs)) is not None:
            return service_pb2.ChangeInvisibleDurationResponse(status=refused)
        if (refused := consume_refusal(topic, group)) is not None:
            return service_pb2.ChangeInvisibleDurationResponse(status=refused)
        if not request.HasField("invisible_duration"):
            return service_pb2.ChangeInvisibleDurationResponse(
                status=status(Code.ILLEGAL_INVISIBLE_TIME, "the request has no invisible_duration")
            )
        try:
            invisible_ms = duration_ms(
                request.invisible_duration, "invisible_duration", Code.ILLEGAL_INVISIBLE_TIME
            )
            handle = await self._services.pop.change_invisible(
                group, topic, request.receipt_handle, invisible_ms
            )
        except Refusal as refusal:
            return service_pb2.ChangeInvisibleDurationResponse(status=refusal.status)
        except ServiceError as exc:
            return service_pb2.ChangeInvisibleDurationResponse(status=error_status(exc))
        return service_pb2.ChangeInvisibleDurationResponse(status=ok(), receipt_handle=str(handle))

    @_internal_error_answered(service_pb2.ForwardMessageToDeadLetterQueueResponse)
    async def ForwardMessageToDeadLetterQueue(  # noqa: N802
        self, request: service_pb2.ForwardMessageToDeadLetterQueueRequest, context: Context
    ) -> service_pb2.ForwardMessageToDeadLetterQueueResponse:
        group, topic = request.group.name, request.topic.name
        needs = consume_needs(topic, group)
        if (refused := self._admit(context, "ForwardMessageToDeadLetterQueue", needs)) is not None:
            return service_pb2.ForwardMessageToDeadLetterQueueResponse(status=refused)
        if (refused := consume_refusal(topic, group)) is not None:
            return service_pb2.ForwardMessageToDeadLetterQueueResponse(status=refused)
        try:
            await self._services.pop.forward_to_dead_letters(group, topic, request.receipt_handle)
        except ServiceError as exc:
            return service_pb2.ForwardMessageToDeadLetterQueueResponse(status=error_status(exc))
        return service_pb2.ForwardMessageToDeadLetterQueueResponse(status=ok())

    # ------------------------------------------------------------------ timers
    @_internal_error_answered(service_pb2.RecallMessageResponse)
    async def RecallMessage(  # noqa: N802
        self, request: service_pb2.RecallMessageRequest, context: Context
    ) -> service_pb2.RecallMessageResponse:
        """Cancel a pending timer message by the recall handle its send answered with
        (``TimerService.recall``); PUB on the topic, as a send."""
        topic = request.topic.name
        needs = Needs(resources={topic_resource(topic): Perm.PUB})
        if (refused := self._admit(context, "RecallMessage", needs)) is not None:
            return service_pb2.RecallMessageResponse(status=refused)
        if not topic:
            return service_pb2.RecallMessageResponse(
                status=status(Code.ILLEGAL_TOPIC, "the request names no topic")
            )
        try:
            handle = RecallHandle.parse(request.recall_handle)
            if handle.broker_name != self._state.config.broker_name or not self._state.is_master:
                # the client calls any endpoint it knows: the handle's master decides
                return await self._forward_recall(topic, handle)
            message_id = await self._services.timers.recall(topic, request.recall_handle)
        except ServiceError as exc:
            return service_pb2.RecallMessageResponse(status=error_status(exc))
        return service_pb2.RecallMessageResponse(status=ok(), message_id=message_id)

    async def _forward_recall(
        self, topic: str, handle: RecallHandle
    ) -> service_pb2.RecallMessageResponse:
        """RECALL_MESSAGE (remoting) to the master of the handle's broker, its answer mapped."""
        fields = {"producerGroup": GRPC_PRODUCER_GROUP, "topic": topic,
                  "recallHandle": str(handle)}  # fmt: skip
        try:
            answer = await self._routes.ask_master(
                topic, handle.broker_name, MQRequestCode.RECALL_MESSAGE, fields
            )
        except TopicNotFound as exc:
            return service_pb2.RecallMessageResponse(status=status(Code.TOPIC_NOT_FOUND, str(exc)))
        except LedgerMQError as exc:
            return service_pb2.RecallMessageResponse(
                status=status(Code.HA_NOT_AVAILABLE, f"recall not forwarded: {exc}")
            )
        if answer.code == MQResponseCode.SUCCESS:
            return service_pb2.RecallMessageResponse(
                status=ok(), message_id=answer.ext_fields.get("msgId", handle.message_id)
            )
        code = _FORWARDED_CODES.get(answer.code, Code.INTERNAL_ERROR)
        return service_pb2.RecallMessageResponse(status=status(code, answer.remark or ""))

    async def SyncLiteSubscription(  # noqa: N802
        self, request: service_pb2.SyncLiteSubscriptionRequest, context: Context
    ) -> service_pb2.SyncLiteSubscriptionResponse:
        return service_pb2.SyncLiteSubscriptionResponse(
            status=not_implemented("SyncLiteSubscription")
        )


_FORWARDED_CODES: Final[dict[int, definition_pb2.Code.ValueType]] = {
    MQResponseCode.NO_MESSAGE: Code.NOT_FOUND,
    MQResponseCode.SERVICE_NOT_AVAILABLE: Code.HA_NOT_AVAILABLE,
    MQResponseCode.NO_PERMISSION: Code.FORBIDDEN,
    MQResponseCode.MESSAGE_ILLEGAL: Code.BAD_REQUEST,
    MQResponseCode.TOPIC_NOT_EXIST: Code.TOPIC_NOT_FOUND,
}
"""A forwarded remoting answer's code -> the status code (``broker.remoting.errors``'s table,
read backwards, for what a recall can answer)."""
