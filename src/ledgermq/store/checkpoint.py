"""The checkpoint file: the committed index, which the log itself cannot tell.

DLedger G1 writes ``<store>/checkpoint`` as a Java properties file with ``endIndex`` and
``committedIndex`` (spec-replication-storage.md section 1.12) and reads back only
``committedIndex``; the end of the log is found by scanning. We keep that format. Unlike DLedger
(write, copy to ``.bak``, delete, rename, no fsync), the new file is fsynced before it atomically
replaces the old one, so a crash leaves either the old or the new checkpoint, never neither.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Final

from ledgermq.store.segment import replace_file_durably

__all__ = ["Checkpoint", "read_checkpoint", "write_checkpoint"]

CHECKPOINT_NAME: Final = "checkpoint"
_log: Final = logging.getLogger("ledgermq.store")


@dataclass(frozen=True, slots=True)
class Checkpoint:
    end_index: int = -1
    committed_index: int = -1
    flushed_pos: int = -1
    """Data-log position up to which everything was on disk when the checkpoint was written
    (our addition; DLedger readers ignore the key). Recovery treats damage at or after it as a
    torn tail: those bytes were never known durable, so a power loss may have left holes there.
    -1 when unknown."""


def read_checkpoint(directory: str) -> Checkpoint:
    """The checkpoint in ``directory``; an absent or unreadable one counts as empty (-1).

    An unreadable checkpoint is not corruption of the log: the committed index only moves the
    point below which entries are known to be committed, and the cluster re-establishes it.
    """
    path = os.path.join(directory, CHECKPOINT_NAME)
    try:
        with open(path, encoding="ascii") as f:
            text = f.read()
    except FileNotFoundError:
        return Checkpoint()
    except (OSError, UnicodeDecodeError) as exc:
        _log.warning("checkpoint %s unreadable (%s); starting with no committed index", path, exc)
        return Checkpoint()
    values: dict[str, int] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if not sep:
            continue
        try:
            values[key.strip()] = int(value.strip())
        except ValueError:
            _log.warning("checkpoint %s: ignoring bad line %r", path, line)
    return Checkpoint(
        values.get("endIndex", -1), values.get("committedIndex", -1), values.get("flushedPos", -1)
    )


def write_checkpoint(directory: str, checkpoint: Checkpoint) -> None:
    """Durably replace the checkpoint in ``directory``."""
    data = (
        f"endIndex={checkpoint.end_index}\n"
        f"committedIndex={checkpoint.committed_index}\n"
        f"flushedPos={checkpoint.flushed_pos}\n"
    ).encode("ascii")
    replace_file_durably(directory, CHECKPOINT_NAME, data)
