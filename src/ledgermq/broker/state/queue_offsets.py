"""The master's next queue offset per (topic, queue): RocketMQ's ``topicQueueTable``.

Only a master assigns queue offsets: when it encodes a message it stamps the next offset of the
message's queue into the record (spec-broker.md section 3.2), so log order is queue-offset order.
The table advances before the quorum answers; an append that the ledger refuses at once (not the
leader any more, transfer in progress, too many pending) is rolled back, because its entries
never reached the log. Followers never assign, so a new master rebuilds the table from its
ConsumeQueues once dispatch has caught up with everything committed (section 5.1).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["QueueOffsetTable"]


class QueueOffsetTable:
    def __init__(self) -> None:
        self._next: dict[tuple[str, int], int] = {}

    def assign(self, topic: str, queue_id: int, count: int) -> int:
        """Reserve ``count`` consecutive offsets of the queue; returns the first."""
        key = (topic, queue_id)
        first = self._next.get(key, 0)
        self._next[key] = first + count
        return first

    def roll_back(self, topic: str, queue_id: int, first: int) -> None:
        """Give back what ``assign`` reserved (only valid before anyone else assigned)."""
        self._next[(topic, queue_id)] = first

    def rebuild(self, queues: Iterable[tuple[str, int, int]]) -> None:
        """From (topic, queue id, max offset) of every ConsumeQueue (``recoverTopicQueueTable``)."""
        self._next = {(topic, queue_id): max_offset for topic, queue_id, max_offset in queues}
