"""The sink's talks with the cluster (no pyspark here): writing a partition of a micro-batch
exactly once, and recording committed batches. The design is in ``ledgermq.spark.sink``.

The sink's state log is the topic ``%SPARK_SINK%<sinkId>`` (one queue, on one broker group,
in the target cluster). Its records are JSON bodies tagged:

- ``begin``: ``{"batch", "part", "attempt", "topic", "broker", "queue", "start"}``, written
  by a task attempt before its first send to a queue; ``start`` is a lower bound of the queue
  offsets that attempt's messages get.
- ``commit``: ``{"batch"}``, written by the driver's ``commit(messages, batchId)``.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from ledgermq.client import (
    Message,
    MessageQueue,
    PullStatus,
    SyncAdmin,
    SyncProducer,
    SyncPullConsumer,
)
from ledgermq.errors import ConfigError, LedgerMQError, TopicNotFoundError

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from ledgermq.spark.planning import SinkOptions
    from ledgermq.wire import MessageExt

__all__ = [
    "PROP_BATCH",
    "PROP_PART",
    "PROP_ROW",
    "PROP_SINK",
    "OutRow",
    "commit_batch",
    "state_topic",
    "write_partition",
]

logger = logging.getLogger("ledgermq.spark.sink")

PROP_SINK: Final = "__spark_query"
PROP_BATCH: Final = "__spark_batch"
PROP_PART: Final = "__spark_part"
PROP_ROW: Final = "__spark_row"
"""Properties of every message the exactly-once sink writes: which sink, micro-batch and
partition wrote it, and the row's identity within that partition (see ``_row_ids``)."""

_RESERVED: Final = frozenset({"UNIQ_KEY", "KEYS", "TAGS", "WAIT", PROP_SINK, PROP_BATCH,
                              PROP_PART, PROP_ROW})  # fmt: skip
_BATCH_BYTES: Final = 1 << 20
_SCAN_CHUNK: Final = 256

OutRow = tuple[str, bytes, "str | None", "str | None", "Mapping[str, str] | None"]
"""``(topic, body, keys, tags, properties)`` of one message to write."""


def state_topic(sink_id: str) -> str:
    return f"%SPARK_SINK%{sink_id}"


@dataclass
class _Clients:
    options: SinkOptions
    producer: SyncProducer
    consumer: SyncPullConsumer
    queues: dict[str, list[MessageQueue]] = field(default_factory=dict)

    @classmethod
    def open(cls, options: SinkOptions) -> _Clients:
        timeout_s = options.request_timeout_ms / 1000
        security = options.security.client_options()
        producer = SyncProducer(
            options.producer_group, options.namesrv_addr, send_timeout_s=timeout_s, **security
        )
        try:
            producer.start()
            consumer = SyncPullConsumer(
                options.producer_group,
                options.namesrv_addr,
                request_timeout_s=timeout_s,
                **security,
            )
            consumer.start()
        except BaseException:
            producer.close()
            raise
        return cls(options, producer, consumer)

    def close(self) -> None:
        try:
            self.producer.close()
        finally:
            self.consumer.close()

    def topic_queues(self, topic: str, *, auto_create: bool = True) -> list[MessageQueue]:
        """The readable queues of ``topic``. A topic without a route is created first if the
        cluster creates topics on first send (``_auto_create``) and ``auto_create`` allows."""
        if topic not in self.queues:
            try:
                self.queues[topic] = self.consumer.fetch_queues(topic)
            except TopicNotFoundError:
                if not auto_create:
                    raise ConfigError(
                        f"unknown topic {topic!r}: the NameServer {self.options.namesrv_addr} "
                        "has no route for it"
                    ) from None
                _auto_create(self.options, topic)
                self.queues[topic] = self.consumer.fetch_queues(topic)
            if not self.queues[topic]:
                raise ConfigError(f"topic {topic!r} has no readable queue")
        return self.queues[topic]


def _auto_create(options: SinkOptions, topic: str) -> None:
    """Create ``topic`` where a producer's first send would (``Admin.auto_create_queue_nums``).

    As Kafka's sink follows ``auto.create.topics.enable``, the sink follows the cluster's
    ``autoCreateTopicEnable``, which the cluster shows its clients by offering ``TBW102``.
    The topic is created before anything is sent, not by the first send as a producer does,
    so the exactly-once ``begin`` record can name the queue's offset before that send.
    """
    with SyncAdmin(options.namesrv_addr, **options.security.client_options()) as admin:
        counts = admin.auto_create_queue_nums()
        if not counts:
            raise ConfigError(
                f"unknown topic {topic!r}: the NameServer {options.namesrv_addr} has no route "
                "for it, and the cluster does not create topics on first send "
                "(autoCreateTopicEnable=false); create it first (ledgermq admin topic-create)"
            )
        for count in sorted(set(counts.values())):
            groups = sorted(g for g, n in counts.items() if n == count)
            admin.create_topic(topic, count, broker_names=groups)
        admin.wait_for_route(topic, counts, timeout_s=options.request_timeout_ms / 1000)
    logger.info("created topic %s on first write (%s)", topic, counts)


