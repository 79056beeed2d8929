"""Pure routing policy of the clients: which queue a send goes to, who serves a pull, which
queues a consumer owns, and how far a queue has been consumed. No I/O, no clock of its own.

Theory of operation (RocketMQ's ``TopicPublishInfo``, ``MQFaultStrategy``, ``RebalanceImpl`` and
``ProcessQueue``, simplified where noted):

- *Publishing.* A topic's writable queues are those of every group whose queue data allows
  writing **and** which has a master (broker id 0) in the route: only a master stores messages.
  Queues are ordered by (broker name, queue id), so a sharding key picks the same queue on every
  client that sees the same route.
- *Queue selection* is round-robin over that list, driven by a counter the caller owns. It skips
  the group of the previous failed attempt and every group the ``LatencyFaultTolerance`` says is
  unavailable (marked failed within the last N ms). When every group is excluded it falls back to
  any group other than the one that just failed, then to anything: sending somewhere beats not
  sending. (RocketMQ also grades groups by observed latency; we only mark failures.)
- *Subscribing.* A consumer reads the readable queues of every group holding the topic, master
  or not: a group that lost its master can still be read from a slave (``pull_address``).
- *Allocation* is ``AllocateMessageQueueAveragely`` exactly: sorted client ids, sorted queues,
  contiguous ranges, the first ``len(queues) % len(clients)`` clients get one queue more.
- *Consumed offset* (``ProcessQueue``): a queue's messages are consumed out of order (concurrent
  listeners), yet the offset committed must never pass a message not consumed yet, or a restart
  would skip it. The committed offset is the lowest offset still in flight, or, when none is,
  the next offset to pull (everything before it was consumed or filtered out).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from ledgermq.wire import tag_hash
from ledgermq.wire.route import MASTER_ID, TopicRouteData, is_readable, is_writable

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

__all__ = [
    "DEFAULT_TOPIC",
    "DEFAULT_TOPIC_QUEUE_NUMS",
    "LatencyFaultTolerance",
    "MessageQueue",
    "ProcessQueue",
    "TopicPublishInfo",
    "allocate_averagely",
    "java_hash_mod",
    "master_address",
    "publish_info",
    "pull_address",
    "retry_topic",
    "select_queue",
    "sharding_queue",
    "subscribe_queues",
]

DEFAULT_TOPIC: Final = "TBW102"
"""``TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC``: the route a producer borrows for a new topic."""
DEFAULT_TOPIC_QUEUE_NUMS: Final = 4
"""``defaultTopicQueueNums``: queues per group of a topic created on first send."""
RETRY_GROUP_TOPIC_PREFIX: Final = "%RETRY%"


def retry_topic(group: str) -> str:
    """``%RETRY%<group>``: where a consumer group's failed messages come back."""
    return RETRY_GROUP_TOPIC_PREFIX + group


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue:
    """One queue of a topic on one broker group (``MessageQueue.java``); ordered like Java's."""

    topic: str
    broker_name: str
    queue_id: int

    def __str__(self) -> str:
        return f"{self.topic}@{self.broker_name}:{self.queue_id}"

    def to_object(self) -> dict[str, object]:
        return {"topic": self.topic, "brokerName": self.broker_name, "queueId": self.queue_id}


@dataclass(frozen=True, slots=True)
class TopicPublishInfo:
    """Where a topic can be written: its writable queues, in (broker, queue id) order.

    ``borrowed`` is True when the queues come from the route of ``DEFAULT_TOPIC`` (the topic
    does not exist yet; the first send creates it on the broker).
    """

    topic: str
    queues: tuple[MessageQueue, ...]
    route: TopicRouteData
    borrowed: bool = False

    @property
    def ok(self) -> bool:
        return bool(self.queues)


