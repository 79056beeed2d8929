"""Applying a ``Ready``'s log changes to a ``MemoryLedgerStore``: what the server does on disk.

Shared by the simulator and the golden interaction tests so both persist exactly as the ledger
server will: truncate first, then append; a leader's own entries go through ``append_batch`` in
runs of one type and term, a follower's replicated entries through ``append_entries``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledgermq.raft import NewEntry
from ledgermq.store import Entry, EntryType, MemoryLedgerStore

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ledgermq.raft import Ready

__all__ = ["apply_log_changes"]


def apply_log_changes(store: MemoryLedgerStore, ready: Ready) -> list[Entry]:
    """Truncate and append as ``ready`` asks; returns the entries now stored."""
    if ready.truncate_from is not None:
        store.truncate_from(ready.truncate_from)
    if not ready.entries:
        return []
    if isinstance(ready.entries[0], NewEntry):
        run: list[NewEntry] = []
        for entry in ready.entries:
            assert isinstance(entry, NewEntry)
            if run and (entry.entry_type != run[0].entry_type or entry.term != run[0].term):
                _append_run(store, run)
                run = []
            run.append(entry)
        _append_run(store, run)
    else:
        store.append_entries([e for e in ready.entries if isinstance(e, Entry)])
    return store.read_range(store.end_index - len(ready.entries) + 1, 1 << 40)


def _append_run(store: MemoryLedgerStore, run: Sequence[NewEntry]) -> None:
    stored = store.append_batch(
        run[0].term, [e.body for e in run], entry_type=EntryType(run[0].entry_type)
    )
    assert [e.index for e in stored] == [e.index for e in run]
