"""Applying a ``Ready``'s log changes to a store: the one place the core's log reaches disk.

The server, the simulator, the golden interaction tests and the core benchmark all persist
through here: truncate first, then append; a leader's own entries go through ``append_batch`` in
runs of one type, term and channel, a follower's received entries through ``append_entries`` (which
checks continuity and the chain CRC before writing anything).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from ledgermq.raft import NewEntry
from ledgermq.store import Entry, EntryType

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ledgermq.raft import Ready
    from ledgermq.store import LogStore

__all__ = ["apply_log_changes"]


def apply_log_changes(store: LogStore, ready: Ready) -> int:
    """Truncate and append as ``ready`` asks; returns how many entries were appended."""
    if ready.restart_from is not None:
        # A follower rebuilt from a leader whose older entries retention deleted.
        assert ready.entries
        assert ready.entries[0].index == ready.restart_from
        store.rebuild_from(cast("list[Entry]", ready.entries))
        return len(ready.entries)
    if ready.truncate_from is not None:
        store.truncate_from(ready.truncate_from)
    if not ready.entries:
        return 0
    if isinstance(ready.entries[0], NewEntry):
        run: list[NewEntry] = []
        for entry in ready.entries:
            assert isinstance(entry, NewEntry)
            head = run[0] if run else None
            if head is not None and (
                entry.entry_type != head.entry_type
                or entry.term != head.term
                or entry.channel != head.channel
            ):
                _append_run(store, run)
                run = []
            run.append(entry)
        _append_run(store, run)
    else:
        # Received entries go to the log as they are: append_entries checks every one (a copy
        # filtered in Python cost 5 % of the core benchmark, and would drop a wrong item silently).
        assert isinstance(ready.entries[-1], Entry)
        store.append_entries(cast("list[Entry]", ready.entries))
    return len(ready.entries)


def _append_run(store: LogStore, run: Sequence[NewEntry]) -> None:
    head = run[0]
    stored = store.append_batch(
        head.term, [e.body for e in run], head.channel, entry_type=EntryType(head.entry_type)
    )
    # append_batch numbers a batch contiguously: its ends agreeing means every index does.
    if (stored[0].index, stored[-1].index) != (run[0].index, run[-1].index):
        raise AssertionError(
            f"store numbered entries {stored[0].index}..{stored[-1].index}, "
            f"the core expected {run[0].index}..{run[-1].index}"
        )
