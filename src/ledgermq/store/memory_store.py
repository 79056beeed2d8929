"""The in-memory twin of ``LedgerStore``: the same API and the same positions, no files.

Fast tests and the Raft simulator use it. It follows the file store rule for rule (both build
their appends with ``append_plan``, both delete whole segments on retention), and one conformance
suite runs against both (STYLE.md section 7.13.1, "verified fakes").

It also models durability for the simulator: ``flush()`` (or every append in ``sync`` mode) makes
the log durable up to its end, and ``crashed()`` returns the store a machine crash would leave:
the durable prefix, plus nothing else.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING, Self

from ledgermq.errors import (
    ConfigError,
    DiskFullError,
    InconsistentLogError,
    IndexCompactedError,
    IndexOutOfRangeError,
    StoreClosedError,
    StoreError,
)
from ledgermq.store.append_plan import (
    AppendPlan,
    LogTail,
    plan_leader_append,
    plan_replicated_append,
)
from ledgermq.store.entry_format import Entry, EntryType
from ledgermq.store.ledger_store import (
    DEFAULT_DATA_SEGMENT_BYTES,
    DEFAULT_MAX_BODY_BYTES,
    FlushMode,
)

if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import TracebackType

__all__ = ["MemoryLedgerStore"]


def _entry_end(entry: Entry) -> int:
    """Data-log position just after ``entry``."""
    return entry.pos + entry.size


class MemoryLedgerStore:
    """A ledger store held in a list; see ``LedgerStore`` for the meaning of every method."""

    def __init__(
        self,
        *,
        data_segment_bytes: int = DEFAULT_DATA_SEGMENT_BYTES,
        flush: FlushMode = "async",
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        if flush not in ("async", "sync"):
            raise ConfigError(f"flush must be 'async' or 'sync', got {flush!r}")
        if data_segment_bytes < 4096 or data_segment_bytes % 8:
            raise ConfigError(
                "data_segment_bytes must be a multiple of 8 of at least 4096, "
                f"got {data_segment_bytes}"
            )
        self._data_segment_bytes = data_segment_bytes
        self._flush_mode: FlushMode = flush
        self._max_body_bytes = max_body_bytes
        self._entries: list[Entry] = []
        self._begin_index = -1
        self._data_end = 0
        self._committed_index = -1
        self._durable_committed_index = -1
        self._flushed_index = -1
        self._closed = False
        self.disk_full = False
        """Set by a test to make appends fail with ``DiskFullError``."""

    @classmethod
    def open(
        cls,
        *,
        data_segment_bytes: int = DEFAULT_DATA_SEGMENT_BYTES,
        flush: FlushMode = "async",
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> Self:
        return cls(
            data_segment_bytes=data_segment_bytes, flush=flush, max_body_bytes=max_body_bytes
        )

    # ------------------------------------------------------------------ properties
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
        return self._begin_index

    @property
    def end_index(self) -> int:
        return self._begin_index + len(self._entries) - 1 if self._entries else -1

    @property
    def end_term(self) -> int:
        return self._entries[-1].term if self._entries else -1

    @property
    def committed_index(self) -> int:
        return self._committed_index

    @property
    def write_pos(self) -> int:
        return self._data_end

    @property
    def flushed_index(self) -> int:
        return min(self._flushed_index, self.end_index)

    # ------------------------------------------------------------------ appends
    def append(
        self, term: int, body: bytes, channel: int = 0, *, entry_type: EntryType = EntryType.NORMAL
    ) -> Entry:
        return self.append_batch(term, (body,), channel, entry_type=entry_type)[0]

    def append_batch(
        self,
        term: int,
        bodies: Sequence[bytes],
        channel: int = 0,
        *,
        entry_type: EntryType = EntryType.NORMAL,
    ) -> list[Entry]:
        if not bodies:
            return []
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
        self._apply(plan)
        return plan.entries

    def append_entries(self, entries: Sequence[Entry]) -> None:
        if not entries:
            return
        self._check_writable()
        plan = plan_replicated_append(
            self._tail(), entries, self._data_segment_bytes, self._max_body_bytes
        )
        self._apply(plan)

    def _tail(self) -> LogTail:
        last = self._entries[-1] if self._entries else None
        return LogTail(
            self.end_index + 1,
            self._data_end,
            last.term if last else -1,
            last.chain_crc if last else 0,
        )

    def _apply(self, plan: AppendPlan) -> None:
        if self._begin_index < 0:
            self._begin_index = plan.entries[0].index
        self._entries.extend(plan.entries)
        self._data_end = plan.end_pos
        if self._flush_mode == "sync":
            self._flushed_index = self.end_index

    def _check_writable(self) -> None:
        if self._closed:
            raise StoreClosedError("memory store is closed")
        if self.disk_full:
            raise DiskFullError("memory store is marked full; appends are refused")

    # ------------------------------------------------------------------ reads
    def get(self, index: int) -> Entry:
        self._check_readable(index)
        return self._entries[index - self._begin_index]

    def term_at(self, index: int) -> int:
        return self.get(index).term

    def positions(self, first_index: int, last_index: int) -> list[int]:
        self._check_readable(first_index)
        self._check_readable(last_index)
        entries, base = self._entries, self._begin_index
        return [entries[i - base].pos for i in range(first_index, last_index + 1)]

    def read_body(self, pos: int, size: int) -> bytes:
        if self._closed:
            raise StoreClosedError("memory store is closed")
        entries = self._entries
        i = bisect.bisect_right(entries, pos, key=lambda e: e.pos) - 1
        if i < 0 or size < 0:
            if self._begin_index > 0 or (entries and pos < entries[0].pos):
                raise IndexCompactedError(f"position {pos} was deleted by retention")
            raise IndexOutOfRangeError(f"position {pos} is outside the written log")
        entry = entries[i]
        start = pos - entry.pos - 48
        if start < 0 or start + size > len(entry.body):
            raise IndexOutOfRangeError(
                f"bytes {pos}..{pos + size} do not lie inside the body of entry {entry.index}"
            )
        return entry.body[start : start + size]

    def read_bodies(
        self, positions: Sequence[int], sizes: Sequence[int], *, stamp_at: int | None = None
    ) -> bytes:
        if len(sizes) != len(positions):
            raise ValueError(f"{len(positions)} positions but {len(sizes)} sizes")
        if self._closed:
            raise StoreClosedError("memory store is closed")
        if not positions:
            return b""
        shortest = min(sizes)
        # The file store's order of checks: a negative size is refused by the range checks,
        # then the stamp is checked, then the ranges.
        if stamp_at is not None and shortest >= 0 and not 0 <= stamp_at <= shortest - 8:
            raise ValueError(
                f"a range of {shortest} bytes has no room for a stamp at offset {stamp_at}"
            )
        out = bytearray(b"".join(map(self.read_body, positions, sizes)))
        if stamp_at is not None:
            for pos, size in zip(positions, sizes, strict=True):
                out[stamp_at : stamp_at + 8] = pos.to_bytes(8, "big", signed=True)
                stamp_at += size
        return bytes(out)

    def read_range(self, start_index: int, max_bytes: int) -> list[Entry]:
        if start_index == self.end_index + 1 and start_index >= 0:
            if self._closed:
                raise StoreClosedError("memory store is closed")
            return []
        self._check_readable(start_index)
        entries = self._entries
        offset = start_index - self._begin_index
        first = entries[offset]
        # Entries of one data segment lie back to back, so up to the end of ``first``'s segment
        # the size total of a run is the span of its positions: bisect for the last entry that
        # fits instead of adding sizes one entry at a time. An entry of a later segment starts
        # at or after ``segment_end`` (a BLANK fills the gap), so the bisect stops before it.
        seg = self._data_segment_bytes
        segment_end = first.pos - first.pos % seg + seg
        stop = bisect.bisect_right(
            entries,
            min(first.pos + max_bytes, segment_end),
            offset + 1,
            key=_entry_end,
        )
        result = entries[offset:stop]
        total = _entry_end(entries[stop - 1]) - first.pos
        # The rest (a range that continues into the next segment): one entry at a time.
        for later in range(stop, len(entries)):
            entry = entries[later]
            if total + entry.size > max_bytes:
                break
            result.append(entry)
            total += entry.size
        return result

    def _check_readable(self, index: int) -> None:
        if self._closed:
            raise StoreClosedError("memory store is closed")
        if index < 0 or index > self.end_index:
            raise IndexOutOfRangeError(
                f"index {index} is outside the log [{self._begin_index}, {self.end_index}]"
            )
        if index < self._begin_index:
            raise IndexCompactedError(
                f"index {index} was deleted by retention; the log begins at {self._begin_index}"
            )

    # ------------------------------------------------------------------ commit, truncate, retention
    def set_committed_index(self, index: int) -> None:
        index = min(index, self.end_index)
        self._committed_index = max(self._committed_index, index)

    def truncate_from(self, index: int) -> None:
        if self._closed:
            raise StoreClosedError("memory store is closed")
        if index > self.end_index:
            return
        if index <= self._committed_index:
            raise InconsistentLogError(
                f"cannot truncate from {index}: entries up to {self._committed_index} are committed"
            )
        if index < self._begin_index:
            raise IndexCompactedError(
                f"cannot truncate from {index}: the log begins at {self._begin_index}"
            )
        if index == self._begin_index and index > 0:
            raise InconsistentLogError(f"cannot remove every entry of a log that begins at {index}")
        offset = index - self._begin_index
        # Where the previous entry ends (a BLANK may lie between it and the removed entry).
        prev = self._entries[offset - 1] if offset > 0 else None
        self._data_end = self._entries[offset].pos if prev is None else prev.pos + prev.size
        del self._entries[offset:]
        if not self._entries:
            self._begin_index = -1
        self._flushed_index = min(self._flushed_index, self.end_index)

    def rebuild_from(self, entries: Sequence[Entry]) -> None:
        """Discard the whole log and begin it again with ``entries`` (see ``LedgerStore``)."""
        if not entries:
            return
        self._check_writable()
        first = entries[0]
        if first.pos % self._data_segment_bytes != 0:
            raise InconsistentLogError(
                f"entry {first.index} at position {first.pos} does not start a data segment "
                f"of {self._data_segment_bytes} bytes; the log cannot begin with it"
            )
        tail = LogTail(first.index, first.pos, -1, 0, verify_chain=False)
        plan = plan_replicated_append(tail, entries, self._data_segment_bytes, self._max_body_bytes)
        self._entries = []
        self._begin_index = -1
        self._apply(plan)
        self._committed_index = self._durable_committed_index = first.index
        self._flushed_index = self.end_index

    def reset_begin(self, index: int) -> int:
        if self._closed:
            raise StoreClosedError("memory store is closed")
        if not self._entries or index <= self._begin_index:
            return self._begin_index
        if index > self._committed_index:
            raise StoreError(
                f"reset_begin({index}) would delete uncommitted entries; the committed index "
                f"is {self._committed_index}"
            )
        # The segment holding `index` survives; everything in earlier segments goes.
        seg = self._data_segment_bytes
        keep_from = self.get(index).pos // seg
        offset = 0
        while self._entries[offset].pos // seg < keep_from:
            offset += 1
        del self._entries[:offset]
        self._begin_index = self._entries[0].index
        return self._begin_index

    # ------------------------------------------------------------------ durability
    def sync_written(self) -> bool:
        """Everything written counts as synced (``LedgerStore.sync_written`` for the real disk)."""
        self.flush()
        return True

    def flush(self) -> None:
        if self._closed:
            raise StoreClosedError("memory store is closed")
        self._flushed_index = self.end_index
        self._durable_committed_index = self._committed_index

    def crashed(self) -> MemoryLedgerStore:
        """The store a machine crash would leave now: the flushed prefix only."""
        twin = MemoryLedgerStore(
            data_segment_bytes=self._data_segment_bytes,
            flush=self._flush_mode,
            max_body_bytes=self._max_body_bytes,
        )
        kept = self._entries[: max(0, self.flushed_index - self._begin_index + 1)]
        twin._entries = list(kept)
        twin._begin_index = self._begin_index if kept else -1
        twin._data_end = kept[-1].pos + kept[-1].size if kept else 0
        twin._committed_index = min(self._durable_committed_index, twin.end_index)
        twin._flushed_index = twin.end_index
        return twin

    def close(self) -> None:
        if not self._closed:
            self.flush()
        self._closed = True

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
