"""The message-key index: find messages by KEYS or UNIQ_KEY (RocketMQ ``IndexService``'s job).

Theory of operation
-------------------
An on-disk hash table per file, after RocketMQ's ``IndexFile``, so that memory and start-up time
do not grow with the retained log: every message has a UNIQ_KEY, and the previous design (a
``hash -> record numbers`` dict rebuilt by scanning every file on open) cost about 184 bytes of
RAM per key and an open time proportional to the whole index.

Files are mapped (``SegmentLog``), ``<root>/index/<first byte, 20 digits>``, all
``HEADER_SIZE + slots * 4 + records_per_file * RECORD_SIZE`` bytes, little-endian, and sparse:
blocks are allocated before they are written, and only where they are (see "Disk space" below):

    header, 64 bytes: magic "LMQK", uint32 slots, uint32 capacity, uint32 durableCount,
        int64 beginPhy, endPhy, minTimestamp, maxTimestamp, uint32 crc of the 52 bytes before
    slots: uint32 per slot, the number (1-based) of the newest item of the slot, 0 if none
    items, 32 bytes each, numbered from 1, in dispatch (= commit-log) order:
        int64  keyHash         first 8 bytes of BLAKE2b-64 of "<topic>#<key>" (RocketMQ's buildKey)
        int64  phyOffset       the message's physical offset
        int64  storeTimestamp  ms (whole, not a delta: timestamps need not increase)
        int32  prevItem        the slot's previous newest item (0: none): a chain, newest first
        uint32 crc             zlib.crc32 of the 28 bytes above

An item goes to slot ``keyHash mod slots`` (floored, so never negative). A file holds exactly
``records_per_file`` items before the next is started; item ``i`` of the ``k``-th file ever
written is record number ``k * records_per_file + i - 1`` (``record_count`` counts them).

A query walks the files newest first, skipping those whose timestamp range misses the query's
and stopping at those below the retention offset, and in each follows one slot chain. Memory
is a few objects per file plus one ``memoryview`` of the last file's slots; no per-record state.

Rules:

1. **Physical offsets never decrease along the items.** ``add`` drops a message whose offset is
   below the last one indexed: the dispatcher re-dispatches from its checkpoint after a crash,
   and those messages are already here. For a message at exactly the last offset (a crash may
   have persisted only some of its keys) each key's chain is checked and only missing keys are
   added.
2. **Nothing garbage is ever followed.** A chain link is followed only to an item that is
   within the file's valid items, older than the one linking to it (so every walk ends), whose
   CRC matches, whose hash belongs to the slot and whose offset is not above its successor's.
   A link that fails stops the walk (a warning is logged once per file): the query returns
   what it found before, never a made-up offset.
3. **Recovery reads the last file only** (``O(last file)`` at most, usually ``O(items since the
   last flush)``). A file is synced and its header completed before the next file is created,
   so every earlier file is whole and only its header is read. ``flush`` records in the header
   how many items it synced (written after the sync, so it never claims an unsynced item).
   Recovery trusts those and checks the rest in order, keeping the longest valid prefix (CRC,
   offsets not going back, ``prevItem`` below the item) and replaying their slot updates (a
   slot page may have missed the disk). When anything had to be dropped - a torn item, or a
   slot persisted before its item - the tail is zeroed and the file's slots are rebuilt from its
   kept items, then synced. What was dropped came after the last flush; the dispatcher, which
   restarts at its checkpoint, adds it again.
4. **Hashes collide**, rarely: a query returns offsets whose key hash matches, and the caller
   checks the key against the message it reads. Offsets are returned once each, newest first.
5. **Truncation** (``truncate_dirty``) removes a suffix of the items, as offsets only grow: later
   files are deleted, the holder's header is cut back and synced first, then its slots are
   rewound to each removed item's ``prevItem`` (newest first) and the items zeroed and synced.
   A crash half-way is repaired by recovery plus the ``truncate_dirty`` every start repeats.
6. **Retention**: ``delete_expired`` deletes whole files below the commit log's minimum offset
   (never the last file) and hides items below it from queries.

Disk space. A file of the default geometry is 34 MB, but a fresh one takes a few pages: the
header page, the slot pages that keys have hashed to (a page holds 1,024 slots), and the items
written so far plus a growth step (16 KiB at first, doubling, as ``SegmentLog``'s appends).
Blocks are allocated (``posix_fallocate``) before the mapping writes there, so a full disk is
a ``DiskFullError`` from ``add`` before the key's slot or item changes, never SIGBUS. Slot pages
are tracked in a bitmap of the last file (one byte test per key on the hot path; one system
call per slot page, at most ``slots / 1024`` per file). Nothing reads a page that may be a
hole through the mapping (tmpfs would allocate it on read): queries read slots with ``pread``
and recovery asks the file where its data is.

Not thread-safe, except that ``flush`` may run in another thread (the broker's flusher) while
the dispatch thread adds: a lock orders its header update against file roll-over and truncation.
"""

