"""``Admin.consumer_status``'s answer (``mqadmin consumerStatus``): each online client of a group
as it describes itself (GET_CONSUMER_RUNNING_INFO, passed on by a broker), with each queue's lag
worked out against the broker's offsets.

The client's ``commitOffset`` is its own offset of the queue (what it will commit next), fresher
than the committed offset ``consumer-progress`` shows; the lag here is the broker's max offset
minus it. A client that could not answer (too old, gone since the connection list was read, or
not answering) is still listed, with the reason, so a script sees every member.

``warnings`` and ``subscriptions_differ`` are RocketMQ's ``analyzeProcessQueue`` and
``analyzeSubscription``: a queue whose cache has not moved for a minute (the listener may be
blocked), an orderly queue not locked, and clients of one group that subscribe differently (the
group's rebalancing then assigns queues of a topic to clients that do not read it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ledgermq.wire.running_info import PROP_CONSUME_ORDERLY, PROP_CONSUMER_START_TIMESTAMP

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ledgermq.wire.running_info import ConsumerRunningInfo

__all__ = [
    "BLOCKED_AFTER_MS",
    "ClientStatus",
    "QueueStatus",
    "queue_statuses",
    "subscriptions_differ",
    "warnings",
]

BLOCKED_AFTER_MS: Final = 60_000
"""A push consumer's queue with cached messages and no consumption for this long looks blocked
(RocketMQ's ``analyzeProcessQueue`` uses one minute)."""


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


def warnings(client: ClientStatus, now_ms: int) -> list[str]:
    """What looks wrong with a push consumer's queues at ``now_ms`` (see the module)."""
    info = client.info
    if info is None or info.consume_type != "CONSUME_PASSIVELY":
        return []
    orderly = info.properties.get(PROP_CONSUME_ORDERLY) == "true"
    clustering = info.properties.get("messageModel", "CLUSTERING") == "CLUSTERING"
    started = int(info.properties.get(PROP_CONSUMER_START_TIMESTAMP, "0") or 0)
    found = []
    for q in client.queues:
        name = f"{q.topic}@{q.broker_name}:{q.queue_id}"
        if orderly and clustering:
            if not q.locked:
                found.append(f"{name}: not locked, so orderly consumption of it waits")
            continue
        since = q.last_consume_ms or started
        if q.cached > 0 and since > 0 and now_ms - since > BLOCKED_AFTER_MS:
            found.append(
                f"{name}: {q.cached} message(s) cached and nothing consumed for "
                f"{(now_ms - since) // 1000} s: the listener may be blocked"
            )
    return found


def subscriptions_differ(clients: list[ClientStatus]) -> dict[str, str] | None:
    """client id -> its subscriptions, when the clients that answered do not all subscribe
    alike; None when they do (or fewer than two answered)."""
    seen = {
        c.client_id: frozenset(
            (s.topic, s.expression_type, s.expression) for s in c.info.subscriptions
        )
        for c in clients
        if c.info is not None
    }
    if len(set(seen.values())) <= 1:
        return None
    return {
        cid: ", ".join(f"{t} ({kind} {expr})" for t, kind, expr in sorted(subs))
        for cid, subs in sorted(seen.items())
    }
