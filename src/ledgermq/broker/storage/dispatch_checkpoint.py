"""The dispatch checkpoint: how far the ConsumeQueues and the key index are known durable.

RocketMQ restarts dispatch from the largest physical offset any ConsumeQueue references
(spec-broker.md section 2.5), which trusts every queue to be flushed as far as the furthest one.
We record the point instead, in ``<root>/dispatch_checkpoint``, a properties file:

    dispatchedIndex=<ledger index of the last entry dispatched, -1 for none>
    reputFromOffset=<physical offset where dispatch resumes: the end of that entry, -1 for none>

**Ordering rule**: a checkpoint may only be written after the queues and the index it covers
are flushed; ``flush_and_checkpoint`` does both in that order, and is the only way the broker
should write it. After a crash the dispatcher restarts at ``dispatchedIndex + 1``: what was
dispatched after the checkpoint may be partly on disk, and dispatching it again is harmless
(``ConsumeQueue.put`` and ``KeyIndex.add`` drop repeats). The file is replaced atomically and
durably (``store.segment.replace_file_durably``): a crash leaves the old or the new one.

A missing or unreadable file means "nothing known": dispatch starts from the ledger's first
entry and rebuilds everything, which is slow but correct.
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ledgermq.store.segment import replace_file_durably

if TYPE_CHECKING:
    from ledgermq.broker.storage.consume_queue_store import ConsumeQueueStore
    from ledgermq.broker.storage.key_index import KeyIndex

__all__ = [
    "DISPATCH_CHECKPOINT_NAME",
    "DispatchCheckpoint",
    "flush_and_checkpoint",
    "read_dispatch_checkpoint",
    "write_dispatch_checkpoint",
]

DISPATCH_CHECKPOINT_NAME: Final = "dispatch_checkpoint"
_log: Final = logging.getLogger("ledgermq.broker")


@dataclass(frozen=True, slots=True)
class DispatchCheckpoint:
    """Everything up to ``dispatched_index`` is durably in the queues and the key index."""

    dispatched_index: int = -1
    """Ledger index of the last entry dispatched (-1: none)."""
    reput_from_offset: int = -1
    """Physical offset just past that entry, where dispatch resumes (RocketMQ's
    ``reputFromOffset``; -1: none)."""


def read_dispatch_checkpoint(root: str) -> DispatchCheckpoint:
    """The checkpoint under ``root``; an absent or unreadable one is the empty checkpoint."""
    path = os.path.join(root, DISPATCH_CHECKPOINT_NAME)
    try:
        with open(path, encoding="ascii") as f:
            text = f.read()
    except FileNotFoundError:
        return DispatchCheckpoint()
    except (OSError, UnicodeDecodeError) as exc:
        _log.warning(
            "dispatch checkpoint %s unreadable (%s); dispatching from the start", path, exc
        )
        return DispatchCheckpoint()
    values: dict[str, int] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            with contextlib.suppress(ValueError):  # a bad line: the key counts as missing
                values[key.strip()] = int(value.strip())
    if "dispatchedIndex" not in values or "reputFromOffset" not in values:
        _log.warning("dispatch checkpoint %s incomplete; dispatching from the start", path)
        return DispatchCheckpoint()
    return DispatchCheckpoint(values["dispatchedIndex"], values["reputFromOffset"])


def write_dispatch_checkpoint(root: str, checkpoint: DispatchCheckpoint) -> None:
    """Durably replace the checkpoint under ``root``. Flush what it covers first (see module)."""
    data = (
        f"dispatchedIndex={checkpoint.dispatched_index}\n"
        f"reputFromOffset={checkpoint.reput_from_offset}\n"
    ).encode("ascii")
    replace_file_durably(root, DISPATCH_CHECKPOINT_NAME, data)


def flush_and_checkpoint(
    root: str, checkpoint: DispatchCheckpoint, queues: ConsumeQueueStore, index: KeyIndex
) -> None:
    """Flush ``queues`` and ``index``, then write ``checkpoint``: the ordering rule, in one call.

    ``checkpoint`` must describe what had been dispatched when this was called.
    """
    queues.flush_all()
    index.flush()
    write_dispatch_checkpoint(root, checkpoint)
