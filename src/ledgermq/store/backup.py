"""A consistent copy of a ledger store that another process is writing (``store backup``).

The store's files are append-only: an entry is written once into the data segments and its
fixed-size unit into the index segments, and only the tail changes (appends, and a follower's
truncation of entries that were never committed). Reading through the page cache sees what the
owner wrote through its mmap. So a copy taken in this order is the log as it was at some moment,
up to a tail that may be torn:

1. the checkpoint, whose committed index was true when it was written (it may be old);
2. every index segment, oldest first;
3. every data segment, oldest first: each holds at least the data of the units copied in 2.

Opening the copy runs the store's crash recovery, which cuts a torn tail (entries whose data or
unit were copied half-written, or units whose data was not yet there) exactly as after a
crash; anything it cannot explain as a tail (the owner truncated or deleted files while they
were copied) refuses the copy, and the caller runs it again. The copy is then closed, which
writes its own checkpoint. Segment files keep their preallocated size; runs of zeros are left
as holes, so a copy takes the disk space of what the log holds.

Pure file work on a directory; the broker-level backup (metadata snapshot, manifest, restore)
is ``broker.backup``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass
from typing import Final

from ledgermq.errors import CorruptLogError, StoreError
from ledgermq.store.checkpoint import CHECKPOINT_NAME
from ledgermq.store.entry_format import INDEX_UNIT_SIZE
from ledgermq.store.layout import parse_segment_name
from ledgermq.store.ledger_store import (
    DEFAULT_DATA_SEGMENT_BYTES,
    DEFAULT_INDEX_SEGMENT_ENTRIES,
    LedgerStore,
)

__all__ = [
    "BackupError",
    "LogCopy",
    "copy_live_store",
    "copy_tree_sparse",
    "detect_segment_sizes",
    "open_copy",
]

_CHUNK: Final = 64 << 10
"""Copy granularity: a chunk of zeros is left as a hole."""
_ZEROS: Final = bytes(_CHUNK)


class BackupError(StoreError):
    """The copy could not be made or is not a log (the sentence says what to do)."""


@dataclass(frozen=True, slots=True)
class LogCopy:
    """What a copied log holds: ``[begin_index, end_index]``, committed up to
    ``committed_index``, and the bytes its files take on disk."""

    begin_index: int
    end_index: int
    end_term: int
    committed_index: int
    disk_bytes: int


def detect_segment_sizes(directory: str) -> tuple[int, int]:
    """(data_segment_bytes, index_segment_entries) of an existing store, read from its files.

    Falls back to the defaults for a store that has no segment of a kind yet.
    """
    sizes = [DEFAULT_DATA_SEGMENT_BYTES, DEFAULT_INDEX_SEGMENT_ENTRIES]
    for slot, (sub, divisor) in enumerate((("data", 1), ("index", INDEX_UNIT_SIZE))):
        path = os.path.join(directory, sub)
        if not os.path.isdir(path):
            continue
        names = sorted(n for n in os.listdir(path) if parse_segment_name(n) is not None)
        if names:
            sizes[slot] = os.path.getsize(os.path.join(path, names[0])) // divisor
    return sizes[0], sizes[1]


def _copy_sparse(source: str, target: str) -> int:
    """Copy ``source`` to ``target`` of the same size, leaving zero chunks as holes; the
    bytes written."""
    written = 0
    with open(source, "rb") as src, open(target, "wb") as dst:
        while chunk := src.read(_CHUNK):
            if chunk == _ZEROS[: len(chunk)]:
                dst.seek(len(chunk), os.SEEK_CUR)
            else:
                dst.write(chunk)
                written += len(chunk)
        dst.truncate()  # the size of the source, also when it ends in a hole
        dst.flush()
        os.fsync(dst.fileno())
    return written


def copy_tree_sparse(source: str, target: str) -> None:
    """Copy the directory ``source`` into the new ``target``, every file with holes kept
    (``shutil.copytree`` would write a preallocated segment's zeros in full)."""
    for root, _, files in os.walk(source):
        here = os.path.join(target, os.path.relpath(root, source))
        os.makedirs(here, exist_ok=True)
        for name in files:
            _copy_sparse(os.path.join(root, name), os.path.join(here, name))


def _segments(directory: str, sub: str) -> list[str]:
    path = os.path.join(directory, sub)
    if not os.path.isdir(path):
        return []
    return sorted(n for n in os.listdir(path) if parse_segment_name(n) is not None)


def copy_live_store(source: str, target: str) -> None:
    """Copy the store in ``source`` (open in another process or not) into the new directory
    ``target`` in the module docstring's order. ``BackupError`` when a segment disappeared
    during the copy (retention deleted it: run the backup again)."""
    if not os.path.isdir(os.path.join(source, "data")):
        raise BackupError(f"{source} is not a ledger store (no data/ directory)")
    os.makedirs(target)
    with contextlib.suppress(FileNotFoundError):  # none yet: the copy counts nothing committed
        shutil.copyfile(
            os.path.join(source, CHECKPOINT_NAME), os.path.join(target, CHECKPOINT_NAME)
        )
    for sub in ("index", "data"):
        os.makedirs(os.path.join(target, sub))
        for name in _segments(source, sub):
            try:
                _copy_sparse(os.path.join(source, sub, name), os.path.join(target, sub, name))
            except FileNotFoundError:
                raise BackupError(
                    f"{sub} segment {name} of {source} was deleted while it was copied "
                    "(retention); run the backup again"
                ) from None


def open_copy(
    directory: str, committed_at_least: int = -1, committed_when_copied: int = -1
) -> LogCopy:
    """Recover the copied store in ``directory`` (cutting a torn tail), record entries up to
    ``committed_at_least`` as committed (the caller knows them committed: a metadata snapshot
    applied them before the log was copied) and up to ``committed_when_copied`` as far as the
    copy reaches (a running replica's commit index when the copy began), close it (writing its
    checkpoint) and say what it holds; ``BackupError`` when it is not one log or ends before
    ``committed_at_least``."""
    data_bytes, index_entries = detect_segment_sizes(directory)
    try:
        store = LedgerStore.open(
            directory,
            background=False,
            data_segment_bytes=data_bytes,
            index_segment_entries=index_entries,
        )
    except CorruptLogError as exc:
        raise BackupError(
            f"the copy is not one log ({exc}): the replica truncated or deleted files while "
            "they were copied; run the backup again"
        ) from None
    with store:
        if store.end_index < committed_at_least:
            raise BackupError(
                f"the copied log ends at {store.end_index}, before entry {committed_at_least} "
                "that the copied metadata snapshot applied: the replica truncated its log while "
                "it was copied; run the backup again"
            )
        # what the running replica had committed when the copy began, as far as the copy reaches
        # (entries it had not yet written out are not in the copy, and need not be)
        store.set_committed_index(
            max(committed_at_least, min(committed_when_copied, store.end_index))
        )
        copy = (store.begin_index, store.end_index, store.end_term, store.committed_index)
    disk = 0
    for root, _, files in os.walk(directory):
        disk += sum(os.stat(os.path.join(root, f)).st_blocks * 512 for f in files)
    return LogCopy(*copy, disk)