# ---------------------------------------------------------------------- the state log
def _state_queue(clients: _Clients, sink_id: str) -> MessageQueue:
    """The state log's queue, the topic created on first use (on the first broker group)."""
    topic = state_topic(sink_id)
    try:
        return clients.topic_queues(topic, auto_create=False)[0]
    except ConfigError:
        clients.queues.pop(topic, None)
    options = clients.options
    with SyncAdmin(options.namesrv_addr, **options.security.client_options()) as admin:
        groups = sorted(admin.cluster_info().broker_addr_table)
        admin.create_topic(topic, 1, broker_names=groups[:1])
        admin.wait_for_route(topic, groups[:1], timeout_s=15.0)
    return clients.topic_queues(topic, auto_create=False)[0]


def _records(messages: Iterable[MessageExt]) -> list[tuple[str, dict[str, int | str]]]:
    out = []
    for m in messages:
        try:
            out.append((m.tags or "", json.loads(m.body)))
        except ValueError:
            logger.warning("state log record at %d is not JSON; ignored", m.queue_offset)
    return out


def _pull_all(consumer: SyncPullConsumer, mq: MessageQueue, start: int, end: int) -> list[
        MessageExt]:  # fmt: skip
    messages: list[MessageExt] = []
    offset = start
    while offset < end:
        result = consumer.pull(mq, offset, min(1024, end - offset))
        if result.status is PullStatus.FOUND and result.messages:
            messages.extend(m for m in result.messages if m.queue_offset < end)
        if result.next_begin_offset <= offset:
            if result.status is PullStatus.OFFSET_ILLEGAL and offset < result.min_offset:
                offset = result.min_offset
                continue
            raise LedgerMQError(
                f"{mq}: cannot read offsets {offset}..{end} ({result.status.value})"
            )
        offset = result.next_begin_offset
    return messages


def _tail(clients: _Clients, mq: MessageQueue) -> tuple[int, list[dict[str, int | str]]]:
    """``(last committed batch or -1, begin records written after that commit)``.

    Reads the state log backwards in chunks until its last ``commit`` record: a batch's
    tasks start only after the previous batch was committed, so every ``begin`` record of
    an uncommitted batch follows the last ``commit`` record.
    """
    consumer = clients.consumer
    end = consumer.max_offset(mq)
    low = consumer.min_offset(mq)
    begins: list[dict[str, int | str]] = []
    while end > low:
        start = max(low, end - _SCAN_CHUNK)
        records = _records(_pull_all(consumer, mq, start, end))
        for tag, body in reversed(records):
            if tag == "commit":
                return int(body["batch"]), begins
            if tag == "begin":
                begins.append(body)
        end = start
    return -1, begins


def _append(clients: _Clients, mq: MessageQueue, tag: str, body: Mapping[str, int | str]) -> None:
    result = clients.producer.send(
        mq.topic, json.dumps(body, sort_keys=True).encode(), tags=tag, queue=mq
    )
    if not result.ok:
        raise LedgerMQError(f"state log record not confirmed: {result.status.value}")


# ---------------------------------------------------------------------- writing
def _row_ids(rows: Iterable[OutRow]) -> list[str]:
    """Each row's identity: a hash of its content and its occurrence among equal rows.

    Independent of row order, so a replayed partition (same rows, maybe in another order)
    gives every row the id it had before.
    """
    seen: dict[str, int] = {}
    ids = []
    for topic, body, keys, tags, props in rows:
        h = hashlib.blake2b(digest_size=12)
        for part in (topic, keys or "", tags or ""):
            h.update(part.encode())
            h.update(b"\0")
        for k, v in sorted((props or {}).items()):
            h.update(f"{k}\0{v}\0".encode())
        h.update(body)
        digest = h.hexdigest()
        n = seen.get(digest, 0)
        seen[digest] = n + 1
        ids.append(f"{digest}.{n}")
    return ids


