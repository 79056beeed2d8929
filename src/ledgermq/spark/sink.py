"""The ``ledgermq`` sink: ``df.write`` and ``writeStream`` into LedgerMQ topics.

Input columns: ``body`` (binary or string, required), ``topic`` (string; the ``topic``
option overrides it, one of them is required), and optional ``keys`` (string, keys separated
by spaces), ``tags`` (string) and ``properties`` (map<string,string>). Other columns are
ignored.

Exactly-once streaming sink (``exactlyOnce``, default true)
-----------------------------------------------------------
Spark's streaming engine makes a replayable source exactly-once up to the sink: a micro-batch
is planned (its offsets written to ``offsets/N``), its tasks run ``write()``, the driver runs
the sink's ``commit(messages, N)`` and then writes ``commits/N``. After a crash, a batch with
no ``commits/N`` is run again, with the same offsets, and a task that fails is re-run. A sink
that just sends (Spark's Kafka sink, rocketmq-spark) then stores the replayed rows twice.

This sink keeps a state log in the target cluster, the topic ``%SPARK_SINK%<sinkId>`` (one
queue; ``sinkId`` defaults to the streaming query's id, which is stable across restarts from
the same checkpoint). Every message written carries the properties ``__spark_query`` (the sink
id), ``__spark_batch``, ``__spark_part`` (the task's partition) and ``__spark_row`` (the row's
identity: a hash of its topic, body, keys, tags and properties plus its occurrence number among
equal rows of the partition, so it does not depend on row order).

- **A task** (``write()``) reads the tail of the state log first. If the batch is committed
  (a crash after the sink's commit and before ``commits/N``), it sends nothing. Otherwise it
  looks for ``begin`` records of earlier attempts of the same (batch, partition), scans the
  queues they name from the offsets they recorded, and skips every row whose identity is
  already stored there. Before its first send to a queue, it appends its own ``begin`` record
  (batch, partition, attempt, queue, the queue's max offset). All its rows for a topic go to
  one queue (chosen by the partition number), in batches.
- **The driver** (``commit(messages, N)``) appends a ``commit`` record for ``N`` unless one is
  already there.

So a replayed batch adds no message that an earlier attempt stored: a consumer sees every row
of every batch exactly once. What this relies on, precisely:

1. The query is deterministic per batch: a replay puts the same rows (as a multiset) into the
   same partition numbers, as with a replayable source (LedgerMQ, Kafka, files) and
   deterministic transformations. Rows that differ on a replay (``current_timestamp()``,
   ``rand()``) are new rows.
2. Two attempts of one task never run at the same time (no ``spark.speculation``, the
   default).
3. The state log topic is not deleted while the query may still replay a batch.
4. Visibility: a consumer may see part of a batch before the batch is committed (messages are
   visible when stored); a replay completes it without duplicates. Readers that need whole
   batches can group by ``__spark_batch``.

With ``exactlyOnce=false``, and for batch writes (``df.write``), the sink just sends:
at-least-once, as Spark's Kafka sink (a re-run task sends its rows again).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from ledgermq.errors import ConfigError
from ledgermq.spark._sink_io import OutRow, commit_batch, write_partition

if TYPE_CHECKING:
    from collections.abc import Iterator

    import pyarrow as pa
    from pyspark.sql.types import StructType

    from ledgermq.spark.planning import SinkOptions

__all__ = ["LedgerMQBatchWriter", "LedgerMQStreamWriter", "SinkCommit"]

_COLUMNS: Final = ("topic", "body", "keys", "tags", "properties")


@dataclass
class SinkCommit(WriterCommitMessage):
    """What one task did: ``sent`` messages, ``skipped`` rows (stored by an earlier attempt)."""

    sink_id: str | None
    batch_id: int
    partition: int
    sent: int
    skipped: int


def _check_schema(options: SinkOptions, schema: StructType) -> None:
    names = set(schema.fieldNames())
    if "body" not in names:
        raise ConfigError(f"the LedgerMQ sink needs a column body; the columns are {sorted(names)}")
    if options.topic is None and "topic" not in names:
        raise ConfigError("the LedgerMQ sink needs a column topic or the option topic")


def _rows(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> list[OutRow]:
    rows: list[OutRow] = []
    for batch in batches:
        names = batch.schema.names
        n = batch.num_rows
        cols: dict[str, list[Any]] = {
            c: batch.column(names.index(c)).to_pylist() if c in names else [None] * n
            for c in _COLUMNS
        }
        for topic, body, keys, tags, props in zip(*(cols[c] for c in _COLUMNS), strict=True):
            target = options.topic or topic
            if not target:
                raise ConfigError("a row has no topic (null topic column and no topic option)")
            if body is None:
                raise ConfigError(f"a row for topic {target!r} has a null body")
            raw = body.encode() if isinstance(body, str) else bytes(body)
            rows.append((target, raw, keys, tags, dict(props) if props else None))
    return rows


class LedgerMQBatchWriter(DataSourceArrowWriter):
    """``df.write.format("ledgermq")``: at-least-once (each task sends its rows)."""

    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        _check_schema(options, schema)
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:
        context = TaskContext.get()
        part = context.partitionId() if context else 0
        rows = _rows(self.options, iterator)
        sent, skipped = write_partition(
            self.options, rows, sink_id=None, batch=0, part=part, attempt=0
        )
        return SinkCommit(None, 0, part, sent, skipped)


class LedgerMQStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("ledgermq")``: exactly-once per batch id (module docstring)."""

    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        _check_schema(options, schema)
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:
        context = TaskContext.get()
        assert context is not None, "write() runs in a Spark task"
        batch = int(context.getLocalProperty("streaming.sql.batchId") or 0)
        sink_id = None
        if self.options.exactly_once:
            sink_id = self.options.sink_id or context.getLocalProperty("sql.streaming.queryId")
        part, attempt = context.partitionId(), context.attemptNumber()
        rows = _rows(self.options, iterator)
        sent, skipped = write_partition(
            self.options, rows, sink_id=sink_id, batch=batch, part=part, attempt=attempt
        )
        return SinkCommit(sink_id, batch, part, sent, skipped)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        ids = {m.sink_id for m in messages if isinstance(m, SinkCommit) and m.sink_id}
        sink_id = self.options.sink_id or (min(ids) if ids else None)
        if self.options.exactly_once and sink_id is not None:
            commit_batch(self.options, sink_id, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Nothing to undo: stored messages stay, and a replay will not send them again."""
