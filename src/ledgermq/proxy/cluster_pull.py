"""The v5 PullConsumer RPCs through the stand-alone proxy: PullMessage, UpdateOffset, GetOffset
and QueryOffset as the remoting requests a remoting pull consumer makes (PULL_MESSAGE 11,
UPDATE_CONSUMER_OFFSET 15, QUERY_CONSUMER_OFFSET 14, GET_MIN_OFFSET 31 / GET_MAX_OFFSET 30,
SEARCH_OFFSET_BY_TIMESTAMP 29) to the master of the queue's broker group (``proxy.forward``).

The answers are laid out as the in-replica door lays them out (``proxy.pull_rpcs``): a pull's
``status`` first, one ``message`` per message (``proxy.received``), then ``next_offset``, also
after MESSAGE_NOT_FOUND (past what a filter skipped) and after ILLEGAL_OFFSET (where to go on).
Every one of these is safe to repeat, so each is retried across a failover.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from ledgermq.errors import LedgerMQError, TopicNotFoundError
from ledgermq.proxy.messages import DEFAULT_LONG_POLLING_MS, Refusal
from ledgermq.proxy.name_status import group_refusal, topic_refusal
from ledgermq.proxy.protocol import definition_pb2, service_pb2
from ledgermq.proxy.pull_rpcs import consume_needs
from ledgermq.proxy.received import stored_message
from ledgermq.proxy.remote_status import remote_status
from ledgermq.proxy.status import Code, ok, status
from ledgermq.proxy.timestamps import duration_ms, timestamp_ms
from ledgermq.wire import MQRequestCode, MQResponseCode
from ledgermq.wire.message import decode_records

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

    import grpc.aio

    from ledgermq.acl import Needs
    from ledgermq.proxy.forward import Forwarded, Forwarder

    Context = grpc.aio.ServicerContext[Any, Any]

__all__ = ["ClusterPullRpcs"]

_MAX_BATCH: Final = 1024
_MAX_SUSPEND_MS: Final = 30_000
_FLAG_SUSPEND: Final = 2
_FLAG_SUBSCRIPTION: Final = 4
_PULL_CODES: Final = (
    MQResponseCode.SUCCESS,
    MQResponseCode.PULL_NOT_FOUND,
    MQResponseCode.PULL_RETRY_IMMEDIATELY,
    MQResponseCode.PULL_OFFSET_MOVED,
)


class ClusterPullRpcs:
    """The PullConsumer part of ``ClusterServicer`` (a mixin over its forwarder)."""

    _forward: Forwarder

    if TYPE_CHECKING:  # the servicer's (proxy.door.DoorServicer)

        def _deadline_s(self, context: Context) -> float: ...

        def _admit(
            self, context: Context, request: str, needs: Needs | None = None
        ) -> definition_pb2.Status | None: ...

    async def _queue_call(
        self,
        queue: definition_pb2.MessageQueue,
        code: int,
        fields: Mapping[str, str],
        context: Context,
        *,
        expect: tuple[int, ...] = (MQResponseCode.SUCCESS,),
        extra_s: float = 0.0,
    ) -> Forwarded:
        return await self._forward.call(
            queue.topic.name, queue.broker.name, code, fields,
            deadline_s=max(self._deadline_s(context), extra_s + 0.5), timeout_s=3.0 + extra_s,
            expect=expect,
        )  # fmt: skip

    async def PullMessage(  # noqa: N802 - the generated servicer's names
        self, request: service_pb2.PullMessageRequest, context: Context
    ) -> AsyncIterator[service_pb2.PullMessageResponse]:
        needs = consume_needs(request.message_queue.topic.name, request.group.name)
        if (refused := self._admit(context, "PullMessage", needs)) is not None:
            yield service_pb2.PullMessageResponse(status=refused)
            return
        queue = request.message_queue
        try:
            fields, poll_ms = _pull_fields(request)
            forwarded = await self._queue_call(
                queue, MQRequestCode.PULL_MESSAGE, fields, context,
                expect=_PULL_CODES, extra_s=poll_ms / 1000,
            )  # fmt: skip
        except Refusal as refusal:
            yield service_pb2.PullMessageResponse(status=refusal.status)
            return
        except TopicNotFoundError:
            yield service_pb2.PullMessageResponse(
                status=status(Code.TOPIC_NOT_FOUND, f"topic {queue.topic.name} does not exist")
            )
            return
        except LedgerMQError as exc:
            yield service_pb2.PullMessageResponse(status=remote_status(exc))
            return
        response = forwarded.response
        ext = response.ext_fields
        next_offset = _int(ext, "nextBeginOffset", request.offset)
        where = f"{queue.topic.name}:{queue.broker.name}:{queue.id}"
        if response.code == MQResponseCode.SUCCESS:
            yield service_pb2.PullMessageResponse(status=ok())
            for message in decode_records(response.body):
                yield service_pb2.PullMessageResponse(message=stored_message(message))
        elif response.code == MQResponseCode.PULL_OFFSET_MOVED:
            yield service_pb2.PullMessageResponse(
                status=status(
                    Code.ILLEGAL_OFFSET,
                    f"offset {request.offset} is outside queue {where}, which holds offsets "
                    f"{_int(ext, 'minOffset', 0)}..{_int(ext, 'maxOffset', 0) - 1}; "
                    f"go on from {next_offset}",
                )
            )
        else:
            yield service_pb2.PullMessageResponse(
                status=status(
                    Code.MESSAGE_NOT_FOUND,
                    f"no new message in {where} from offset {request.offset}; "
                    f"go on from {next_offset}",
                )
            )
        yield service_pb2.PullMessageResponse(next_offset=next_offset)

    async def UpdateOffset(  # noqa: N802
        self, request: service_pb2.UpdateOffsetRequest, context: Context
    ) -> service_pb2.UpdateOffsetResponse:
        needs = consume_needs(request.message_queue.topic.name, request.group.name)
        if (refused := self._admit(context, "UpdateOffset", needs)) is not None:
            return service_pb2.UpdateOffsetResponse(status=refused)
        queue = request.message_queue
        try:
            fields = _queue_fields(queue, request.group.name)
            _check_offset(request.offset)
            fields["commitOffset"] = str(request.offset)
            await self._queue_call(queue, MQRequestCode.UPDATE_CONSUMER_OFFSET, fields, context)
        except Refusal as refusal:
            return service_pb2.UpdateOffsetResponse(status=refusal.status)
        except LedgerMQError as exc:
            return service_pb2.UpdateOffsetResponse(status=remote_status(exc))
        return service_pb2.UpdateOffsetResponse(status=ok())

    async def GetOffset(  # noqa: N802
        self, request: service_pb2.GetOffsetRequest, context: Context
    ) -> service_pb2.GetOffsetResponse:
        needs = consume_needs(request.message_queue.topic.name, request.group.name)
        if (refused := self._admit(context, "GetOffset", needs)) is not None:
            return service_pb2.GetOffsetResponse(status=refused)
        queue = request.message_queue
        try:
            fields = _queue_fields(queue, request.group.name)
            forwarded = await self._queue_call(
                queue, MQRequestCode.QUERY_CONSUMER_OFFSET, fields, context,
                expect=(MQResponseCode.SUCCESS, MQResponseCode.QUERY_NOT_FOUND),
            )  # fmt: skip
        except Refusal as refusal:
            return service_pb2.GetOffsetResponse(status=refusal.status)
        except LedgerMQError as exc:
            return service_pb2.GetOffsetResponse(status=remote_status(exc))
        if forwarded.response.code == MQResponseCode.QUERY_NOT_FOUND:
            return service_pb2.GetOffsetResponse(
                status=status(
                    Code.OFFSET_NOT_FOUND,
                    f"group {request.group.name} has no offset in {queue.topic.name}:"
                    f"{queue.broker.name}:{queue.id}: start where QueryOffset says",
                )
            )
        offset = _int(forwarded.response.ext_fields, "offset", -1)
        return service_pb2.GetOffsetResponse(status=ok(), offset=offset)

    async def QueryOffset(  # noqa: N802
        self, request: service_pb2.QueryOffsetRequest, context: Context
    ) -> service_pb2.QueryOffsetResponse:
        needs = consume_needs(request.message_queue.topic.name, "")
        if (refused := self._admit(context, "QueryOffset", needs)) is not None:
            return service_pb2.QueryOffsetResponse(status=refused)
        queue = request.message_queue
        try:
            fields = _queue_fields(queue, None)
            code = _offset_query(request, fields)
            forwarded = await self._queue_call(queue, code, fields, context)
        except Refusal as refusal:
            return service_pb2.QueryOffsetResponse(status=refusal.status)
        except LedgerMQError as exc:
            return service_pb2.QueryOffsetResponse(status=remote_status(exc))
        offset = _int(forwarded.response.ext_fields, "offset", 0)
        return service_pb2.QueryOffsetResponse(status=ok(), offset=offset)


def _queue_fields(queue: definition_pb2.MessageQueue, group: str | None) -> dict[str, str]:
    """The remoting fields naming a request's queue (and group); ``Refusal`` if one is
    missing. The queue's broker group must be named: the route's queues all carry it."""
    if group is not None and not group:
        raise Refusal(status(Code.ILLEGAL_CONSUMER_GROUP, "the request names no consumer group"))
    if not queue.topic.name:
        raise Refusal(status(Code.ILLEGAL_TOPIC, "the request names no topic"))
    refused = topic_refusal(queue.topic.name) or (group_refusal(group) if group else None)
    if refused is not None:
        raise Refusal(refused)
    if not queue.broker.name:
        raise Refusal(
            status(Code.BAD_REQUEST, "the queue names no broker (take it from QueryRoute)")
        )
    if queue.id < 0:
        raise Refusal(status(Code.BAD_REQUEST, f"queue id {queue.id} is negative"))
    fields = {"topic": queue.topic.name, "queueId": str(queue.id)}
    if group:
        fields["consumerGroup"] = group
    return fields


def _check_offset(offset: int) -> None:
    if offset < 0:
        raise Refusal(status(Code.ILLEGAL_OFFSET, f"offset {offset} is negative"))


def _offset_query(request: service_pb2.QueryOffsetRequest, fields: dict[str, str]) -> int:
    """The remoting code answering a QueryOffset's policy (``fields`` gets its timestamp)."""
    policy = request.query_offset_policy
    if policy == definition_pb2.BEGINNING:
        return MQRequestCode.GET_MIN_OFFSET
    if policy == definition_pb2.END:
        return MQRequestCode.GET_MAX_OFFSET
    if policy != definition_pb2.TIMESTAMP:
        raise Refusal(status(Code.BAD_REQUEST, f"unknown query_offset_policy {int(policy)}"))
    if not request.HasField("timestamp"):
        raise Refusal(status(Code.BAD_REQUEST, "query_offset_policy TIMESTAMP needs a timestamp"))
    fields["timestamp"] = str(timestamp_ms(request.timestamp, "timestamp"))
    return MQRequestCode.SEARCH_OFFSET_BY_TIMESTAMP


