"""The ``ledgermq`` PySpark data source: batch and streaming reads (this module imports
pyspark; ``ledgermq.spark`` imports it only when ``LedgerMQDataSource`` is asked for).

Who runs what (Spark's Python Data Source API, 4.2+): ``reader()`` / ``streamReader()`` and
the offset calls run in Python processes on the driver; ``read(partition)`` runs in executor
Python workers on a copy of the reader pickled at planning time. So a partition carries
everything a read needs (NameServer, queue, offsets, options), and the readers keep their
clients out of the pickle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from ledgermq.errors import ConfigError
from ledgermq.spark._io import Resolver, read_range
from ledgermq.spark.arrow_rows import ARROW_SCHEMA
from ledgermq.spark.planning import (
    OffsetSpec,
    QueueKey,
    QueueRange,
    SourceOptions,
    cap_offsets,
    flatten,
    nest,
    pack_ranges,
    parse_sink_options,
    parse_source_options,
    plan_ranges,
    split_ranges,
)
from ledgermq.spark.save_modes import OVERWRITE_REFUSED, install

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    import pyarrow as pa
    from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter
    from pyspark.sql.types import StructType

__all__ = ["SCHEMA", "LedgerMQDataSource", "LedgerMQPartition"]

SCHEMA: Final = (
    "topic STRING, brokerName STRING, queueId INT, queueOffset BIGINT, msgId STRING, "
    "keys STRING, tags STRING, body BINARY, properties MAP<STRING, STRING>, "
    "bornTimestamp TIMESTAMP, storeTimestamp TIMESTAMP, reconsumeTimes INT"
)


class LedgerMQDataSource(DataSource):
    """``spark.read.format("ledgermq")`` and friends; see ``ledgermq.spark`` for the options."""

    @classmethod
    def name(cls) -> str:
        return "ledgermq"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        _check_schema(schema)
        return LedgerMQBatchReader(parse_source_options(self.options), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        _check_schema(schema)
        return LedgerMQStreamReader(parse_source_options(self.options), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """``df.write``: appends. ``overwrite`` (``mode("overwrite")``) is refused: a topic
        cannot be replaced (``ledgermq.spark.save_modes``)."""
        if overwrite:
            raise ConfigError(OVERWRITE_REFUSED)
        from ledgermq.spark.sink import LedgerMQBatchWriter  # noqa: PLC0415

        return LedgerMQBatchWriter(parse_sink_options(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        """``writeStream``; ``overwrite`` (output mode ``complete``) appends each micro-batch's
        whole result, as Spark's Kafka sink does."""
        from ledgermq.spark.sink import LedgerMQStreamWriter  # noqa: PLC0415

        return LedgerMQStreamWriter(parse_sink_options(self.options), schema)


install()  # df.write.format("ledgermq").save() without a mode appends (save_modes)

_STREAM_ROWS_PER_TASK: Final = 20_000
"""Queue ranges of a micro-batch smaller than this are read together by one task (unless
``minPartitions`` asks for more tasks): a few hundred messages over eight queues took eight
task launches (~0.55 s of a ~0.7 s micro-batch on two cores) to read."""


@dataclass
class LedgerMQPartition(InputPartition):
    """Queue ranges ``[start, end)`` read one after another by one task, with what ``read``
    needs to fetch them."""

    ranges: tuple[QueueRange, ...]


def _partitions(
    options: SourceOptions, start: dict[QueueKey, int], end: dict[QueueKey, int], *, pack: bool
) -> list[LedgerMQPartition]:
    ranges = split_ranges(plan_ranges(start, end), options.min_partitions)
    if not pack or options.min_partitions:
        return [LedgerMQPartition((r,)) for r in ranges]
    return [LedgerMQPartition(tuple(g)) for g in pack_ranges(ranges, _STREAM_ROWS_PER_TASK)]


