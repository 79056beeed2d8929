"""Offset requests, the remoting door of ``OffsetService`` (broker.service.offsets):
QUERY_CONSUMER_OFFSET (14), UPDATE_CONSUMER_OFFSET (15), GET_MAX_OFFSET (30), GET_MIN_OFFSET
(31), GET_EARLIEST_MSG_STORETIME (32) and SEARCH_OFFSET_BY_TIMESTAMP (29). Translators only."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledgermq.wire import MQResponseCode, ext_int, ext_str

if TYPE_CHECKING:
    from ledgermq.broker.service.offsets import OffsetService
    from ledgermq.wire import RemotingCommand

__all__ = ["OffsetProcessor"]


class OffsetProcessor:
    def __init__(self, service: OffsetService) -> None:
        self._service = service

    def query_consumer_offset(self, command: RemotingCommand) -> RemotingCommand:
        fields = command.ext_fields
        offset = self._service.consumer_offset(
            ext_str(fields, "consumerGroup"), ext_str(fields, "topic"), ext_int(fields, "queueId")
        )
        if offset is None:
            return command.response(
                MQResponseCode.QUERY_NOT_FOUND,
                remark="Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
            )
        return command.response(MQResponseCode.SUCCESS, ext_fields={"offset": str(offset)})

    async def update_consumer_offset(self, command: RemotingCommand) -> RemotingCommand:
        fields = command.ext_fields
        group = ext_str(fields, "consumerGroup")
        topic = ext_str(fields, "topic")
        queue_id = ext_int(fields, "queueId")
        offset = ext_int(fields, "commitOffset")
        await self._service.commit(group, topic, queue_id, offset)
        return command.response(MQResponseCode.SUCCESS)

    def max_offset(self, command: RemotingCommand) -> RemotingCommand:
        fields = command.ext_fields
        _, high = self._service.queue_bounds(ext_str(fields, "topic"), ext_int(fields, "queueId"))
        return command.response(MQResponseCode.SUCCESS, ext_fields={"offset": str(high)})

    def min_offset(self, command: RemotingCommand) -> RemotingCommand:
        fields = command.ext_fields
        low, _ = self._service.queue_bounds(ext_str(fields, "topic"), ext_int(fields, "queueId"))
        return command.response(MQResponseCode.SUCCESS, ext_fields={"offset": str(low)})

    def earliest_store_time(self, command: RemotingCommand) -> RemotingCommand:
        fields = command.ext_fields
        stamp = self._service.earliest_store_time(
            ext_str(fields, "topic"), ext_int(fields, "queueId")
        )
        return command.response(MQResponseCode.SUCCESS, ext_fields={"timestamp": str(stamp)})

    def search_offset_by_timestamp(self, command: RemotingCommand) -> RemotingCommand:
        fields = command.ext_fields
        offset = self._service.search_offset_by_timestamp(
            ext_str(fields, "topic"), ext_int(fields, "queueId"), ext_int(fields, "timestamp")
        )
        return command.response(MQResponseCode.SUCCESS, ext_fields={"offset": str(offset)})
