"""The connector's talks with the cluster, through the blocking clients (no pyspark here).

Driver side: which queues a source reads and where they start and end. Executor side: reading
one queue range completely into Arrow rows (``read_range``), retrying through a master failover.
"""

from __future__ import annotations

import atexit
import logging
import threading
from typing import TYPE_CHECKING, Final

import pyarrow as pa
import pyarrow.compute as pc

from ledgermq.client import (
    MessageQueue,
    PullStatus,
    RecordsPullResult,
    SyncAdmin,
    SyncPullConsumer,
)
from ledgermq.clock import SystemClock
from ledgermq.errors import ConfigError, LedgerMQError, TopicNotFoundError
from ledgermq.spark.arrow_rows import ARROW_SCHEMA, rows_of_records
from ledgermq.spark.planning import (
    EARLIEST,
    LATEST,
    ClientSecurity,
    OffsetSpec,
    QueueKey,
    SourceOptions,
)
from ledgermq.wire import parse_subscription

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from concurrent.futures import Future

__all__ = ["DataLossError", "Resolver", "read_range", "shared_consumer"]

logger = logging.getLogger("ledgermq.spark")

_CLOCK: Final = SystemClock()
_OFFSET_COLUMN: Final = ARROW_SCHEMA.get_field_index("queueOffset")


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
        security = options.security.client_options()
        self.consumer = SyncPullConsumer(
            options.consumer_group,
            options.namesrv_addr,
            request_timeout_s=min(timeout_s, 5.0),
            **security,
        )
        try:
            self.consumer.start()
            self.admin = SyncAdmin(options.namesrv_addr, **security)
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
_PULLS_AHEAD: Final = 2
"""Pulls of a queue range in flight while the reader turns the last one into rows: enough to
keep a broker busy while the reader works, few enough that a mispredicted one wastes little."""

_consumers: dict[tuple[str, str, ClientSecurity], SyncPullConsumer] = {}
_consumers_lock = threading.Lock()


def shared_consumer(
    namesrv_addr: str, group: str, security: ClientSecurity | None = None
) -> SyncPullConsumer:
    """One pull consumer per NameServer and group in this process, kept between tasks.

    Spark reuses its Python workers across tasks (``spark.python.worker.reuse``), so starting
    a client (loop thread, route lookups) per partition would be paid on every micro-batch;
    closed when the worker exits.
    """
    security = security or ClientSecurity()
    key = (namesrv_addr, group, security)
    with _consumers_lock:
        consumer = _consumers.get(key)
        if consumer is None:
            consumer = SyncPullConsumer(
                group, namesrv_addr, request_timeout_s=5.0, **security.client_options()
            )
            consumer.start()
            if not _consumers:
                atexit.register(_close_consumers)
            _consumers[key] = consumer
        return consumer


def _close_consumers() -> None:
    with _consumers_lock:
        consumers = list(_consumers.values())
        _consumers.clear()
    for consumer in consumers:
        try:
            consumer.close()
        except Exception:  # the process is exiting; nothing is lost here
            logger.debug("closing a pull consumer at exit failed", exc_info=True)


