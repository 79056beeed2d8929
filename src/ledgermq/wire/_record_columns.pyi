"""Message records to Arrow column buffers (``_record_columns.c``); ``ledgermq.spark.arrow_rows``
holds the reference."""

from typing import TypeAlias

from _typeshed import ReadableBuffer

RecordColumns: TypeAlias = tuple[
    int,  # rows
    bytes,  # topic: int32 offsets
    bytes,  # topic: UTF-8 data
    bytes,  # queueId: int32
    bytes,  # queueOffset: int64
    bytes,  # msgId: int32 offsets
    bytes,  # msgId: data
    bytes,  # keys: validity bitmap
    bytes,  # keys: int32 offsets
    bytes,  # keys: data
    bytes,  # tags: validity bitmap
    bytes,  # tags: int32 offsets
    bytes,  # tags: data
    bytes,  # body: int32 offsets
    bytes,  # body: data
    bytes,  # properties: int32 offsets into the map entries
    bytes,  # property names: int32 offsets
    bytes,  # property names: data
    bytes,  # property values: int32 offsets
    bytes,  # property values: data
    bytes,  # bornTimestamp: int64 microseconds
    bytes,  # storeTimestamp: int64 microseconds
    bytes,  # reconsumeTimes: int32
]

def record_columns(data: ReadableBuffer, /) -> RecordColumns | None:
    """The column buffers (little-endian) of the records in ``data``, or None when a record is
    not a V1 IPv4 uncompressed record with UTF-8 topic and properties (and at most 256
    properties): decode those with ``message.decode_records``."""
