"""The file-backed ledger store: DLedger's ``DLedgerMmapFileStore`` with CRCs and safe recovery.

Layout under the store directory (spec-replication-storage.md section 1.2)::

    data/00000000000000000000     data segments (entries), named by start offset
    index/00000000000000000000    index segments (32-byte records), named by start offset
    checkpoint                    committed index (Java properties)
    repair/                       copies of bytes discarded by torn-tail repair
    lock                          held (flock) while the store is open

Threading: the store is used by one owner thread (the ledger's event loop). A background
maintenance thread, owned by the store, flushes every ``flush_interval_ms`` in ``async`` mode,
writes the checkpoint every ``checkpoint_interval_ms`` and runs retention. Public methods take the
store lock; the flusher never does (segment pins have their own small lock), so a busy writer
cannot stretch the flush interval, and retention, which needs the store lock, runs in the owner
thread at its next append when the lock is busy.

Durability (``flush``):

- ``"async"`` (DLedger's default): ``append*`` returns once the bytes are in the page cache; the
  maintenance thread ``fdatasync``s every 10 ms. A process crash loses nothing; a machine crash
  loses at most the last flush interval, which replication to a majority covers.
- ``"sync"``: ``append*`` returns after ``fdatasync`` of the data segments it wrote; a batch
  shares one sync. Index records are not synced on this path: recovery rebuilds them from data.

``truncate_from`` and torn-tail repair zero the bytes they remove and sync before returning, so a
crash can never bring truncated entries back (the hazard of DLedger's truncation, section 8.2).
"""

from __future__ import annotations

import fcntl
import itertools
import logging
import operator
import os
import shutil
import struct
import threading
from typing import TYPE_CHECKING, Final, Literal, Self

from ledgermq.clock import Clock, SystemClock
from ledgermq.errors import (
    ConfigError,
    CorruptLogError,
    DiskFullError,
    InconsistentLogError,
    IndexCompactedError,
    IndexOutOfRangeError,
    StoreClosedError,
    StoreError,
    StoreLockedError,
)
from ledgermq.store.append_plan import (
    AppendPlan,
    LogTail,
    plan_leader_append,
    plan_replicated_append,
)
from ledgermq.store.checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from ledgermq.store.entry_format import (
    ENTRY_HEADER,
    HEADER_SIZE,
    INDEX_RECORD,
    INDEX_UNIT_SIZE,
    Entry,
    EntryFormatError,
    EntryType,
    chain_crc,
    decode_entry,
)
from ledgermq.store.recovery import RecoveredLog, recover
from ledgermq.store.retention import RetentionConfig, segments_to_delete
from ledgermq.store.segment import Segment, SegmentLog

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import TracebackType

__all__ = [
    "DEFAULT_DATA_SEGMENT_BYTES",
    "DEFAULT_INDEX_SEGMENT_ENTRIES",
    "DEFAULT_MAX_BODY_BYTES",
    "FlushMode",
    "LedgerStore",
    "disk_used_ratio",
]

FlushMode = Literal["async", "sync"]

DEFAULT_DATA_SEGMENT_BYTES: Final = 1 << 30
"""DLedger ``mappedFileSizeForEntryData``: 1 GiB."""
DEFAULT_INDEX_SEGMENT_ENTRIES: Final = 5 * 1024 * 1024
"""DLedger ``mappedFileSizeForEntryIndex`` / 32: 5,242,880 records (160 MiB)."""
DEFAULT_MAX_BODY_BYTES: Final = 4 * 1024 * 1024
"""DLedger's 4 MiB encode buffer, and RocketMQ's default ``maxMessageSize``."""

_log: Final = logging.getLogger("ledgermq.store")
_ERROR_BACKOFF_S: Final = 0.2
_RETENTION_LOCK_WAIT_S: Final = 0.005


def disk_used_ratio(path: str) -> float:
    """Used fraction (0..1) of the file system holding ``path``, as space a writer can use."""
    usage = shutil.disk_usage(path)
    return 1.0 - usage.free / usage.total if usage.total else 1.0


