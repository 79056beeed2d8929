"""The source's rows as Arrow record batches, straight from a pull's records (pyarrow, no
pyspark).

Spark's Python data source takes ``pyarrow.RecordBatch`` es whose schema equals the declared
one exactly (``ARROW_SCHEMA``: ``int32`` for INT, ``string``, ``timestamp[us, UTC]``). The C
helper ``ledgermq.wire._record_columns`` turns a PULL response body into the column buffers
without a Python object per message; ``rows_of_messages`` is the reference it is tested
against (tests/spark/test_arrow_rows.py) and the path for what the helper leaves to it:
other record layouts, compressed bodies, records a subscription filters by tag string, and
machines where the extension was not compiled.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Final

import pyarrow as pa

from ledgermq.wire import decode_records, tags_match

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ledgermq.wire import MessageExt
    from ledgermq.wire._record_columns import RecordColumns

try:
    from ledgermq.wire._record_columns import record_columns as _record_columns
except ImportError:  # pragma: no cover - the extension is optional (no C compiler)
    _record_columns = None  # type: ignore[assignment]

__all__ = ["ARROW_SCHEMA", "HAVE_RECORD_COLUMNS", "rows_of_messages", "rows_of_records"]

HAVE_RECORD_COLUMNS: Final = _record_columns is not None
_use_c = HAVE_RECORD_COLUMNS and os.environ.get("LEDGERMQ_PURE_PYTHON") != "1"

_TIMESTAMP: Final = pa.timestamp("us", tz="UTC")
_PROPERTIES: Final = pa.map_(pa.string(), pa.string())
ARROW_SCHEMA: Final = pa.schema(
    [
        ("topic", pa.string()),
        ("brokerName", pa.string()),
        ("queueId", pa.int32()),
        ("queueOffset", pa.int64()),
        ("msgId", pa.string()),
        ("keys", pa.string()),
        ("tags", pa.string()),
        ("body", pa.binary()),
        ("properties", _PROPERTIES),
        ("bornTimestamp", _TIMESTAMP),
        ("storeTimestamp", _TIMESTAMP),
        ("reconsumeTimes", pa.int32()),
    ]
)
"""What Spark makes of the source's DDL schema (``to_arrow_schema``; a test checks they agree)."""

_HIDDEN_PROPERTIES: Final = frozenset({"UNIQ_KEY", "KEYS", "TAGS", "WAIT"})
"""Properties shown as their own columns (msgId, keys, tags) or of no use to a reader."""


def rows_of_records(
    broker_name: str, records: bytes, tags: frozenset[str] | None = None
) -> pa.RecordBatch:
    """The rows of the messages in ``records`` (a PULL response body), read from
    ``broker_name``; with ``tags``, only the messages carrying one of them (the broker filters
    by tag hash, and different tags can share a hash).

    Raises:
        MessageFormatError: the body is not a sequence of well-formed records.
    """
    if _use_c and tags is None:
        assert _record_columns is not None
        buffers = _record_columns(records)
        if buffers is not None:
            return _from_buffers(broker_name, buffers)
    messages = decode_records(records)
    if tags is not None:
        messages = [m for m in messages if tags_match(m.properties.get("TAGS"), tags)]
    return rows_of_messages(broker_name, messages)


def _string(n: int, offsets: bytes, data: bytes, validity: bytes | None = None) -> pa.Array:
    valid = None if validity is None else pa.py_buffer(validity)
    return pa.Array.from_buffers(pa.string(), n, [valid, pa.py_buffer(offsets), pa.py_buffer(data)])


def _fixed(kind: pa.DataType, n: int, values: bytes) -> pa.Array:
    return pa.Array.from_buffers(kind, n, [None, pa.py_buffer(values)])


def _from_buffers(broker_name: str, buffers: RecordColumns) -> pa.RecordBatch:
    (n, topic_off, topic, queue_id, queue_offset, msgid_off, msgid, keys_valid, keys_off, keys,
     tags_valid, tags_off, tags, body_off, body, prop_off, name_off, names, value_off, values,
     born, store, reconsume) = buffers  # fmt: skip
    entries = pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(prop_off)])
    m = len(name_off) // 4 - 1
    properties = pa.MapArray.from_arrays(
        entries, _string(m, name_off, names), _string(m, value_off, values), type=_PROPERTIES
    )
    columns = [
        _string(n, topic_off, topic),
        pa.repeat(pa.scalar(broker_name, pa.string()), n),
        _fixed(pa.int32(), n, queue_id),
        _fixed(pa.int64(), n, queue_offset),
        _string(n, msgid_off, msgid),
        _string(n, keys_off, keys, keys_valid),
        _string(n, tags_off, tags, tags_valid),
        pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(body_off), pa.py_buffer(body)]),
        properties,
        _fixed(_TIMESTAMP, n, born),
        _fixed(_TIMESTAMP, n, store),
        _fixed(pa.int32(), n, reconsume),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)


def rows_of_messages(broker_name: str, messages: Sequence[MessageExt]) -> pa.RecordBatch:
    """The rows of ``messages`` (decoded already), read from ``broker_name``."""
    hidden = _HIDDEN_PROPERTIES
    properties = [[(k, v) for k, v in m.properties.items() if k not in hidden] for m in messages]
    columns = [
        [m.topic for m in messages],
        [broker_name] * len(messages),
        [m.queue_id for m in messages],
        [m.queue_offset for m in messages],
        [m.msg_id for m in messages],
        [m.properties.get("KEYS") for m in messages],
        [m.properties.get("TAGS") for m in messages],
        [m.body for m in messages],
        properties,
        [m.born_timestamp * 1000 for m in messages],
        [m.store_timestamp * 1000 for m in messages],
        [m.reconsume_times for m in messages],
    ]
    arrays = [
        pa.array(values, type=field.type)
        for values, field in zip(columns, ARROW_SCHEMA, strict=True)
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)
