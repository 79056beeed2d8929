"""RocketMQ 5's remoting POP codes, the remoting door of ``PopService`` (broker.service.pop):
POP_MESSAGE (200050), ACK_MESSAGE (200051) and CHANGE_MESSAGE_INVISIBLETIME (200053).
Translators only: header fields in, a service call, header fields and body out.

Fields, as RocketMQ 5's ``PopMessageRequestHeader`` / ``PopMessageResponseHeader``,
``AckMessageRequestHeader`` and ``ChangeInvisibleTimeRequestHeader`` / ``...ResponseHeader``
name them: a pop takes ``consumerGroup``, ``topic``, ``queueId`` (-1: any queue),
``maxMsgNums``, ``invisibleTime``, ``pollTime``, ``expType`` / ``exp`` (the filter, as a pull's
subscription) and ``order`` (true: FIFO for this receive, as for an orderly group, whatever the
group's ``consumeMessageOrderly``); it answers ``popTime``, ``invisibleTime``, ``reviveQid``
(0), ``restNum`` and the messages back to back in the record layout a pull returns, each
carrying its receipt handle in the ``POP_CK`` property (``MessageConst.PROPERTY_POP_CK``). An
ack and a change of invisible time name the message by ``extraInfo`` (that handle); the change
answers the new handle in ``extraInfo`` beside ``popTime`` / ``invisibleTime`` / ``reviveQid``.

Nothing to hand out answers PULL_NOT_FOUND (RocketMQ's "no new message"); a stale or malformed
handle NO_MESSAGE with a remark that says which (``broker.remoting.errors``).

Differences from RocketMQ 5 a client may notice: ``startOffsetInfo`` / ``msgOffsetInfo`` /
``orderCountInfo`` are not sent (the handle is the whole truth here), so a client must ack with
the ``POP_CK`` of the message it got, not one it rebuilds from those fields.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ledgermq.messaging.consuming import Receive
from ledgermq.wire import MQResponseCode
from ledgermq.wire.message import encode_properties, encode_record

if TYPE_CHECKING:
    from ledgermq.broker.service.pop import PoppedMessage, PopService
    from ledgermq.wire import RemotingCommand
    from ledgermq.wire.headers import (
        AckMessageRequestHeader,
        ChangeInvisibleTimeRequestHeader,
        PopMessageRequestHeader,
    )

__all__ = ["POP_CK", "PopProcessor"]

POP_CK: Final = "POP_CK"
"""``MessageConst.PROPERTY_POP_CK``: a popped message's receipt handle."""


class PopProcessor:
    """Each method serves its request from the header the door parsed (and checked)."""

    def __init__(self, service: PopService) -> None:
        self._service = service

    async def pop(
        self, command: RemotingCommand, asked: PopMessageRequestHeader
    ) -> RemotingCommand:
        request = Receive(
            group=asked.consumer_group,
            topic=asked.topic,
            max_messages=asked.max_msg_nums,
            invisible_ms=asked.invisible_time,
            expression=asked.exp or "*",
            expression_type=asked.exp_type or "",
            poll_ms=asked.poll_time,
            queue_id=asked.queue_id,
            order=asked.order,
        )
        result = await self._service.receive(request)
        header = {
            "popTime": str(result.pop_time_ms),
            "invisibleTime": str(result.invisible_ms),
            "reviveQid": "0",
            "restNum": "0",
        }
        if not result.messages:
            return command.response(
                MQResponseCode.PULL_NOT_FOUND, remark="no new message", ext_fields=header
            )
        body = b"".join(_record(m) for m in result.messages)
        return command.response(MQResponseCode.SUCCESS, ext_fields=header, body=body)

    async def ack(
        self, command: RemotingCommand, header: AckMessageRequestHeader
    ) -> RemotingCommand:
        await self._service.ack(header.consumer_group, header.topic, header.extra_info)
        return command.response(MQResponseCode.SUCCESS)

    async def change_invisible_time(
        self, command: RemotingCommand, header: ChangeInvisibleTimeRequestHeader
    ) -> RemotingCommand:
        handle = await self._service.change_invisible(
            header.consumer_group, header.topic, header.extra_info, header.invisible_time
        )
        return command.response(
            MQResponseCode.SUCCESS,
            ext_fields={
                "popTime": str(handle.pop_time_ms),
                "invisibleTime": str(handle.invisible_ms),
                "reviveQid": "0",
                "extraInfo": str(handle),
            },
        )


def _record(popped: PoppedMessage) -> bytes:
    """The message's record as a pull returns it, with its handle in ``POP_CK``."""
    message = popped.message
    properties = dict(message.properties)
    properties[POP_CK] = str(popped.handle)
    return encode_record(
        topic=message.topic,
        queue_id=message.queue_id,
        body=message.body,
        flag=message.flag,
        properties=encode_properties(properties),
        sys_flag=message.sys_flag & ~1,  # the body is inflated
        born_timestamp=message.born_timestamp,
        born_host=_host(message.born_host),
        store_timestamp=message.store_timestamp,
        store_host=_host(message.store_host),
        reconsume_times=popped.attempt - 1,
        queue_offset=message.queue_offset,
        physical_offset=message.commit_log_offset,
        prepared_transaction_offset=message.prepared_transaction_offset,
    )


def _host(text: str) -> tuple[str, int]:
    """``"ip:port"`` as the record encoder takes it; IPv6 hosts become 0.0.0.0:0 (the record
    layout here writes IPv4 only)."""
    ip, _, port = text.rpartition(":")
    if ip.startswith("[") or not port.isdigit():
        return "0.0.0.0", 0  # noqa: S104 - a record field, not a bind address
    return ip, int(port)
