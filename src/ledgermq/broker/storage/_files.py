"""File helpers shared by the broker's derived stores (ConsumeQueues and the key index).

Both keep their data in ``store.segment.SegmentLog`` files; what they add is stricter loading
(a file of the wrong size is refused, not extended) and durable creation of nested directories.
"""

from __future__ import annotations

import contextlib
import os

from ledgermq.errors import CorruptLogError
from ledgermq.store.layout import parse_segment_name
from ledgermq.store.segment import SegmentLog, fsync_directory

__all__ = ["discard_from", "make_dirs_durably", "open_segment_log"]


def make_dirs_durably(path: str) -> None:
    """``os.makedirs(path)``, then fsync the parent of every directory it created.

    A queue's files are fsynced when they are created, but after a power loss they are only
    reachable if the directories leading to them were made durable too.
    """
    missing: list[str] = []
    current = os.path.abspath(path)
    while not os.path.isdir(current):
        missing.append(current)
        current = os.path.dirname(current)
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made meanwhile by another opener
            os.mkdir(directory)
        fsync_directory(os.path.dirname(directory))


def open_segment_log(directory: str, file_bytes: int, what: str) -> SegmentLog:
    """Load the segment files in ``directory``, every one of which must be ``file_bytes`` long.

    ``SegmentLog.load`` extends a short last file with zeros, which suits the ledger (its tail is
    re-sent by the leader). Here missing bytes would silently lose units that a dispatch
    checkpoint already counts as durable, so any size mismatch is refused with the fix in the
    message: the directory is derived data and is rebuilt from the commit log when deleted.
    """
    if os.path.isdir(directory):
        for name in sorted(os.listdir(directory)):
            if parse_segment_name(name) is None:
                continue
            path = os.path.join(directory, name)
            actual = os.path.getsize(path)
            if actual != file_bytes:
                raise CorruptLogError(
                    path,
                    actual,
                    f"{what} file is {actual} bytes, expected {file_bytes}; it was written with "
                    "another file size or damaged. Delete the directory to rebuild it from the "
                    "commit log",
                )
    log = SegmentLog(directory, file_bytes, what=what)
    try:
        log.load()
    except BaseException:
        log.close()
        raise
    return log


def discard_from(log: SegmentLog, pos: int) -> bool:
    """Make the log end at logical ``pos``: zero every byte after it and delete later files.

    Only the non-zero part of the file holding ``pos`` is rewritten (zeroing zeros would dirty
    every page of a file that may be megabytes long), and the result is synced, so stale
    records can never reappear behind newer ones after a crash. Returns whether anything was
    discarded. A crash half-way leaves some of the stale bytes; the callers re-detect and
    redo this at the next start (recovery, or ``truncate_dirty`` at start).
    """
    changed = False
    segments = log.segments
    if segments and pos < segments[-1].base:
        log.drop_after(pos)
        changed = True
    holder = log.segment_at(pos)
    if holder is not None:
        last = holder.last_nonzero(pos - holder.base, holder.size)
        if last >= 0:
            holder.zero(pos - holder.base, last + 1)
            changed = True
    log.sync_now()
    return changed
