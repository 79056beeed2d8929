"""RECALL_MESSAGE (370, RocketMQ 5.3): the remoting door of ``TimerService.recall``
(broker.service.timers). A translator only: ``RecallMessageRequestHeader`` (producerGroup,
topic, recallHandle) in, ``RecallMessageResponseHeader`` (msgId, the recalled message's id) out;
refusals go through ``broker.remoting.errors``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledgermq.wire import MQResponseCode

if TYPE_CHECKING:
    from ledgermq.broker.service.timers import TimerService
    from ledgermq.wire import RemotingCommand
    from ledgermq.wire.headers import RecallMessageRequestHeader

__all__ = ["RecallProcessor"]


class RecallProcessor:
    def __init__(self, service: TimerService) -> None:
        self._service = service

    async def process(
        self, command: RemotingCommand, header: RecallMessageRequestHeader
    ) -> RemotingCommand:
        message_id = await self._service.recall(header.topic, header.recall_handle)
        return command.response(MQResponseCode.SUCCESS, ext_fields={"msgId": message_id})