def _pull_fields(request: service_pb2.PullMessageRequest) -> tuple[dict[str, str], int]:
    fields = _queue_fields(request.message_queue, request.group.name)
    _check_offset(request.offset)
    if request.batch_size <= 0:
        raise Refusal(
            status(Code.BAD_REQUEST, f"batch_size must be positive, got {request.batch_size}")
        )
    poll_ms = (
        duration_ms(request.long_polling_timeout, "long_polling_timeout", Code.ILLEGAL_POLLING_TIME)
        if request.HasField("long_polling_timeout")
        else DEFAULT_LONG_POLLING_MS
    )
    if poll_ms < 0:
        raise Refusal(
            status(Code.ILLEGAL_POLLING_TIME, f"long_polling_timeout is negative: {poll_ms} ms")
        )
    poll_ms = min(poll_ms, _MAX_SUSPEND_MS)
    expression = request.filter_expression
    sql = expression.type == definition_pb2.SQL
    fields.update(
        queueOffset=str(request.offset),
        maxMsgNums=str(min(request.batch_size, _MAX_BATCH)),
        sysFlag=str(_FLAG_SUBSCRIPTION | (_FLAG_SUSPEND if poll_ms else 0)),
        commitOffset="-1",
        suspendTimeoutMillis=str(poll_ms),
        subscription=expression.expression if sql else (expression.expression or "*"),
        subVersion="0",
        expressionType="SQL92" if sql else "TAG",
    )
    return fields, poll_ms


def _int(fields: Mapping[str, str], name: str, default: int) -> int:
    try:
        return int(fields.get(name) or default)
    except ValueError:
        return default
