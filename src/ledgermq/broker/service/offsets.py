"""Offsets: consumer offsets (commit, query) and queue offsets (bounds, store times).

The remoting door (``broker.remoting.offsets``) serves QUERY_CONSUMER_OFFSET (14),
UPDATE_CONSUMER_OFFSET (15) and the queue offset requests (29-32) from here.

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

from ledgermq.broker.errors import (
    InvalidArgumentError,
    InvalidQueueError,
    NoSuchTopicError,
    NotFoundError,
)
from ledgermq.broker.names import require_group_name, require_topic_name
from ledgermq.errors import IndexCompactedError, IndexOutOfRangeError
from ledgermq.messaging.consuming import OffsetPolicy
from ledgermq.wire.message import STORE_TIMESTAMP_POSITION

if TYPE_CHECKING:
    from ledgermq.broker.state.broker_state import BrokerState

__all__ = ["NO_POSITION", "OffsetService"]

NO_POSITION: Final = -1
"""``commitOffset`` of a queue a consumer holds without a position: accepted, never stored."""


class OffsetService:
    def __init__(self, state: BrokerState) -> None:
        self._state = state

    def query_offset(
        self, topic: str, queue_id: int, policy: OffsetPolicy, at_ms: int | None
    ) -> int:
        """The messaging contract's QueryOffset: the queue's first offset (BEGINNING), its next
        (END), or the first stored at or after ``at_ms`` (TIMESTAMP; with no time, END)."""
        if policy is OffsetPolicy.TIMESTAMP and at_ms is not None:
            return self.search_offset_by_timestamp(topic, queue_id, at_ms)
        low, high = self.queue_bounds(topic, queue_id)
        return low if policy is OffsetPolicy.BEGINNING else high

    def queue_bounds(self, topic: str, queue_id: int) -> tuple[int, int]:
        """(min offset, max offset) of a queue; (0, 0) for one that has no message yet."""
        queue = self._state.queues.find(topic, queue_id)
        return (queue.min_offset, queue.max_offset) if queue is not None else (0, 0)

    def consumer_offset(self, group: str, topic: str, queue_id: int) -> int | None:
        """Where ``group`` goes on in the queue: its committed offset, else 0 while the queue
        still holds its first message; None when it has none and the queue's start is gone
        (the consumer then applies its consume-from-where).

        Only the master answers (``NotMasterError`` on a slave, which sends the client to the
        master). A slave's copy of the offsets is only as new as what it has applied, and a
        replica that just restarted has applied less than was acknowledged: the one-hour chaos
        soak of 2026-11-26 saw a query go, on a stale route, to the restarted old master and
        answer an offset 1.2 s older than an acknowledged commit, which sends a consumer back
        over messages it already consumed. The master became master only after applying
        everything committed, so its answer includes every acknowledged commit."""
        require_group_name(group)
        require_topic_name(topic)
        self._state.require_master("reading a committed consumer offset")
        offset = self._state.writer.offset(group, topic, queue_id)
        if offset is None:
            min_offset, _ = self.queue_bounds(topic, queue_id)
            if min_offset > 0:
                return None
            offset = 0
        return offset

    async def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Commit ``group``'s offset in the queue through the ledger; returns once committed.
        ``NO_POSITION`` is accepted and changes nothing. Raises ``InvalidGroupError`` /
        ``InvalidTopicError`` for names that break the naming rules, ``NoSuchTopicError`` for
        a topic the broker does not have, ``InvalidQueueError`` for a queue id the topic
        does not have (as a pull is refused: an offset of queue -1 or 2147483647 is garbage
        in the replicated metadata for ever) and other negative offsets, ``NotMasterError`` on
        a slave."""
        require_group_name(group)
        require_topic_name(topic)
        if offset < NO_POSITION:
            raise InvalidArgumentError(
                f"commitOffset {offset} is negative (only -1, 'no position yet', is accepted)"
            )
        state = self._state
        state.require_master("committing consumer offsets")
        topic_config = state.topics.find(topic)
        if topic_config is None:
            raise NoSuchTopicError(f"topic[{topic}] not exist, apply first please!")
        queues = max(topic_config.read_queue_nums, topic_config.write_queue_nums)
        if not 0 <= queue_id < queues:
            raise InvalidQueueError(
                f"queueId[{queue_id}] is illegal, topic:[{topic}] has {queues} queues "
                f"(0 <= queueId < {queues})"
            )
        if offset != NO_POSITION:
            await state.writer.commit_offset(group, topic, queue_id, offset)

    def _store_time(self, topic: str, queue_id: int, offset: int) -> int | None:
        state = self._state
        queue = state.queues.find(topic, queue_id)
        unit = queue.get(offset) if queue is not None else None
        if unit is None:
            return None
        try:
            raw = state.commitlog.read_record(unit[0], unit[1])
        except (IndexOutOfRangeError, IndexCompactedError):
            return None
        return int.from_bytes(raw[STORE_TIMESTAMP_POSITION : STORE_TIMESTAMP_POSITION + 8], "big")

    def earliest_store_time(self, topic: str, queue_id: int) -> int:
        """Store time (ms) of the queue's first message; ``NotFoundError`` if it has none."""
        low, high = self.queue_bounds(topic, queue_id)
        stamp = self._store_time(topic, queue_id, low) if low < high else None
        if stamp is None:
            raise NotFoundError(f"queue {topic}:{queue_id} holds no message")
        return stamp

    def search_offset_by_timestamp(self, topic: str, queue_id: int, timestamp: int) -> int:
        """The first offset whose message was stored at or after ``timestamp`` (max if none)."""
        low, high = self.queue_bounds(topic, queue_id)
        lo, hi = low, high
        while lo < hi:
            mid = (lo + hi) // 2
            stamp = self._store_time(topic, queue_id, mid)
            if stamp is None or stamp >= timestamp:
                hi = mid
            else:
                lo = mid + 1
        return lo