def _check_schema(schema: StructType) -> None:
    """The rows are built as ``ARROW_SCHEMA``; Spark refuses batches of any other schema, so a
    user-given one (``.schema(...)``) is refused here, where the message can say why."""
    if not to_arrow_schema(schema, timezone="UTC").equals(ARROW_SCHEMA):
        raise ConfigError(
            f"the ledgermq source's schema is fixed ({SCHEMA}); select or cast columns "
            "instead of passing a schema"
        )


def _read(options: SourceOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    if not isinstance(partition, LedgerMQPartition):
        # Nothing to read: when ``partitions()`` plans none, Spark still runs one task with
        # ``InputPartition(None)`` (plan_data_source_read.py).
        return
    for r in partition.ranges:
        yield from read_range(
            options.namesrv_addr,
            options.consumer_group,
            (r.topic, r.broker_name, r.queue_id),
            r.start,
            r.end,
            pull_batch_size=options.pull_batch_size,
            pull_timeout_ms=options.pull_timeout_ms,
            fail_on_data_loss=options.fail_on_data_loss,
            security=options.security,
            sub_expression=options.sub_expression,
        )


class LedgerMQBatchReader(DataSourceReader):
    """A batch read: offsets resolved once, here, when the query is planned."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        resolver = Resolver(options)
        try:
            queues = resolver.queues(strict=True)
            start = resolver.resolve(options.starting or OffsetSpec("earliest"), queues,
                                     ending=False)  # fmt: skip
            end = resolver.resolve(options.ending, queues, ending=True)
        finally:
            resolver.close()
        self._partitions = _partitions(options, start, end, pack=False)

    def partitions(self) -> Sequence[InputPartition]:
        return list(self._partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)


class LedgerMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A streaming read: offsets per ``(topic, brokerName, queueId)`` in the checkpoint.

    ``latestOffset`` looks the queues up again every micro-batch, so new queues, topics (of
    ``topicPattern``) and broker groups are picked up; a new queue is read from offset 0. A
    queue whose group does not answer (a failover in progress) stays where it was for that
    batch. Only committed messages are below a queue's max offset, so only they are read.
    """

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self._resolver: Resolver | None = None
        self._initial: dict[str, Any] | None = None
        self._target: dict[QueueKey, int] | None = None
        self._latest: dict[QueueKey, int] | None = None

    def __getstate__(self) -> dict[str, Any]:  # the clients stay in the driver process
        state = dict(self.__dict__)
        state["_resolver"] = None
        return state

    def _lookups(self) -> Resolver:
        if self._resolver is None:
            self._resolver = Resolver(self.options)
        return self._resolver

    def initialOffset(self) -> dict[str, Any]:
        # Called twice on a fresh query: resolve "latest" / a timestamp once.
        if self._initial is None:
            resolver = self._lookups()
            queues = resolver.queues(strict=True)
            spec = self.options.starting or OffsetSpec("latest")
            self._initial = dict(nest(resolver.resolve(spec, queues, ending=False)))
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_messages_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def _heads(self, start: dict[QueueKey, int]) -> dict[QueueKey, int]:
        heads = self._lookups().heads(start)
        merged = dict(start)
        for key, head in heads.items():
            merged[key] = max(head, start.get(key, 0))
        return merged

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = flatten(start)
        latest = self._heads(begin)
        self._latest = latest
        if self._target is not None:  # Trigger.AvailableNow: never past the target
            latest = {k: min(v, self._target.get(k, begin.get(k, 0))) if k in self._target
                      else begin.get(k, 0) for k, v in latest.items()}  # fmt: skip
            latest = {k: max(v, begin.get(k, 0)) for k, v in latest.items()}
        if isinstance(limit, ReadMaxRows):
            latest = cap_offsets(begin, latest, limit.max_rows)
        return dict(nest({**begin, **latest}))

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return None if self._latest is None else dict(nest(self._latest))

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._heads({})

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        return list(_partitions(self.options, flatten(start), flatten(end), pack=True))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: the checkpoint is the truth (Spark calls this lazily)."""

    def stop(self) -> None:
        if self._resolver is not None:
            self._resolver.close()
            self._resolver = None
