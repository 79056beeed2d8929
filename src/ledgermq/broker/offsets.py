"""Offset requests: consumer offsets (14, 15) and queue offsets (29-32).

QUERY_CONSUMER_OFFSET answers a group that has no committed offset yet like the Java broker does
for a queue whose messages are all still there: offset 0, so a new group reads a young queue
from its start (protocol-remoting-and-grpc.md section 2.9); otherwise QUERY_NOT_FOUND and the
client applies its consume-from-where. UPDATE_CONSUMER_OFFSET is answered once the offset is
committed through the ledger (broker.state.metadata_writer), so an acknowledged commit survives a
failover.

``commitOffset=-1`` is what clients send for a queue they hold but have not consumed yet
(ali-ons, and Java's persistAll for a queue whose local offset is still unknown). RocketMQ 4.x
stores it and answers SUCCESS; its QUERY_CONSUMER_OFFSET then treats a stored -1 like no entry.
We answer SUCCESS too but store nothing: -1 means "no position yet", and writing it over a
stored offset would send the group back to its consume-from-where (often the queue's start or
end) because one client's bookkeeping lagged behind another's commit. So -1 never changes a
stored offset, and where none is stored QUERY_CONSUMER_OFFSET answers exactly as RocketMQ does
after storing -1. Other negative offsets mean nothing in the protocol and are refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ledgermq.errors import IndexCompactedError, IndexOutOfRangeError, RequestRejectedError
from ledgermq.wire import MQResponseCode, ext_int, ext_str
from ledgermq.wire.message import STORE_TIMESTAMP_POSITION

if TYPE_CHECKING:
    from ledgermq.broker.state.broker_state import BrokerState
    from ledgermq.wire import RemotingCommand

__all__ = [
    "NO_POSITION",
    "earliest_store_time",
    "max_offset",
    "min_offset",
    "query_consumer_offset",
    "search_offset_by_timestamp",
    "update_consumer_offset",
]

NO_POSITION: Final = -1
"""``commitOffset`` of a queue a consumer holds without a position: accepted, never stored."""


def _queue_bounds(state: BrokerState, topic: str, queue_id: int) -> tuple[int, int]:
    queue = state.queues.find(topic, queue_id)
    return (queue.min_offset, queue.max_offset) if queue is not None else (0, 0)


def query_consumer_offset(state: BrokerState, command: RemotingCommand) -> RemotingCommand:
    fields = command.ext_fields
    group = ext_str(fields, "consumerGroup")
    topic = ext_str(fields, "topic")
    queue_id = ext_int(fields, "queueId")
    offset = state.writer.offset(group, topic, queue_id)
    if offset is None:
        min_offset, _ = _queue_bounds(state, topic, queue_id)
        if min_offset <= 0:
            offset = 0
        else:
            return command.response(
                MQResponseCode.QUERY_NOT_FOUND,
                remark="Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
            )
    return command.response(MQResponseCode.SUCCESS, ext_fields={"offset": str(offset)})


async def update_consumer_offset(state: BrokerState, command: RemotingCommand) -> RemotingCommand:
    fields = command.ext_fields
    group = ext_str(fields, "consumerGroup")
    topic = ext_str(fields, "topic")
    queue_id = ext_int(fields, "queueId")
    offset = ext_int(fields, "commitOffset")
    if offset < NO_POSITION:
        raise RequestRejectedError(
            f"commitOffset {offset} is negative (only -1, 'no position yet', is accepted)",
            MQResponseCode.SYSTEM_ERROR,
        )
    state.require_master("committing consumer offsets")
    if offset != NO_POSITION:
        await state.writer.commit_offset(group, topic, queue_id, offset)
    return command.response(MQResponseCode.SUCCESS)


def max_offset(state: BrokerState, command: RemotingCommand) -> RemotingCommand:
    fields = command.ext_fields
    _, high = _queue_bounds(state, ext_str(fields, "topic"), ext_int(fields, "queueId"))
    return command.response(MQResponseCode.SUCCESS, ext_fields={"offset": str(high)})


def min_offset(state: BrokerState, command: RemotingCommand) -> RemotingCommand:
    fields = command.ext_fields
    low, _ = _queue_bounds(state, ext_str(fields, "topic"), ext_int(fields, "queueId"))
    return command.response(MQResponseCode.SUCCESS, ext_fields={"offset": str(low)})


def _store_time(state: BrokerState, topic: str, queue_id: int, offset: int) -> int | None:
    queue = state.queues.find(topic, queue_id)
    unit = queue.get(offset) if queue is not None else None
    if unit is None:
        return None
    try:
        raw = state.commitlog.read_record(unit[0], unit[1])
    except (IndexOutOfRangeError, IndexCompactedError):
        return None
    return int.from_bytes(raw[STORE_TIMESTAMP_POSITION : STORE_TIMESTAMP_POSITION + 8], "big")


def earliest_store_time(state: BrokerState, command: RemotingCommand) -> RemotingCommand:
    fields = command.ext_fields
    topic, queue_id = ext_str(fields, "topic"), ext_int(fields, "queueId")
    low, high = _queue_bounds(state, topic, queue_id)
    stamp = _store_time(state, topic, queue_id, low) if low < high else None
    if stamp is None:
        raise RequestRejectedError(
            f"queue {topic}:{queue_id} holds no message", MQResponseCode.SYSTEM_ERROR
        )
    return command.response(MQResponseCode.SUCCESS, ext_fields={"timestamp": str(stamp)})


def search_offset_by_timestamp(state: BrokerState, command: RemotingCommand) -> RemotingCommand:
    """The first offset whose message was stored at or after ``timestamp`` (max if none)."""
    fields = command.ext_fields
    topic, queue_id = ext_str(fields, "topic"), ext_int(fields, "queueId")
    target = ext_int(fields, "timestamp")
    low, high = _queue_bounds(state, topic, queue_id)
    lo, hi = low, high
    while lo < hi:
        mid = (lo + hi) // 2
        stamp = _store_time(state, topic, queue_id, mid)
        if stamp is None or stamp >= target:
            hi = mid
        else:
            lo = mid + 1
    return command.response(MQResponseCode.SUCCESS, ext_fields={"offset": str(lo)})
