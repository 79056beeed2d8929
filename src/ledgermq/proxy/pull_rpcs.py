"""The v5 PullConsumer RPCs (PullMessage, UpdateOffset, GetOffset, QueryOffset) over the
broker's pull and offset services: translation only, as the rest of the door.

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
stopping. Any replica serves a pull (queues hold only committed messages); only the master
stores or answers a group's offset (``OffsetService``: a slave's copy may be older than an
acknowledged commit), so a slave answers HA_NOT_AVAILABLE for those.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Final

from ledgermq.acl import Needs, Perm
from ledgermq.acl.resources import group_resource, topic_resource
from ledgermq.broker.errors import ServiceError
from ledgermq.broker.service.pull import MAX_SUSPEND_MS, PullRequest, PullStatus
from ledgermq.errors import LedgerMQError
from ledgermq.proxy.messages import DEFAULT_LONG_POLLING_MS, Refusal
from ledgermq.proxy.protocol import definition_pb2, service_pb2
from ledgermq.proxy.received import stored_message
from ledgermq.proxy.status import Code, error_status, ok, status
from ledgermq.proxy.timestamps import duration_ms, timestamp_ms
from ledgermq.wire.message import decode_records

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    import grpc.aio

    from ledgermq.broker.service.services import BrokerServices
    from ledgermq.broker.state.broker_state import BrokerState

    Context = grpc.aio.ServicerContext[Any, Any]

__all__ = ["PullConsumerRpcs", "consume_needs"]

_log = logging.getLogger(__name__)

MAX_PULL_BATCH: Final = 1024
"""Messages one PullMessage hands out at most (the pull service's own limit)."""


class PullConsumerRpcs:
    """The PullConsumer part of ``MessagingServicer`` (a mixin: it uses the servicer's
    services, state and ACL check)."""

    _services: BrokerServices
    _state: BrokerState

    if TYPE_CHECKING:  # the servicer's (proxy.door.DoorServicer)

        def _admit(
            self, context: Context, request: str, needs: Needs | None = None
        ) -> definition_pb2.Status | None: ...

    # ------------------------------------------------------------------ the RPCs
    async def PullMessage(  # noqa: N802 - the generated servicer's names
        self, request: service_pb2.PullMessageRequest, context: Context
    ) -> AsyncIterator[service_pb2.PullMessageResponse]:
        group, queue = request.group.name, request.message_queue
        needs = consume_needs(queue.topic.name, group)
        if (refused := self._admit(context, "PullMessage", needs)) is not None:
            yield service_pb2.PullMessageResponse(status=refused)
            return
        try:
            pull = self._pull_request(request)
            result = await self._services.pull.pull(pull)
            found = decode_records(result.body) if result.count else []
        except Refusal as refusal:
            yield service_pb2.PullMessageResponse(status=refusal.status)
            return
        except ServiceError as exc:
            yield service_pb2.PullMessageResponse(status=error_status(exc))
            return
        except Exception as exc:  # noqa: BLE001 - answered; the traceback is in the log
            _log.exception("gRPC PullMessage failed")
            yield service_pb2.PullMessageResponse(
                status=status(Code.INTERNAL_ERROR, f"internal error: {type(exc).__name__}")
            )
            return
        where = f"{pull.topic}:{pull.queue_id}"
        if result.status is PullStatus.FOUND:
            yield service_pb2.PullMessageResponse(status=ok())
            for message in found:
                yield service_pb2.PullMessageResponse(message=stored_message(message))
        elif result.status is PullStatus.OFFSET_MOVED:
            yield service_pb2.PullMessageResponse(
                status=status(
                    Code.ILLEGAL_OFFSET,
                    f"offset {pull.offset} is outside queue {where}, which holds offsets "
                    f"{result.min_offset}..{result.max_offset - 1}; "
                    f"go on from {result.next_begin_offset}",
                )
            )
        elif result.status is PullStatus.RETRY_IMMEDIATELY:
            yield service_pb2.PullMessageResponse(
                status=status(
                    Code.MESSAGE_NOT_FOUND,
                    f"no message of {where} from offset {pull.offset} matched the filter; "
                    f"go on from {result.next_begin_offset}",
                )
            )
        else:
            yield service_pb2.PullMessageResponse(
                status=status(Code.MESSAGE_NOT_FOUND, f"no new message in {where}")
            )
        yield service_pb2.PullMessageResponse(next_offset=result.next_begin_offset)

    async def UpdateOffset(  # noqa: N802
        self, request: service_pb2.UpdateOffsetRequest, context: Context
    ) -> service_pb2.UpdateOffsetResponse:
        group, queue = request.group.name, request.message_queue
        needs = consume_needs(queue.topic.name, group)
        if (refused := self._admit(context, "UpdateOffset", needs)) is not None:
            return service_pb2.UpdateOffsetResponse(status=refused)
        try:
            topic, queue_id = self._queue(queue, group=group)
            _check_offset(request.offset)
            await self._services.offsets.commit(group, topic, queue_id, request.offset)
        except Refusal as refusal:
            return service_pb2.UpdateOffsetResponse(status=refusal.status)
        except ServiceError as exc:
            return service_pb2.UpdateOffsetResponse(status=error_status(exc))
        except LedgerMQError as exc:
            return service_pb2.UpdateOffsetResponse(status=status(Code.INTERNAL_ERROR, str(exc)))
        return service_pb2.UpdateOffsetResponse(status=ok())

    async def GetOffset(  # noqa: N802
        self, request: service_pb2.GetOffsetRequest, context: Context
    ) -> service_pb2.GetOffsetResponse:
        group, queue = request.group.name, request.message_queue
        needs = consume_needs(queue.topic.name, group)
        if (refused := self._admit(context, "GetOffset", needs)) is not None:
            return service_pb2.GetOffsetResponse(status=refused)
        try:
            topic, queue_id = self._queue(queue, group=group)
            offset = self._services.offsets.consumer_offset(group, topic, queue_id)
        except Refusal as refusal:
            return service_pb2.GetOffsetResponse(status=refusal.status)
        except ServiceError as exc:
            return service_pb2.GetOffsetResponse(status=error_status(exc))
        if offset is None:
            return service_pb2.GetOffsetResponse(
                status=status(
                    Code.OFFSET_NOT_FOUND,
                    f"group {group} has no offset in {topic}:{queue_id}, and the queue's first "
                    "messages are gone: start where QueryOffset says",
                )
            )
        return service_pb2.GetOffsetResponse(status=ok(), offset=offset)

    async def QueryOffset(  # noqa: N802
        self, request: service_pb2.QueryOffsetRequest, context: Context
    ) -> service_pb2.QueryOffsetResponse:
        queue = request.message_queue
        needs = consume_needs(queue.topic.name, "")
        if (refused := self._admit(context, "QueryOffset", needs)) is not None:
            return service_pb2.QueryOffsetResponse(status=refused)
        try:
            offset = self._query_offset(request)
        except Refusal as refusal:
            return service_pb2.QueryOffsetResponse(status=refusal.status)
        except ServiceError as exc:
            return service_pb2.QueryOffsetResponse(status=error_status(exc))
        return service_pb2.QueryOffsetResponse(status=ok(), offset=offset)

    # ------------------------------------------------------------------ translation
    def _queue(
        self, queue: definition_pb2.MessageQueue, *, group: str | None = None
    ) -> tuple[str, int]:
        """(topic, queue id) of a request's queue, checked against this broker group; raises
        ``Refusal`` with the status a bad one gets."""
        if group is not None and not group:
            raise Refusal(
                status(Code.ILLEGAL_CONSUMER_GROUP, "the request names no consumer group")
            )
        topic = queue.topic.name
        if not topic:
            raise Refusal(status(Code.ILLEGAL_TOPIC, "the request names no topic"))
        mine = self._state.config.broker_name
        if queue.broker.name and queue.broker.name != mine:
            raise Refusal(
                status(
                    Code.BAD_REQUEST,
                    f"the queue belongs to broker {queue.broker.name}; this is broker {mine} "
                    "(send the request to the endpoint the route gives that broker)",
                )
            )
        config = self._state.topics.find(topic)
        if config is None:
            raise Refusal(status(Code.TOPIC_NOT_FOUND, f"topic {topic} does not exist"))
        if not 0 <= queue.id < config.read_queue_nums:
            raise Refusal(
                status(
                    Code.BAD_REQUEST,
                    f"queue id {queue.id} is not one of topic {topic}'s "
                    f"{config.read_queue_nums} read queues",
                )
            )
        return topic, queue.id

    def _query_offset(self, request: service_pb2.QueryOffsetRequest) -> int:
        offsets = self._services.offsets
        topic, queue_id = self._queue(request.message_queue)
        policy = request.query_offset_policy
        low, high = offsets.queue_bounds(topic, queue_id)
        if policy == definition_pb2.BEGINNING:
            return low
        if policy == definition_pb2.END:
            return high
        if policy != definition_pb2.TIMESTAMP:
            raise Refusal(status(Code.BAD_REQUEST, f"unknown query_offset_policy {int(policy)}"))
        if not request.HasField("timestamp"):
            raise Refusal(
                status(Code.BAD_REQUEST, "query_offset_policy TIMESTAMP needs a timestamp")
            )
        return offsets.search_offset_by_timestamp(
            topic, queue_id, timestamp_ms(request.timestamp, "timestamp")
        )

    def _pull_request(self, request: service_pb2.PullMessageRequest) -> PullRequest:
        group = request.group.name
        topic, queue_id = self._queue(request.message_queue, group=group)
        _check_offset(request.offset)
        if request.batch_size <= 0:
            raise Refusal(
                status(Code.BAD_REQUEST, f"batch_size must be positive, got {request.batch_size}")
            )
        poll_ms = (
            duration_ms(
                request.long_polling_timeout, "long_polling_timeout", Code.ILLEGAL_POLLING_TIME
            )
            if request.HasField("long_polling_timeout")
            else DEFAULT_LONG_POLLING_MS
        )
        if poll_ms < 0:
            raise Refusal(
                status(Code.ILLEGAL_POLLING_TIME, f"long_polling_timeout is negative: {poll_ms} ms")
            )
        expression = request.filter_expression
        subscription: tuple[str, str | None] = (
            (expression.expression, "SQL92")
            if expression.type == definition_pb2.SQL
            else (expression.expression or "*", "TAG")
        )
        return PullRequest(
            group=group,
            topic=topic,
            queue_id=queue_id,
            offset=request.offset,
            max_nums=min(request.batch_size, MAX_PULL_BATCH),
            subscription=subscription,
            suspend_ms=min(poll_ms, MAX_SUSPEND_MS),
        )


def _check_offset(offset: int) -> None:
    if offset < 0:
        raise Refusal(status(Code.ILLEGAL_OFFSET, f"offset {offset} is negative"))


def consume_needs(topic: str, group: str) -> Needs:
    """SUB on the topic and the group, as a remoting pull, POP or offset request needs (names
    given only)."""
    wanted = [(topic_resource(topic), topic), (group_resource(group), group)]
    return Needs(resources={resource: Perm.SUB for resource, name in wanted if name})