from __future__ import annotations

import hashlib
import logging
import os
import struct
import sys
import threading
from typing import TYPE_CHECKING, Final
from zlib import crc32

from ledgermq.broker.storage._files import make_dirs_durably, open_segment_log
from ledgermq.errors import CorruptLogError, StoreClosedError, StoreError
from ledgermq.speedups import PURE_PYTHON
from ledgermq.store.segment import PAGE_BYTES, READ_MARGIN, allocation_target

try:
    from ledgermq.broker.storage import _key_index
except ImportError:  # pragma: no cover - the extension is optional (no C compiler)
    _key_index = None  # type: ignore[assignment]

if TYPE_CHECKING:
    import mmap
    from collections.abc import Iterable, Iterator, Sequence

    from ledgermq.store.segment import Segment

__all__ = [
    "DEFAULT_RECORDS_PER_FILE",
    "HEADER_SIZE",
    "INDEX_DIR",
    "MAX_TIMESTAMP",
    "RECORD_SIZE",
    "KeyIndex",
    "index_file_bytes",
    "key_hash",
]

_log: Final = logging.getLogger("ledgermq.broker")

INDEX_DIR: Final = "index"
HEADER_SIZE: Final = 64
SLOT_SIZE: Final = 4
RECORD_SIZE: Final = 32
DEFAULT_RECORDS_PER_FILE: Final = 1_000_000
"""With half as many slots: 34,000,064 bytes per file, about 2 items per slot when full."""
MAX_TIMESTAMP: Final = (1 << 63) - 1

_MAGIC: Final = b"LMQK"
_HEADER: Final = struct.Struct("<4sIIIqqqq")
_HEADER_CRC: Final = struct.Struct("<I")
_BODY: Final = struct.Struct("<qqqi")
_ITEM: Final = struct.Struct("<qqqiI")
_CRC: Final = struct.Struct("<I")
_SLOT: Final = struct.Struct("<I")
_SLOTS_PER_PAGE: Final = PAGE_BYTES // SLOT_SIZE
_SLOT_BIAS: Final = HEADER_SIZE // SLOT_SIZE
_DONE, _NEED_ROOM, _NEED_PAGE, _SAME_OFFSET = 0, 1, 2, 3
"""``index_run``'s statuses (``_key_index.c``); 4 (SLOW) is the remaining one."""
"""Slot ``s`` is on file page ``(s + _SLOT_BIAS) // _SLOTS_PER_PAGE`` (the header is page 0)."""


