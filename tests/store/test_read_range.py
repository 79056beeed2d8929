"""``read_range`` against its definition, on logs whose ranges cross segment ends.

``MemoryLedgerStore.read_range`` finds the end of a range by bisecting on positions inside the
first entry's segment instead of adding sizes entry by entry; the file store reads entry by entry.
Both must return exactly the entries the definition gives: the first one always, then each next
one while the sizes so far stay within ``max_bytes``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from ledgermq.store import Entry, LogStore, MemoryLedgerStore, ledger_store

from .conftest import SMALL_SEGMENT, open_file_store


def _by_definition(store: LogStore, start: int, max_bytes: int) -> list[Entry]:
    result = [store.get(start)]
    total = result[0].size
    for index in range(start + 1, store.end_index + 1):
        entry = store.get(index)
        if total + entry.size > max_bytes:
            break
        result.append(entry)
        total += entry.size
    return result


@st.composite
def logs(draw: st.DrawFn) -> tuple[list[list[int]], int, int, list[tuple[int, int, int]]]:
    """Batches of body sizes, a truncation point, a retention point and reads to make."""
    sizes = st.integers(0, 60) | st.integers(0, 1500) | st.just(SMALL_SEGMENT - 56)
    batches = draw(st.lists(st.lists(sizes, min_size=1, max_size=8), min_size=1, max_size=6))
    count = sum(map(len, batches))
    truncate = draw(st.integers(1, count))  # from this index on: removed (count: nothing)
    begin = draw(st.integers(0, truncate - 1))  # reset_begin target
    # (start, entries, slack): read from ``start`` with ``max_bytes`` the sizes of that many
    # entries plus ``slack``, so the limit falls on an entry's end or a byte either side.
    reads = draw(
        st.lists(
            st.tuples(
                st.integers(0, count - 1),
                st.integers(0, count),
                st.sampled_from([-1, 0, 1]) | st.integers(-200, 3 * SMALL_SEGMENT),
            ),
            min_size=1,
            max_size=12,
        )
    )
    return batches, truncate, begin, reads


@settings(max_examples=150, deadline=None)
@given(logs(), st.sampled_from([0, 3000, 1 << 25]))
def test_read_range_returns_what_the_definition_says(
    log: tuple[list[list[int]], int, int, list[tuple[int, int, int]]], cache_bytes: int
) -> None:
    """Also with the file store's cache of recent entries evicting early, late or never."""
    batches, truncate, begin, reads = log
    with (
        tempfile.TemporaryDirectory() as tmp,
        mock.patch.object(ledger_store, "_RECENT_CACHE_BYTES", cache_bytes),
    ):
        memory = MemoryLedgerStore(data_segment_bytes=SMALL_SEGMENT)
        stores: list[LogStore] = [memory, open_file_store(Path(tmp) / "store")]
        try:
            for store in stores:
                for term, batch in enumerate(batches, 1):
                    store.append_batch(term, [bytes([term]) * n for n in batch])
                store.truncate_from(truncate)
            _check_reads(memory, stores[1], reads)  # right after the cut
            for store in stores:
                store.append_batch(len(batches) + 1, [b"after the cut"] * (1 + truncate % 3))
                store.set_committed_index(store.end_index)
                store.reset_begin(begin)
            assert memory.begin_index == stores[1].begin_index
            _check_reads(memory, stores[1], reads)
        finally:
            for store in stores:
                store.close()


def _check_reads(memory: LogStore, files: LogStore, reads: list[tuple[int, int, int]]) -> None:
    for start, count, slack in reads:
        if start < memory.begin_index or start > memory.end_index:
            continue
        last = min(start + count, memory.end_index + 1)
        max_bytes = sum(memory.get(i).size for i in range(start, last)) + slack
        expected = _by_definition(memory, start, max_bytes)
        assert memory.read_range(start, max_bytes) == expected
        assert files.read_range(start, max_bytes) == expected


def test_the_recent_entries_cache_holds_about_its_limit_whatever_the_entry_size() -> None:
    """Dead entries were dropped only once 4,096 of them had piled up: with 64 KiB batches a
    replica kept 256 MiB it never read again, and its heap grew by every byte it replicated
    (found by counting page faults under the batched benchmark)."""
    limit = 1 << 20
    cache = ledger_store._RecentEntries(limit)
    body = b"x" * (64 << 10)
    pos = 0
    held: list[int] = []
    for index in range(2_000):
        entry = Entry(index=index, term=1, pos=pos, size=48 + len(body), channel=0, body=body)
        pos += entry.size
        cache.add([entry])
        live = cache._entries
        held.append(live[-1].pos + live[-1].size - live[0].pos)
    assert max(held) <= 2 * limit + 48 + len(body)
    newest = cache.read(1_999, 1 << 30)
    assert [e.index for e in newest] == [1_999]
    assert cache.read(1_000, 1 << 30) == []  # long gone: the store reads the segment instead


def test_the_recent_entries_cache_keeps_what_it_may_still_serve() -> None:
    cache = ledger_store._RecentEntries(10_000)
    entries = [
        Entry(index=i, term=1, pos=i * 1_000, size=1_000, channel=0, body=b"") for i in range(50)
    ]
    for entry in entries:
        cache.add([entry])
    served = cache.read(40, 1 << 30)
    assert [e.index for e in served] == list(range(40, 50))
