"""The connector's talks with the cluster, through the blocking clients (no pyspark here).

Driver side: which queues a source reads and where they start and end. Executor side: reading
one queue range completely (``read_range``), retrying through a master failover.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Final

from ledgermq.client import MessageQueue, PullResult, PullStatus, SyncAdmin, SyncPullConsumer
from ledgermq.clock import SystemClock
from ledgermq.errors import ConfigError, LedgerMQError, TopicNotFoundError
from ledgermq.spark.planning import EARLIEST, LATEST, OffsetSpec, QueueKey, SourceOptions

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from ledgermq.wire import MessageExt

__all__ = ["DataLossError", "Resolver", "read_range"]

logger = logging.getLogger("ledgermq.spark")

_CLOCK: Final = SystemClock()
_HIDDEN_PROPERTIES: Final = frozenset({"UNIQ_KEY", "KEYS", "TAGS", "WAIT"})
"""Properties shown as their own columns (msgId, keys, tags) or of no use to a reader."""


class DataLossError(LedgerMQError):
    """Messages a query should have read are gone (retention removed them before they were
    read). Set ``failOnDataLoss`` to false to skip them with a warning."""


def _pause(seconds: float) -> None:
    threading.Event().wait(seconds)


def key_of(mq: MessageQueue) -> QueueKey:
    return (mq.topic, mq.broker_name, mq.queue_id)


class Resolver:
    """Driver-side lookups of one source: topics, queues and their offsets.

    Owns a pull consumer and an admin client (each with its own loop thread); ``close()``
    them. Errors of single queues during a failover are tolerated where a caller can do
    without the answer (``heads``).
    """

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        timeout_s = options.pull_timeout_ms / 1000
        self.consumer = SyncPullConsumer(
            options.consumer_group, options.namesrv_addr, request_timeout_s=min(timeout_s, 5.0)
        )
        try:
            self.consumer.start()
            self.admin = SyncAdmin(options.namesrv_addr)
        except BaseException:
            self.consumer.close()
            raise

    def close(self) -> None:
        try:
            self.consumer.close()
        finally:
            self.admin.close()

    def topics(self) -> list[str]:
        if self.options.topic_pattern is None:
            return list(self.options.topics)
        return sorted(t for t in self.admin.topic_list() if self.options.matches(t))

    def queues(self, *, strict: bool) -> list[MessageQueue]:
        """The readable queues of the source's topics; ``strict``: an unknown topic is an error."""
        found: list[MessageQueue] = []
        for topic in self.topics():
            try:
                found.extend(self.consumer.fetch_queues(topic))
            except TopicNotFoundError:
                if strict:
                    raise ConfigError(
                        f"unknown topic {topic!r}: the NameServer "
                        f"{self.options.namesrv_addr} has no route for it"
                    ) from None
            except LedgerMQError as exc:
                if strict:
                    raise ConfigError(f"cannot look up topic {topic!r}: {exc}") from exc
                logger.warning("queues of %s not refreshed: %s", topic, exc)
        return found

    def resolve(self, spec: OffsetSpec, queues: list[MessageQueue], *, ending: bool) -> dict[
            QueueKey, int]:  # fmt: skip
        """Offsets of ``queues`` for ``spec``; queues a JSON does not name take the default
        (the min offset for a start, the max offset for an end)."""
        known = {key_of(mq): mq for mq in queues}
        if spec.offsets is not None:
            unknown = sorted(set(spec.offsets) - set(known))
            if unknown:
                names = ", ".join(f"{t}/{b}/{q}" for t, b, q in unknown)
                raise ConfigError(f"offsets name queues that do not exist: {names}")
        out: dict[QueueKey, int] = {}
        for key, mq in known.items():
            wanted: int
            if spec.kind == "earliest":
                wanted = EARLIEST
            elif spec.kind == "latest":
                wanted = LATEST
            elif spec.kind == "timestamp":
                out[key] = self.consumer.search_offset(mq, spec.timestamp_ms)
                continue
            else:
                assert spec.offsets is not None
                wanted = spec.offsets.get(key, LATEST if ending else EARLIEST)
            if wanted == EARLIEST:
                out[key] = self.consumer.min_offset(mq)
            elif wanted == LATEST:
                out[key] = self.consumer.max_offset(mq)
            else:
                out[key] = wanted
        return out

    def heads(self, previous: Mapping[QueueKey, int]) -> dict[QueueKey, int]:
        """The max offset of every queue now routable; a queue whose broker does not answer
        (failover in progress) keeps ``previous``."""
        heads: dict[QueueKey, int] = {}
        for mq in self.queues(strict=False):
            key = key_of(mq)
            try:
                heads[key] = self.consumer.max_offset(mq)
            except LedgerMQError as exc:
                logger.warning("offsets of %s not refreshed: %s", mq, exc)
                if key in previous:
                    heads[key] = previous[key]
        return heads