class LedgerStore:
    """A segmented, CRC-checked, crash-safe log of entries (one Raft replica's log).

    Open it with ``LedgerStore.open(directory, ...)``; use it from one thread; ``close()`` it (or
    use ``with``). Indexes are 0-based; ``end_index`` and ``end_term`` are -1 while the log is
    empty; ``begin_index`` is the first stored index (-1 when empty).
    """

    def __init__(self) -> None:
        raise TypeError("use LedgerStore.open(directory, ...)")

    # ------------------------------------------------------------------ opening
    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        *,
        data_segment_bytes: int = DEFAULT_DATA_SEGMENT_BYTES,
        index_segment_entries: int = DEFAULT_INDEX_SEGMENT_ENTRIES,
        flush: FlushMode = "async",
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        flush_interval_ms: int = 10,
        checkpoint_interval_ms: int = 3000,
        clean_interval_ms: int = 100,
        retention: RetentionConfig | None = None,
        clock: Clock | None = None,
        disk_usage: Callable[[str], float] = disk_used_ratio,
        background: bool = True,
    ) -> Self:
        """Open (creating if needed) the store in ``directory`` and recover its log.

        Args:
            directory: the store's base directory (DLedger's ``storeBaseDir/dledger-<id>``).
            data_segment_bytes: size of each data file (DLedger default 1 GiB). Must not change
                over the life of a store, and must be equal on all replicas of a group.
            index_segment_entries: index records per index file (default 5,242,880).
            flush: ``"async"`` (flush every ``flush_interval_ms`` in the background) or
                ``"sync"`` (``append*`` returns after the data is on disk).
            max_body_bytes: largest accepted body (default 4 MiB).
            flush_interval_ms: background flush period (DLedger ``flushFileInterval``, 10 ms).
            checkpoint_interval_ms: checkpoint period (DLedger ``checkPointInterval``, 3 s).
            clean_interval_ms: how often disk usage and retention are checked (100 ms).
            retention: retention settings (DLedger defaults when omitted).
            clock: time source for retention (the system clock when omitted).
            disk_usage: returns the used fraction of the disk holding a path.
            background: run the maintenance thread; tests that drive ``run_maintenance()``
                themselves turn it off.

        Raises:
            CorruptLogError: the log is damaged before its tail.
            StoreLockedError: another process has the store open.
            ConfigError: a setting is out of range.
        """
        self = object.__new__(cls)
        self._init(
            os.fspath(directory),
            data_segment_bytes=data_segment_bytes,
            index_segment_entries=index_segment_entries,
            flush=flush,
            max_body_bytes=max_body_bytes,
            flush_interval_ms=flush_interval_ms,
            checkpoint_interval_ms=checkpoint_interval_ms,
            clean_interval_ms=clean_interval_ms,
            retention=retention or RetentionConfig(),
            clock=clock or SystemClock(),
            disk_usage=disk_usage,
        )
        if background:
            self._start_maintenance()
        return self

    def _init(  # noqa: PLR0915 - validation and recovery of every setting, in order
        self,
        directory: str,
        *,
        data_segment_bytes: int,
        index_segment_entries: int,
        flush: FlushMode,
        max_body_bytes: int,
        flush_interval_ms: int,
        checkpoint_interval_ms: int,
        clean_interval_ms: int,
        retention: RetentionConfig,
        clock: Clock,
        disk_usage: Callable[[str], float],
    ) -> None:
        if flush not in ("async", "sync"):
            raise ConfigError(f"flush must be 'async' or 'sync', got {flush!r}")
        if data_segment_bytes < 4096 or data_segment_bytes % 8:
            raise ConfigError(
                "data_segment_bytes must be a multiple of 8 of at least 4096, "
                f"got {data_segment_bytes}"
            )
        if index_segment_entries < 1:
            raise ConfigError(
                f"index_segment_entries must be positive, got {index_segment_entries}"
            )
        if max_body_bytes < 1:
            raise ConfigError(f"max_body_bytes must be positive, got {max_body_bytes}")
        for name, value in (
            ("flush_interval_ms", flush_interval_ms),
            ("checkpoint_interval_ms", checkpoint_interval_ms),
            ("clean_interval_ms", clean_interval_ms),
        ):
            if value < 1:
                raise ConfigError(f"{name} must be at least 1, got {value}")
        self._directory = directory
        self._flush_mode: FlushMode = flush
        self._data_segment_bytes = data_segment_bytes
        self._max_body_bytes = max_body_bytes
        self._flush_interval_s = flush_interval_ms / 1000
        self._checkpoint_interval_ms = checkpoint_interval_ms
        self._clean_interval_ms = clean_interval_ms
        self._retention = retention
        self._clock = clock
        self._disk_usage = disk_usage
        self._lock = threading.RLock()
        self._checkpoint_lock = threading.Lock()
        self._closed = False
        self._failed: BaseException | None = None
        self._disk_full = False
        self._retention_due = False
        self._truncations = 0
        self._recent = _RecentEntries(_RECENT_CACHE_BYTES)
        """Counts truncations, so a flush that raced one does not record stale positions."""
        self._scratch = bytearray()
        """Where ``read_bodies`` gathers (used under the lock only); grows to the largest read
        up to ``_SCRATCH_MAX_BYTES``."""
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        os.makedirs(directory, exist_ok=True)
        self._lock_fd = _lock_directory(directory)
        self._data = SegmentLog(os.path.join(directory, "data"), data_segment_bytes, what="data")
        self._index = SegmentLog(
            os.path.join(directory, "index"), index_segment_entries * INDEX_UNIT_SIZE, what="index"
        )
        try:
            warnings = self._data.load() + self._index.load()
            for warning in warnings:
                _log.warning("%s", warning)
            checkpoint = read_checkpoint(directory)
            recovered = recover(
                self._data,
                self._index,
                os.path.join(directory, "repair"),
                checkpoint.flushed_pos,
            )
        except BaseException:
            self._data.close()
            self._index.close()
            os.close(self._lock_fd)
            raise
        self.recovery: RecoveredLog = recovered
        """What recovery found and repaired when the store was opened."""
        self._begin_index = recovered.begin_index
        self._end_index = recovered.end_index
        self._end_term = recovered.end_term
        self._data_end = recovered.data_end
        self._last_chain = recovered.last_chain_crc
        self._flushed_index = recovered.end_index
        self._flushed_pos = recovered.data_end
        self._committed_index = min(checkpoint.committed_index, self._end_index)
        if self._begin_index > 0:
            # Retention only deletes committed entries and keeps the last committed one, so a
            # log that no longer starts at 0 has at least its first entry committed.
            self._committed_index = max(self._committed_index, self._begin_index)
        self._last_checkpoint = checkpoint
        self._last_checkpoint_ms = clock.monotonic_ms()
        self._last_clean_ms = -(1 << 62)
        _log.info(
            "opened store %s: entries [%d, %d], end term %d, committed %d; scanned %d entries, "
            "rewrote %d index records, %d repairs",
            directory,
            self._begin_index,
            self._end_index,
            self._end_term,
            self._committed_index,
            recovered.entries_scanned,
            recovered.index_records_rewritten,
            len(recovered.repairs),
        )

    # ------------------------------------------------------------------ properties
    @property
    def directory(self) -> str:
        return self._directory

    @property
    def flush_mode(self) -> FlushMode:
        return self._flush_mode

    @property
    def data_segment_bytes(self) -> int:
        return self._data_segment_bytes

    @property
    def max_body_bytes(self) -> int:
        return self._max_body_bytes

    @property
    def begin_index(self) -> int:
        """First stored index; -1 while the log is empty."""
        return self._begin_index

    @property
    def end_index(self) -> int:
        """Index of the last entry; -1 while the log is empty."""
        return self._end_index

    @property
    def end_term(self) -> int:
        """Term of the last entry; -1 while the log is empty."""
        return self._end_term

    @property
    def committed_index(self) -> int:
        """Highest index known committed (restored from the checkpoint at open); -1 if none."""
        return self._committed_index

    @property
    def write_pos(self) -> int:
        """Data-log position where the next entry would start (before any BLANK roll-over)."""
        return self._data_end

    @property
    def flushed_index(self) -> int:
        """Highest index known to be on disk."""
        return min(self._flushed_index, self._end_index)

    @property
    def disk_full(self) -> bool:
        """Whether appends are refused because the disk is above ``diskFullRatio``."""
        return self._disk_full

    # ------------------------------------------------------------------ appends
    def append(
        self,
        term: int,
        body: bytes,
        channel: int = 0,
        *,
        entry_type: EntryType = EntryType.NORMAL,
    ) -> Entry:
        """Append one entry as leader of ``term``; returns it with its index and position."""
        return self.append_batch(term, (body,), channel, entry_type=entry_type)[0]

    def append_batch(
        self,
        term: int,
        bodies: Sequence[bytes],
        channel: int = 0,
        *,
        entry_type: EntryType = EntryType.NORMAL,
    ) -> list[Entry]:
        """Append several entries at once (one write per segment, one sync in ``sync`` mode).

        All or nothing: if any body is too large or the disk is full, nothing is appended.

        Raises:
            EntryTooLargeError: a body exceeds ``max_body_bytes`` (or a segment).
            DiskFullError: the disk is above ``diskFullRatio`` or a segment cannot be allocated.
            InconsistentLogError: ``term`` is lower than the log's last term.
        """
        if not bodies:
            return []
        with self._lock:
            if self._retention_due:
                self._retention_due = False
                self.apply_retention()
            self._check_writable()
            plan = plan_leader_append(
                self._tail(),
                term,
                bodies,
                channel,
                entry_type,
                self._data_segment_bytes,
                self._max_body_bytes,
            )
            self._apply_plan(plan)
            return plan.entries

    def append_entries(self, entries: Sequence[Entry]) -> None:
        """Append entries received from a leader, byte for byte (DLedger ``appendAsFollower``).

        Raises:
            InconsistentLogError: an entry does not continue this log (index, term, position
                or chain CRC); nothing is appended.
        """
        if not entries:
            return
        with self._lock:
            self._check_writable()
            plan = plan_replicated_append(
                self._tail(), entries, self._data_segment_bytes, self._max_body_bytes
            )
            self._apply_plan(plan)

    def _tail(self) -> LogTail:
        return LogTail(self._end_index + 1, self._data_end, self._end_term, self._last_chain)

    def _apply_plan(self, plan: AppendPlan) -> None:
        entries = plan.entries
        first = entries[0]
        data = self._data
        index = self._index
        # Allocate every segment the plan needs before writing a byte, so DiskFullError
        # leaves the log exactly as it was.
        for pos, chunk in plan.data_writes:
            data.ensure_range(pos, pos + len(chunk))
        record_pos = first.index * INDEX_UNIT_SIZE
        records = plan.index_records
        index.ensure_range(record_pos, record_pos + len(records))
        for pos, chunk in plan.data_writes:
            data.write(pos, chunk)
        seg_bytes = index.segment_bytes
        written = 0
        while written < len(records):
            pos = record_pos + written
            room = seg_bytes - pos % seg_bytes
            piece = records[written : written + room]
            index.write(pos, piece)
            written += len(piece)
        last = entries[-1]
        self._recent.add(entries)
        if self._begin_index < 0:
            self._begin_index = first.index
        self._end_index = last.index
        self._end_term = last.term
        self._last_chain = last.chain_crc
        self._data_end = plan.end_pos
        if self._flush_mode == "sync":
            try:
                data.sync_now()
            except OSError as exc:
                self._fail(exc)
                raise StoreError(f"fdatasync failed; the store must be reopened: {exc}") from exc
            self._flushed_index = last.index
            self._flushed_pos = plan.end_pos

    def _check_writable(self) -> None:
        if self._closed:
            raise StoreClosedError(f"store {self._directory} is closed")
        if self._failed is not None:
            raise StoreError(
                f"store {self._directory} failed ({self._failed}); reopen it to recover"
            )
        if self._disk_full:
            raise DiskFullError(
                f"disk holding {self._directory} is above the diskFullRatio of "
                f"{self._retention.disk_full_ratio:.2f}; appends are refused until space is freed"
            )

    def _fail(self, exc: BaseException) -> None:
        _log.error("store %s failed: %s", self._directory, exc)
        self._failed = exc

    # ------------------------------------------------------------------ reads
    def get(self, index: int) -> Entry:
        """The entry at ``index``, its body verified against its CRC.

        Raises:
            IndexOutOfRangeError: ``index`` is negative or past ``end_index``.
            IndexCompactedError: ``index`` is before ``begin_index``.
            CorruptLogError: the stored entry fails its checks; no bytes are returned.
        """
        with self._lock:
            self._check_readable(index)
            return self._read_entry(index)

    def term_at(self, index: int) -> int:
        """The term of the entry at ``index`` (from the index record, without reading data)."""
        with self._lock:
            self._check_readable(index)
            return self._index_record(index)[4]

    def positions(self, first_index: int, last_index: int) -> list[int]:
        """Data-log positions of the entries ``first_index..last_index``, from their index records.

        How the broker learns where the messages it just appended landed (their physical offsets
        are ``pos + 48``) without reading the entries back.
        """
        with self._lock:
            self._check_readable(first_index)
            self._check_readable(last_index)
            return [self._index_record(i)[1] for i in range(first_index, last_index + 1)]

    def read_body(self, pos: int, size: int) -> bytes:
        """``size`` bytes at data-log position ``pos``, which must lie inside one entry's body.

        The broker's read by physical offset (RocketMQ ``getMessage``): a ConsumeQueue unit
        names a message by the position of its body. No CRC check here: the entry was checked
        when the dispatcher read it, and a pull must not pay for it again.

        Raises:
            IndexOutOfRangeError: the range is not inside the written log.
            IndexCompactedError: retention already deleted that part of the log.
        """
        with self._lock:
            if self._closed:
                raise StoreClosedError(f"store {self._directory} is closed")
            segment, off = self._locate_body(pos, size)
            return segment.mm[off : off + size]

    def read_bodies(
        self, positions: Sequence[int], sizes: Sequence[int], *, stamp_at: int | None = None
    ) -> bytes:
        """The ranges ``(positions[i], sizes[i])``, each as ``read_body`` reads it, back to back.

        The read of a whole pull (up to 1024 messages). ``read_body`` per message cost about
        1 us each in lock rounds, checks and a bytes object per message; here the lock is taken
        once, and ranges that continue one another (the records of one batch lie back to back in
        one entry) are checked and copied as one run.

        With ``stamp_at``, each range gets its own position written into it at that offset, as a
        big-endian int64: the broker's PHYSICALOFFSET field, which the append path leaves 0
        (see ``broker.storage.commitlog``). Doing it here, on the copy, spares the caller a copy of
        every record to patch it.

        The runs are gathered and stamped in a buffer the store keeps (under its lock) and the
        result is copied out of it once. A fresh gather buffer per call would make two new
        megabyte blocks per pull (it and the result); the allocator hands freed blocks that size
        back to the kernel and gets them again as zeroed pages, a page fault per 4 KiB, which
        costs more than copying the bytes.

        Raises:
            ValueError: ``positions`` and ``sizes`` differ in length, or a range is too short
                for the stamp.
            IndexOutOfRangeError, IndexCompactedError: as ``read_body`` raises for the first
                range it refuses; nothing is returned then.
        """
        count = len(positions)
        if len(sizes) != count:
            raise ValueError(f"{count} positions but {len(sizes)} sizes")
        with self._lock:
            if self._closed:
                raise StoreClosedError(f"store {self._directory} is closed")
            if not count:
                return b""
            shortest = min(sizes)
            if shortest < 0:  # runs assume sizes >= 0: raise for the first range refused
                for pos, size in zip(positions, sizes, strict=True):
                    self._locate_body(pos, size)
            if stamp_at is not None and not 0 <= stamp_at <= shortest - _STAMP.size:
                raise ValueError(
                    f"a range of {shortest} bytes has no room for a stamp at offset {stamp_at}"
                )
            total = sum(sizes)
            out = self._scratch
            if total > len(out):
                out = bytearray(total)
                if total <= _SCRATCH_MAX_BYTES:
                    self._scratch = out
            self._gather(out, positions, sizes)
            if stamp_at is not None:
                pack_into = _STAMP.pack_into
                for pos, size in zip(positions, sizes, strict=True):
                    pack_into(out, stamp_at, pos)
                    stamp_at += size
            if total == len(out):
                return bytes(out)
            with memoryview(out) as view:
                return bytes(view[:total])

    def _gather(self, out: bytearray, positions: Sequence[int], sizes: Sequence[int]) -> None:
        """Copy the ranges to the start of ``out``, back to back (``read_bodies``'s checks).

        Call with the lock held, on an open store, with sizes >= 0.
        """
        count = len(positions)
        ends = list(map(operator.add, positions, sizes))
        # Range i starts a new run unless it begins where range i - 1 ends (in C-level loops:
        # this runs per message).
        run_starts = itertools.compress(range(1, count), map(operator.ne, positions[1:], ends))
        data_end = self._data_end
        dst = 0
        for first, stop in itertools.pairwise((0, *run_starts, count)):
            pos, end = positions[first], ends[stop - 1]
            segment = self._data.segment_at(pos)
            if pos >= 0 and end <= data_end and segment is not None and end <= segment.end:
                dst = _copy_into(out, dst, segment, pos - segment.base, end - pos)
                continue
            # Part of the run is refused (raise as read_body does, for the first range
            # refused), or the run crosses into the next segment file: range by range.
            for i in range(first, stop):
                segment, off = self._locate_body(positions[i], sizes[i])
                dst = _copy_into(out, dst, segment, off, sizes[i])

    def _locate_body(self, pos: int, size: int) -> tuple[Segment, int]:
        """The segment holding bytes ``[pos, pos + size)`` and their offset in it; raises as
        ``read_body`` documents. Call with the lock held, on an open store."""
        if pos < 0 or size < 0 or pos + size > self._data_end:
            raise IndexOutOfRangeError(
                f"bytes {pos}..{pos + size} are outside the written log (ends at {self._data_end})"
            )
        segment = self._data.segment_at(pos)
        if segment is None:
            raise IndexCompactedError(
                f"position {pos} was deleted by retention or was never written"
            )
        if pos + size > segment.end:
            raise IndexOutOfRangeError(
                f"bytes {pos}..{pos + size} cross the end of segment {segment.path}"
            )
        return segment, pos - segment.base

    def read_range(self, start_index: int, max_bytes: int) -> list[Entry]:
        """Entries from ``start_index`` on, up to ``max_bytes`` of entry sizes in total.

        Returns at least one entry when ``start_index <= end_index`` (even one larger than
        ``max_bytes``) and an empty list when ``start_index == end_index + 1``. Consecutive
        entries are also checked against each other's chain CRC.
        """
        with self._lock:
            if start_index == self._end_index + 1 and start_index >= 0:
                if self._closed:
                    raise StoreClosedError(f"store {self._directory} is closed")
                return []
            self._check_readable(start_index)
            cached = self._recent.read(start_index, max_bytes)
            if cached:
                return cached
            entries = [self._read_entry(start_index)]
            total = entries[0].size
            prev = entries[0]
            index = start_index + 1
            while index <= self._end_index:
                entry = self._read_entry(index)
                if total + entry.size > max_bytes:
                    break
                expected = chain_crc(
                    prev.chain_crc,
                    entry.magic,
                    entry.size,
                    entry.index,
                    entry.term,
                    entry.pos,
                    entry.channel,
                    entry.body_crc,
                )
                if expected != entry.chain_crc:
                    segment = self._data.segment_at(entry.pos)
                    raise CorruptLogError(
                        segment.path if segment else self._data.directory,
                        entry.pos - (segment.base if segment else 0),
                        f"chain CRC of entry {index} does not continue entry {index - 1}",
                    )
                entries.append(entry)
                total += entry.size
                prev = entry
                index += 1
            return entries

    def _check_readable(self, index: int) -> None:
        if self._closed:
            raise StoreClosedError(f"store {self._directory} is closed")
        if index < 0 or index > self._end_index:
            raise IndexOutOfRangeError(
                f"index {index} is outside the log [{self._begin_index}, {self._end_index}]"
            )
        if index < self._begin_index:
            raise IndexCompactedError(
                f"index {index} was deleted by retention; the log begins at {self._begin_index}"
            )

    def _index_record(self, index: int) -> tuple[int, int, int, int, int]:
        record_pos = index * INDEX_UNIT_SIZE
        segment = self._index.segment_at(record_pos)
        if segment is None:
            raise CorruptLogError(
                self._index.directory, record_pos, f"index segment for entry {index} is missing"
            )
        off = record_pos - segment.base
        record: tuple[int, int, int, int, int] = INDEX_RECORD.unpack_from(segment.mm, off)
        if record[3] != index or record[2] < HEADER_SIZE:
            raise CorruptLogError(
                segment.path, off, f"index record of entry {index} is damaged: {record}"
            )
        return record

    def _read_entry(self, index: int) -> Entry:
        magic, pos, size, _, term = self._index_record(index)
        segment = self._data.segment_at(pos)
        if segment is None or pos + size > segment.end:
            raise CorruptLogError(
                self._data.directory,
                pos,
                f"index record of entry {index} points outside the data files (pos {pos})",
            )
        off = pos - segment.base
        try:
            entry = decode_entry(segment.mm, off)
        except EntryFormatError as exc:
            raise CorruptLogError(segment.path, off, f"entry {index}: {exc.reason}") from exc
        if (entry.index, entry.pos, entry.size, entry.term, entry.magic) != (
            index,
            pos,
            size,
            term,
            magic,
        ):
            raise CorruptLogError(
                segment.path,
                off,
                f"entry header (index {entry.index}, pos {entry.pos}, term {entry.term}) does "
                f"not match its index record (index {index}, pos {pos}, term {term})",
            )
        return entry

    # ------------------------------------------------------------------ commit, truncate, retention
    def set_committed_index(self, index: int) -> None:
        """Record that entries up to ``index`` are committed (DLedger ``updateCommittedIndex``).

        Never moves backwards; clamped to ``end_index``. Persisted by the next checkpoint.
        """
        with self._lock:
            index = min(index, self._end_index)
            self._committed_index = max(self._committed_index, index)

    def truncate_from(self, index: int) -> None:
        """Remove every entry with index >= ``index`` (a follower's divergent tail).

        Durable when it returns: the removed bytes are zeroed and synced, so a crash cannot bring
        them back. A no-op when ``index > end_index``.

        Raises:
            InconsistentLogError: ``index`` is at or below the committed index (committed
                entries are never removed).
            IndexCompactedError: ``index`` is before ``begin_index``.
        """
        with self._lock:
            if self._closed:
                raise StoreClosedError(f"store {self._directory} is closed")
            if index > self._end_index:
                return
            if index <= self._committed_index:
                raise InconsistentLogError(
                    f"cannot truncate from {index}: entries up to {self._committed_index} "
                    "are committed"
                )
            if index < self._begin_index:
                raise IndexCompactedError(
                    f"cannot truncate from {index}: the log begins at {self._begin_index}"
                )
            if index == self._begin_index and index > 0:
                raise InconsistentLogError(
                    f"cannot remove every entry of a log that begins at {index}"
                )
            prev = self._read_entry(index - 1) if index > self._begin_index else None
            # The log ends where the previous entry ends, not where the removed one starts: an
            # entry that opened a new segment has a BLANK before it, and the next entry the
            # leader sends may fit where that BLANK is (found by a simulation seed with 4 KiB
            # segments; a follower then refused every later entry as misplaced).
            pos = self._index_record(index)[1] if prev is None else prev.pos + prev.size
            data_seg = self._data.segment_at(pos)
            touched = self._data.zero_range(
                pos, min(self._data_end, data_seg.end if data_seg else pos)
            )
            self._data.drop_after(pos)
            record_pos = index * INDEX_UNIT_SIZE
            index_seg = self._index.segment_at(record_pos)
            end_record = (self._end_index + 1) * INDEX_UNIT_SIZE
            touched += self._index.zero_range(
                record_pos, min(end_record, index_seg.end if index_seg else record_pos)
            )
            self._index.drop_after(record_pos)
            try:
                SegmentLog.sync_segments(touched)
            except OSError as exc:
                self._fail(exc)
                raise StoreError(f"fdatasync failed during truncation: {exc}") from exc
            self._data_end = pos
            if prev is None:
                self._begin_index = self._end_index = self._end_term = -1
                self._last_chain = 0
            else:
                self._end_index = prev.index
                self._end_term = prev.term
                self._last_chain = prev.chain_crc
            self._truncations += 1
            self._recent.truncate_from(index)
            self._flushed_index = min(self._flushed_index, self._end_index)
            self._flushed_pos = min(self._flushed_pos, pos)
        # A checkpoint still naming a flushed position beyond the cut would make recovery
        # stricter than it should be about the region truncation just zeroed.
        self._write_checkpoint()
        _log.info("store %s truncated from index %d", self._directory, index)

    def rebuild_from(self, entries: Sequence[Entry]) -> None:
        """Discard the whole log, committed entries too, and begin it again with ``entries``.

        For a follower whose log ends before its leader's oldest entry (retention deleted what it
        needs next on the leader): DLedger's ``rebuildWithPos``. ``entries`` keep the leader's
        indexes and positions; the first must start a data segment (a leader's oldest entry
        always does: retention deletes whole segments) and is committed. The entries are checked
        before anything is deleted, and the result is durable when this returns.

        Raises:
            InconsistentLogError: the entries are not a valid run starting a segment.
        """
        if not entries:
            return
        first = entries[0]
        with self._lock:
            self._check_writable()
            if first.pos % self._data_segment_bytes != 0:
                raise InconsistentLogError(
                    f"entry {first.index} at position {first.pos} does not start a data segment "
                    f"of {self._data_segment_bytes} bytes; the log cannot begin with it"
                )
            tail = LogTail(first.index, first.pos, -1, 0, verify_chain=False)
            plan = plan_replicated_append(
                tail, entries, self._data_segment_bytes, self._max_body_bytes
            )
            self._data.drop_first(len(self._data.segments))
            self._index.drop_first(len(self._index.segments))
            self._recent.clear()
            self._truncations += 1
            self._begin_index = self._end_index = self._end_term = -1
            self._last_chain = 0
            self._data_end = self._flushed_pos = first.pos
            self._flushed_index = -1
            self._committed_index = -1
            self._apply_plan(plan)
            self._committed_index = first.index
            try:
                self._data.sync_now()
                self._index.sync_now()
            except OSError as exc:
                self._fail(exc)
                raise StoreError(f"fdatasync failed while rebuilding the log: {exc}") from exc
            self._flushed_index = self._end_index
            self._flushed_pos = self._data_end
        self._write_checkpoint()
        _log.warning(
            "store %s rebuilt: the log now begins at index %d (position %d)",
            self._directory, first.index, first.pos,
        )  # fmt: skip

    def reset_begin(self, index: int) -> int:
        """Delete the whole data segments holding only entries before ``index``.

        Entries are removed a segment at a time, so the new ``begin_index`` is the first index of
        the segment holding ``index`` (it may be lower than ``index``). Returns it.

        Raises:
            StoreError: ``index`` is above the committed index; uncommitted data is never
                deleted, and the last committed entry is always kept.
        """
        with self._lock:
            if self._closed:
                raise StoreClosedError(f"store {self._directory} is closed")
            if self._end_index < 0 or index <= self._begin_index:
                return self._begin_index
            if index > self._committed_index:
                raise StoreError(
                    f"reset_begin({index}) would delete uncommitted entries; the committed index "
                    f"is {self._committed_index}"
                )
            segments = self._data.segments
            count = 0
            for k in range(len(segments) - 1):
                next_first = _first_index(segments[k + 1])
                if next_first is None or next_first > index:
                    break
                count = k + 1
            self._drop_data_segments(count)
            return self._begin_index

    def _drop_data_segments(self, count: int) -> None:
        if count == 0:
            return
        self._data.drop_first(count)
        first = _first_index(self._data.segments[0])
        assert first is not None
        self._begin_index = first
        self._index.drop_before(first * INDEX_UNIT_SIZE)
        _log.info(
            "store %s: deleted %d old segments, log begins at %d", self._directory, count, first
        )

    @property
    def retention(self) -> RetentionConfig:
        """The retention settings in force."""
        return self._retention

    def set_retention(self, retention: RetentionConfig) -> None:
        """Use ``retention`` from the next retention pass on (a broker's live config update:
        ``fileReservedTime``, ``deleteWhen`` and the disk ratios change without a restart).

        The maintenance thread reads ``self._retention`` once per pass, and rebinding one
        attribute to another frozen object is atomic, so no lock is needed.
        """
        self._retention = retention

    def apply_retention(self) -> int:
        """Check disk usage and delete expired segments now; returns how many were deleted.

        The maintenance thread calls this every ``clean_interval_ms``; call it yourself when the
        store was opened with ``background=False``.
        """
        ratio = self._disk_usage(self._directory)
        with self._lock:
            if self._closed:
                return 0
            full = ratio > self._retention.disk_full_ratio
            if full != self._disk_full:
                _log.warning(
                    "store %s: disk %.0f%% used, appends %s",
                    self._directory,
                    ratio * 100,
                    "refused" if full else "accepted again",
                )
            self._disk_full = full
            segments = self._data.segments
            eligible = 0
            for k in range(len(segments) - 1):
                next_first = _first_index(segments[k + 1])
                if next_first is None or next_first > self._committed_index:
                    break
                eligible = k + 1
            if eligible == 0:
                return 0
            mtimes = [os.stat(s.path).st_mtime for s in segments[:eligible]]
            count = segments_to_delete(
                mtimes, eligible, self._clock.wall_time_s(), ratio, self._retention
            )
            self._drop_data_segments(count)
            return count

    # ------------------------------------------------------------------ durability
    def flush(self) -> None:
        """Sync every written byte to disk and write the checkpoint."""
        if self._closed:
            raise StoreClosedError(f"store {self._directory} is closed")
        self._flush_segments()
        self._write_checkpoint()

    def sync_written(self) -> bool:
        """Sync every byte written so far; safe to call from a thread other than the appender's.

        For group commit: the caller runs it off its event loop while appends go on. Returns
        False when a truncation ran during the sync (what was written before may have been cut
        and rewritten): the caller must sync again before it relies on anything being durable.
        """
        if self._closed:
            raise StoreClosedError(f"store {self._directory} is closed")
        generation = self._truncations
        self._flush_segments()
        return generation == self._truncations

    def _flush_segments(self, logs: tuple[SegmentLog, ...] | None = None) -> None:
        """Sync dirty segments without taking the store lock.

        The appending thread re-takes the store lock as soon as it releases it, so a flusher
        waiting for it could starve for many flush intervals (measured: up to 20 ms per
        acquisition under a sustained append load), silently stretching the async durability
        window. Positions are read before the dirty flags are cleared, so everything they
        cover was written before the sync started.
        """
        if self._closed:
            return
        generation = self._truncations
        flushed = self._end_index
        flushed_pos = self._data_end
        pinned: list[tuple[SegmentLog, list[Segment]]] = [
            (log, log.pin_dirty()) for log in (logs or (self._data, self._index))
        ]
        try:
            for _, segments in pinned:
                SegmentLog.sync_segments(segments)
        except OSError as exc:
            self._fail(exc)
            raise
        finally:
            for log, segments in pinned:
                log.unpin_all(segments)
        if logs is None and generation == self._truncations:
            # A truncation while the sync ran may have cut below what was synced.
            self._flushed_index = max(self._flushed_index, flushed)
            self._flushed_pos = max(self._flushed_pos, flushed_pos)

    def _write_checkpoint(self) -> None:
        # Its own lock: the owner thread (flush, truncate) and the maintenance thread both
        # write it, and two writers of checkpoint.tmp at once would interleave their bytes.
        with self._checkpoint_lock:
            if self._closed:
                return
            checkpoint = Checkpoint(
                self._end_index, self._committed_index, min(self._flushed_pos, self._data_end)
            )
            if checkpoint != self._last_checkpoint:
                write_checkpoint(self._directory, checkpoint)
                self._last_checkpoint = checkpoint
            self._last_checkpoint_ms = self._clock.monotonic_ms()

    def run_maintenance(self) -> None:
        """One round of background work: flush, checkpoint, and retention when due."""
        if self._flush_mode == "async":
            self._flush_segments()
        else:
            self._flush_segments((self._index,))  # data is synced by each append
        now_ms = self._clock.monotonic_ms()
        if now_ms - self._last_checkpoint_ms >= self._checkpoint_interval_ms:
            self._write_checkpoint()
        if now_ms - self._last_clean_ms >= self._clean_interval_ms:
            self._last_clean_ms = now_ms
            # Retention deletes segments, so it needs the store lock; if the owner thread is
            # busy appending, it runs the check itself at its next append instead of making
            # this thread (and so the flushes) wait.
            if self._lock.acquire(timeout=_RETENTION_LOCK_WAIT_S):
                try:
                    self.apply_retention()
                finally:
                    self._lock.release()
            else:
                self._retention_due = True

    def _start_maintenance(self) -> None:
        self._thread = threading.Thread(
            target=self._maintenance_loop, name=f"ledgermq-store-{self._directory}", daemon=True
        )
        self._thread.start()

    def _maintenance_loop(self) -> None:
        interval = self._flush_interval_s
        while not self._stop.wait(interval):
            try:
                self.run_maintenance()
            except Exception:  # noqa: BLE001 - supervisor: log, back off, go on (DLedger: 200 ms)
                _log.exception("store %s: background maintenance failed", self._directory)
                self._stop.wait(_ERROR_BACKOFF_S)

    # ------------------------------------------------------------------ closing
    def close(self) -> None:
        """Flush, write the checkpoint and release the directory. Safe to call twice."""
        if self._closed:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            if self._failed is None:
                with self._lock:
                    self._data.sync_now()
                    self._index.sync_now()
                    self._flushed_index = self._end_index
                    self._flushed_pos = self._data_end
                self._write_checkpoint()
        finally:
            with self._lock:
                self._closed = True
                self._data.close()
                self._index.close()
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
                os.close(self._lock_fd)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"LedgerStore({self._directory!r}, entries=[{self._begin_index}, {self._end_index}], "
            f"committed={self._committed_index}, flush={self._flush_mode!r})"
        )


