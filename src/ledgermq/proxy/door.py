"""``MessagingService`` over a ``Backend``: every RPC written once, for both gRPC doors (issue 26).

A replica's door (``proxy.local``, over ``proxy.local_backend``) and the stand-alone proxy
(``proxy.cluster``, over ``proxy.remote_backend``) are one ``DoorServicer`` each: what a call
must pass before a backend is asked lives here, once: the ACL's permissions (``_admit``: with
``aclEnable`` the RocketMQ 5 clients' ``authorization`` metadata against the ACL, after
``proxy.admission`` has authenticated the call), the name checks (``proxy.name_status``), the
duration checks (``proxy.timestamps``), the translation of the v5 messages
(``proxy.messages``, ``proxy.received``, ``proxy.route_answers``). Served: QueryRoute,
QueryAssignment, SendMessage (``proxy.door_send``), ReceiveMessage, AckMessage,
ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue, EndTransaction, RecallMessage,
Telemetry (settings, the client's session, check-backs), Heartbeat (renews the session),
NotifyClientTermination, the PullConsumer set (``proxy.door_pull``); SyncLiteSubscription
answers NOT_IMPLEMENTED in its status.

Every answer carries its outcome in ``status`` (the gRPC status stays OK, as the Java proxy
answers); an unexpected failure is logged and answered INTERNAL_ERROR, never a bare UNKNOWN.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from typing import TYPE_CHECKING, Any, Concatenate, Final, ParamSpec, Protocol, TypeVar

from ledgermq.messaging import (
    AckEntry,
    Caller,
    ClientKind,
    ClientSession,
    EndTransaction,
    Resolution,
)
from ledgermq.proxy.door_pull import PullRpcs, consume_needs
from ledgermq.proxy.door_send import send_message
from ledgermq.proxy.grpc_access import signed_in_publisher
from ledgermq.proxy.message_types import accepted_message_types
from ledgermq.proxy.messages import receive_request
from ledgermq.proxy.name_status import (
    consume_refusal,
    group_refusal,
    settings_refusal,
    topic_refusal,
)
from ledgermq.proxy.protocol import definition_pb2, service_pb2, service_pb2_grpc
from ledgermq.proxy.received import received_message
from ledgermq.proxy.refusal import Refusal
from ledgermq.proxy.route_answers import (
    assignments,
    broker_at,
    peer_address,
    replica_route_queues,
    server_settings,
)
from ledgermq.proxy.status import (
    Code,
    common_status,
    internal_error,
    not_implemented,
    ok,
    status,
)
from ledgermq.proxy.timestamps import duration_ms
from ledgermq.security.acl import Needs, Perm
from ledgermq.security.acl.resources import topic_resource

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

    import grpc.aio

    from ledgermq.proxy.backend import GrpcBackend
    from ledgermq.security.gate import AclGate

    Context = grpc.aio.ServicerContext[Any, Any]

__all__ = ["DoorServicer", "internal_error_answered"]


_DEFAULT_DEADLINE_S: Final = 3.0
"""How long a call may take at a backend when the client set no deadline (its usual timeout)."""
_MARGIN_S: Final = 0.2
"""A call is answered this long before the client's deadline, so the client reads our status
instead of a deadline error."""
_CLIENT_ID: Final = "x-mq-client-id"
_LANGUAGE: Final = "x-mq-language"
_VERSION: Final = "x-mq-client-version"
_CLIENT_KINDS: Final = {
    definition_pb2.PRODUCER: ClientKind.PRODUCER,
    definition_pb2.PUSH_CONSUMER: ClientKind.CONSUMER,
    definition_pb2.SIMPLE_CONSUMER: ClientKind.CONSUMER,
    definition_pb2.PULL_CONSUMER: ClientKind.PULL_CONSUMER,
}
_ALL_TYPES: Final = (
    definition_pb2.NORMAL,
    definition_pb2.FIFO,
    definition_pb2.DELAY,
    definition_pb2.TRANSACTION,
)
"""What a route says every queue takes when sends are not checked against a topic's type."""
_RESOLUTIONS: Final = {
    definition_pb2.COMMIT: Resolution.COMMIT,
    definition_pb2.ROLLBACK: Resolution.ROLLBACK,
    definition_pb2.TRANSACTION_RESOLUTION_UNSPECIFIED: Resolution.UNKNOWN,
}