# ---------------------------------------------------------------------- executor side
class _Columns:
    """Column lists of the source schema, filled message by message."""

    __slots__ = (
        "body",
        "born",
        "broker",
        "keys",
        "msg_id",
        "offset",
        "properties",
        "queue_id",
        "reconsume",
        "store",
        "tags",
        "topic",
    )

    def __init__(self) -> None:
        self.topic: list[str] = []
        self.broker: list[str] = []
        self.queue_id: list[int] = []
        self.offset: list[int] = []
        self.msg_id: list[str] = []
        self.keys: list[str | None] = []
        self.tags: list[str | None] = []
        self.body: list[bytes] = []
        self.properties: list[list[tuple[str, str]]] = []
        self.born: list[int] = []
        self.store: list[int] = []
        self.reconsume: list[int] = []

    def __len__(self) -> int:
        return len(self.offset)

    def add(self, broker: str, messages: list[MessageExt]) -> None:
        hidden = _HIDDEN_PROPERTIES
        for m in messages:
            props = m.properties
            self.topic.append(m.topic)
            self.broker.append(broker)
            self.queue_id.append(m.queue_id)
            self.offset.append(m.queue_offset)
            self.msg_id.append(m.msg_id)
            self.keys.append(props.get("KEYS"))
            self.tags.append(props.get("TAGS"))
            self.body.append(m.body)
            self.properties.append([(k, v) for k, v in props.items() if k not in hidden])
            self.born.append(m.born_timestamp * 1000)
            self.store.append(m.store_timestamp * 1000)
            self.reconsume.append(m.reconsume_times)

    def as_lists(self) -> list[list[Any]]:
        """In schema order: topic, brokerName, queueId, queueOffset, msgId, keys, tags, body,
        properties, bornTimestamp (us), storeTimestamp (us), reconsumeTimes."""
        return [
            self.topic,
            self.broker,
            self.queue_id,
            self.offset,
            self.msg_id,
            self.keys,
            self.tags,
            self.body,
            self.properties,
            self.born,
            self.store,
            self.reconsume,
        ]


