"""Offset requests, the remoting door of ``OffsetService`` (broker.service.offsets):
QUERY_CONSUMER_OFFSET (14), UPDATE_CONSUMER_OFFSET (15), GET_MAX_OFFSET (30), GET_MIN_OFFSET
(31), GET_EARLIEST_MSG_STORETIME (32) and SEARCH_OFFSET_BY_TIMESTAMP (29). Translators only."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledgermq.wire import MQResponseCode

if TYPE_CHECKING:
    from ledgermq.broker.service.offsets import OffsetService
    from ledgermq.wire import RemotingCommand
    from ledgermq.wire.headers import (
        GetEarliestMsgStoretimeRequestHeader,
        GetMaxOffsetRequestHeader,
        GetMinOffsetRequestHeader,
        QueryConsumerOffsetRequestHeader,
        SearchOffsetRequestHeader,
        UpdateConsumerOffsetRequestHeader,
    )

__all__ = ["OffsetProcessor"]


class OffsetProcessor:
    """Each method serves its request from the header the door parsed (and checked)."""

    def __init__(self, service: OffsetService) -> None:
        self._service = service

    def query_consumer_offset(
        self, command: RemotingCommand, header: QueryConsumerOffsetRequestHeader
    ) -> RemotingCommand:
        offset = self._service.consumer_offset(header.consumer_group, header.topic, header.queue_id)
        if offset is None:
            return command.response(
                MQResponseCode.QUERY_NOT_FOUND,
                remark="Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
            )
        return command.response(MQResponseCode.SUCCESS, ext_fields={"offset": str(offset)})

    async def update_consumer_offset(
        self, command: RemotingCommand, header: UpdateConsumerOffsetRequestHeader
    ) -> RemotingCommand:
        await self._service.commit(
            header.consumer_group, header.topic, header.queue_id, header.commit_offset
        )
        return command.response(MQResponseCode.SUCCESS)

    def max_offset(
        self, command: RemotingCommand, header: GetMaxOffsetRequestHeader
    ) -> RemotingCommand:
        _, high = self._service.queue_bounds(header.topic, header.queue_id)
        return command.response(MQResponseCode.SUCCESS, ext_fields={"offset": str(high)})

    def min_offset(
        self, command: RemotingCommand, header: GetMinOffsetRequestHeader
    ) -> RemotingCommand:
        low, _ = self._service.queue_bounds(header.topic, header.queue_id)
        return command.response(MQResponseCode.SUCCESS, ext_fields={"offset": str(low)})

    def earliest_store_time(
        self, command: RemotingCommand, header: GetEarliestMsgStoretimeRequestHeader
    ) -> RemotingCommand:
        stamp = self._service.earliest_store_time(header.topic, header.queue_id)
        return command.response(MQResponseCode.SUCCESS, ext_fields={"timestamp": str(stamp)})

    def search_offset_by_timestamp(
        self, command: RemotingCommand, header: SearchOffsetRequestHeader
    ) -> RemotingCommand:
        offset = self._service.search_offset_by_timestamp(
            header.topic, header.queue_id, header.timestamp
        )
        return command.response(MQResponseCode.SUCCESS, ext_fields={"offset": str(offset)})
