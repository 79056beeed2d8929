"""Which changes of a topic's queue counts would make stored messages unreachable.

RocketMQ keeps two counts per topic: producers write to queues ``0 .. writeQueueNums-1``,
consumers read ``0 .. readQueueNums-1``. Shrinking both at once (``-q 4`` on an 8-queue topic)
strands whatever queues 4..7 still hold: the issue-27 trial lost access to 20 of 40 messages.
So a shrink drains first, and the broker refuses the update that would strand messages:

1. ``writeQueueNums`` may never exceed ``readQueueNums`` (a message written to a queue no
   consumer reads is unreachable from the start);
2. ``readQueueNums`` may shrink only when the write count *already* stored is at most the new
   read count (producers stopped writing to the queues being dropped: ``-w N`` first), and every
   dropped queue is drained: each consumer group with offsets in the topic has consumed it to
   its end, and when no group has any, the queue holds no message.

Shrinking ``writeQueueNums`` alone, and every growth, is always allowed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ledgermq.wire.route import TopicConfig

__all__ = ["queue_count_problem"]


def queue_count_problem(
    existing: TopicConfig | None,
    new: TopicConfig,
    bounds: Callable[[int], tuple[int, int]],
    committed: Mapping[str, Callable[[int], int | None]],
) -> str | None:
    """Why changing ``existing`` into ``new`` would strand messages, or None when it would not.

    ``bounds(queue_id)`` is a queue's (min offset, max offset); ``committed`` maps each consumer
    group that has offsets in the topic to its committed offset per queue id (None: none)."""
    topic = new.topic_name
    if new.write_queue_nums > new.read_queue_nums:
        return (
            f"topic {topic}: writeQueueNums {new.write_queue_nums} is above readQueueNums "
            f"{new.read_queue_nums}; messages written to queues {new.read_queue_nums}.."
            f"{new.write_queue_nums - 1} would be read by no consumer"
        )
    if existing is None or new.read_queue_nums >= existing.read_queue_nums:
        return None
    dropped = f"{new.read_queue_nums}..{existing.read_queue_nums - 1}"
    how = (
        f"shrink the write count first (topic-update -t {topic} -w {new.read_queue_nums}), let "
        f"the consumers drain queues {dropped}, then shrink the read count (-r "
        f"{new.read_queue_nums})"
    )
    if existing.write_queue_nums > new.read_queue_nums:
        return (
            f"topic {topic}: readQueueNums cannot shrink from {existing.read_queue_nums} to "
            f"{new.read_queue_nums} while producers write to queues up to "
            f"{existing.write_queue_nums - 1}; {how}"
        )
    for queue_id in range(new.read_queue_nums, existing.read_queue_nums):
        low, high = bounds(queue_id)
        if high <= low:
            continue
        if not committed:
            return (
                f"topic {topic}: queue {queue_id} holds messages at offsets {low}..{high - 1} "
                f"that no consumer group has consumed; shrinking readQueueNums to "
                f"{new.read_queue_nums} would make them unreachable; {how}"
            )
        behind = sorted(
            group for group, offset_of in committed.items() if (offset_of(queue_id) or 0) < high
        )
        if behind:
            return (
                f"topic {topic}: queue {queue_id} (max offset {high}) is not drained by "
                f"{', '.join(behind)}; shrinking readQueueNums to {new.read_queue_nums} would "
                f"make its messages unreachable; {how}"
            )
    return None