_RECENT_CACHE_BYTES: Final = 32 << 20
_SCRATCH_MAX_BYTES: Final = 8 << 20
"""Largest ``read_bodies`` gather buffer kept between calls: twice the 4 MiB a pull may read."""
_STAMP: Final = struct.Struct(">q")
"""The position ``read_bodies`` writes into each range (the broker's PHYSICALOFFSET)."""


class _RecentEntries:
    """The entries appended last, as written, for ``read_range``.

    A leader pushes each entry to its followers right after writing it; reading it back from
    the mapped segment meant decoding the header, copying the body and checking two CRCs per
    entry (a third of a busy leader's time). Entries here were checked when they were written
    and are dropped oldest first once they span more than ``limit_bytes`` of the data log, or
    when truncated.
    """

    __slots__ = ("_entries", "_first", "_limit")

    def __init__(self, limit_bytes: int) -> None:
        self._entries: list[Entry] = []
        self._first = 0  # offset of the oldest live entry in _entries
        self._limit = limit_bytes

    def add(self, entries: Sequence[Entry]) -> None:
        live = self._entries
        if self._first < len(live) and live[-1].index + 1 != entries[0].index:
            self.clear()
            live = self._entries
        live.extend(entries)
        end = entries[-1].pos + entries[-1].size
        first = self._first
        while first < len(live) and end - live[first].pos > self._limit:
            first += 1
        # Entries before ``first`` are dead; drop them once they are many (the deletion then
        # costs little per entry) or once they hold more than the limit themselves. Counting
        # entries alone let big entries pile up: 4,096 dead batches of 64 KiB kept 256 MiB,
        # and the heap grew by every byte replicated (a page fault per 4 KiB of messages).
        if first and ((first > 4096 and first * 2 > len(live)) or _span(live, first) > self._limit):
            del live[:first]
            first = 0
        self._first = first

    def read(self, start: int, max_bytes: int) -> list[Entry]:
        live = self._entries
        if self._first >= len(live):
            return []
        offset = start - live[self._first].index
        if offset < 0 or self._first + offset >= len(live):
            return []
        i = self._first + offset
        total = live[i].size
        end = i + 1
        count = len(live)
        while end < count:
            total += live[end].size
            if total > max_bytes:
                break
            end += 1
        return live[i:end]

    def truncate_from(self, index: int) -> None:
        live = self._entries
        if self._first >= len(live):
            return
        keep = index - live[self._first].index
        if keep <= 0:
            self.clear()
            return
        del live[self._first + keep :]

    def clear(self) -> None:
        self._entries = []
        self._first = 0


