"""CONSUMER_SEND_MSG_BACK (36): the remoting door of ``SendBackService``
(broker.service.retry). A translator only."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledgermq.wire import MQResponseCode

if TYPE_CHECKING:
    from ledgermq.broker.service.access import Access
    from ledgermq.broker.service.retry import SendBackService
    from ledgermq.wire import RemotingCommand
    from ledgermq.wire.headers import ConsumerSendMsgBackRequestHeader

__all__ = ["SendBackProcessor"]


class SendBackProcessor:
    def __init__(self, service: SendBackService) -> None:
        self._service = service

    async def process(
        self, command: RemotingCommand, header: ConsumerSendMsgBackRequestHeader, access: Access
    ) -> RemotingCommand:
        """``header``: parsed once by the door (its group checked, and SUB on it by the ACL);
        ``access``: the requester, who needs SUB on the record's topic (checked once read)."""
        await self._service.send_back(
            header.offset,
            header.group,
            header.delay_level,
            header.max_reconsume_times,
            access=access,
        )
        return command.response(MQResponseCode.SUCCESS)
