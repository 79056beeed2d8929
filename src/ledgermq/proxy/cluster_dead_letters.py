"""ForwardMessageToDeadLetterQueue through the stand-alone proxy, as RocketMQ's proxy does it
over remoting: the message goes to the group's dead-letter topic by CONSUMER_SEND_MSG_BACK (36)
with ``delayLevel`` -1, then its receipt handle is acknowledged (ACK_MESSAGE), so POP never
hands it out again.

The send-back names the message by its commit-log offset, which a receipt handle does not hold
(it names the queue and the queue offset: ``"... <brokerName> <queueId> <offset>"``), so the
message is read first with a one-message PULL_MESSAGE at that queue offset. In that order a
failure between the steps leaves the message where a consumer still gets it (the handle not
acknowledged: it comes back after its invisible time), never lost; at worst it is in the
dead-letter topic and delivered once more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ledgermq.errors import LedgerMQError
from ledgermq.proxy.remote_status import remote_status
from ledgermq.proxy.status import Code, ok, status
from ledgermq.wire import MQRequestCode, MQResponseCode
from ledgermq.wire.message import decode_records

if TYPE_CHECKING:
    from ledgermq.proxy.forward import Forwarder
    from ledgermq.proxy.protocol import definition_pb2, service_pb2

__all__ = ["forward_to_dead_letters"]

_FLAG_SUBSCRIPTION: Final = 4


async def forward_to_dead_letters(
    forwarder: Forwarder,
    request: service_pb2.ForwardMessageToDeadLetterQueueRequest,
    deadline_s: float,
) -> definition_pb2.Status:
    """The status answering ``request`` (module docstring)."""
    group, topic, handle = request.group.name, request.topic.name, request.receipt_handle
    fields = handle.split(" ")
    if len(fields) != 8 or not fields[5] or not (fields[6].isdigit() and fields[7].isdigit()):
        return status(Code.INVALID_RECEIPT_HANDLE, f"not a receipt handle: {handle!r:.120}")
    if not group:
        return status(Code.ILLEGAL_CONSUMER_GROUP, "the request names no consumer group")
    broker_name, queue_id, offset = fields[5], fields[6], int(fields[7])
    try:
        pulled = await forwarder.call(
            topic, broker_name, MQRequestCode.PULL_MESSAGE,
            {"consumerGroup": group, "topic": topic, "queueId": queue_id,
             "queueOffset": str(offset), "maxMsgNums": "1", "sysFlag": str(_FLAG_SUBSCRIPTION),
             "commitOffset": "-1", "suspendTimeoutMillis": "0", "subscription": "*",
             "subVersion": "0", "expressionType": "TAG"},
            deadline_s=deadline_s,
            expect=(MQResponseCode.SUCCESS, MQResponseCode.PULL_NOT_FOUND,
                    MQResponseCode.PULL_OFFSET_MOVED, MQResponseCode.PULL_RETRY_IMMEDIATELY),
        )  # fmt: skip
        records = (
            decode_records(pulled.response.body)
            if pulled.response.code == MQResponseCode.SUCCESS
            else []
        )
        if not records or records[0].queue_offset != offset:
            return status(
                Code.INVALID_RECEIPT_HANDLE,
                f"the message of handle {handle!r:.120} is no longer in {topic}:{queue_id}",
            )
        message = records[0]
        await forwarder.call(
            topic, broker_name, MQRequestCode.CONSUMER_SEND_MSG_BACK,
            {"offset": str(message.commit_log_offset), "group": group, "delayLevel": "-1",
             "originMsgId": message.msg_id, "originTopic": topic, "unitMode": "false"},
            deadline_s=deadline_s,
        )  # fmt: skip
        acked = await forwarder.call(
            topic, broker_name, MQRequestCode.ACK_MESSAGE,
            {"consumerGroup": group, "topic": topic, "extraInfo": handle},
            deadline_s=deadline_s, expect=(MQResponseCode.SUCCESS, MQResponseCode.NO_MESSAGE),
        )  # fmt: skip
    except LedgerMQError as exc:
        return remote_status(exc)
    if acked.response.code == MQResponseCode.NO_MESSAGE and not acked.unknown_before:
        return status(
            Code.INVALID_RECEIPT_HANDLE,
            f"the message went to the dead letters, but its handle is stale: "
            f"{acked.response.remark}",
        )
    return ok()
