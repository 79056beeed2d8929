"""The message-key index: find messages by KEYS or UNIQ_KEY (RocketMQ ``IndexService``'s job).

Theory of operation
-------------------
RocketMQ's index files are hash tables with in-place slot updates. This index is append-only
instead, so that crash recovery is "keep the longest valid prefix", as for the ledger itself.

On disk: records of 28 bytes, big-endian, appended in dispatch (= commit-log) order to
preallocated, mapped files ``<root>/index/<first byte offset, 20 digits>`` (``SegmentLog``):

    int64  keyHash         first 8 bytes of BLAKE2b-64 of "<topic>#<key>" (RocketMQ's buildKey)
    int64  phyOffset       the message's physical offset
    int64  storeTimestamp  ms
    uint32 crc             zlib.crc32 of the 24 bytes above

Record ``n`` (numbered from the first record ever written) is at logical byte ``n * 28``.

In memory: ``hash -> [record numbers]``, ascending, rebuilt by scanning every file on open.
A query walks one list newest first and reads each record's offset and time from the mapping.
Memory is O(records): roughly 100 bytes per record. That suits the message volumes this broker
is sized for; an on-disk hash table is the way past it.

Rules:

1. **Physical offsets never decrease along the file.** ``add`` drops a message whose offset is
   below the last one indexed: the dispatcher re-dispatches from its checkpoint after a crash,
   and those messages are already here. For a message at exactly the last offset (a crash may
   have persisted only some of its keys) each key is checked and only missing ones are added.
2. **Recovery keeps the longest valid prefix**: it ends at the first record whose CRC fails
   (a torn or never-written record; all zeros fails too) or whose offset goes back. What
   follows is zeroed and synced; it was written after the last flush, so the dispatcher, which
   restarts at its checkpoint, adds it again.
3. **Hashes collide**, rarely: a query returns offsets whose key hash matches, and the caller
   checks the key against the message it reads. Offsets are returned once each, newest first.
4. **Retention**: ``delete_expired`` deletes whole files below the commit log's minimum offset
   (never the last file) and hides records below it from queries.

Not thread-safe; the broker serialises dispatch, queries and retention.
"""

from __future__ import annotations

import hashlib
import logging
import os
import struct
from bisect import bisect_left
from typing import TYPE_CHECKING, Final
from zlib import crc32

from ledgermq.broker._files import discard_from, make_dirs_durably, open_segment_log
from ledgermq.errors import StoreClosedError

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

__all__ = ["DEFAULT_RECORDS_PER_FILE", "INDEX_DIR", "MAX_TIMESTAMP", "KeyIndex", "key_hash"]

_log: Final = logging.getLogger("ledgermq.broker")

INDEX_DIR: Final = "index"
RECORD_SIZE: Final = 28
DEFAULT_RECORDS_PER_FILE: Final = 1_000_000
"""28,000,000 bytes per file."""
MAX_TIMESTAMP: Final = (1 << 63) - 1

_BODY: Final = struct.Struct(">qqq")
_RECORD: Final = struct.Struct(">qqqI")
_CRC: Final = struct.Struct(">I")
_SCAN_RECORDS: Final = 8192


