"""Finding the end of the log at start-up, repairing a torn tail, refusing real corruption.

Theory of operation (DLedger ``recover()``, spec-replication-storage.md section 1.11, with the
CRCs DLedger leaves out):

1. **Start segment.** Scanning a whole log at every start would take minutes for a large store,
   so, like DLedger, scanning starts at the third-last data segment, or earlier when the
   checkpoint's ``flushedPos`` lies in an earlier segment (nothing after it was ever known to be
   on disk), or at the first segment when there is no checkpoint. It walks back while the start
   segment's first entry does not decode or does not match its index record. Entries before the
   start segment are trusted at open and verified on every read instead.
2. **Forward scan.** Each entry must have a known magic, ``size == 48 + bodyLen``, ``pos`` equal to
   where it sits, ``index`` one more than the previous, a ``term`` no smaller than the previous,
   a body matching ``bodyCrc`` and a ``chainCrc`` continuing the previous entry's. A BLANK record
   (magic -1) must fill its segment exactly and moves the scan to the next segment. An all-zero
   header with nothing after it is the clean end of the log. Each entry's index record is
   compared with the entry and rewritten when missing or different (the index is derived data).
3. **A bad entry** (or an all-zero header with bytes after it) ends the scan. It is a *torn
   tail*, and is repaired, when either
   - no later entry provably exists: none of the next index records points past it to an entry
     that decodes with that index and a good CRC (what a crash in the middle of the last write
     leaves: at most stray bytes of that write); or
   - it lies at or after the position the checkpoint records as flushed (``flushedPos``): those
     bytes were never known to be on disk, and a power loss may write back some of their pages
     and not others, leaving holes followed by data.
   The bytes from the bad entry on are copied to ``<store>/repair/`` first, then zeroed (later
   segments deleted) and synced, and the repair is logged. Anything else, damage followed by an
   entry that was written after it, is damage the store must not paper over: opening fails with
   ``CorruptLogError`` naming the file, the byte position and the reason.
4. **After the scan**, data segments past the end are removed (they are empty) and index segments
   outside ``[begin, end]`` are removed.

The forward scan is the open-time hot path (about 2 us per entry in Python, two seconds for a
1 GiB log of 1 KiB entries). When the C extension is built, ``_scan`` hands runs of entries to
``_speedups.scan_entries``, which makes the same checks in the same order with the same reasons
and rewrites index records in the current index segment; it hands back anything else (a BLANK, a
zero header, a record in another index segment), which the Python loop, the reference, then
takes one step. ``LEDGERMQ_PURE_PYTHON=1`` at import time, or a missing extension, leaves the
Python loop alone (tests/store/test_speedups_scan.py compares the two).

What it deliberately does not do: scan segments before the start segment; repair anything but
the tail; trust the checkpoint's ``endIndex`` (the log is the truth, as in DLedger).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, TypeAlias

from crc32c import crc32c

from ledgermq.errors import CorruptLogError
from ledgermq.store.entry_format import (
    BLANK_HEADER,
    BLANK_MAGIC,
    CHAIN_INPUT,
    ENTRY_HEADER,
    HEADER_SIZE,
    INDEX_RECORD,
    INDEX_UNIT_SIZE,
    MIN_BLANK_LEN,
    EntryFormatError,
    EntryType,
    decode_entry,
)

try:
    from ledgermq.store._speedups import scan_entries as _c_scan_entries
except ImportError:  # built without a C compiler: the reference loop serves alone
    HAVE_SPEEDUPS = False
else:
    HAVE_SPEEDUPS = True

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledgermq.store.segment import Segment, SegmentLog

    _ScanResult: TypeAlias = tuple[int, int, int, int, int, int, int, str | None]
    _ScanRun: TypeAlias = Callable[
        [memoryview, int, int, int, int, int, int, int, memoryview | None, int], _ScanResult
    ]

__all__ = ["HAVE_SPEEDUPS", "RecoveredLog", "recover"]

_log: Final = logging.getLogger("ledgermq.store")
_VALID_MAGICS: Final = frozenset(int(t) for t in EntryType)
_ZERO_HEADER: Final = bytes(HEADER_SIZE)
_STRAY_WINDOW_BYTES: Final = 8 << 20
"""How far past a zero header recovery looks for bytes a torn write left behind."""
_LATER_RECORDS_CHECKED: Final = 4

_scan_run: _ScanRun | None = None
"""The C scan (``_speedups.scan_entries``), or None for the reference loop alone."""
if HAVE_SPEEDUPS and os.environ.get("LEDGERMQ_PURE_PYTHON") != "1":
    _scan_run = _c_scan_entries


@dataclass(slots=True)
class RecoveredLog:
    """What recovery found: the state the store continues from."""

    begin_index: int = -1
    end_index: int = -1
    end_term: int = -1
    data_end: int = 0
    """Data-log position where the next entry (or BLANK) is written."""
    last_chain_crc: int = 0
    entries_scanned: int = 0
    index_records_rewritten: int = 0
    repairs: list[str] = field(default_factory=list)


class _BadEntryError(Exception):
    def __init__(self, segment_no: int, offset: int, reason: str, prev_index: int) -> None:
        super().__init__(reason)
        self.segment_no = segment_no
        self.offset = offset
        self.reason = reason
        self.prev_index = prev_index


def recover(
    data: SegmentLog, index: SegmentLog, repair_dir: str, durable_pos: int = -1
) -> RecoveredLog:
    """Scan the loaded logs, repair a torn tail, and return where the log ends.

    ``durable_pos`` is the checkpoint's ``flushedPos`` (-1 if unknown): damage at or after it is
    treated as a torn tail.
    """
    result = RecoveredLog()
    segments = data.segments
    if not segments:
        index.drop_first(len(index.segments))
        return result
    start = max(0, len(segments) - 3)
    # Bytes after the last known flush were never verified durable: scan them all. Without a
    # checkpoint (a store younger than its first checkpoint, or one whose file was lost) that
    # means the whole log.
    durable_segment = data.segment_at(durable_pos) if durable_pos >= 0 else None
    if durable_pos < 0:
        start = 0
    elif durable_segment is not None:
        start = min(start, segments.index(durable_segment))
    while start > 0 and not _is_good_start(segments[start], index):
        start -= 1
    try:
        _scan(data, index, start, result)
    except _BadEntryError as bad:
        _repair_or_refuse(data, index, bad, repair_dir, durable_pos, result)
        # Scan again from the same start: the repaired log now ends cleanly at the bad entry.
        result = RecoveredLog(repairs=result.repairs)
        _scan(data, index, start, result)
    _tidy_after_end(data, index, result)
    return result


def _allocated_view(segment: Segment | None) -> memoryview | None:
    """The part of an index segment that has blocks, for the C scan to rewrite records in."""
    if segment is None:
        return None
    return memoryview(segment.mm)[: segment.allocated]


def _is_good_start(segment: Segment, index: SegmentLog) -> bool:
    """Whether ``segment`` begins with a sound entry that its index record agrees with."""
    mm = segment.mm
    magic, size, idx, term, pos, _, _, crc, body_len = ENTRY_HEADER.unpack_from(mm, 0)
    if magic not in _VALID_MAGICS or size != HEADER_SIZE + body_len or pos != segment.base:
        return False
    if size + MIN_BLANK_LEN > segment.size or crc32c(mm[HEADER_SIZE:size]) != crc:
        return False
    record_seg = index.segment_at(idx * INDEX_UNIT_SIZE)
    if record_seg is None:
        return False
    record = INDEX_RECORD.unpack_from(record_seg.mm, idx * INDEX_UNIT_SIZE - record_seg.base)
    return bool(record == (magic, pos, size, idx, term))


def _scan(  # noqa: PLR0915 - one tight loop on purpose: it is the open-time hot path
    data: SegmentLog, index: SegmentLog, start: int, result: RecoveredLog
) -> None:
    """Walk entries from segment ``start``; fill ``result``; raise ``_BadEntryError`` at damage."""
    segments = data.segments
    unpack_header = ENTRY_HEADER.unpack_from
    pack_chain = CHAIN_INPUT.pack
    pack_record = INDEX_RECORD.pack
    unpack_record = INDEX_RECORD.unpack_from
    prev_index = -1
    prev_term = -1
    prev_chain = -1  # -1: no previous entry scanned, the chain cannot be checked yet
    begin_index = -1
    scanned = 0
    rewritten = 0
    pos = segments[start].base
    seg_no = start
    index_seg: Segment | None = None
    scan_run = _scan_run
    while seg_no < len(segments):
        segment = segments[seg_no]
        mm = segment.mm
        off = pos - segment.base
        seg_size = segment.size
        next_segment = False
        with memoryview(mm) as view:
            while True:
                if scan_run is not None:
                    # The C scan runs the checks below over every entry it can; it stops before
                    # the first it leaves to this loop (a BLANK, a zero header, an index record
                    # in another index segment) or at a bad entry, with the reference's reason.
                    # It may rewrite index records only where the index segment has blocks
                    # (a write into a hole of a full disk would SIGBUS): it hands an entry
                    # whose record lies past them to this loop, which allocates.
                    records = _allocated_view(index_seg)
                    try:
                        (
                            off,
                            n,
                            n_rewritten,
                            prev_index,
                            prev_term,
                            prev_chain,
                            begin_index,
                            why,
                        ) = scan_run(
                            view,
                            off,
                            seg_size,
                            segment.base,
                            prev_index,
                            prev_term,
                            prev_chain,
                            begin_index,
                            records,
                            0 if index_seg is None else index_seg.base,
                        )
                    finally:
                        if records is not None:
                            records.release()
                    scanned += n
                    if n_rewritten:
                        assert index_seg is not None
                        index_seg.dirty = True
                        rewritten += n_rewritten
                    if why is not None:
                        raise _BadEntryError(seg_no, off, why, prev_index)
                remaining = seg_size - off
                if remaining < MIN_BLANK_LEN:
                    short = f"only {remaining} bytes left in segment"
                    raise _BadEntryError(seg_no, off, short, prev_index)
                magic, size = BLANK_HEADER.unpack_from(mm, off)
                if magic == BLANK_MAGIC:
                    if size != remaining:
                        blank = f"BLANK record claims {size} bytes but {remaining} remain"
                        raise _BadEntryError(seg_no, off, blank, prev_index)
                    next_segment = True
                    break
                # The clean end may sit fewer than 48 bytes before the segment's end (the last
                # entry left 8-47 bytes; the next append rolls over with a BLANK), so compare
                # only the bytes that exist.
                head = min(HEADER_SIZE, remaining)
                if magic == 0 and size == 0 and view[off : off + head] == _ZERO_HEADER[:head]:
                    if _something_follows(segments, seg_no, off):
                        stray = "the entry header is zero but bytes follow it"
                        raise _BadEntryError(seg_no, off, stray, prev_index)
                    break  # the clean end of the log
                if remaining < HEADER_SIZE:
                    raise _BadEntryError(seg_no, off, "truncated entry header", prev_index)
                magic, size, idx, term, epos, channel, chain, crc, body_len = unpack_header(mm, off)
                reason: str | None = None
                if magic not in _VALID_MAGICS:
                    reason = f"unknown magic {magic}"
                elif size != HEADER_SIZE + body_len:
                    reason = f"size {size} does not match body length {body_len} + 48"
                elif size + MIN_BLANK_LEN > remaining:
                    reason = f"entry of {size} bytes runs past the end of its segment"
                elif epos != segment.base + off:
                    reason = f"entry says it is at position {epos}, it is at {segment.base + off}"
                elif prev_index >= 0 and idx != prev_index + 1:
                    reason = f"index {idx} does not follow {prev_index}"
                elif term < prev_term:
                    reason = f"term {term} of entry {idx} is lower than the previous {prev_term}"
                elif crc32c(view[off + HEADER_SIZE : off + size]) != crc:
                    reason = f"body CRC mismatch in entry {idx}"
                elif prev_chain >= 0 and chain != crc32c(
                    pack_chain(magic, size, idx, term, epos, channel, crc), prev_chain
                ):
                    reason = (
                        f"chain CRC mismatch in entry {idx}: its header or a predecessor changed"
                    )
                if reason is not None:
                    raise _BadEntryError(seg_no, off, reason, prev_index)
                # The index record must agree; it is derived data, so rewrite it when it does not.
                record_pos = idx * INDEX_UNIT_SIZE
                if index_seg is None or not index_seg.base <= record_pos < index_seg.end:
                    index_seg = index.ensure_segment(record_pos)
                    index_seg.adopt_blocks()
                rec_off = record_pos - index_seg.base
                # Blocks for the record before any write to it; the C scan above uses them too.
                index_seg.allocate(rec_off + INDEX_UNIT_SIZE)
                if unpack_record(index_seg.mm, rec_off) != (magic, epos, size, idx, term):
                    index_seg.mm[rec_off : rec_off + INDEX_UNIT_SIZE] = pack_record(
                        magic, epos, size, idx, term
                    )
                    index_seg.dirty = True
                    rewritten += 1
                if begin_index < 0:
                    begin_index = idx
                prev_index = idx
                prev_term = term
                prev_chain = chain
                scanned += 1
                off += size
        pos = segment.base + off
        if not next_segment:
            break
        pos = segment.end
        seg_no += 1
    result.entries_scanned = scanned
    result.index_records_rewritten = rewritten
    result.end_index = prev_index
    result.end_term = prev_term
    result.last_chain_crc = max(prev_chain, 0)
    result.data_end = pos
    if prev_index >= 0:
        result.begin_index = _first_index(segments[0]) if start > 0 else begin_index


def _something_follows(segments: list[Segment], seg_no: int, off: int) -> bool:
    """Whether any byte follows a zero header: near it in its segment, or in a later segment."""
    segment = segments[seg_no]
    stop = min(segment.size, off + _STRAY_WINDOW_BYTES)
    if segment.last_nonzero(off, stop) >= 0:
        return True
    return any(not s.is_zero(0, HEADER_SIZE) for s in segments[seg_no + 1 :])


def _first_index(segment: Segment) -> int:
    _, _, idx, _, _, _, _, _, _ = ENTRY_HEADER.unpack_from(segment.mm, 0)
    return int(idx)


def _later_entry_exists(data: SegmentLog, index: SegmentLog, prev_index: int, pos: int) -> bool:
    """Whether an entry after the bad one at ``pos`` provably exists (index record + good CRC)."""
    for idx in range(prev_index + 2, prev_index + 2 + _LATER_RECORDS_CHECKED):
        record_seg = index.segment_at(idx * INDEX_UNIT_SIZE)
        if record_seg is None:
            continue
        _, entry_pos, size, record_index, _ = INDEX_RECORD.unpack_from(
            record_seg.mm, idx * INDEX_UNIT_SIZE - record_seg.base
        )
        segment = data.segment_at(entry_pos)
        if record_index != idx or entry_pos <= pos or segment is None:
            continue
        if entry_pos + max(size, HEADER_SIZE) > segment.end:
            continue
        try:
            entry = decode_entry(segment.mm, entry_pos - segment.base)
        except EntryFormatError:
            continue
        if entry.index == idx and entry.pos == entry_pos:
            return True
    return False


def _repair_or_refuse(
    data: SegmentLog,
    index: SegmentLog,
    bad: _BadEntryError,
    repair_dir: str,
    durable_pos: int,
    result: RecoveredLog,
) -> None:
    segments = data.segments
    segment = segments[bad.segment_no]
    later = segments[bad.segment_no + 1 :]
    log_pos = segment.base + bad.offset
    never_durable = 0 <= durable_pos <= log_pos
    if not never_durable and _later_entry_exists(data, index, bad.prev_index, log_pos):
        raise CorruptLogError(
            segment.path,
            bad.offset,
            f"{bad.reason} (log position {log_pos}); entries written after it follow, so this "
            "is not a torn tail and the store will not discard them. Restore this replica "
            "from its peers or inspect the file",
        )
    discarded = 0
    backups: list[str] = []
    for victim, start in [(segment, bad.offset), *((s, 0) for s in later)]:
        stop = victim.last_nonzero(start, victim.size) + 1
        if stop > start:
            backups.append(_backup_and_zero(victim, start, stop, repair_dir))
            discarded += stop - start
    data.drop_after(log_pos)
    why = "never known durable" if never_durable else "no entry follows it"
    message = (
        f"repaired torn tail in {segment.path} at byte {bad.offset} (log position {log_pos}, "
        f"{why}): {bad.reason}; {discarded} bytes discarded, copies kept in "
        f"{', '.join(backups) or '(nothing to keep)'}"
    )
    _log.warning("%s", message)
    result.repairs.append(message)


def _backup_and_zero(segment: Segment, start: int, stop: int, repair_dir: str) -> str:
    """Copy bytes ``[start, stop)`` of ``segment`` to the repair folder, then zero and sync them."""
    os.makedirs(repair_dir, exist_ok=True)
    backup = os.path.join(repair_dir, f"{os.path.basename(segment.path)}.{start}.broken")
    with open(backup, "wb") as f:
        f.write(segment.mm[start:stop])
        f.flush()
        os.fsync(f.fileno())
    segment.zero(start, stop)
    os.fdatasync(segment.fd)
    segment.dirty = False
    return backup


def _tidy_after_end(data: SegmentLog, index: SegmentLog, result: RecoveredLog) -> None:
    """Drop the (empty) segments past the end, and index segments outside the log."""
    data.drop_after(result.data_end)
    if result.end_index < 0:
        index.drop_first(len(index.segments))
        return
    index.drop_after(result.end_index * INDEX_UNIT_SIZE)
    index.drop_before(result.begin_index * INDEX_UNIT_SIZE)
