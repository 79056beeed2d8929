"""``Admin.consumer_status``'s answer (``mqadmin consumerStatus``): each online client of a group
as it describes itself (GET_CONSUMER_RUNNING_INFO, passed on by a broker), with each queue's lag
worked out against the broker's offsets.

The client's ``commitOffset`` is its own offset of the queue (what it will commit next), fresher
than the committed offset ``consumer-progress`` shows; the lag here is the broker's max offset
minus it. A client that could not answer (too old, gone since the connection list was read, or
not answering) is still listed, with the reason, so a script sees every member.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ledgermq.wire.running_info import ConsumerRunningInfo

__all__ = ["ClientStatus", "QueueStatus", "queue_statuses"]


@dataclass(frozen=True, slots=True)
class QueueStatus:
    """One queue a client holds: its offset, the broker's, and what it has cached."""

    topic: str
    broker_name: str
    queue_id: int
    consumer_offset: int
    broker_offset: int | None
    """The queue's max offset on its master; None when the master did not say."""
    cached: int
    locked: bool
    last_pull_ms: int
    last_consume_ms: int

    @property
    def lag(self) -> int | None:
        """Messages after the client's offset; None when the broker offset is unknown."""
        if self.broker_offset is None:
            return None
        return max(self.broker_offset - self.consumer_offset, 0)


@dataclass(frozen=True, slots=True)
class ClientStatus:
    """One client of the group: where it is connected and what it said (or why it did not)."""

    client_id: str
    client_addr: str
    language: str
    version: int
    broker_name: str
    """The broker group whose master passed the question on."""
    info: ConsumerRunningInfo | None
    queues: tuple[QueueStatus, ...]
    error: str = ""
    """Why ``info`` is None."""


def queue_statuses(
    info: ConsumerRunningInfo, broker_offsets: Mapping[tuple[str, str, int], int]
) -> tuple[QueueStatus, ...]:
    """``info``'s queues with the broker's max offsets ((topic, broker, queue) -> offset)."""
    return tuple(
        QueueStatus(
            topic=q.topic,
            broker_name=q.broker_name,
            queue_id=q.queue_id,
            consumer_offset=q.commit_offset,
            broker_offset=broker_offsets.get((q.topic, q.broker_name, q.queue_id)),
            cached=q.cached_count,
            locked=q.locked,
            last_pull_ms=q.last_pull_ms,
            last_consume_ms=q.last_consume_ms,
        )
        for q in info.queues
    )