def key_hash(topic: str, key: str) -> int:
    """The stable 64-bit (signed) hash of ``topic#key`` that records carry.

    Stable across processes and versions, unlike ``hash()``, which is salted per process.
    """
    digest = hashlib.blake2b(f"{topic}#{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class KeyIndex:
    """The key index under ``<root>/index``, opened (and recovered) on construction.

    Args:
        root: the store root (``storePathRootDir``).
        records_per_file: records per file (default 1,000,000); must match existing files.

    Raises:
        CorruptLogError: a file has the wrong size or name.
    """

    def __init__(self, root: str, records_per_file: int = DEFAULT_RECORDS_PER_FILE) -> None:
        if records_per_file < 1:
            raise ValueError(f"records_per_file must be >= 1, got {records_per_file}")
        self.directory: Final = os.path.join(root, INDEX_DIR)
        self.records_per_file: Final = records_per_file
        make_dirs_durably(self.directory)
        self._log = open_segment_log(self.directory, records_per_file * RECORD_SIZE, "key index")
        self._closed = False
        self._chains: dict[int, list[int]] = {}
        """key hash -> numbers of its records, ascending (so by physical offset too)."""
        self._first = 0
        """Number of the first record on disk."""
        self._next = 0
        """Number of the next record to write. Invariant: bytes from _next * 28 on are zero."""
        self._last_phy = -1
        """Physical offset of record _next - 1 (-1 if none)."""
        self._min_phy = 0
        """Records below this offset are hidden from queries (retention)."""
        try:
            self._recover()
        except BaseException:
            self._log.close()
            raise

    # ------------------------------------------------------------------ properties
    @property
    def last_phy_offset(self) -> int:
        """Physical offset of the last message indexed, -1 if none."""
        return self._last_phy

    @property
    def record_count(self) -> int:
        """Records on disk (and in memory)."""
        return self._next - self._first

    # ------------------------------------------------------------------ add, query
    def add(self, topic: str, keys: Iterable[str], phy_offset: int, store_timestamp: int) -> int:
        """Index the message at ``phy_offset`` under each of ``keys``; returns records added.

        Pass every key of the message (its KEYS, split on spaces, and its UNIQ_KEY); empty keys
        are skipped. Re-adding a message already indexed adds nothing (rule 1).

        Raises:
            ValueError: ``phy_offset`` is negative.
            DiskFullError: a new file could not be allocated; nothing was added.
        """
        self._check_open()
        if phy_offset < 0:
            raise ValueError(f"phy offset must be >= 0, got {phy_offset}")
        if phy_offset < self._last_phy:
            return 0
        repeat = phy_offset == self._last_phy
        hashes: list[int] = []
        data = bytearray()
        for key in keys:
            if not key:
                continue
            h = key_hash(topic, key)
            if h in hashes:
                continue
            if repeat:
                chain = self._chains.get(h)
                if chain and self._record(chain[-1])[1] == phy_offset:
                    continue
            hashes.append(h)
            body = _BODY.pack(h, phy_offset, store_timestamp)
            data += body
            data += _CRC.pack(crc32(body))
        if not hashes:
            return 0
        self._append(bytes(data))
        n = self._next
        for i, h in enumerate(hashes):
            chain = self._chains.get(h)
            if chain is None:
                self._chains[h] = [n + i]
            else:
                chain.append(n + i)
        self._next = n + len(hashes)
        self._last_phy = phy_offset
        return len(hashes)

    def add_many(self, messages: Iterable[tuple[str, Sequence[str], int, int]]) -> int:
        """``add`` for each (topic, keys, phy offset, store timestamp), in one file write; returns
        records added. The dispatcher's way: one call per pass instead of one per message.

        Raises:
            ValueError: an offset is negative; the messages before it were added.
            DiskFullError: a new file could not be allocated; nothing more was added.
        """
        self._check_open()
        added = 0
        data = bytearray()
        hashes: list[int] = []
        last = self._last_phy
        pack = _BODY.pack
        pack_crc = _CRC.pack
        for topic, keys, phy_offset, store_timestamp in messages:
            if phy_offset < 0 or phy_offset <= last:
                # Negative, or a repeat from a re-dispatch: ``add`` knows what to do.
                added += self._add_records(data, hashes, last)
                data = bytearray()
                hashes = []
                added += self.add(topic, keys, phy_offset, store_timestamp)
                last = self._last_phy
                continue
            mine = len(hashes)
            for key in keys:
                if not key:
                    continue
                h = key_hash(topic, key)
                if h in hashes[mine:]:
                    continue
                hashes.append(h)
                body = pack(h, phy_offset, store_timestamp)
                data += body
                data += pack_crc(crc32(body))
            if len(hashes) > mine:
                last = phy_offset
        return added + self._add_records(data, hashes, last)

    def _add_records(self, data: bytearray, hashes: list[int], last_phy: int) -> int:
        """Write the records ``data`` (of ``hashes``, in order) and take them into the chains."""
        if not hashes:
            return 0
        self._append(bytes(data))
        n = self._next
        chains = self._chains
        for h in hashes:
            chain = chains.get(h)
            if chain is None:
                chains[h] = [n]
            else:
                chain.append(n)
            n += 1
        self._next = n
        self._last_phy = last_phy
        return len(hashes)

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
        can collide: check each message's key (rule 3).
        """
        self._check_open()
        chain = self._chains.get(key_hash(topic, key))
        if not chain or max_results <= 0:
            return []
        found: list[int] = []
        for n in reversed(chain):
            _, phy, ts, _ = self._record(n)
            if phy < self._min_phy:
                break  # older records are older still
            if begin_ts <= ts <= end_ts and phy not in found:
                found.append(phy)
                if len(found) >= max_results:
                    break
        return found

    # ------------------------------------------------------------------ truncation, retention
    def truncate_dirty(self, phy_offset_limit: int) -> int:
        """Remove the records of messages at or past ``phy_offset_limit``; returns how many.

        Called at start with the ledger's end, as for the ConsumeQueues (spec-broker.md section
        2.3 step 4). The truncation is synced before this returns.
        """
        self._check_open()
        cut = self._first_at_or_after(phy_offset_limit)
        if cut >= self._next:
            return 0
        for n in range(self._next - 1, cut - 1, -1):
            h = self._record(n)[0]
            chain = self._chains[h]
            assert chain[-1] == n
            chain.pop()
            if not chain:
                del self._chains[h]
        removed = self._next - cut
        self._next = cut
        discard_from(self._log, cut * RECORD_SIZE)
        self._last_phy = self._record(cut - 1)[1] if cut > self._first else -1
        _log.info(
            "key index: truncated %d records at or past phy offset %d", removed, phy_offset_limit
        )
        return removed

    def delete_expired(self, min_phy_offset: int) -> int:
        """Forget messages below ``min_phy_offset``; returns the files deleted.

        Whole files whose records are all below it are deleted (never the last file); the
        records left below it are hidden from queries.
        """
        self._check_open()
        self._min_phy = max(self._min_phy, min_phy_offset)
        segments = self._log.segments
        if len(segments) < 2:
            return 0
        cut = self._first_at_or_after(min_phy_offset)
        new_first = min(cut * RECORD_SIZE, segments[-1].base) // RECORD_SIZE
        new_first -= new_first % self.records_per_file
        if new_first <= self._first:
            return 0
        doomed: set[int] = set()
        n = self._first
        while n < new_first:
            chunk = self._chunk(n, new_first)
            doomed.update(record[0] for record in chunk)
            n += len(chunk)
        deleted = self._log.drop_before(new_first * RECORD_SIZE)
        self._first = new_first
        for h in doomed:
            chain = self._chains[h]
            del chain[: bisect_left(chain, new_first)]
            if not chain:
                del self._chains[h]
        _log.info("key index: deleted %d expired files", deleted)
        return deleted

    # ------------------------------------------------------------------ durability, lifecycle
    def flush(self) -> None:
        """Sync every record added so far to disk."""
        self._check_open()
        self._log.sync_now()

    def close(self) -> None:
        """Unmap and close the files; idempotent."""
        if not self._closed:
            self._closed = True
            self._chains = {}
            self._log.close()

    # ------------------------------------------------------------------ internals
    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError("the key index is closed")

    def _record(self, n: int) -> tuple[int, int, int, int]:
        pos = n * RECORD_SIZE
        segment = self._log.segment_at(pos)
        assert segment is not None, f"no key index file for record {n}"
        return _RECORD.unpack_from(segment.mm, pos - segment.base)

    def _chunk(self, n: int, stop: int) -> list[tuple[int, int, int, int]]:
        """Records from ``n``, at most to ``stop`` and to the end of its file."""
        pos = n * RECORD_SIZE
        segment = self._log.segment_at(pos)
        assert segment is not None
        end = min(stop * RECORD_SIZE, segment.end, pos + _SCAN_RECORDS * RECORD_SIZE)
        off = pos - segment.base
        return list(_RECORD.iter_unpack(segment.mm[off : off + end - pos]))

    def _first_at_or_after(self, phy_offset: int) -> int:
        """The first record number whose offset is >= ``phy_offset`` (``_next`` if none)."""
        lo, hi = self._first, self._next
        while lo < hi:
            mid = (lo + hi) // 2
            if self._record(mid)[1] >= phy_offset:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def _append(self, data: bytes) -> None:
        pos = self._next * RECORD_SIZE
        self._log.ensure_range(pos, pos + len(data))  # may raise DiskFullError: nothing written
        done = 0
        while done < len(data):
            segment = self._log.segment_at(pos + done)
            assert segment is not None
            n = min(len(data) - done, segment.end - pos - done)
            self._log.write(pos + done, data[done : done + n])
            done += n

    def _recover(self) -> None:
        """Rebuild the chains from the longest valid prefix of records (rule 2)."""
        segments = self._log.segments
        if not segments:
            return
        self._first = n = segments[0].base // RECORD_SIZE
        stop = segments[-1].end // RECORD_SIZE
        chains = self._chains
        last_phy = -1
        valid = True
        while valid and n < stop:
            pos = n * RECORD_SIZE
            segment = self._log.segment_at(pos)
            assert segment is not None
            end = min(segment.end, pos + _SCAN_RECORDS * RECORD_SIZE)
            data = memoryview(segment.mm[pos - segment.base : end - segment.base])
            for off in range(0, len(data), RECORD_SIZE):
                h, phy, _, crc = _RECORD.unpack_from(data, off)
                if crc != crc32(data[off : off + 24]) or phy < last_phy:
                    valid = False
                    break
                chain = chains.get(h)
                if chain is None:
                    chains[h] = [n]
                else:
                    chain.append(n)
                last_phy = phy
                n += 1
        self._next = n
        self._last_phy = last_phy
        if discard_from(self._log, n * RECORD_SIZE):
            _log.warning("key index: recovery kept %d records and discarded what followed", n)
