"""Consuming: pull (a queue read from an offset), POP (receive, ack, change-invisible, dead
letters) and offsets, with one result shape for both ways of reading.

``Delivered`` answers a pull and a POP receive alike: the messages handed out (``Delivery``:
the record as stored, plus a POP delivery's receipt handle, attempt and invisible time) and
where to go on (a pull's next offset and the queue's bounds; a receive's pop time). A door
renders it in its protocol; the messages are records (a pull's may stay as the store holds
them, ``Delivered.stored``, for a door that answers with them as they are).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ledgermq.wire.message import decode_records

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ledgermq.wire.message import MessageExt

__all__ = [
    "AckEntry",
    "Delivered",
    "Delivery",
    "OffsetPolicy",
    "PullOutcome",
    "PullQuery",
    "QueueRef",
    "Receive",
]


@dataclass(frozen=True, slots=True)
class QueueRef:
    """One queue of a topic."""

    topic: str
    broker_name: str
    """Its broker group; "" when the request names none (a replica's door: its own)."""
    queue_id: int


class PullOutcome(enum.Enum):
    """What a read found."""

    FOUND = "found"
    NOT_FOUND = "not found"
    """Nothing new at the offset (nothing to receive): read again later."""
    FILTERED = "filtered"
    """Nothing the filter wanted (or nothing left: removed by retention meanwhile): go on from
    the next offset (remoting's PULL_RETRY_IMMEDIATELY)."""
    OFFSET_MOVED = "offset moved"
    """The offset is outside the queue: go on from the next offset."""


@dataclass(slots=True)
class PullQuery:
    """Read a queue from an offset.

    Not frozen: made once per pull on the remoting door's consume path (a frozen dataclass's
    ``__init__`` costs about three times a plain one's)."""

    group: str
    queue: QueueRef
    offset: int
    max_messages: int = 32
    expression: str | None = None
    """The subscription's expression; None: what the group's members registered for the topic
    (a remoting pull that carries none), else everything."""
    expression_type: str | None = None
    """``TAG`` or ``SQL92`` (None: TAG)."""
    poll_ms: int = 0
    """How long to wait for a message when there is none."""
    max_bytes: int | None = None
    """At most this many bytes of records, but at least one message (None: the broker's
    bound)."""
    commit_offset: int | None = None
    """An offset of the group to commit on the way (remoting's COMMIT_OFFSET flag), None for
    none."""


@dataclass(frozen=True, slots=True)
class Receive:
    """A POP receive: up to ``max_messages`` of ``topic`` for ``group``, invisible for
    ``invisible_ms``, from queue ``queue_id`` (None: any readable queue of the topic)."""

    group: str
    topic: str
    broker_name: str = ""
    """The assignment's broker group ("": any, or the replica's own)."""
    max_messages: int = 32
    invisible_ms: int = 30_000
    expression: str = "*"
    expression_type: str = "TAG"
    """``TAG`` or ``SQL92`` ("": TAG)."""
    poll_ms: int = 0
    """How long a receive that finds nothing may wait for a message (long polling)."""
    queue_id: int | None = None
    """One queue of the topic (remoting POP's ``queueId``; None or -1: any)."""
    order: bool = False
    """FIFO for this receive even when the group is not orderly: remoting POP's ``order``
    (RocketMQ's ``PopMessageRequestHeader.order``, what an orderly pop consumer sends)."""


@dataclass(frozen=True, slots=True)
class Delivery:
    """One message handed out by a pull or a receive."""

    record: MessageExt
    """The message as stored (without the broker's ``POP_CK`` property)."""
    receipt_handle: str = ""
    """A POP delivery's handle to ack it by ("" for a pull's)."""
    attempt: int = 1
    """1 for the first delivery."""
    invisible_ms: int = 0
    """How long a POP delivery stays invisible (0 for a pull's)."""


@dataclass(slots=True)
class Delivered:
    """A pull's or a receive's answer (module docstring).

    Not frozen: made once per pull on the remoting door's consume path, and a frozen
    dataclass's ``__init__`` costs about three times a plain one's. A pull's records may come
    as the store holds them (``stored``: what the remoting door answers with, as they are),
    decoded into ``Delivery`` values only for a door that asks (``deliveries``)."""

    outcome: PullOutcome
    messages: Sequence[Delivery]
    next_offset: int = 0
    """A pull's: where the next pull starts."""
    min_offset: int = 0
    max_offset: int = 0
    """A pull's: the queue's bounds, for an offset outside it."""
    pop_time_ms: int = 0
    """A receive's: when the messages were handed out."""
    stored: bytes = b""
    """A pull's records as stored, back to back (RocketMQ's record layout), when they are
    handed over so (``messages`` is then empty)."""
    count: int = 0
    """How many records ``stored`` holds."""

    def deliveries(self) -> Sequence[Delivery]:
        """The messages as ``Delivery`` values: ``messages``, or ``stored`` decoded."""
        if self.messages or not self.count:
            return self.messages
        return [Delivery(record) for record in decode_records(self.stored)]


@dataclass(frozen=True, slots=True)
class AckEntry:
    """One delivery to acknowledge."""

    message_id: str
    receipt_handle: str


class OffsetPolicy(enum.Enum):
    """Where QueryOffset looks: a queue's beginning, its end, or a time."""

    BEGINNING = "beginning"
    END = "end"
    TIMESTAMP = "timestamp"
