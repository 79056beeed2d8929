"""The core's view of its log: the stored part (read-only) plus what is not stored yet.

The store implements ``LogReader``; the core never imports it (etcd's ``Storage``). Changes the
core decides (a truncation, appended entries) live in the unstable overlay until the driver has
applied them and called ``advance``; the core reads through the overlay meanwhile.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ledgermq.raft.messages import LogEntry
    from ledgermq.raft.ready import NewEntry

__all__ = ["LogReader", "LogView"]


class LogReader(Protocol):
    """Read-only access to the stored log (``ledgermq.store.LedgerStore`` satisfies it)."""

    @property
    def begin_index(self) -> int: ...
    @property
    def end_index(self) -> int: ...
    @property
    def end_term(self) -> int: ...
    def term_at(self, index: int) -> int: ...
    def read_range(self, start_index: int, max_bytes: int) -> Sequence[LogEntry]: ...


class LogView:
    def __init__(self, reader: LogReader) -> None:
        self.reader = reader
        self.truncate_from: int | None = None
        """Pending truncation (not yet applied to the store)."""
        self.unstable: list[NewEntry | LogEntry] = []
        """Pending appends, contiguous, starting right after the stable end."""
        self.restart_from: int | None = None
        """Pending restart: the whole stored log is discarded and the log begins at this index
        with the first of ``unstable`` (a follower rebuilt from a leader whose log begins after
        this one's end, see ``restart``)."""

    @property
    def begin_index(self) -> int:
        """First index the log holds (-1 when it is empty and has never been restarted)."""
        return self.restart_from if self.restart_from is not None else self.reader.begin_index

    @property
    def stable_end(self) -> int:
        """Last index the store holds that survives the pending truncation."""
        if self.restart_from is not None:
            return self.restart_from - 1
        end = self.reader.end_index
        if self.truncate_from is not None:
            end = min(end, self.truncate_from - 1)
        return end

    @property
    def last_index(self) -> int:
        return self.unstable[-1].index if self.unstable else self.stable_end

    @property
    def last_term(self) -> int:
        if self.unstable:
            return self.unstable[-1].term
        end = self.stable_end
        return self.reader.term_at(end) if end >= 0 else -1

    def term_at(self, index: int) -> int:
        """Term of ``index``; -1 for index -1 (the empty prefix)."""
        if index < 0:
            return -1
        if self.unstable and index >= self.unstable[0].index:
            return self.unstable[index - self.unstable[0].index].term
        if index > self.stable_end or index < self.begin_index:
            raise IndexError(
                f"index {index} is outside the log [{self.begin_index}, {self.last_index}]"
            )
        return self.reader.term_at(index)

    def append(self, entries: Sequence[NewEntry | LogEntry]) -> None:
        assert entries[0].index == self.last_index + 1, (entries[0].index, self.last_index)
        self.unstable.extend(entries)

    def restart(self, first: LogEntry) -> None:
        """Forget the whole log and begin it again with ``first`` (the leader's oldest entry).

        Used only when the entries this log needs next were deleted by retention on the leader:
        everything here is older than ``first`` or diverges from the leader, and ``first`` is
        committed (a leader deletes only committed entries and keeps the newest committed one).
        """
        self.truncate_from = None
        self.restart_from = first.index
        self.unstable = [first]

    def truncate(self, from_index: int) -> None:
        """Forget every entry with index >= ``from_index``."""
        if self.unstable and from_index >= self.unstable[0].index:
            del self.unstable[from_index - self.unstable[0].index :]
            return
        self.unstable.clear()
        if self.restart_from is not None:  # only the restart's own entries were left
            return
        if from_index <= self.stable_end:
            self.truncate_from = from_index

    def stable_entries(self, start: int, max_bytes: int) -> Sequence[LogEntry]:
        """Stored entries from ``start`` (what a leader may send: it is durable locally)."""
        if start > self.stable_end:
            return ()
        entries = self.reader.read_range(start, max_bytes)
        end = self.stable_end
        if entries and entries[-1].index > end:
            entries = [e for e in entries if e.index <= end]
        return entries

    def first_index_of_term(self, index: int) -> int:
        """The first index, at or before ``index``, holding the same term (G2 ``xIndex``)."""
        term = self.term_at(index)
        begin = max(self.begin_index, 0)
        while index > begin and self.term_at(index - 1) == term:
            index -= 1
        return index

    def take_unstable(self) -> tuple[int | None, int | None, list[NewEntry | LogEntry]]:
        """(truncate_from, restart_from, entries) for a ``Ready``; the overlay is emptied."""
        truncate_from, restart_from, entries = self.truncate_from, self.restart_from, self.unstable
        self.truncate_from = None
        self.restart_from = None
        self.unstable = []
        return truncate_from, restart_from, entries