def publish_info(
    topic: str,
    route: TopicRouteData,
    *,
    borrowed: bool = False,
    borrowed_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS,
) -> TopicPublishInfo:
    """The writable queues of ``route`` for ``topic`` (``topicRouteData2TopicPublishInfo``).

    With ``borrowed`` the route is the default topic's, and each group offers
    ``min(borrowed_queue_nums, writeQueueNums)`` queues, as RocketMQ's producer computes.
    """
    masters = {b.broker_name for b in route.broker_datas if MASTER_ID in b.broker_addrs}
    queues: list[MessageQueue] = []
    for data in sorted(route.queue_datas, key=lambda q: q.broker_name):
        if not is_writable(data.perm) or data.broker_name not in masters:
            continue
        count = (
            min(borrowed_queue_nums, data.write_queue_nums) if borrowed else data.write_queue_nums
        )
        queues.extend(MessageQueue(topic, data.broker_name, i) for i in range(count))
    return TopicPublishInfo(topic, tuple(queues), route, borrowed)


def subscribe_queues(topic: str, route: TopicRouteData) -> list[MessageQueue]:
    """The readable queues of ``topic`` (``topicRouteData2TopicSubscribeInfo``), sorted."""
    queues = [
        MessageQueue(topic, data.broker_name, i)
        for data in route.queue_datas
        if is_readable(data.perm)
        for i in range(data.read_queue_nums)
    ]
    queues.sort()
    return queues


def master_address(route: TopicRouteData, broker_name: str) -> str | None:
    """The address of ``broker_name``'s master in ``route``, or None."""
    for data in route.broker_datas:
        if data.broker_name == broker_name:
            return data.broker_addrs.get(MASTER_ID)
    return None


def pull_address(route: TopicRouteData, broker_name: str) -> str | None:
    """Where to read ``broker_name``'s queues: its master, else its lowest-id slave, else None.

    (``findBrokerAddressInSubscribe``: reading from a slave keeps consumers going while a group
    elects a new master; in DLedger mode every member holds the committed log.)
    """
    for data in route.broker_datas:
        if data.broker_name == broker_name:
            addrs = data.broker_addrs
            if MASTER_ID in addrs:
                return addrs[MASTER_ID]
            slaves = sorted(i for i in addrs if i != MASTER_ID)
            return addrs[slaves[0]] if slaves else None
    return None


class LatencyFaultTolerance:
    """Broker groups to avoid for a while after a failure (RocketMQ's ``LatencyFaultTolerance``,
    simplified: a failure makes a group unavailable for ``duration_ms``; a success clears it).

    Times are whatever monotonic milliseconds the caller passes.
    """

    def __init__(self) -> None:
        # broker name -> monotonic ms from which it may be used again.
        self._unavailable_until: dict[str, int] = {}

    def mark_failed(self, broker_name: str, now_ms: int, duration_ms: int) -> None:
        self._unavailable_until[broker_name] = now_ms + duration_ms

    def mark_ok(self, broker_name: str) -> None:
        self._unavailable_until.pop(broker_name, None)

    def is_available(self, broker_name: str, now_ms: int) -> bool:
        until = self._unavailable_until.get(broker_name)
        if until is None:
            return True
        if now_ms >= until:
            del self._unavailable_until[broker_name]
            return True
        return False


def select_queue(
    info: TopicPublishInfo,
    counter: int,
    *,
    last_failed_broker: str | None = None,
    faults: LatencyFaultTolerance | None = None,
    now_ms: int = 0,
) -> MessageQueue:
    """The queue for one send attempt (``MQFaultStrategy.selectOneMessageQueue``).

    ``counter`` is the caller's round-robin position (incremented per attempt). Preference:
    a queue whose group is neither ``last_failed_broker`` nor marked unavailable; then any
    queue not of ``last_failed_broker``; then the plain round-robin choice.
    """
    queues = info.queues
    if not queues:
        raise ValueError(f"topic {info.topic!r} has no writable queue")
    n = len(queues)
    fallback: MessageQueue | None = None
    for i in range(n):
        mq = queues[(counter + i) % n]
        if mq.broker_name == last_failed_broker:
            continue
        if faults is None or faults.is_available(mq.broker_name, now_ms):
            return mq
        if fallback is None:
            fallback = mq
    return fallback if fallback is not None else queues[counter % n]


def java_hash_mod(key: str, n: int) -> int:
    """``SelectMessageQueueByHash``: ``abs(key.hashCode() % n)`` with Java's truncating ``%``."""
    return abs(tag_hash(key)) % n