def _key_hash_py(topic: str, key: str) -> int:
    """The stable 64-bit (signed) hash of ``topic#key`` that items carry.

    Stable across processes and versions, unlike ``hash()``, which is salted per process. The
    reference of ``_key_index.c``'s BLAKE2b.
    """
    digest = hashlib.blake2b(f"{topic}#{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


HAVE_KEY_INDEX_C: Final = _key_index is not None
"""Whether ``_key_index.c`` was built."""
_use_c = HAVE_KEY_INDEX_C and not PURE_PYTHON
"""Whether ``KeyIndex`` indexes with the C loop (a global, so a test can turn it off)."""

key_hash = _key_index.key_hash if _use_c else _key_hash_py
"""The stable 64-bit (signed) hash of ``topic#key`` that items carry (C where built)."""


def index_file_bytes(records_per_file: int, slots: int) -> int:
    """The size of every index file of this geometry."""
    return HEADER_SIZE + slots * SLOT_SIZE + records_per_file * RECORD_SIZE


_Header = tuple[bytes, int, int, int, int, int, int, int]
"""magic, slots, capacity, durable count, begin phy, end phy, min timestamp, max timestamp"""


class _File:
    """What is kept in memory per file: its segment and header fields (O(1) per file)."""

    __slots__ = (
        "begin_phy",
        "count",
        "end_phy",
        "header_ready",
        "items_allocated",
        "max_ts",
        "min_ts",
        "number",
        "room",
        "segment",
    )

    def __init__(self, segment: Segment, number: int) -> None:
        self.segment = segment
        self.number = number
        """Record number of the file's first item."""
        self.count = 0
        """Valid items. Set last when items are added (``flush`` reads it from another thread)."""
        self.begin_phy = -1
        self.end_phy = -1
        self.min_ts = MAX_TIMESTAMP
        self.max_ts = 0
        self.header_ready = False
        """Whether the header page has blocks (allocated by this process)."""
        self.items_allocated = 0
        """Bytes of the item area (from its start) with blocks, allocated by this process."""
        self.room = 0
        """Items that may be written: those below ``items_allocated - READ_MARGIN`` (all of
        them once the file is fully allocated). Invariant: count <= room once items are added."""


class KeyIndex:
    """The key index under ``<root>/index``, opened (and recovered) on construction.

    Args:
        root: the store root (``storePathRootDir``).
        records_per_file: items per file (default 1,000,000); must match existing files.
        slots_per_file: hash slots per file (default half of ``records_per_file``); likewise.

    Raises:
        CorruptLogError: a file has the wrong size, name or geometry.
    """

    def __init__(
        self,
        root: str,
        records_per_file: int = DEFAULT_RECORDS_PER_FILE,
        slots_per_file: int | None = None,
    ) -> None:
        if records_per_file < 1 or records_per_file >= 1 << 31:
            raise ValueError(f"records_per_file must be in [1, 2**31), got {records_per_file}")
        slots = max(1, records_per_file // 2) if slots_per_file is None else slots_per_file
        if slots < 1:
            raise ValueError(f"slots_per_file must be >= 1, got {slots}")
        if sys.byteorder != "little":  # slots are updated through a native uint32 view
            raise StoreError("the key index needs a little-endian host")
        self.directory: Final = os.path.join(root, INDEX_DIR)
        self.records_per_file: Final = records_per_file
        self.slots_per_file: Final = slots
        self.file_bytes: Final = index_file_bytes(records_per_file, slots)
        self._items_at: Final = HEADER_SIZE + slots * SLOT_SIZE
        make_dirs_durably(self.directory)
        self._log = open_segment_log(self.directory, self.file_bytes, "key index")
        self._closed = False
        self._files: list[_File] = []
        self._slots: memoryview | None = None
        """The last file's slot table as uint32s: the hot path's one lookup and store per key."""
        self._slot_pages = bytearray()
        """Per page of the last file's slot table: 1 once it has blocks (allocated by this
        process). A slot is read or written through the mapping only when its page is."""
        self._last_phy = -1
        """Physical offset of the last item (-1 if none)."""
        self._min_phy = 0
        """Items below this offset are hidden from queries (retention)."""
        self._lock = threading.Lock()
        """Orders ``flush``'s header update (flusher thread) against roll-over and truncation."""
        self._generation = 0
        """Bumped when the last file is sealed or truncated: a flush begun before writes no
        header."""
        self._warned: set[int] = set()
        try:
            self._open_files()
        except BaseException:
            self._release_slots()
            self._log.close()
            raise

    # ------------------------------------------------------------------ properties
    @property
    def last_phy_offset(self) -> int:
        """Physical offset of the last message indexed, -1 if none."""
        return self._last_phy

    @property
    def record_count(self) -> int:
        """Items in the files on disk."""
        files = self._files
        if not files:
            return 0
        return (len(files) - 1) * self.records_per_file + files[-1].count

    # ------------------------------------------------------------------ add, query
    def add(self, topic: str, keys: Iterable[str], phy_offset: int, store_timestamp: int) -> int:
        """Index the message at ``phy_offset`` under each of ``keys``; returns items added.

        Pass every key of the message (its KEYS, split on spaces, and its UNIQ_KEY); empty keys
        are skipped. Re-adding a message already indexed adds nothing (rule 1).

        Raises:
            ValueError: ``phy_offset`` is negative.
            DiskFullError: a new file could not be allocated; the keys before it were added.
        """
        self._check_open()
        if phy_offset < 0:
            raise ValueError(f"phy offset must be >= 0, got {phy_offset}")
        return self._add(((topic, keys, phy_offset, store_timestamp),))

    def add_many(self, messages: Iterable[tuple[str, Sequence[str], int, int]]) -> int:
        """``add`` for each (topic, keys, phy offset, store timestamp), with one file write per
        file touched; returns items added. The dispatcher's way: one call per pass.

        Raises:
            ValueError: an offset is negative; the messages before it were added.
            DiskFullError: a new file could not be allocated; nothing more was added.
        """
        self._check_open()
        return self._add(messages)

    def _add(self, messages: Iterable[tuple[str, Iterable[str], int, int]]) -> int:
        if _use_c:
            return self._add_c(messages if type(messages) is list else list(messages))
        return self._add_py(messages)

    def _add_c(  # noqa: PLR0915 - one loop over index_run's stops
        self, messages: list[tuple[str, Iterable[str], int, int]]
    ) -> int:
        """``_add_py`` with its per-key loop in C (``_key_index.c``: ``index_run``), which
        stops where this side must act: a file to grow or roll, a slot page to allocate, a
        re-dispatched message at the last offset, or a message only the reference takes."""
        files = self._files
        if not files:
            self._roll()
        file = files[-1]
        cap = self.records_per_file
        nslots = self.slots_per_file
        run = _key_index.index_run
        last = self._last_phy
        count = start = file.count
        room = file.room
        min_ts, max_ts = file.min_ts, file.max_ts
        data = bytearray()
        added = 0
        pos = kpos = 0
        skip_first = False
        try:
            while True:
                slots = self._slots
                assert slots is not None
                status, pos, kpos, count, last, min_ts, max_ts, n, slot = run(
                    messages, pos, kpos, skip_first, slots, self._slot_pages, nslots,
                    count, room, last, min_ts, max_ts, data,
                )  # fmt: skip
                added += n
                skip_first = skip_first and pos == 0  # it applies to messages[0] only
                if status == _DONE:
                    return added
                if status == _NEED_ROOM:  # may raise DiskFullError before the key changes anything
                    if count == cap:
                        self._commit(file, start, count, data, last, min_ts, max_ts)
                        file = self._roll()
                        count = start = 0
                        min_ts, max_ts = file.min_ts, file.max_ts
                        data = bytearray()
                    room = self._grow_items(file, count + 1)
                elif status == _NEED_PAGE:
                    self._allocate_slot_page(slot)
                elif status == _SAME_OFFSET:
                    self._commit(file, start, count, data, last, min_ts, max_ts)
                    start = count
                    data = bytearray()
                    topic, keys, phy_offset, store_timestamp = messages[pos]
                    missing = self._missing_keys(topic, keys, phy_offset)
                    messages = [(topic, missing, phy_offset, store_timestamp), *messages[pos + 1 :]]
                    pos = kpos = 0
                    skip_first = True
                else:  # _SLOW: the reference takes the rest, from this file's state
                    self._commit(file, start, count, data, last, min_ts, max_ts)
                    start = count
                    if skip_first:  # its offset was handled: index the keys given, as is
                        topic, keys, phy_offset, store_timestamp = messages[pos]
                        added += self._add_py(
                            ((topic, keys, phy_offset, store_timestamp),), skip_first=True
                        )
                        pos += 1
                    return added + self._add_py(messages[pos:])
        finally:
            self._commit(file, start, count, data, last, min_ts, max_ts)

    def _add_py(  # noqa: PLR0915 - one loop, kept inline for speed
        self, messages: Iterable[tuple[str, Iterable[str], int, int]], *, skip_first: bool = False
    ) -> int:
        """The reference of the hot path. Per key: hash, one slot load and store, one packed
        item; the items of a file are written in one go at the end (or when the file fills up).

        ``skip_first``: the first message's offset was checked by the caller (``_add_c`` after a
        re-dispatched message's missing keys were found); index its keys as given."""
        files = self._files
        if not files:
            self._roll()
        file = files[-1]
        slots = self._slots
        assert slots is not None
        slot_pages = self._slot_pages
        nslots = self.slots_per_file
        cap = self.records_per_file
        room = file.room
        pack = _BODY.pack
        pack_crc = _CRC.pack
        hash_of = key_hash
        last = self._last_phy
        count = start = file.count
        min_ts, max_ts = file.min_ts, file.max_ts
        data = bytearray()
        added = 0
        try:
            for topic, given, phy_offset, store_timestamp in messages:
                keys = given
                if skip_first:
                    skip_first = False
                elif phy_offset <= last:
                    if phy_offset < 0:
                        raise ValueError(f"phy offset must be >= 0, got {phy_offset}")
                    if phy_offset < last:
                        continue  # a re-dispatch: already here
                    self._commit(file, start, count, data, last, min_ts, max_ts)
                    start = count
                    data = bytearray()
                    keys = self._missing_keys(topic, keys, phy_offset)
                seen: list[int] = []
                for key in keys:
                    if not key:
                        continue
                    h = hash_of(topic, key)
                    if h in seen:
                        continue
                    seen.append(h)
                    if count >= room:  # may raise DiskFullError before the key changes anything
                        if count == cap:
                            self._commit(file, start, count, data, last, min_ts, max_ts)
                            file = self._roll()
                            slots = self._slots
                            assert slots is not None
                            slot_pages = self._slot_pages
                            count = start = 0
                            min_ts, max_ts = file.min_ts, file.max_ts
                            data = bytearray()
                        room = self._grow_items(file, count + 1)
                    s = h % nslots
                    if not slot_pages[(s + _SLOT_BIAS) // _SLOTS_PER_PAGE]:
                        self._allocate_slot_page(s)
                    body = pack(h, phy_offset, store_timestamp, slots[s])
                    count += 1
                    slots[s] = count
                    data += body
                    data += pack_crc(crc32(body))
                    if store_timestamp > max_ts:  # noqa: PLR1730 - no call on the hot path
                        max_ts = store_timestamp
                    if store_timestamp < min_ts:  # noqa: PLR1730
                        min_ts = store_timestamp
                    last = phy_offset
                    added += 1
        finally:
            self._commit(file, start, count, data, last, min_ts, max_ts)
        return added

    def _grow_items(self, file: _File, needed: int) -> int:
        """Allocate blocks for ``file``'s items up to ``needed`` and a growth step; new room."""
        area = self.records_per_file * RECORD_SIZE
        if needed * RECORD_SIZE + READ_MARGIN > file.items_allocated:
            target = allocation_target(needed * RECORD_SIZE + READ_MARGIN, area)
            start = self._items_at
            file.segment.allocate_range(start + file.items_allocated, start + target)
            file.items_allocated = target
        limit = file.items_allocated
        full = limit == area
        file.room = self.records_per_file if full else (limit - READ_MARGIN) // RECORD_SIZE
        return file.room

    def _allocate_slot_page(self, s: int) -> None:
        """Give the page of the last file's slot ``s`` blocks before it is read or written."""
        page = (s + _SLOT_BIAS) // _SLOTS_PER_PAGE
        self._files[-1].segment.allocate_range(page * PAGE_BYTES, (page + 1) * PAGE_BYTES)
        self._slot_pages[page] = 1

    def _set_slot(self, slots: memoryview, s: int, value: int) -> None:
        """``slots[s] = value`` for the last file, off the hot path (recovery, rebuilds)."""
        if not self._slot_pages[(s + _SLOT_BIAS) // _SLOTS_PER_PAGE]:
            self._allocate_slot_page(s)
        slots[s] = value

    def _get_slot(self, slots: memoryview, s: int) -> int:
        """``slots[s]`` of the last file, allocating its page first (it is about to change)."""
        if not self._slot_pages[(s + _SLOT_BIAS) // _SLOTS_PER_PAGE]:
            self._allocate_slot_page(s)
        return int(slots[s])

    def _reset_slot_pages(self) -> None:
        """Forget which slot pages have blocks: a new last file, or a reopened one."""
        self._slot_pages = bytearray(-(-self._items_at // PAGE_BYTES))

    def _commit(
        self, file: _File, start: int, count: int, data: bytearray, last: int, lo: int, hi: int
    ) -> None:
        """Write items ``start + 1 .. count`` of ``file`` (``data``); their slots are set."""
        if count == start:
            return
        segment = file.segment
        pos = self._items_at + start * RECORD_SIZE
        self._log.write(segment.base + pos, bytes(data))
        if start == 0:
            file.begin_phy = _ITEM.unpack_from(data, 0)[1]
        file.end_phy = last
        file.min_ts = lo
        file.max_ts = hi
        file.count = count  # last: a concurrent flush reads the count, then the rest
        self._last_phy = last

    def _missing_keys(self, topic: str, keys: Iterable[str], phy_offset: int) -> list[str]:
        """The keys of the message at ``phy_offset`` (the last one indexed) not indexed yet."""
        return [
            key
            for key in keys
            if key
            and not any(p == phy_offset for p, _ in self._chain(key_hash(topic, key), phy_offset))
        ]

    def query(
        self,
        topic: str,
        key: str,
        max_results: int,
        begin_ts: int = 0,
        end_ts: int = MAX_TIMESTAMP,
    ) -> list[int]:
        """Physical offsets of messages indexed under ``key``, newest first, each once.

        At most ``max_results``, with ``begin_ts <= store timestamp <= end_ts`` (ms). The hash
        can collide: check each message's key (rule 4).
        """
        self._check_open()
        found: list[int] = []
        if max_results <= 0:
            return found
        seen: set[int] = set()
        for phy, ts in self._chain(key_hash(topic, key), self._min_phy, begin_ts, end_ts):
            if begin_ts <= ts <= end_ts and phy not in seen:
                seen.add(phy)
                found.append(phy)
                if len(found) >= max_results:
                    break
        return found

    def _chain(
        self, h: int, floor: int, begin_ts: int = 0, end_ts: int = MAX_TIMESTAMP
    ) -> Iterator[tuple[int, int]]:
        """(offset, timestamp) of the items with hash ``h``, newest first, down to offset
        ``floor``, in the files whose time range meets ``[begin_ts, end_ts]``."""
        min_phy = floor
        for file in reversed(self._files):
            if file.count == 0:
                continue
            if file.end_phy < min_phy:
                return  # so are all older files
            if file.max_ts < begin_ts or file.min_ts > end_ts:
                continue
            for phy, ts in self._walk(file, h):
                if phy < min_phy:
                    return
                yield phy, ts

    def _walk(self, file: _File, h: int) -> Iterator[tuple[int, int]]:
        """Follow ``h``'s slot chain in ``file``, checking every link (rule 2)."""
        mm = file.segment.mm
        nslots = self.slots_per_file
        items_at = self._items_at - RECORD_SIZE  # items are numbered from 1
        s = h % nslots
        # pread, not the mapping: the slot's page may be a hole, which a read through the
        # mapping would allocate on tmpfs (SIGBUS when it is full).
        at = HEADER_SIZE + s * SLOT_SIZE
        v = _SLOT.unpack(os.pread(file.segment.fd, SLOT_SIZE, at))[0]
        limit = file.count
        upper = file.end_phy
        while v:
            off = items_at + v * RECORD_SIZE
            if v > limit:
                self._warn(file, f"slot {s} points at item {v} of {limit}")
                return
            item_hash, phy, ts, prev, crc = _ITEM.unpack_from(mm, off)
            if crc != crc32(mm[off : off + 28]):
                self._warn(file, f"item {v} fails its CRC")
                return
            if not 0 <= prev < v or item_hash % nslots != s or phy > upper:
                self._warn(file, f"item {v} breaks the chain of slot {s}")
                return
            if item_hash == h:
                yield phy, ts
            upper = phy
            v = prev

    def _warn(self, file: _File, what: str) -> None:
        if file.segment.base not in self._warned:
            self._warned.add(file.segment.base)
            _log.warning(
                "key index file %s: %s; queries stop there (further problems in this file are "
                "not logged)",
                file.segment.path,
                what,
            )

    # ------------------------------------------------------------------ truncation, retention
    def truncate_dirty(self, phy_offset_limit: int) -> int:
        """Remove the items of messages at or past ``phy_offset_limit``; returns how many.

        Called at start with the ledger's end, as for the ConsumeQueues (spec-broker.md section
        2.3 step 4). The truncation is synced before this returns (rule 5).
        """
        self._check_open()
        total = self._end_number()
        cut = self._first_at_or_after(phy_offset_limit)
        if cut >= total:
            return 0
        files = self._files
        k = (cut - files[0].number) // self.records_per_file
        with self._lock:
            self._generation += 1
            self._release_slots()
            if k < len(files) - 1:
                self._log.drop_after(files[k].segment.base)
                del files[k + 1 :]
                self._reset_slot_pages()  # another file is the last now
            file = files[k]
            keep = cut - file.number
            segment = file.segment
            self._write_header(file, min(keep, self._durable(segment)))
            self._log.sync_now()
            keep = self._rewind_slots(file, keep)
            pos = self._items_at + keep * RECORD_SIZE
            last_nonzero = segment.last_nonzero(pos, segment.size)
            if last_nonzero >= 0:
                segment.zero(pos, last_nonzero + 1)
            file.count = keep
            if keep:
                file.end_phy = self._item(file, keep)[1]
            else:
                file.begin_phy = file.end_phy = -1
            self._log.sync_now()
            self._write_header(file, keep)  # all synced now
            self._slots = self._slot_view(file)
        self._last_phy = self._end_phy()
        _log.info(
            "key index: truncated %d items at or past phy offset %d",
            total - cut,
            phy_offset_limit,
        )
        return total - cut

    def _rewind_slots(self, file: _File, keep: int) -> int:
        """Point every slot at its newest item among the first ``keep``, newest removed first;
        returns the items kept (fewer than ``keep`` only if the file was damaged).

        Each removed item is its slot's head when it is reached, so its ``prevItem`` is the
        new head; a chain that disagrees is damaged and the slots are rebuilt instead.
        """
        slots = self._slot_view(file)
        try:
            nslots = self.slots_per_file
            for v in range(file.count, keep, -1):
                h, _, _, prev, _ = self._item(file, v)
                s = h % nslots
                if self._get_slot(slots, s) != v:
                    _log.warning("key index: a slot chain disagrees; rebuilding the slots")
                    return self._rebuild_slots(file, slots, keep)
                slots[s] = prev
            file.segment.dirty = True
            return keep
        finally:
            slots.release()

    def delete_expired(self, min_phy_offset: int) -> int:
        """Forget messages below ``min_phy_offset``; returns the files deleted.

        Whole files whose items are all below it are deleted (never the last file); the items
        left below it are hidden from queries.
        """
        self._check_open()
        self._min_phy = max(self._min_phy, min_phy_offset)
        files = self._files
        doomed = 0
        while doomed < len(files) - 1 and files[doomed].end_phy < min_phy_offset:
            doomed += 1
        if not doomed:
            return 0
        self._log.drop_first(doomed)
        self._files = files[doomed:]
        _log.info("key index: deleted %d expired files", doomed)
        return doomed

    # ------------------------------------------------------------------ durability, lifecycle
    def flush(self) -> None:
        """Sync every item added so far to disk, then record their count in the header.

        Safe in a thread other than the adding one: the count is captured before the sync,
        and the header is written only if the file was neither sealed nor truncated meanwhile.
        """
        self._check_open()
        with self._lock:
            generation = self._generation
            file = self._files[-1] if self._files else None
            count = file.count if file is not None else 0
        self._log.sync_pinned()
        if file is None:
            return
        with self._lock:
            if generation == self._generation and not self._closed:
                self._write_header(file, count)

    def close(self) -> None:
        """Unmap and close the files; idempotent."""
        if not self._closed:
            with self._lock:
                self._closed = True
                self._release_slots()
                self._files = []
                self._log.close()

    # ------------------------------------------------------------------ internals
    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError("the key index is closed")

    def _slot_view(self, file: _File) -> memoryview:
        return memoryview(file.segment.mm)[HEADER_SIZE : self._items_at].cast("I")

    def _release_slots(self) -> None:
        """Drop the slot view: a mapping with a view on it cannot be closed."""
        if self._slots is not None:
            self._slots.release()
            self._slots = None

    def _item(self, file: _File, v: int) -> tuple[int, int, int, int, int]:
        """Item ``v`` (1-based) of ``file``, unchecked."""
        return _ITEM.unpack_from(file.segment.mm, self._items_at + (v - 1) * RECORD_SIZE)

    @staticmethod
    def _item_ok(mm: mmap.mmap, off: int) -> bool:
        crc: int = _CRC.unpack_from(mm, off + 28)[0]
        return crc == crc32(mm[off : off + 28])

    def _end_phy(self) -> int:
        for file in reversed(self._files):
            if file.count:
                return file.end_phy
        return -1

    def _first_at_or_after(self, phy_offset: int) -> int:
        """The first record number whose offset is >= ``phy_offset`` (the end if none)."""
        for file in self._files:
            if file.count and file.end_phy >= phy_offset:
                lo, hi = 1, file.count
                while lo < hi:
                    mid = (lo + hi) // 2
                    if self._item(file, mid)[1] >= phy_offset:
                        hi = mid
                    else:
                        lo = mid + 1
                return file.number + lo - 1
        return self._end_number()

    def _end_number(self) -> int:
        """The record number the next item will have (0 if there is no file)."""
        return self._files[-1].number + self._files[-1].count if self._files else 0

    def _durable(self, segment: Segment) -> int:
        header = self._read_header(segment)
        return header[3] if header is not None else 0

    def _write_header(self, file: _File, durable: int) -> None:
        """Write ``file``'s header, saying ``durable`` items are synced; dirty only if changed."""
        body = _HEADER.pack(
            _MAGIC,
            self.slots_per_file,
            self.records_per_file,
            durable,
            file.begin_phy,
            file.end_phy,
            file.min_ts,
            file.max_ts,
        )
        data = body + _HEADER_CRC.pack(crc32(body))
        if not file.header_ready:  # blocks before the mapping reads or writes the page
            file.segment.allocate_range(0, HEADER_SIZE)
            file.header_ready = True
        mm = file.segment.mm
        if mm[: len(data)] != data:
            mm[: len(data)] = data
            file.segment.dirty = True

    def _read_header(self, segment: Segment) -> _Header | None:
        """The header's fields if its CRC holds, else None; refuses another geometry."""
        raw = segment.read_bytes(0, HEADER_SIZE)  # pread: the page may be a hole
        fields = _HEADER.unpack_from(raw, 0)
        (crc,) = _HEADER_CRC.unpack_from(raw, _HEADER.size)
        if fields[0] != _MAGIC or crc != crc32(raw[: _HEADER.size]):
            return None
        if (fields[1], fields[2]) != (self.slots_per_file, self.records_per_file):
            raise CorruptLogError(
                segment.path,
                0,
                f"key index file has {fields[1]} slots and {fields[2]} items, expected "
                f"{self.slots_per_file} and {self.records_per_file}. Delete the directory to "
                "rebuild it from the commit log",
            )
        return fields

    def _roll(self) -> _File:
        """Seal the last file (complete its header, sync) and start the next; rule 3's order."""
        files = self._files
        with self._lock:
            number = base = 0
            if files:
                old = files[-1]
                number = old.number + self.records_per_file
                base = old.segment.base + self.file_bytes
                self._write_header(old, old.count)
                self._log.sync_now()
                self._generation += 1
                self._release_slots()
            try:
                segment = self._log.ensure_segment(base)  # may raise DiskFullError
            except BaseException:
                if files:
                    self._slots = self._slot_view(files[-1])
                raise
            file = _File(segment, number)
            files.append(file)
            self._reset_slot_pages()
            try:
                self._write_header(file, 0)  # may raise DiskFullError
            except BaseException:
                files.pop()
                self._log.drop_after(files[-1].segment.base if files else -1)
                if files:
                    self._reset_slot_pages()
                    self._slots = self._slot_view(files[-1])
                raise
            self._slots = self._slot_view(file)
        return file

    def _open_files(self) -> None:
        segments = self._log.segments
        cap = self.records_per_file
        for i, segment in enumerate(segments):
            number = segment.base // self.file_bytes * cap
            file = _File(segment, number)
            header = self._read_header(segment)
            if i < len(segments) - 1:
                if header is not None and header[3] == cap:
                    _, _, _, _, file.begin_phy, file.end_phy, file.min_ts, file.max_ts = header
                else:  # never written so, as a file is sealed before the next is made
                    _log.warning("key index file %s has no valid header", segment.path)
                    file.begin_phy, file.end_phy = self._item(file, 1)[1], self._item(file, cap)[1]
                    file.min_ts, file.max_ts = 0, MAX_TIMESTAMP
                file.count = cap
                self._files.append(file)
            else:
                self._files.append(file)
                self._reset_slot_pages()
                self._recover_last(file, header)
        if self._files:
            self._slots = self._slot_view(self._files[-1])
        self._last_phy = self._end_phy()

    def _recover_last(  # noqa: PLR0915 - the steps of rule 3 in order
        self, file: _File, header: _Header | None
    ) -> None:
        """Rule 3 for the last file."""
        segment = file.segment
        mm = segment.mm
        cap = self.records_per_file
        nslots = self.slots_per_file
        items_at = self._items_at
        prior = self._files[-2].end_phy if len(self._files) > 1 else -1
        durable = 0
        if header is not None and 0 < header[3] <= cap:
            durable = header[3]
            off = items_at + (durable - 1) * RECORD_SIZE
            if self._item_ok(mm, off) and _ITEM.unpack_from(mm, off)[1] >= prior:
                file.min_ts, file.max_ts = header[6], header[7]
            else:
                durable = 0
        last = self._item(file, durable)[1] if durable else prior
        # Items past the file's last data are zero (a hole, never written): the scan stops
        # there rather than read a hole through the mapping.
        written = min(cap, max(0, (segment.data_end() - items_at) // RECORD_SIZE))
        slots = self._slot_view(file)
        try:
            n = durable
            consistent = True
            min_ts, max_ts = file.min_ts, file.max_ts
            while n < written:
                off = items_at + n * RECORD_SIZE
                h, phy, ts, prev, crc = _ITEM.unpack_from(mm, off)
                if crc != crc32(mm[off : off + 28]) or phy < last or not 0 <= prev <= n:
                    break
                n += 1
                last = phy
                min_ts, max_ts = min(min_ts, ts), max(max_ts, ts)
                s = h % nslots
                if self._get_slot(slots, s) < n:
                    consistent = consistent and slots[s] == prev
                    slots[s] = n
            if n > durable:
                segment.dirty = True
            tail = items_at + n * RECORD_SIZE
            dirty_tail = segment.last_nonzero(tail, segment.size)
            if dirty_tail >= 0 or not consistent or self._max_slot(segment) > n:
                if dirty_tail >= 0:
                    segment.zero(tail, dirty_tail + 1)
                n = self._rebuild_slots(file, slots, n)
                self._log.sync_now()
                self._write_header(file, n)  # all synced now
                _log.warning(
                    "key index: recovery kept %d items of %s and discarded what followed",
                    n,
                    segment.path,
                )
                min_ts, max_ts = MAX_TIMESTAMP, 0
                for v in range(1, n + 1):
                    ts = self._item(file, v)[2]
                    min_ts, max_ts = min(min_ts, ts), max(max_ts, ts)
        finally:
            slots.release()
        file.count = n
        file.min_ts, file.max_ts = min_ts, max_ts
        if n:
            file.begin_phy = self._item(file, 1)[1]
            file.end_phy = self._item(file, n)[1]
        else:
            file.begin_phy = file.end_phy = -1

    def _max_slot(self, segment: Segment) -> int:
        """The largest slot value of a file, read with ``pread`` from its data ranges only."""
        top = 0
        for lo, hi in segment.data_ranges(HEADER_SIZE, self._items_at):
            values = memoryview(segment.read_bytes(lo, hi)).cast("I")
            top = max(top, max(values, default=0))
        return top

    def _rebuild_slots(self, file: _File, slots: memoryview, count: int) -> int:
        """Recompute ``file``'s slots from its first ``count`` items; returns how many agree
        with them (``prevItem`` = the slot's head), zeroing any after (O(file), rare)."""
        segment = file.segment
        segment.zero(HEADER_SIZE, self._items_at)
        nslots = self.slots_per_file
        n = 0
        while n < count:
            h, _, _, prev, _ = self._item(file, n + 1)
            s = h % nslots
            if self._get_slot(slots, s) != prev:
                break
            n += 1
            slots[s] = n
        if n < count:
            start = self._items_at + n * RECORD_SIZE
            segment.zero(start, self._items_at + count * RECORD_SIZE)
        segment.dirty = True
        return n
