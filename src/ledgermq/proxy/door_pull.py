"""The v5 PullConsumer RPCs (PullMessage, UpdateOffset, GetOffset, QueryOffset) over a
``Backend``: part of ``proxy.door``'s servicer, written once for both doors.

A pull consumer keeps its own position per queue, as a remoting pull consumer does: it reads a
queue from an offset (``PullMessage``), stores the group's progress on the broker
(``UpdateOffset``), reads it back after a restart or a rebalance (``GetOffset``), and finds
where to start without one (``QueryOffset``: the queue's beginning, its end, or the first
message stored at or after a time).

``PullMessage`` answers on a server stream, as the protocol's comments and the Java proxy's
stream writer lay it out: the ``status`` first, then one ``message`` per message found, then
``next_offset``, where the next pull of this queue starts. Nothing found is MESSAGE_NOT_FOUND,
still followed by ``next_offset`` (past what a filter skipped, so a consumer never reads the
same skipped messages again); an offset outside the queue is ILLEGAL_OFFSET followed by the
offset to go on from, so a consumer whose position retention removed moves on instead of
stopping. Which replica serves what is the backend's matter (a replica's pulls are its own;
a group's offsets are the master's).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from ledgermq.messaging import OffsetPolicy, PullOutcome, PullQuery, QueueRef
from ledgermq.proxy.messages import long_polling_ms
from ledgermq.proxy.name_status import group_refusal, topic_refusal
from ledgermq.proxy.protocol import definition_pb2, service_pb2
from ledgermq.proxy.received import stored_message
from ledgermq.proxy.refusal import Refusal
from ledgermq.proxy.status import Code, internal_error, ok, status
from ledgermq.proxy.timestamps import timestamp_ms
from ledgermq.security.acl import Needs, Perm
from ledgermq.security.acl.resources import group_resource, topic_resource

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    import grpc.aio

    from ledgermq.messaging import Backend, Delivered

    Context = grpc.aio.ServicerContext[Any, Any]

__all__ = ["MAX_PULL_BATCH", "MAX_PULL_SUSPEND_MS", "PullRpcs", "consume_needs"]


MAX_PULL_BATCH: Final = 1024
"""Messages one PullMessage hands out at most (the pull service's own limit)."""
MAX_PULL_SUSPEND_MS: Final = 30_000
"""The longest a pull waits for a message (the pull service's own limit)."""
_POLICIES: Final = {
    definition_pb2.BEGINNING: OffsetPolicy.BEGINNING,
    definition_pb2.END: OffsetPolicy.END,
    definition_pb2.TIMESTAMP: OffsetPolicy.TIMESTAMP,
}


def consume_needs(topic: str, group: str) -> Needs:
    """SUB on the topic and the group, as a remoting pull, POP or offset request needs (names
    given only)."""
    wanted = [(topic_resource(topic), topic), (group_resource(group), group)]
    return Needs(resources={resource: Perm.SUB for resource, name in wanted if name})


def _queue(queue: definition_pb2.MessageQueue, group: str | None) -> QueueRef:
    """A request's queue (and group) checked by the naming rules; ``Refusal`` otherwise."""
    if group is not None and not group:
        raise Refusal(status(Code.ILLEGAL_CONSUMER_GROUP, "the request names no consumer group"))
    if not queue.topic.name:
        raise Refusal(status(Code.ILLEGAL_TOPIC, "the request names no topic"))
    refused = topic_refusal(queue.topic.name) or (group_refusal(group) if group else None)
    if refused is not None:
        raise Refusal(refused)
    return QueueRef(queue.topic.name, queue.broker.name, queue.id)


def _check_offset(offset: int) -> None:
    if offset < 0:
        raise Refusal(status(Code.ILLEGAL_OFFSET, f"offset {offset} is negative"))


def _pull_query(request: service_pb2.PullMessageRequest) -> PullQuery:
    queue = _queue(request.message_queue, request.group.name)
    _check_offset(request.offset)
    if request.batch_size <= 0:
        raise Refusal(
            status(Code.BAD_REQUEST, f"batch_size must be positive, got {request.batch_size}")
        )
    poll_ms = long_polling_ms(request)
    expression = request.filter_expression
    sql = expression.type == definition_pb2.SQL
    return PullQuery(
        group=request.group.name,
        queue=queue,
        offset=request.offset,
        max_messages=min(request.batch_size, MAX_PULL_BATCH),
        expression=expression.expression if sql else (expression.expression or "*"),
        expression_type="SQL92" if sql else "TAG",
        poll_ms=min(poll_ms, MAX_PULL_SUSPEND_MS),
    )


def _where(queue: QueueRef) -> str:
    if queue.broker_name:
        return f"{queue.topic}:{queue.broker_name}:{queue.queue_id}"
    return f"{queue.topic}:{queue.queue_id}"


def _pull_status(query: PullQuery, pulled: Delivered) -> definition_pb2.Status:
    where, offset, next_offset = _where(query.queue), query.offset, pulled.next_offset
    if pulled.outcome is PullOutcome.FOUND:
        return ok()
    if pulled.outcome is PullOutcome.OFFSET_MOVED:
        return status(
            Code.ILLEGAL_OFFSET,
            f"offset {offset} is outside queue {where}, which holds offsets "
            f"{pulled.min_offset}..{pulled.max_offset - 1}; go on from {next_offset}",
        )
    if pulled.outcome is PullOutcome.FILTERED:
        return status(
            Code.MESSAGE_NOT_FOUND,
            f"no message of {where} from offset {offset} matched the filter; "
            f"go on from {next_offset}",
        )
    return status(
        Code.MESSAGE_NOT_FOUND,
        f"no new message in {where} from offset {offset}; go on from {next_offset}",
    )


class PullRpcs:
    """The PullConsumer part of ``DoorServicer`` (a mixin: it uses the servicer's backend,
    ACL check and deadline)."""

    backend: Backend

    if TYPE_CHECKING:  # the servicer's (proxy.door.DoorServicer)

        def _deadline_s(self, context: Context) -> float: ...

        def _admit(
            self, context: Context, request: str, needs: Needs | None = None
        ) -> definition_pb2.Status | None: ...

    async def PullMessage(  # noqa: N802 - the generated servicer's names
        self, request: service_pb2.PullMessageRequest, context: Context
    ) -> AsyncIterator[service_pb2.PullMessageResponse]:
        needs = consume_needs(request.message_queue.topic.name, request.group.name)
        if (refused := self._admit(context, "PullMessage", needs)) is not None:
            yield service_pb2.PullMessageResponse(status=refused)
            return
        try:
            query = _pull_query(request)
            pulled = await self.backend.pull(query, self._deadline_s(context))
        except Refusal as refusal:
            yield service_pb2.PullMessageResponse(status=refusal.status)
            return
        except Exception as exc:  # noqa: BLE001 - answered; the traceback is in the log
            yield service_pb2.PullMessageResponse(status=internal_error("PullMessage", exc))
            return
        yield service_pb2.PullMessageResponse(status=_pull_status(query, pulled))
        if pulled.outcome is PullOutcome.FOUND:
            for delivery in pulled.messages:
                yield service_pb2.PullMessageResponse(message=stored_message(delivery.record))
        yield service_pb2.PullMessageResponse(next_offset=pulled.next_offset)

    async def UpdateOffset(  # noqa: N802
        self, request: service_pb2.UpdateOffsetRequest, context: Context
    ) -> service_pb2.UpdateOffsetResponse:
        group = request.group.name
        needs = consume_needs(request.message_queue.topic.name, group)
        if (refused := self._admit(context, "UpdateOffset", needs)) is not None:
            return service_pb2.UpdateOffsetResponse(status=refused)
        try:
            queue = _queue(request.message_queue, group)
            _check_offset(request.offset)
            await self.backend.commit_offset(
                group, queue, request.offset, self._deadline_s(context)
            )
        except Refusal as refusal:
            return service_pb2.UpdateOffsetResponse(status=refusal.status)
        return service_pb2.UpdateOffsetResponse(status=ok())

    async def GetOffset(  # noqa: N802
        self, request: service_pb2.GetOffsetRequest, context: Context
    ) -> service_pb2.GetOffsetResponse:
        group = request.group.name
        needs = consume_needs(request.message_queue.topic.name, group)
        if (refused := self._admit(context, "GetOffset", needs)) is not None:
            return service_pb2.GetOffsetResponse(status=refused)
        try:
            queue = _queue(request.message_queue, group)
            offset = await self.backend.consumer_offset(group, queue, self._deadline_s(context))
        except Refusal as refusal:
            return service_pb2.GetOffsetResponse(status=refusal.status)
        if offset is None:
            return service_pb2.GetOffsetResponse(
                status=status(
                    Code.OFFSET_NOT_FOUND,
                    f"group {group} has no offset in {_where(queue)}, and the queue's first "
                    "messages are gone: start where QueryOffset says",
                )
            )
        return service_pb2.GetOffsetResponse(status=ok(), offset=offset)

    async def QueryOffset(  # noqa: N802
        self, request: service_pb2.QueryOffsetRequest, context: Context
    ) -> service_pb2.QueryOffsetResponse:
        needs = consume_needs(request.message_queue.topic.name, "")
        if (refused := self._admit(context, "QueryOffset", needs)) is not None:
            return service_pb2.QueryOffsetResponse(status=refused)
        try:
            queue = _queue(request.message_queue, None)
            policy = _POLICIES.get(request.query_offset_policy)
            if policy is None:
                raise Refusal(  # noqa: TRY301 - answered below, as every refusal
                    status(
                        Code.BAD_REQUEST,
                        f"unknown query_offset_policy {int(request.query_offset_policy)}",
                    )
                )
            at_ms = None
            if policy is OffsetPolicy.TIMESTAMP:
                if not request.HasField("timestamp"):
                    raise Refusal(  # noqa: TRY301
                        status(Code.BAD_REQUEST, "query_offset_policy TIMESTAMP needs a timestamp")
                    )
                at_ms = timestamp_ms(request.timestamp, "timestamp")
            offset = await self.backend.query_offset(
                queue, policy, at_ms, self._deadline_s(context)
            )
        except Refusal as refusal:
            return service_pb2.QueryOffsetResponse(status=refusal.status)
        return service_pb2.QueryOffsetResponse(status=ok(), offset=offset)
