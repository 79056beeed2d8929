"""Which queue a FIFO message goes to: its message group hashed over the topic's write queues.
Pure.

RocketMQ 5's proxy (``SendMessageActivity.SendMessageQueueSelector``) puts every message of one
message group in one queue, ``writeQueues[Hashing.consistentHash(group.hashCode(), n)]``: Java's
``String.hashCode`` of the group, then Guava's jump consistent hash (Lamping and Veach), so that
adding queues moves as few groups as possible. The queue a client asked for is ignored. We
compute the same function, so one group lands in the queue RocketMQ would pick, and a group's
messages from every client and every replica that becomes master land in one queue while the
topic's write queue count stays the same (changing it moves some groups, as in RocketMQ).

The group itself is checked as the Java proxy's ``validateMessageGroup`` does: at most
``MAX_MESSAGE_GROUP_CHARS`` characters (``maxMessageGroupSize``), no control characters.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "MAX_MESSAGE_GROUP_CHARS",
    "consistent_hash",
    "group_problem",
    "java_string_hash",
    "queue_of_group",
]

MAX_MESSAGE_GROUP_CHARS: Final = 64
"""The Java proxy's ``maxMessageGroupSize`` default."""

_MASK64: Final = (1 << 64) - 1
_LCG_MULTIPLIER: Final = 2862933555777941757
"""Guava's ``LinearCongruentialGenerator`` multiplier (L'Ecuyer)."""


def java_string_hash(text: str) -> int:
    """``String.hashCode()``: ``h = 31 * h + c`` over the UTF-16 code units, as a signed 32-bit
    int (characters beyond the BMP count as their two surrogates, as Java sees them)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def consistent_hash(key: int, buckets: int) -> int:
    """Guava's ``Hashing.consistentHash(long, int)``: a bucket in ``range(buckets)``.

    ``key`` is a Java long (an int is sign-extended, as Java widens it). The generator's state
    is a 64-bit two's complement number; ``(int) (state >>> 33)`` is its top 31 bits, so never
    negative; Java's ``(int)`` of the quotient truncates towards zero, as ``int`` does here.
    """
    if buckets <= 0:
        raise ValueError(f"buckets must be positive, got {buckets}")
    state = key & _MASK64
    candidate = 0
    while True:
        state = (_LCG_MULTIPLIER * state + 1) & _MASK64
        next_double = ((state >> 33) + 1) / float(1 << 31)
        jump = int((candidate + 1) / next_double)
        if 0 <= jump < buckets:
            candidate = jump
        else:
            return candidate


def queue_of_group(group: str, write_queue_nums: int) -> int:
    """The write queue of a topic with ``write_queue_nums`` write queues that ``group`` goes to."""
    return consistent_hash(java_string_hash(group), write_queue_nums)


def group_problem(group: str) -> str | None:
    """None if ``group`` is a message group the proxy takes, else why not."""
    if not group.strip():
        return "the message group is blank"
    if len(group) > MAX_MESSAGE_GROUP_CHARS:
        return (
            f"the message group is {len(group)} characters long, more than "
            f"{MAX_MESSAGE_GROUP_CHARS}"
        )
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in group):
        return "the message group holds a control character"
    return None
