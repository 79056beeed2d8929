"""Fixed-size, memory-mapped segment files and the contiguous log they form.

A ``SegmentLog`` is DLedger's ``MmapFileList`` (RocketMQ's ``MappedFileQueue``): equal-size files
named by their start offset that together hold one logical byte log. The data log and the index
log of a store are each one ``SegmentLog``.

Why these choices:

- **Sparse files, allocated in growing chunks before they are written.** A segment file has its
  full size from the start (``ftruncate``), but takes disk blocks only as it fills: before a
  byte is written, ``posix_fallocate`` allocates the chunk holding it (a step that doubles with
  the bytes already allocated, from 16 KiB up to 64 MiB at a time, so a 1 GiB segment grows in
  about 28 calls and most 20-byte ConsumeQueue units cost none). Writing through a shared mapping
  into an unallocated page of a full disk kills the process with SIGBUS; allocating first turns
  "disk full" into a clean ``DiskFullError`` before any byte of the write, so the caller's state
  is unchanged. Every writer keeps to that: appends through ``ensure_range``, recovery's index
  rewrites within ``Segment.allocated``, and zeroing skips pages that already read as zero, so
  it never touches a hole (a page holding a non-zero byte has blocks).
- **Writes are slice assignments into the mapping** (about 0.2 us per KiB into resident pages
  against 3.7 us per ``pwrite`` call, research/limits.md section 1.5).
- **Flushes are ``os.fdatasync`` on the file**, which writes back pages dirtied through the
  mapping and, unlike ``mmap.flush``, releases the GIL while it waits for the disk.
- **Closing is deferred while a flush holds the segment** (``pin``/``unpin``), so the background
  flusher can sync without holding the store lock and a concurrent truncation or retention never
  closes a descriptor under it.

This module does no validation of entries; it moves bytes.
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
import threading
from typing import TYPE_CHECKING, Final

from ledgermq.errors import CorruptLogError, DiskFullError, StoreError
from ledgermq.store.layout import parse_segment_name, segment_base, segment_name

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["Segment", "SegmentLog", "fsync_directory"]

_log: Final = logging.getLogger("ledgermq.store")
_ZERO_CHUNK: Final = bytes(1 << 20)
_PWRITE_MIN_BYTES: Final = 4096
PAGE_BYTES: Final = mmap.PAGESIZE
_ZERO_PAGE: Final = bytes(PAGE_BYTES)
MIN_GROWTH_BYTES: Final = 16 << 10
"""Smallest allocation step: a queue of a few messages takes 16-20 KiB, not its 6 MB file."""
MAX_GROWTH_BYTES: Final = 64 << 20
"""Largest allocation step: steps double up to it, then stay (one call per 64 MiB written)."""
READ_MARGIN: Final = PAGE_BYTES
"""Blocks kept allocated past the last byte written (see ``Segment.allocate``)."""


def allocation_target(needed: int, size: int) -> int:
    """How far to allocate a file of ``size`` bytes when bytes up to ``needed`` must be backed.

    ``needed`` plus as much again (at least ``MIN_GROWTH_BYTES``, at most ``MAX_GROWTH_BYTES``),
    rounded up to a page and capped at ``size``: the allocated part doubles while it is small,
    so growth costs O(log size) calls, then grows by a bounded chunk, so one call never
    allocates a huge range on the append path.
    """
    target = needed + min(max(needed, MIN_GROWTH_BYTES), MAX_GROWTH_BYTES)
    target += -target % PAGE_BYTES
    return min(size, target)


def allocate_blocks(fd: int, start: int, stop: int, what: str, path: str) -> None:
    """Give bytes ``[start, stop)`` of the file real blocks; ``DiskFullError`` if full.

    Once this returns, writes into the range (through the mapping too) cannot fail for lack of
    space. Not synced: after a crash the blocks of never-synced writes may be gone, but a
    reopened segment starts with ``allocated = 0`` and allocates again before it writes, and
    allocating where blocks already exist takes no space (so it works on a full disk).
    """
    if stop <= start:
        return
    try:
        os.posix_fallocate(fd, start, stop - start)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise DiskFullError(
                f"no space left to allocate bytes {start}..{stop} of the {what} segment {path}"
            ) from exc
        raise StoreError(f"cannot allocate {what} segment {path}: {exc}") from exc


def replace_file_durably(directory: str, name: str, data: bytes) -> None:
    """Atomically and durably replace ``directory/name`` with ``data``.

    Write a temporary file, fsync it, rename it over the old one, fsync the directory: after a
    crash the file holds either the old or the new bytes, never a mix.
    """
    path = os.path.join(directory, name)
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_directory(directory)


def fsync_directory(path: str) -> None:
    """Make a directory's entries (created, renamed or deleted files) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Segment:
    """One segment file, mapped whole into memory."""

    __slots__ = (
        "_closed",
        "_pins",
        "_retired",
        "allocated",
        "base",
        "dirty",
        "fd",
        "mm",
        "path",
        "size",
        "what",
        "write_limit",
    )

    def __init__(self, path: str, base: int, size: int, fd: int, what: str = "data") -> None:
        self.path = path
        self.base = base
        """Logical offset of the file's first byte (also its name)."""
        self.size = size
        self.fd = fd
        self.mm = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        self.what = what
        self.allocated = 0
        """File-relative bytes ``[0, allocated)`` known to have blocks (allocated by this
        process, or found so by a no-op allocation after reopen); ``allocate`` raises it."""
        self.write_limit = 0
        """Writes of ``SegmentLog.write`` end at or below it: ``allocated - READ_MARGIN``, or
        the whole file once it is all allocated."""
        self.dirty = False
        """Set after every write; cleared by a flush just before it syncs."""
        self._pins = 0
        self._retired = False
        self._closed = False

    @property
    def end(self) -> int:
        """Logical offset just past the file's last byte."""
        return self.base + self.size

    def pin(self) -> bool:
        """Keep the file open until ``unpin`` (a flush uses the descriptor); False if closed.

        Pins are counted under the log's ``pin_lock``, not the store lock, so the flusher
        never waits for the appending thread.
        """
        if self._closed or self._retired:
            return False
        self._pins += 1
        return True

    def unpin(self) -> None:
        self._pins -= 1
        if self._pins == 0 and self._retired:
            self._close_now()

    def retire(self) -> None:
        """Close the file now, or as soon as the last pin is released."""
        self._retired = True
        if self._pins == 0:
            self._close_now()

    def _close_now(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.mm.close()
        os.close(self.fd)

    def allocate(self, needed: int) -> None:
        """Make sure file-relative bytes ``[0, needed)`` can be written, growing by a chunk.

        Blocks go to ``[0, needed + READ_MARGIN)`` at least: a reader that looks just past
        the written end (recovery reading the next header) then never maps a hole. Raises
        ``DiskFullError`` (nothing written) when the disk is full.
        """
        if needed <= self.write_limit:
            return
        target = allocation_target(needed + READ_MARGIN, self.size)
        allocate_blocks(self.fd, self.allocated, target, self.what, self.path)
        self.allocated = target
        self.write_limit = target if target == self.size else target - READ_MARGIN

    def adopt_blocks(self) -> None:
        """Count the blocks a reopened file already has (up to its last data) as allocated.

        Recovery's way to let the C scan rewrite index records anywhere in the written part
        without handing each growth step back to Python. Costs no space where the blocks
        exist (the file is written front to back, so there are none missing before its end).
        """
        end = self.data_end()
        if end > self.allocated:
            allocate_blocks(self.fd, self.allocated, end, self.what, self.path)
            self.allocated = end
            self.write_limit = end if end == self.size else max(0, end - READ_MARGIN)

    def allocate_range(self, start: int, stop: int) -> None:
        """Give file-relative bytes ``[start, stop)`` blocks (whole pages; no ``write_limit``).

        For the parts of a file that are not filled front to back (the key index's header,
        hash slots and items each track their own).
        """
        start -= start % PAGE_BYTES
        stop = min(self.size, stop + -stop % PAGE_BYTES)
        allocate_blocks(self.fd, start, stop, self.what, self.path)

    def data_ranges(self, start: int, stop: int) -> Iterator[tuple[int, int]]:
        """The parts of file-relative ``[start, stop)`` that may hold data (not holes).

        ``SEEK_DATA`` / ``SEEK_HOLE``: what lies outside them reads as zero and must not be
        read through the mapping, which on tmpfs allocates a page per hole page read (and
        raises SIGBUS when the file system is full). A file system without hole support
        reports one range, the whole file.
        """
        fd = self.fd
        while start < stop:
            try:
                data = os.lseek(fd, start, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # no data after start
                    return
                raise
            if data >= stop:
                return
            hole = min(os.lseek(fd, data, os.SEEK_HOLE), stop)
            yield data, hole
            start = hole

    def data_end(self) -> int:
        """File-relative end of the last range that may hold data (0 for an empty file)."""
        return max((hi for _, hi in self.data_ranges(0, self.size)), default=0)

    def read_bytes(self, start: int, stop: int) -> bytes:
        """File-relative bytes ``[start, stop)`` read with ``pread`` (holes cost nothing)."""
        return os.pread(self.fd, stop - start, start)

    def is_zero(self, start: int, stop: int) -> bool:
        """Whether bytes ``[start, stop)`` of the file (file-relative) are all zero."""
        for lo, hi in self.data_ranges(start, stop):
            for at in range(lo, hi, len(_ZERO_CHUNK)):
                n = min(len(_ZERO_CHUNK), hi - at)
                if self.read_bytes(at, at + n) != _ZERO_CHUNK[:n]:
                    return False
        return True

    def last_nonzero(self, start: int, stop: int) -> int:
        """File-relative offset of the last non-zero byte in ``[start, stop)``, or -1."""
        for lo, hi in reversed(list(self.data_ranges(start, stop))):
            for end in range(hi, lo, -len(_ZERO_CHUNK)):
                n = min(len(_ZERO_CHUNK), end - lo)
                chunk = self.read_bytes(end - n, end)
                if chunk != _ZERO_CHUNK[:n]:
                    return end - n + len(chunk.rstrip(b"\0")) - 1
        return -1

    def zero(self, start: int, stop: int) -> None:
        """Overwrite bytes ``[start, stop)`` (file-relative) with zeros.

        Only pages that hold a non-zero byte are written (and only they are read through the
        mapping): a page that reads as zero may be a hole, and writing it would allocate a
        block, which raises SIGBUS through the mapping on a full disk. A non-zero page has its
        blocks, as everything written was allocated first.
        """
        mm = self.mm
        for lo, hi in self.data_ranges(start, stop):
            at = lo
            while at < hi:
                n = min(PAGE_BYTES - at % PAGE_BYTES, hi - at)
                if self.read_bytes(at, at + n) != _ZERO_PAGE[:n]:
                    mm[at : at + n] = _ZERO_PAGE[:n]
                at += n
        self.dirty = True


class SegmentLog:
    """A logical byte log made of equal-size segment files in one directory.

    Not thread-safe: the store serialises callers with its lock. The flusher runs outside that
    lock and uses only ``pin_dirty``, ``sync_segments`` and ``unpin_all``, which coordinate with
    segment deletion through ``pin_lock``.
    """

    def __init__(self, directory: str, segment_bytes: int, *, what: str) -> None:
        self.directory = directory
        self.segment_bytes = segment_bytes
        self.what = what
        """``data`` or ``index``: named in errors and logs."""
        self.segments: list[Segment] = []
        self.pin_lock = threading.Lock()
        """Guards segment pins and retirement (see ``Segment.pin``); held only briefly."""

    # ------------------------------------------------------------------ loading
    def load(self) -> list[str]:
        """Open the existing segment files. Returns warnings about repaired files.

        Every file must have the configured size, except that the *last* may be short (a file
        cut by a crash or a copy): it is extended with zeros (a hole: no blocks) and recovery
        treats the missing bytes as a torn tail. Segments must be contiguous. Nothing is
        allocated here: a loaded segment's ``allocated`` starts at 0, and the first write
        re-allocates from the file's start, which costs no space where blocks exist.
        """
        os.makedirs(self.directory, exist_ok=True)
        names = sorted(n for n in os.listdir(self.directory) if parse_segment_name(n) is not None)
        warnings: list[str] = []
        for i, name in enumerate(names):
            base = int(name)
            path = os.path.join(self.directory, name)
            actual = os.path.getsize(path)
            if base % self.segment_bytes != 0:
                raise CorruptLogError(
                    path,
                    0,
                    f"{self.what} segment name {name} is not a multiple of the segment size "
                    f"{self.segment_bytes}; was the store created with another segment size?",
                )
            last = i == len(names) - 1
            if actual != self.segment_bytes and not (last and actual < self.segment_bytes):
                raise CorruptLogError(
                    path,
                    actual,
                    f"{self.what} segment is {actual} bytes, expected {self.segment_bytes}; "
                    "the store was created with another segment size or the file was damaged",
                )
            if self.segments and base != self.segments[-1].end:
                raise CorruptLogError(
                    path,
                    0,
                    f"{self.what} segments are not contiguous: expected a segment starting at "
                    f"{self.segments[-1].end}, found {name}",
                )
            fd = os.open(path, os.O_RDWR)
            try:
                if actual < self.segment_bytes:
                    os.ftruncate(fd, self.segment_bytes)  # a hole, read as zeros
                    # Blocks just past the data, where recovery reads the next header.
                    allocate_blocks(
                        fd, 0, min(actual + READ_MARGIN, self.segment_bytes), self.what, path
                    )
                    warnings.append(
                        f"{self.what} segment {path} was {actual} of {self.segment_bytes} bytes; "
                        "extended with zeros"
                    )
                self.segments.append(Segment(path, base, self.segment_bytes, fd, self.what))
            except BaseException:
                os.close(fd)
                raise
        return warnings

    # ------------------------------------------------------------------ geometry
    def segment_at(self, pos: int) -> Segment | None:
        """The segment holding logical byte ``pos``, if there is one."""
        if not self.segments:
            return None
        k = (pos - self.segments[0].base) // self.segment_bytes
        if 0 <= k < len(self.segments):
            return self.segments[k]
        return None

    def __iter__(self) -> Iterator[Segment]:
        return iter(self.segments)

    # ------------------------------------------------------------------ mutation
    def ensure_segment(self, pos: int, needed: int = 0) -> Segment:
        """The segment holding ``pos``, creating it (and only it) if needed.

        ``pos`` must lie in the segment after the last one (or anywhere when there is none). A
        new file gets its full size as a hole and blocks for its first ``needed`` bytes (and the
        growth step after them). Raises ``DiskFullError`` when they cannot be allocated;
        nothing is left behind.
        """
        existing = self.segment_at(pos)
        if existing is not None:
            return existing
        base = segment_base(pos, self.segment_bytes)
        if self.segments and base != self.segments[-1].end:
            raise StoreError(
                f"internal error: {self.what} segment at {base} would leave a gap after "
                f"{self.segments[-1].end}"
            )
        path = os.path.join(self.directory, segment_name(base))
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.ftruncate(fd, self.segment_bytes)
            segment = Segment(path, base, self.segment_bytes, fd, self.what)
            try:
                segment.allocate(needed)
                os.fsync(fd)  # the new size must survive a power loss, not only the dir entry
            except BaseException:
                segment.mm.close()
                raise
        except BaseException:
            os.close(fd)
            os.unlink(path)
            raise
        fsync_directory(self.directory)
        self.segments.append(segment)
        return segment

    def ensure_range(self, start: int, stop: int) -> None:
        """Make sure segments exist, with blocks, for every byte of ``[start, stop)``.

        Raises ``DiskFullError`` before anything is written when the disk is full; segments
        created for the range before the failure stay (empty, and harmless).
        """
        segments = self.segments
        if segments:
            last = segments[-1]
            if last.base <= start and stop <= last.base + last.write_limit:
                return  # nearly every append: no walk, no system call
        base = segment_base(start, self.segment_bytes)
        while base < stop:
            needed = min(stop - base, self.segment_bytes)
            segment = self.segment_at(base)
            if segment is None:
                self.ensure_segment(base, needed)
            else:
                segment.allocate(needed)
            base += self.segment_bytes

    def write(self, pos: int, data: bytes) -> None:
        """Write ``data`` at logical ``pos``; the bytes must lie in one existing segment."""
        segment = self.segment_at(pos)
        assert segment is not None, f"no {self.what} segment for {pos}"
        off = pos - segment.base
        if len(data) >= _PWRITE_MIN_BYTES:
            # No page faults, and no re-fault of a page the last fdatasync write-protected.
            written = os.pwrite(segment.fd, data, off)
            if written != len(data):  # only on an allocated file that lost its blocks
                raise StoreError(
                    f"short write to {segment.path}: {written} of {len(data)} bytes at {off}"
                )
        else:
            segment.mm[off : off + len(data)] = data
        segment.dirty = True

    def read(self, pos: int, size: int) -> bytes:
        """Bytes ``[pos, pos + size)``; they must lie in one existing segment."""
        segment = self.segment_at(pos)
        if segment is None:
            return b""
        off = pos - segment.base
        return segment.mm[off : off + size]

    def zero_range(self, start: int, stop: int) -> list[Segment]:
        """Zero logical bytes ``[start, stop)``; returns the segments touched."""
        touched: list[Segment] = []
        pos = start
        while pos < stop:
            segment = self.segment_at(pos)
            if segment is None:
                break
            end = min(stop, segment.end)
            segment.zero(pos - segment.base, end - segment.base)
            touched.append(segment)
            pos = end
        return touched

    def drop_after(self, pos: int) -> None:
        """Delete every segment that starts after the one holding ``pos``."""
        keep = [s for s in self.segments if s.base <= pos]
        self._delete([s for s in self.segments if s.base > pos])
        self.segments = keep

    def drop_before(self, pos: int) -> int:
        """Delete every segment that ends at or before ``pos``; returns how many."""
        doomed = [s for s in self.segments if s.end <= pos]
        self._delete(doomed)
        self.segments = self.segments[len(doomed) :]
        return len(doomed)

    def drop_first(self, count: int) -> None:
        """Delete the ``count`` oldest segments."""
        doomed = self.segments[:count]
        self._delete(doomed)
        self.segments = self.segments[count:]

    def _delete(self, doomed: list[Segment]) -> None:
        if not doomed:
            return
        for segment in doomed:
            os.unlink(segment.path)
            with self.pin_lock:
                segment.retire()
        fsync_directory(self.directory)

    # ------------------------------------------------------------------ durability
    def pin_dirty(self) -> list[Segment]:
        """Pin and return the segments with unflushed writes, clearing their dirty flags.

        Safe to call from the flusher thread without the store lock: the writer sets ``dirty``
        after each write, so a write that lands after the flag is cleared sets it again and is
        synced by the next flush. The caller syncs with ``sync_segments`` and must ``unpin``.
        """
        pinned: list[Segment] = []
        with self.pin_lock:
            for segment in list(self.segments):
                if segment.dirty and segment.pin():
                    segment.dirty = False
                    pinned.append(segment)
        return pinned

    def unpin_all(self, segments: list[Segment]) -> None:
        with self.pin_lock:
            for segment in segments:
                segment.unpin()

    def sync_pinned(self) -> None:
        """Sync every dirty segment with it pinned: safe from a thread other than the writer's
        while retention or a deletion may close segments meanwhile."""
        pinned = self.pin_dirty()
        try:
            self.sync_segments(pinned)
        finally:
            self.unpin_all(pinned)

    @staticmethod
    def sync_segments(segments: list[Segment]) -> None:
        """``fdatasync`` each segment (GIL released while the disk works)."""
        for segment in segments:
            os.fdatasync(segment.fd)

    def sync_now(self) -> None:
        """Flush every dirty segment in the caller's thread."""
        for segment in self.segments:
            if segment.dirty:
                segment.dirty = False
                os.fdatasync(segment.fd)

    def close(self) -> None:
        with self.pin_lock:
            for segment in self.segments:
                segment.retire()
        self.segments = []
