"""``MessagingService`` over a ``Backend``: the RPCs written once for both gRPC doors (issue 26).

A replica's door (``proxy.servicer``, over ``proxy.local_backend``) and the stand-alone proxy
(``proxy.cluster_servicer``, over ``proxy.remote_backend``) are ``DoorServicer`` s: what a call
must pass before a backend is asked lives here, once: the ACL's permissions (``_admit``: with
``aclEnable`` the RocketMQ 5 clients' ``authorization`` metadata against the ACL, after
``proxy.admission`` has authenticated the call), the name checks (``proxy.name_status``), the
duration checks (``proxy.timestamps``). The RPCs served here so far: QueryRoute and
QueryAssignment (over the mode's ``_route_queues``), Telemetry (over the mode's settings),
SendMessage's request (each message stored by the mode's ``_send_one``), Heartbeat,
NotifyClientTermination, AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue,
EndTransaction, RecallMessage, SyncLiteSubscription, and the PullConsumer set (PullMessage,
UpdateOffset, GetOffset, QueryOffset: ``proxy.door_pull``); each mode's subclass serves the
rest.

Every answer carries its outcome in ``status`` (the gRPC status stays OK, as the Java proxy
answers); an unexpected failure is logged and answered INTERNAL_ERROR, never a bare UNKNOWN.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from typing import TYPE_CHECKING, Any, Concatenate, Final, ParamSpec, Protocol, TypeVar

from ledgermq.acl import Needs, Perm
from ledgermq.acl.resources import topic_resource
from ledgermq.proxy.backend import AckEntry, Caller, EndTransaction, Resolution
from ledgermq.proxy.door_pull import PullRpcs, consume_needs
from ledgermq.proxy.grpc_access import signed_in_publisher
from ledgermq.proxy.name_status import (
    DEFAULT_MAX_SUBSCRIPTIONS,
    consume_refusal,
    group_refusal,
    settings_refusal,
    topic_refusal,
)
from ledgermq.proxy.protocol import definition_pb2, service_pb2, service_pb2_grpc
from ledgermq.proxy.refusal import Refusal
from ledgermq.proxy.route_answers import assignments, peer_address
from ledgermq.proxy.status import Code, not_implemented, ok, status
from ledgermq.proxy.timestamps import duration_ms

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator

    import grpc.aio

    from ledgermq.proxy.backend import Backend
    from ledgermq.security import AclGate

    Context = grpc.aio.ServicerContext[Any, Any]

__all__ = ["DoorServicer", "internal_error_answered"]

_log = logging.getLogger(__name__)

_DEFAULT_DEADLINE_S: Final = 3.0
"""How long a call may take at a backend when the client set no deadline (its usual timeout)."""
_MARGIN_S: Final = 0.2
"""A call is answered this long before the client's deadline, so the client reads our status
instead of a deadline error."""
_RESOLUTIONS: Final = {
    definition_pb2.COMMIT: Resolution.COMMIT,
    definition_pb2.ROLLBACK: Resolution.ROLLBACK,
    definition_pb2.TRANSACTION_RESOLUTION_UNSPECIFIED: Resolution.UNKNOWN,
}


class TelemetryStreams(Protocol):
    """The open Telemetry streams of v5 producers and the topics each publishes."""

    def open(
        self,
        outbox: asyncio.Queue[service_pb2.TelemetryCommand | None],
        may_publish: Callable[[str], bool] | None = None,
    ) -> int: ...

    def publishes(self, key: int, topics: Iterable[str]) -> None: ...

    def close(self, key: int) -> None: ...


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
                _log.exception("gRPC %s failed", method.__name__)
                return response(
                    status=status(Code.INTERNAL_ERROR, f"internal error: {type(exc).__name__}")
                )

        return guarded

    return wrap


def deadline_s(context: Context) -> float:
    """Seconds a backend may take over a call (the client's deadline, less a margin)."""
    left: float | None = context.time_remaining()  # None: the client set no deadline
    return _DEFAULT_DEADLINE_S if left is None else max(0.1, left - _MARGIN_S)


class DoorServicer(PullRpcs, service_pb2_grpc.MessagingServiceServicer):
    """The RPCs both doors serve alike (module docstring)."""

    def __init__(
        self,
        backend: Backend,
        acl: AclGate | None,
        real_peer: Callable[[str], str] | None,
        wall_time_s: Callable[[], float],
    ) -> None:
        """``acl``: check the clients' ``authorization`` metadata (``aclEnable``);
        ``real_peer``: the client behind a peer address grpcio reports, when connections reach
        grpcio through the door's own front (``tls.server.mode=permissive``, ``proxy.unify``):
        the ACL's white addresses and born hosts must see the client."""
        self._backend = backend
        self._acl = acl
        self._real_peer = real_peer or (lambda address: address)
        self._wall_time_s = wall_time_s
        self._producers: TelemetryStreams
        """v5 producers' Telemetry streams: where check-backs go (each mode's registry)."""

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

    # ------------------------------------------------------------------ the mode's hooks
    async def _route_queues(
        self, topic: str
    ) -> tuple[list[definition_pb2.MessageQueue], definition_pb2.Status]:
        """The topic's queues as this door answers them (each mode's endpoints), or the
        status refusing the route."""
        raise NotImplementedError

    def _settings_limit(self) -> int:
        """The most subscriptions one client's settings may hold."""
        return DEFAULT_MAX_SUBSCRIPTIONS

    def _on_settings(self, key: int, settings: definition_pb2.Settings) -> None:
        """A client's checked settings arrived on Telemetry stream ``key``."""
        if settings.client_type == definition_pb2.PRODUCER:
            self._producers.publishes(key, [t.name for t in settings.publishing.topics])

    async def _server_settings(self, client: definition_pb2.Settings) -> definition_pb2.Settings:
        """The client's settings merged with the door's."""
        raise NotImplementedError

    def _send_peer(self, context: Context) -> str:
        """Who sends, as the mode's ``_send_one`` takes it (the born host comes from it)."""
        return self._real_peer(peer_address(context))

    async def _send_one(
        self, message: definition_pb2.Message, peer: str, deadline_s: float
    ) -> service_pb2.SendResultEntry:
        """Store one message; its entry of the answer."""
        raise NotImplementedError

    # ------------------------------------------------------------------ send
    @internal_error_answered(service_pb2.SendMessageResponse)
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
        peer, deadline = self._send_peer(context), deadline_s(context)
        entries = []
        first_failure: definition_pb2.Status | None = None
        for message in request.messages:
            entry = await self._send_one(message, peer, deadline)
            if first_failure is None and entry.status.code != Code.OK:
                first_failure = entry.status
            entries.append(entry)
        return service_pb2.SendMessageResponse(status=first_failure or ok(), entries=entries)

    # ------------------------------------------------------------------ routes
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

    # ------------------------------------------------------------------ clients
    async def Telemetry(  # noqa: N802
        self,
        request_iterator: AsyncIterator[service_pb2.TelemetryCommand]
        | Iterator[service_pb2.TelemetryCommand],
        context: Context,
    ) -> AsyncIterator[service_pb2.TelemetryCommand]:
        """Each client ``settings`` is answered with the settings merged with the server's
        (the Java proxy's ``GrpcClientSettingsManager``); the stream stays open until the
        client closes it. A producer's stream also carries the check-backs of its topics'
        half messages (``RecoverOrphanedTransactionCommand``; with the ACL on, only to a
        stream whose account may publish the topic). Other commands (thread stack traces,
        verification results) need no answer."""
        if (refused := self._admit(context, "Telemetry")) is not None:
            yield service_pb2.TelemetryCommand(status=refused)
            return
        assert hasattr(request_iterator, "__aiter__"), "grpc.aio passes an async iterator"
        outbox: asyncio.Queue[service_pb2.TelemetryCommand | None] = asyncio.Queue()
        key = self._producers.open(outbox, self._may_publish(context))

        async def read() -> None:
            try:
                async for command in request_iterator:
                    if not command.HasField("settings"):
                        continue
                    settings = command.settings
                    refused = settings_refusal(settings, self._settings_limit())
                    if refused is not None:
                        outbox.put_nowait(service_pb2.TelemetryCommand(status=refused))
                        continue
                    self._on_settings(key, settings)
                    merged = await self._server_settings(settings)
                    outbox.put_nowait(service_pb2.TelemetryCommand(status=ok(), settings=merged))
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

    async def Heartbeat(  # noqa: N802 - the generated servicer's names
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
        results = await self._backend.ack(group, topic, acks, deadline_s(context))
        entries = [
            service_pb2.AckMessageResultEntry(
                message_id=entry.message_id,
                receipt_handle=entry.receipt_handle,
                status=ok() if refusal is None else refusal.status,
            )
            for entry, refusal in zip(request.entries, results, strict=True)
        ]
        codes = {e.status.code for e in entries}
        overall = (
            entries[0].status
            if len(codes) == 1
            else status(Code.MULTIPLE_RESULTS, "the entries have different results")
        )
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
            handle = await self._backend.change_invisible(
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
            await self._backend.forward_to_dead_letters(
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
            await self._backend.end_transaction(end, caller, deadline_s(context))
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
            message_id = await self._backend.recall(
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