def _written_before(
    clients: _Clients, begins: list[dict[str, int | str]], sink_id: str, batch: int, part: int
) -> set[str]:
    """Row ids that earlier attempts of ``(batch, part)`` already stored."""
    starts: dict[MessageQueue, int] = {}
    for b in begins:
        if int(b["batch"]) != batch or int(b["part"]) != part:
            continue
        mq = MessageQueue(str(b["topic"]), str(b["broker"]), int(b["queue"]))
        starts[mq] = min(int(b["start"]), starts.get(mq, 1 << 62))
    done: set[str] = set()
    batch_text, part_text = str(batch), str(part)
    for mq, start in starts.items():
        end = clients.consumer.max_offset(mq)
        for m in _pull_all(clients.consumer, mq, start, end):
            p = m.properties
            if (
                p.get(PROP_SINK) == sink_id
                and p.get(PROP_BATCH) == batch_text
                and p.get(PROP_PART) == part_text
            ):
                done.add(p.get(PROP_ROW, ""))
    if done:
        logger.warning(
            "sink %s batch %d partition %d: %d rows were stored by an earlier attempt; "
            "not sending them again",
            sink_id,
            batch,
            part,
            len(done),
        )
    return done


def write_partition(
    options: SinkOptions,
    rows: list[OutRow],
    *,
    sink_id: str | None,
    batch: int,
    part: int,
    attempt: int,
) -> tuple[int, int]:
    """Send ``rows`` (one task's partition); ``(sent, skipped)``.

    With a ``sink_id`` (exactly-once): nothing is sent if the state log says ``batch`` is
    committed, and rows an earlier attempt of the same partition stored are skipped. Each
    topic's rows go to one queue (chosen by the partition number) in batches.
    """
    clients = _Clients.open(options)
    try:
        done: set[str] = set()
        state: MessageQueue | None = None
        if sink_id is not None:
            state = _state_queue(clients, sink_id)
            committed, begins = _tail(clients, state)
            if committed >= batch:
                logger.warning("sink %s batch %d is committed already; skipped", sink_id, batch)
                return 0, len(rows)
            done = _written_before(clients, begins, sink_id, batch, part)
        ids = _row_ids(rows) if sink_id is not None else [""] * len(rows)
        pending: dict[str, list[Message]] = {}
        skipped = 0
        for row, row_id in zip(rows, ids, strict=True):
            if row_id in done:
                skipped += 1
                continue
            topic, body, keys, tags, props = row
            properties = {k: v for k, v in (props or {}).items() if k not in _RESERVED}
            if sink_id is not None:
                properties.update(
                    {
                        PROP_SINK: sink_id,
                        PROP_BATCH: str(batch),
                        PROP_PART: str(part),
                        PROP_ROW: row_id,
                    }
                )
            pending.setdefault(topic, []).append(Message(body, tags, keys, properties))
        sent = 0
        for topic in sorted(pending):
            queues = clients.topic_queues(topic)
            mq = queues[part % len(queues)]
            if state is not None:
                begin: dict[str, int | str] = {
                    "batch": batch,
                    "part": part,
                    "attempt": attempt,
                    "topic": topic,
                    "broker": mq.broker_name,
                    "queue": mq.queue_id,
                    "start": clients.consumer.max_offset(mq),
                }
                _append(clients, state, "begin", begin)
            sent += _send_all(clients, mq, pending[topic], options.send_batch_size)
        return sent, skipped
    finally:
        clients.close()


def _send_all(clients: _Clients, mq: MessageQueue, messages: list[Message], per_batch: int) -> int:
    chunk: list[Message] = []
    size = 0
    for message in messages:
        if chunk and (len(chunk) >= per_batch or size + len(message.body) > _BATCH_BYTES):
            _send_chunk(clients, mq, chunk)
            chunk, size = [], 0
        chunk.append(message)
        size += len(message.body)
    if chunk:
        _send_chunk(clients, mq, chunk)
    return len(messages)


def _send_chunk(clients: _Clients, mq: MessageQueue, chunk: list[Message]) -> None:
    result = clients.producer.send_batch(mq.topic, chunk, queue=mq)
    if not result.ok:
        raise LedgerMQError(f"batch of {len(chunk)} to {mq} not confirmed: {result.status.value}")


def commit_batch(options: SinkOptions, sink_id: str, batch: int) -> bool:
    """Record ``batch`` as committed (once); False if it was already."""
    clients = _Clients.open(options)
    try:
        state = _state_queue(clients, sink_id)
        committed, _ = _tail(clients, state)
        if committed >= batch:
            return False
        _append(clients, state, "commit", {"batch": batch})
        return True
    finally:
        clients.close()