def sharding_queue(info: TopicPublishInfo, sharding_key: str) -> MessageQueue:
    """The queue an ordered send with ``sharding_key`` goes to: stable for a given route.

    Java's ``String.hashCode`` rather than Python's ``hash`` (salted per process), so every
    client, in any language following RocketMQ, picks the same queue.
    """
    if not info.queues:
        raise ValueError(f"topic {info.topic!r} has no writable queue")
    return info.queues[java_hash_mod(sharding_key, len(info.queues))]


def allocate_averagely(
    current_cid: str, cids: Iterable[str], queues: Iterable[MessageQueue]
) -> list[MessageQueue]:
    """``AllocateMessageQueueAveragely.allocate``, over sorted ids and sorted queues.

    Each client gets a contiguous range; the first ``len(queues) % len(cids)`` clients one more.
    A client not in ``cids`` (not yet seen by the broker) gets nothing.
    """
    cid_all = sorted(set(cids))
    mq_all: Sequence[MessageQueue] = sorted(set(queues))
    if current_cid not in cid_all or not mq_all:
        return []
    index = cid_all.index(current_cid)
    n_mq, n_cid = len(mq_all), len(cid_all)
    mod = n_mq % n_cid
    if n_mq <= n_cid:
        average = 1
    elif mod > 0 and index < mod:
        average = n_mq // n_cid + 1
    else:
        average = n_mq // n_cid
    start = index * average if mod > 0 and index < mod else index * average + mod
    count = min(average, n_mq - start)
    return [mq_all[(start + i) % n_mq] for i in range(max(count, 0))]


@dataclass(slots=True)
class ProcessQueue:
    """What a consumer holds of one queue: messages pulled and not consumed yet.

    Invariant: every offset below ``next_offset`` that is not in flight was consumed (or filtered
    out by the subscription), so ``consumed_offset`` is safe to commit.
    """

    next_offset: int
    """The next offset to pull (the previous pull's ``nextBeginOffset``)."""
    dropped: bool = False
    """Set when the queue is taken away by a rebalance; its loops stop, its offset is final."""
    locked: bool = False
    """Orderly consumption: this client holds the broker's lock on the queue."""
    last_lock_ms: int = 0
    last_pull_ms: int = 0
    """Wall-clock ms when a pull of the queue last came back (GET_CONSUMER_RUNNING_INFO)."""
    last_consume_ms: int = 0
    """Wall-clock ms when a batch of the queue was last consumed."""
    _in_flight: set[int] = field(default_factory=set)
    _heap: list[int] = field(default_factory=list)

    @property
    def count(self) -> int:
        """Messages pulled and not consumed yet."""
        return len(self._in_flight)

    def put(self, offsets: Iterable[int], next_offset: int) -> None:
        """Record a pull: ``offsets`` are now in flight, the next pull starts at ``next_offset``."""
        for offset in offsets:
            if offset not in self._in_flight:
                self._in_flight.add(offset)
                heapq.heappush(self._heap, offset)
        self.next_offset = next_offset

    def skip_to(self, next_offset: int) -> None:
        """Nothing to consume before ``next_offset`` (NO_NEW_MSG, NO_MATCHED_MSG, moved offset)."""
        self.next_offset = next_offset

    def remove(self, offsets: Iterable[int]) -> int:
        """Mark ``offsets`` consumed; return the new ``consumed_offset``."""
        in_flight = self._in_flight
        for offset in offsets:
            in_flight.discard(offset)
        heap = self._heap
        while heap and heap[0] not in in_flight:
            heapq.heappop(heap)
        return self.consumed_offset

    def cached_range(self) -> tuple[int, int]:
        """(lowest, highest) offset pulled and not consumed yet; (0, 0) when none is."""
        if not self._in_flight:
            return 0, 0
        return min(self._in_flight), max(self._in_flight)

    @property
    def consumed_offset(self) -> int:
        """The lowest offset not consumed yet: what may be committed."""
        return self._heap[0] if self._heap else self.next_offset