class _Answer(Protocol):
    def __init__(self, *, status: definition_pb2.Status) -> None: ...


_P = ParamSpec("_P")
_R = TypeVar("_R", bound=_Answer)
_S = TypeVar("_S")


def internal_error_answered(
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
                return response(status=internal_error(method.__name__, exc))

        return guarded

    return wrap


def deadline_s(context: Context) -> float:
    """Seconds a backend may take over a call (the client's deadline, less a margin)."""
    left: float | None = context.time_remaining()  # None: the client set no deadline
    return _DEFAULT_DEADLINE_S if left is None else max(0.1, left - _MARGIN_S)


class DoorServicer(PullRpcs, service_pb2_grpc.MessagingServiceServicer):
    """The RPCs both doors serve alike (module docstring)."""

    backend: GrpcBackend

    def __init__(
        self,
        backend: GrpcBackend,
        acl: AclGate | None,
        real_peer: Callable[[str], str] | None,
        wall_time_s: Callable[[], float],
    ) -> None:
        """``acl``: check the clients' ``authorization`` metadata (``aclEnable``);
        ``real_peer``: the client behind a peer address grpcio reports, when connections reach
        grpcio through the door's own front (``tls.server.mode=permissive``, ``proxy.unify``):
        the ACL's white addresses and born hosts must see the client."""
        self.backend = backend
        self._acl = acl
        self._real_peer = real_peer or (lambda address: address)
        self._wall_time_s = wall_time_s
        self._sessions: dict[str, ClientSession] = {}
        """client id -> its session, while its Telemetry stream is open (a Heartbeat renews
        it; the stream's settings give it)."""

    # ------------------------------------------------------------------ the caller
    def _metadata(self, context: Context) -> dict[str, str]:
        return {
            k.lower(): v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)
        }

    def _caller(self, context: Context, request: str) -> Caller:
        address = self._real_peer(peer_address(context))
        return Caller(address, self._metadata(context), request)

    def _admit(
        self, context: Context, request: str, needs: Needs | None = None
    ) -> definition_pb2.Status | None:
        """None if the call may go on, else the status to answer it with: with ``aclEnable``,
        the RocketMQ 5 clients' ``authorization`` metadata is checked against the ACL (the
        same accounts and permissions as remoting): UNAUTHORIZED when the credentials are
        missing or wrong, FORBIDDEN when a permission is."""
        if self._acl is None:
            return None
        caller = self._caller(context, request)
        decision = self._acl.check_grpc(
            caller.address, caller.metadata, request, needs or Needs(), self._wall_time_s()
        )
        if decision.allowed:
            return None
        code = Code.FORBIDDEN if decision.authenticated else Code.UNAUTHORIZED
        return status(code, decision.remark)

    def _deadline_s(self, context: Context) -> float:
        return deadline_s(context)

    def _may_publish(self, context: Context) -> Callable[[str], bool] | None:
        """For a Telemetry stream: whether its account may publish a topic (None: no ACL)."""
        if self._acl is None:
            return None
        address = self._real_peer(peer_address(context))
        return signed_in_publisher(self._acl, address, self._metadata(context))

    def peer(self, context: Context) -> str:
        """The client's ``host:port`` (behind the door's own front when there is one)."""
        return self._real_peer(peer_address(context))

    def _session(self, context: Context, settings: definition_pb2.Settings) -> ClientSession | None:
        """The client's session as its settings describe it; None without a client id."""
        metadata = self._metadata(context)
        client_id = metadata.get(_CLIENT_ID, "")
        if not client_id:
            return None
        kind = _CLIENT_KINDS.get(settings.client_type, ClientKind.OTHER)
        subscription = settings.subscription
        subscriptions = {
            entry.topic.name: (
                (entry.expression.expression, "SQL92")
                if entry.expression.type == definition_pb2.SQL
                else (entry.expression.expression or "*", "TAG")
            )
            for entry in subscription.subscriptions
            if entry.topic.name
        }
        return ClientSession(
            client_id=client_id,
            address=self.peer(context),
            kind=kind,
            group=subscription.group.name if kind is not ClientKind.PRODUCER else "",
            subscriptions=subscriptions if kind is not ClientKind.PRODUCER else {},
            publishes=tuple(t.name for t in settings.publishing.topics if t.name),
            language=metadata.get(_LANGUAGE, ""),
            version=metadata.get(_VERSION, ""),
        )

    # ------------------------------------------------------------------ send
    @internal_error_answered(service_pb2.SendMessageResponse)
    async def SendMessage(  # noqa: N802
        self, request: service_pb2.SendMessageRequest, context: Context
    ) -> service_pb2.SendMessageResponse:
        return await send_message(self, request, context)

    # ------------------------------------------------------------------ routes
    async def _route_queues(
        self, topic: str
    ) -> tuple[list[definition_pb2.MessageQueue], definition_pb2.Status]:
        """The topic's queues as this door answers them, or the status refusing the route."""
        if not topic:
            return [], status(Code.ILLEGAL_TOPIC, "the request names no topic")
        if (refused := topic_refusal(topic)) is not None:
            return [], refused
        try:
            route = await self.backend.route(topic)
        except Refusal as refusal:
            return [], refusal.status
        kind = route.message_type
        accepted = _ALL_TYPES if kind is None else accepted_message_types(kind)

        def brokers_of(name: str) -> list[definition_pb2.Broker]:
            return [broker_at(name, d.host, d.port) for d in route.doors.get(name, ())]

        queues = replica_route_queues(topic, route.queue_datas, brokers_of, accepted)
        if not queues:
            return [], status(Code.TOPIC_NOT_FOUND, route.no_queue)
        return queues, ok()

    @internal_error_answered(service_pb2.QueryRouteResponse)
    async def QueryRoute(  # noqa: N802 - the generated servicer's names
        self, request: service_pb2.QueryRouteRequest, context: Context
    ) -> service_pb2.QueryRouteResponse:
        if (refused := self._admit(context, "QueryRoute")) is not None:
            return service_pb2.QueryRouteResponse(status=refused)
        queues, answer = await self._route_queues(request.topic.name)
        return service_pb2.QueryRouteResponse(status=answer, message_queues=queues)

    @internal_error_answered(service_pb2.QueryAssignmentResponse)
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

    # ------------------------------------------------------------------ POP receive
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
            receive = receive_request(request)
            result = await self.backend.receive(receive, deadline_s(context))
        except Refusal as refusal:
            yield service_pb2.ReceiveMessageResponse(status=refusal.status)
            return
        except Exception as exc:  # noqa: BLE001 - answered; the traceback is in the log
            yield service_pb2.ReceiveMessageResponse(status=internal_error("ReceiveMessage", exc))
            return
        if not result.messages:
            yield service_pb2.ReceiveMessageResponse(
                status=status(Code.MESSAGE_NOT_FOUND, "no new message")
            )
            return
        yield service_pb2.ReceiveMessageResponse(status=ok())
        for delivery in result.messages:
            yield service_pb2.ReceiveMessageResponse(message=received_message(delivery))
        delivered = service_pb2.ReceiveMessageResponse()
        delivered.delivery_timestamp.FromMilliseconds(result.pop_time_ms)
        yield delivered

    # ------------------------------------------------------------------ clients
    async def Telemetry(  # noqa: N802
        self,
        request_iterator: AsyncIterator[service_pb2.TelemetryCommand]
        | Iterator[service_pb2.TelemetryCommand],
        context: Context,
    ) -> AsyncIterator[service_pb2.TelemetryCommand]:
        """Each client ``settings`` is answered with the settings merged with the server's
        (the Java proxy's ``GrpcClientSettingsManager``) and registers the client's session
        with the backend (its group and subscriptions: ``consumer-connection`` lists it); the
        stream stays open until the client closes it. A producer's stream also carries the
        check-backs of its topics' half messages (``RecoverOrphanedTransactionCommand``; with
        the ACL on, only to a stream whose account may publish the topic). Other commands
        (thread stack traces, verification results) need no answer."""
        if (refused := self._admit(context, "Telemetry")) is not None:
            yield service_pb2.TelemetryCommand(status=refused)
            return
        assert hasattr(request_iterator, "__aiter__"), "grpc.aio passes an async iterator"
        outbox: asyncio.Queue[service_pb2.TelemetryCommand | None] = asyncio.Queue()
        streams = self.backend.streams
        key = streams.open(outbox, self._may_publish(context))
        client_id = ""

        async def read() -> None:
            nonlocal client_id
            try:
                async for command in request_iterator:
                    if not command.HasField("settings"):
                        continue
                    settings = command.settings
                    limits = self.backend.limits()
                    refused = settings_refusal(settings, limits.max_subscriptions)
                    if refused is not None:
                        outbox.put_nowait(service_pb2.TelemetryCommand(status=refused))
                        continue
                    if settings.client_type == definition_pb2.PRODUCER:
                        streams.publishes(key, [t.name for t in settings.publishing.topics])
                    session = self._session(context, settings)
                    if session is not None:
                        try:
                            await self.backend.client_alive(session)
                        except Refusal as refusal:
                            outbox.put_nowait(service_pb2.TelemetryCommand(status=refusal.status))
                            continue
                        client_id = session.client_id
                        self._sessions[client_id] = session
                    merged = server_settings(
                        settings,
                        max_body_size=limits.max_body_size,
                        validate_message_type=limits.validate_message_type,
                        fifo=await self.backend.consumes_orderly(
                            settings.subscription.group.name,
                            [e.topic.name for e in settings.subscription.subscriptions
                             if e.topic.name],
                        ) if settings.HasField("subscription") else False,
                    )  # fmt: skip
                    outbox.put_nowait(service_pb2.TelemetryCommand(status=ok(), settings=merged))
            finally:
                outbox.put_nowait(None)

        reader = asyncio.get_running_loop().create_task(read())
        try:
            while (command := await outbox.get()) is not None:
                yield command
        finally:
            streams.close(key)
            self._sessions.pop(client_id, None)
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader

    @internal_error_answered(service_pb2.HeartbeatResponse)
    async def Heartbeat(  # noqa: N802 - the generated servicer's names
        self, request: service_pb2.HeartbeatRequest, context: Context
    ) -> service_pb2.HeartbeatResponse:
        """Renews the client's session (as its Telemetry settings gave it), so it stays in
        the broker's client registry while it heartbeats (every 10 s; the registry forgets a
        client silent for 120 s)."""
        if (refused := self._admit(context, "Heartbeat")) is not None:
            return service_pb2.HeartbeatResponse(status=refused)
        if request.HasField("group") and (refused := group_refusal(request.group.name)):
            return service_pb2.HeartbeatResponse(status=refused)
        session = self._sessions.get(self._metadata(context).get(_CLIENT_ID, ""))
        if session is not None:
            try:
                await self.backend.client_alive(session)
            except Refusal as refusal:
                return service_pb2.HeartbeatResponse(status=refusal.status)
        return service_pb2.HeartbeatResponse(status=ok())

    @internal_error_answered(service_pb2.NotifyClientTerminationResponse)
    async def NotifyClientTermination(  # noqa: N802
        self, request: service_pb2.NotifyClientTerminationRequest, context: Context
    ) -> service_pb2.NotifyClientTerminationResponse:
        """The client leaves the group it names (the broker's registry forgets it now)."""
        if (refused := self._admit(context, "NotifyClientTermination")) is not None:
            return service_pb2.NotifyClientTerminationResponse(status=refused)
        client_id = self._metadata(context).get(_CLIENT_ID, "")
        if client_id:
            self._sessions.pop(client_id, None)
            await self.backend.client_gone(client_id, request.group.name)
        return service_pb2.NotifyClientTerminationResponse(status=ok())

    # ------------------------------------------------------------------ POP settlement
    @internal_error_answered(service_pb2.AckMessageResponse)
    async def AckMessage(  # noqa: N802
        self, request: service_pb2.AckMessageRequest, context: Context
    ) -> service_pb2.AckMessageResponse:
        """One result per entry, in order; the response's status is the entries' common one,
        else MULTIPLE_RESULTS (the Java proxy's ``AckMessageActivity``)."""
        group, topic = request.group.name, request.topic.name
        if (refused := self._admit(context, "AckMessage", consume_needs(topic, group))) is not None:
            return service_pb2.AckMessageResponse(status=refused)
        if (refused := consume_refusal(topic, group)) is not None:
            return service_pb2.AckMessageResponse(status=refused)
        if not request.entries:
            return service_pb2.AckMessageResponse(
                status=status(Code.BAD_REQUEST, "the request holds no entry")
            )
        acks = [AckEntry(e.message_id, e.receipt_handle) for e in request.entries]
        results = await self.backend.ack(group, topic, acks, deadline_s(context))
        entries = [
            service_pb2.AckMessageResultEntry(
                message_id=entry.message_id,
                receipt_handle=entry.receipt_handle,
                status=ok() if refusal is None else refusal.status,
            )
            for entry, refusal in zip(request.entries, results, strict=True)
        ]
        overall = common_status([e.status for e in entries])
        return service_pb2.AckMessageResponse(status=overall, entries=entries)

    @internal_error_answered(service_pb2.ChangeInvisibleDurationResponse)
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
            handle = await self.backend.change_invisible(
                group, topic, request.receipt_handle, invisible_ms, deadline_s(context)
            )
        except Refusal as refusal:
            return service_pb2.ChangeInvisibleDurationResponse(status=refusal.status)
        return service_pb2.ChangeInvisibleDurationResponse(status=ok(), receipt_handle=handle)

    @internal_error_answered(service_pb2.ForwardMessageToDeadLetterQueueResponse)
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
            await self.backend.forward_to_dead_letters(
                group, topic, request.receipt_handle, deadline_s(context)
            )
        except Refusal as refusal:
            return service_pb2.ForwardMessageToDeadLetterQueueResponse(status=refusal.status)
        return service_pb2.ForwardMessageToDeadLetterQueueResponse(status=ok())

    # ------------------------------------------------------------------ transactions, timers
    @internal_error_answered(service_pb2.EndTransactionResponse)
    async def EndTransaction(  # noqa: N802
        self, request: service_pb2.EndTransactionRequest, context: Context
    ) -> service_pb2.EndTransactionResponse:
        """Commit or roll back a half message; PUB on the topic, as a send (the backend checks
        that the half message's topic is this one)."""
        topic = request.topic.name
        needs = Needs(resources={topic_resource(topic): Perm.PUB})
        if (refused := self._admit(context, "EndTransaction", needs)) is not None:
            return service_pb2.EndTransactionResponse(status=refused)
        if topic and (refused := topic_refusal(topic)):
            return service_pb2.EndTransactionResponse(status=refused)
        resolution = _RESOLUTIONS.get(request.resolution)
        if resolution is None:
            return service_pb2.EndTransactionResponse(
                status=status(Code.BAD_REQUEST, f"unknown resolution {request.resolution}")
            )
        end = EndTransaction(
            topic=topic,
            transaction_id=request.transaction_id,
            message_id=request.message_id,
            resolution=resolution,
            from_check=request.source == definition_pb2.SOURCE_SERVER_CHECK,
        )
        try:
            caller = self._caller(context, "EndTransaction")
            await self.backend.end_transaction(end, caller, deadline_s(context))
        except Refusal as refusal:
            return service_pb2.EndTransactionResponse(status=refusal.status)
        return service_pb2.EndTransactionResponse(status=ok())

    @internal_error_answered(service_pb2.RecallMessageResponse)
    async def RecallMessage(  # noqa: N802
        self, request: service_pb2.RecallMessageRequest, context: Context
    ) -> service_pb2.RecallMessageResponse:
        """Cancel a pending timer message by the recall handle its send answered with; PUB on
        the topic, as a send. The handle's master decides."""
        topic = request.topic.name
        needs = Needs(resources={topic_resource(topic): Perm.PUB})
        if (refused := self._admit(context, "RecallMessage", needs)) is not None:
            return service_pb2.RecallMessageResponse(status=refused)
        if not topic:
            return service_pb2.RecallMessageResponse(
                status=status(Code.ILLEGAL_TOPIC, "the request names no topic")
            )
        if (refused := topic_refusal(topic)) is not None:
            return service_pb2.RecallMessageResponse(status=refused)
        try:
            message_id = await self.backend.recall(
                topic, request.recall_handle, deadline_s(context)
            )
        except Refusal as refusal:
            return service_pb2.RecallMessageResponse(status=refusal.status)
        return service_pb2.RecallMessageResponse(status=ok(), message_id=message_id)

    async def SyncLiteSubscription(  # noqa: N802
        self, request: service_pb2.SyncLiteSubscriptionRequest, context: Context
    ) -> service_pb2.SyncLiteSubscriptionResponse:
        return service_pb2.SyncLiteSubscriptionResponse(
            status=not_implemented("SyncLiteSubscription")
        )