class _Pulls:
    """The pulls of one queue range, with up to ``_PULLS_AHEAD`` more in flight at the offsets
    the next ones will most likely start at (the last pull's step on from its end).

    The pulls run on the consumer's own event loop (``submit_pull_records``). A pull ahead that
    is not at the offset asked for next (the step changed) is cancelled; a failed one fails the
    ``pull`` that takes it, and that caller retries.
    """

    def __init__(
        self, consumer: SyncPullConsumer, mq: MessageQueue, end: int, batch: int, sub: str
    ) -> None:
        self._consumer = consumer
        self._mq = mq
        self._end = end
        self._batch = batch
        self._sub = sub
        self._ahead: dict[int, Future[RecordsPullResult]] = {}

    def _start(self, offset: int) -> Future[RecordsPullResult]:
        count = min(self._batch, self._end - offset)
        return self._consumer.submit_pull_records(self._mq, offset, count, self._sub)

    def pull(self, offset: int) -> RecordsPullResult:
        """The pull at ``offset``: from the pulls ahead if one is there, else started now."""
        pulled = self._ahead.pop(offset, None) or self._start(offset)
        for stale in [o for o in self._ahead if o < offset]:
            self._ahead.pop(stale).cancel()
        result = pulled.result()
        step = result.next_begin_offset - offset
        if result.status is PullStatus.FOUND and step > 0:
            for k in range(_PULLS_AHEAD):
                at = result.next_begin_offset + k * step
                if at >= self._end:
                    break
                if at not in self._ahead:
                    self._ahead[at] = self._start(at)
        return result

    def close(self) -> None:
        for pending in self._ahead.values():
            pending.cancel()
        self._ahead.clear()


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
    security: ClientSecurity | None = None,
) -> Iterator[pa.RecordBatch]:
    """Every stored message of queue ``key`` at offsets ``[start, end)`` (matching
    ``sub_expression``), as Arrow record batches of one pull each (``arrow_rows``).

    The range was below the queue's max offset when it was planned, so its messages are
    committed: a pull that finds nothing (a lagging replica, a failover in progress) is
    retried until ``pull_timeout_ms`` passes without progress. Offsets below the queue's min
    offset are data loss (``DataLossError``, or skipped with a warning).
    """
    topic, broker, queue_id = key
    mq = MessageQueue(topic, broker, queue_id)
    tags, _ = parse_subscription(sub_expression)
    pulls = _Pulls(shared_consumer(namesrv_addr, group, security), mq, end, pull_batch_size,
                   sub_expression)  # fmt: skip
    try:
        offset = start
        deadline = _CLOCK.monotonic_ms() + pull_timeout_ms
        backoff = 0.05
        while offset < end:
            try:
                result = pulls.pull(offset)
            except LedgerMQError as exc:
                if _CLOCK.monotonic_ms() > deadline:
                    raise
                logger.info("pull of %s at %d failed (%s); retrying", mq, offset, exc)
                _pause(backoff)
                backoff = min(backoff * 2, 1.0)
                continue
            rows, next_offset = _advance(mq, result, offset, end, tags, fail_on_data_loss)
            if rows is not None:
                yield rows
            progressed, offset = next_offset > offset, next_offset
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
    finally:
        pulls.close()


def _advance(
    mq: MessageQueue,
    result: RecordsPullResult,
    offset: int,
    end: int,
    tags: frozenset[str] | None,
    fail_on_data_loss: bool,
) -> tuple[pa.RecordBatch | None, int]:
    """The rows one pull at ``offset`` found (None: none) and the offset to pull next."""
    status = result.status
    if status is PullStatus.FOUND and result.records:
        rows = rows_of_records(mq.broker_name, result.records, tags)
        if rows.num_rows == 0:  # every message filtered out by its tag string
            return None, max(offset, min(end, result.next_begin_offset))
        offsets = rows.column(_OFFSET_COLUMN)
        first = offsets[0].as_py()
        if tags is None and first > offset:
            _data_loss(mq, offset, first, fail_on_data_loss)
        if offsets[-1].as_py() >= end:
            rows = rows.slice(0, pc.sum(pc.less(offsets, end)).as_py() or 0)
        return rows, max(offset + 1, min(end, result.next_begin_offset))
    if status in (PullStatus.FOUND, PullStatus.NO_MATCHED_MSG):
        return None, max(offset, min(end, result.next_begin_offset))
    if status is PullStatus.OFFSET_ILLEGAL and 0 <= offset < result.min_offset:
        _data_loss(mq, offset, min(end, result.min_offset), fail_on_data_loss)
        return None, min(end, result.min_offset)
    return None, offset  # NO_NEW_MSG (a lagging replica), or past the max: try again


def _data_loss(mq: MessageQueue, begin: int, end: int, fail: bool) -> None:
    text = (
        f"{mq}: messages at offsets {begin}..{end - 1} are gone (removed by retention before "
        "this query read them)"
    )
    if fail:
        raise DataLossError(f"{text}; set the option failOnDataLoss to false to skip lost messages")
    logger.warning("%s; skipped (failOnDataLoss=false)", text)
