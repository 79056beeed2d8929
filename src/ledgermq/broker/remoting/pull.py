"""PULL_MESSAGE (11): the remoting door of ``PullService`` (broker.service.pull).

A translator only: the header's fields in (``sysFlag`` says whether the pull carries its
subscription, commits an offset on the way and may be held) into the messaging contract's
``PullQuery``, the service call (``PullService.pull``, the gRPC door's too), and its answer
(the contract's ``Delivered``) out: the outcome as RocketMQ's code with
``nextBeginOffset``, ``minOffset`` and ``maxOffset``, and the records as the store holds them
(``Delivered.stored``, never decoded here).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ledgermq.messaging.consuming import PullOutcome, PullQuery, QueueRef
from ledgermq.wire import MQResponseCode

if TYPE_CHECKING:
    from ledgermq.broker.service.pull import PullService
    from ledgermq.wire import RemotingCommand
    from ledgermq.wire.headers import PullMessageRequestHeader

__all__ = ["PullProcessor", "pull_code"]

FLAG_COMMIT_OFFSET: Final = 1
FLAG_SUSPEND: Final = 2
FLAG_SUBSCRIPTION: Final = 4

_CODES: Final = {
    PullOutcome.FOUND: MQResponseCode.SUCCESS,
    PullOutcome.NOT_FOUND: MQResponseCode.PULL_NOT_FOUND,
    PullOutcome.FILTERED: MQResponseCode.PULL_RETRY_IMMEDIATELY,
    PullOutcome.OFFSET_MOVED: MQResponseCode.PULL_OFFSET_MOVED,
}


def pull_code(outcome: PullOutcome) -> MQResponseCode:
    """The response code that reports ``outcome``."""
    return _CODES[outcome]


class PullProcessor:
    def __init__(self, service: PullService) -> None:
        self._service = service

    async def process(
        self, command: RemotingCommand, header: PullMessageRequestHeader
    ) -> RemotingCommand:
        """Serve the pull the door parsed (and checked) as ``header``."""
        sys_flag = header.sys_flag
        expression = header.subscription
        if expression is not None or sys_flag & FLAG_SUBSCRIPTION:
            expression = expression or "*"  # else None: the group's registered subscription
        result = await self._service.pull(
            PullQuery(
                header.consumer_group,
                QueueRef(header.topic, "", header.queue_id),
                header.queue_offset,
                header.max_msg_nums,
                expression,
                header.expression_type,
                header.suspend_timeout_millis if sys_flag & FLAG_SUSPEND else 0,
                header.max_msg_bytes,
                header.commit_offset if sys_flag & FLAG_COMMIT_OFFSET else None,
            )
        )
        ext = {
            "suggestWhichBrokerId": "0",
            "nextBeginOffset": str(result.next_offset),
            "minOffset": str(result.min_offset),
            "maxOffset": str(result.max_offset),
        }
        return command.response(pull_code(result.outcome), ext_fields=ext, body=result.stored)
