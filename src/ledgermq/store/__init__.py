"""The segmented, CRC-checked ledger store (DLedger's file store), usable on its own.

from ledgermq.store import LedgerStore

with LedgerStore.open("/var/lib/ledgermq/n0", flush="sync") as store:
    entry = store.append(term=1, body=b"hello")
    assert store.get(entry.index).body == b"hello"
"""

from ledgermq.store.entry_format import Entry, EntryReader, EntryType
from ledgermq.store.ledger_store import (
    DEFAULT_DATA_SEGMENT_BYTES,
    DEFAULT_INDEX_SEGMENT_ENTRIES,
    DEFAULT_MAX_BODY_BYTES,
    FlushMode,
    LedgerStore,
)
from ledgermq.store.memory_store import MemoryLedgerStore
from ledgermq.store.protocol import LogStore
from ledgermq.store.retention import RetentionConfig

__all__ = [
    "DEFAULT_DATA_SEGMENT_BYTES",
    "DEFAULT_INDEX_SEGMENT_ENTRIES",
    "DEFAULT_MAX_BODY_BYTES",
    "Entry",
    "EntryReader",
    "EntryType",
    "FlushMode",
    "LedgerStore",
    "LogStore",
    "MemoryLedgerStore",
    "RetentionConfig",
]
