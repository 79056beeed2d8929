"""CONSUMER_SEND_MSG_BACK (36): the remoting door of ``SendBackService``
(broker.service.retry). A translator only."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledgermq.wire import MQResponseCode, ext_int, ext_str

if TYPE_CHECKING:
    from ledgermq.broker.service.access import Access
    from ledgermq.broker.service.retry import SendBackService
    from ledgermq.wire import RemotingCommand

__all__ = ["SendBackProcessor"]


class SendBackProcessor:
    def __init__(self, service: SendBackService) -> None:
        self._service = service

    async def process(self, command: RemotingCommand, access: Access) -> RemotingCommand:
        """``access``: the requester, who needs SUB on the record's topic (checked once read)."""
        fields = command.ext_fields
        offset = ext_int(fields, "offset")
        group = ext_str(fields, "group")
        delay_level = ext_int(fields, "delayLevel", 0)
        max_times = fields.get("maxReconsumeTimes")
        await self._service.send_back(
            offset, group, delay_level, int(max_times) if max_times else None, access=access
        )
        return command.response(MQResponseCode.SUCCESS)