def _span(entries: list[Entry], count: int) -> int:
    """Data-log bytes held by ``entries[:count]`` (consecutive entries)."""
    last = entries[count - 1]
    return last.pos + last.size - entries[0].pos


def _copy_into(out: bytearray, dst: int, segment: Segment, off: int, size: int) -> int:
    """Copy ``size`` bytes at ``off`` of ``segment`` to ``out[dst:]``; returns ``dst + size``.

    Through a memoryview, so the bytes are copied once (an mmap slice would first make a bytes
    object of them). The view is released before returning: a segment with a live export
    cannot be closed, and the caller holds the store lock, so retention cannot close it before.
    """
    with memoryview(segment.mm) as view:
        out[dst : dst + size] = view[off : off + size]
    return dst + size


def _first_index(segment: Segment) -> int | None:
    """Index of the entry at the start of ``segment``, or ``None`` if it holds none."""
    magic, size, idx, *_ = ENTRY_HEADER.unpack_from(segment.mm, 0)
    if magic <= 0 or size < HEADER_SIZE:
        return None
    return int(idx)


def _lock_directory(directory: str) -> int:
    fd = os.open(os.path.join(directory, "lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as exc:
        os.close(fd)
        raise StoreLockedError(f"store {directory} is already open (lock held)") from exc
    return fd