def read_range(
    namesrv_addr: str,
    group: str,
    key: QueueKey,
    start: int,
    end: int,
    *,
    pull_batch_size: int = 1024,
    pull_timeout_ms: int = 30_000,
    fail_on_data_loss: bool = True,
    sub_expression: str = "*",
    rows_per_batch: int = 16_384,
) -> Iterator[list[list[Any]]]:
    """Every stored message of queue ``key`` at offsets ``[start, end)``, as column lists of
    up to about ``rows_per_batch`` rows (see ``_Columns.as_lists``).

    The range was below the queue's max offset when it was planned, so its messages are
    committed: a pull that finds nothing (a lagging replica, a failover in progress) is
    retried until ``pull_timeout_ms`` passes without progress. Offsets below the queue's min
    offset are data loss (``DataLossError``, or skipped with a warning).
    """
    topic, broker, queue_id = key
    mq = MessageQueue(topic, broker, queue_id)
    consumer = SyncPullConsumer(group, namesrv_addr, request_timeout_s=5.0)
    check_gaps = sub_expression.strip() in ("", "*")
    prefetch = ThreadPoolExecutor(1, thread_name_prefix="ledgermq-prefetch")
    ahead_offset = -1
    try:
        consumer.start()
        offset = start
        columns = _Columns()
        deadline = _CLOCK.monotonic_ms() + pull_timeout_ms
        backoff = 0.05
        ahead: Future[PullResult] | None = None
        while offset < end:
            try:
                if ahead is not None and ahead_offset == offset:
                    result = ahead.result()
                else:
                    result = consumer.pull(
                        mq, offset, min(pull_batch_size, end - offset), sub_expression
                    )
            except LedgerMQError as exc:
                ahead = None
                if _CLOCK.monotonic_ms() > deadline:
                    raise
                logger.info("pull of %s at %d failed (%s); retrying", mq, offset, exc)
                _pause(backoff)
                backoff = min(backoff * 2, 1.0)
                continue
            # Pull the next chunk while this one is turned into columns.
            ahead, ahead_offset = None, result.next_begin_offset
            if result.messages and offset < ahead_offset < end:
                ahead = prefetch.submit(
                    consumer.pull,
                    mq,
                    ahead_offset,
                    min(pull_batch_size, end - ahead_offset),
                    sub_expression,
                )
            next_offset = _advance(mq, result, offset, end, columns, check_gaps, fail_on_data_loss)
            progressed, offset = next_offset > offset, next_offset
            if len(columns) >= rows_per_batch:
                yield columns.as_lists()
                columns = _Columns()
            if progressed:
                deadline = _CLOCK.monotonic_ms() + pull_timeout_ms
                backoff = 0.05
                continue
            if _CLOCK.monotonic_ms() > deadline:
                raise LedgerMQError(
                    f"{mq}: offsets {offset}..{end} were committed when the batch was planned "
                    f"but no replica served them for {pull_timeout_ms} ms (last pull: "
                    f"{result.status.value}, min {result.min_offset}, max {result.max_offset})"
                )
            _pause(backoff)
            backoff = min(backoff * 2, 1.0)
        if len(columns):
            yield columns.as_lists()
    finally:
        prefetch.shutdown(wait=True, cancel_futures=True)
        consumer.close()


def _advance(
    mq: MessageQueue,
    result: PullResult,
    offset: int,
    end: int,
    columns: _Columns,
    check_gaps: bool,
    fail_on_data_loss: bool,
) -> int:
    """Take what one pull at ``offset`` found into ``columns``; the offset to pull next."""
    status = result.status
    if status is PullStatus.FOUND and result.messages:
        messages = result.messages
        first = messages[0].queue_offset
        if check_gaps and first > offset:
            _data_loss(mq, offset, first, fail_on_data_loss)
        if messages[-1].queue_offset >= end:
            messages = [m for m in messages if m.queue_offset < end]
        columns.add(mq.broker_name, messages)
        return max(offset + 1, min(end, result.next_begin_offset))
    if status in (PullStatus.FOUND, PullStatus.NO_MATCHED_MSG):
        return max(offset, min(end, result.next_begin_offset))
    if status is PullStatus.OFFSET_ILLEGAL and 0 <= offset < result.min_offset:
        _data_loss(mq, offset, min(end, result.min_offset), fail_on_data_loss)
        return min(end, result.min_offset)
    return offset  # NO_NEW_MSG (a lagging replica), or past the max: try again


def _data_loss(mq: MessageQueue, begin: int, end: int, fail: bool) -> None:
    text = (
        f"{mq}: messages at offsets {begin}..{end - 1} are gone (removed by retention before "
        "this query read them)"
    )
    if fail:
        raise DataLossError(f"{text}; set the option failOnDataLoss to false to skip lost messages")
    logger.warning("%s; skipped (failOnDataLoss=false)", text)
