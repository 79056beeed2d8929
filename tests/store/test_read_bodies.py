"""``read_bodies``: many ``read_body`` ranges in one call (the PULL read), on both stores.

The reference is ``read_body`` range by range: the same bytes back to back, and the same error
for the first range it refuses. Bodies here are made of records laid out like a batch's (several
ranges back to back in one entry body), so runs of contiguous ranges are exercised as well as
single ranges, and segments are small (4 KiB) so that a read spans several segment files.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

import pytest

from ledgermq.errors import IndexCompactedError, IndexOutOfRangeError, StoreClosedError
from ledgermq.store import Entry, LedgerStore, LogStore
from ledgermq.store import ledger_store as ledger_store_module
from ledgermq.store.entry_format import HEADER_SIZE

from .conftest import SMALL_SEGMENT, StoreFactory, open_file_store

if TYPE_CHECKING:
    from pathlib import Path

RECORD = 50
"""Every test record is this long; a body holds several, back to back."""


def _fill(store: LogStore, entries: int, per_entry: int = 4) -> list[tuple[int, int]]:
    """Append ``entries`` bodies of ``per_entry`` distinct records; commit them. Returns the
    (position, size) of every record in log order."""
    ranges: list[tuple[int, int]] = []
    for e in range(entries):
        body = b"".join(bytes([(e * per_entry + r) % 251]) * RECORD for r in range(per_entry))
        entry = store.append(1, body)
        start = entry.pos + HEADER_SIZE
        ranges += [(start + r * RECORD, RECORD) for r in range(per_entry)]
    store.set_committed_index(store.end_index)
    return ranges


def _reference(store: LogStore, ranges: list[tuple[int, int]]) -> bytes:
    return b"".join(store.read_body(pos, size) for pos, size in ranges)


def _read(store: LogStore, ranges: list[tuple[int, int]], stamp_at: int | None = None) -> bytes:
    return store.read_bodies([p for p, _ in ranges], [s for _, s in ranges], stamp_at=stamp_at)


def test_contiguous_and_scattered_ranges_read_as_read_body_does(make_store: StoreFactory) -> None:
    store = make_store()
    ranges = _fill(store, 60)
    assert store.positions(0, store.end_index)[-1] >= 2 * SMALL_SEGMENT  # three files
    # All of it: runs of 4 records per entry, entries in several segment files.
    assert _read(store, ranges) == _reference(store, ranges)
    # Every other record: no two ranges touch.
    assert _read(store, ranges[::2]) == _reference(store, ranges[::2])
    # Random subsets in log order, and parts of records (runs that start or end mid-record).
    rng = random.Random(7)
    for _ in range(50):
        subset = sorted(rng.sample(ranges, rng.randint(1, 30)))
        parts = [(p + rng.randint(0, 10), rng.randint(0, RECORD - 10)) for p, _ in subset]
        assert _read(store, subset) == _reference(store, subset)
        assert _read(store, parts) == _reference(store, parts)
    # Out of order and repeated ranges are read as given.
    odd = [ranges[9], ranges[2], ranges[2], ranges[3]]
    assert _read(store, odd) == _reference(store, odd)
    assert store.read_bodies([], []) == b""


def test_stamp_writes_each_range_position_into_its_copy(make_store: StoreFactory) -> None:
    store = make_store()
    ranges = _fill(store, 12)
    picked = ranges[3:20] + ranges[30:33]
    data = _read(store, picked, stamp_at=20)
    expected = b"".join(
        store.read_body(pos, 20) + pos.to_bytes(8, "big") + store.read_body(pos + 28, size - 28)
        for pos, size in picked
    )
    assert data == expected
    assert _read(store, ranges) == _reference(store, ranges)  # the store itself is unchanged
    assert _read(store, ranges[:3], stamp_at=RECORD - 8)[RECORD - 8 : RECORD] == ranges[0][
        0
    ].to_bytes(8, "big")
    with pytest.raises(ValueError, match="no room for a stamp"):
        _read(store, ranges[:3], stamp_at=RECORD - 7)
    with pytest.raises(ValueError, match="no room for a stamp"):
        _read(store, ranges[:3], stamp_at=-1)
    with pytest.raises(ValueError, match="2 positions but 1 sizes"):
        store.read_bodies([1, 2], [3])
    # The stamp is checked before the ranges; a negative size is a range error first.
    with pytest.raises(ValueError, match="no room for a stamp"):
        _read(store, [ranges[0], (-5, RECORD)], stamp_at=RECORD)
    with pytest.raises(IndexOutOfRangeError):
        _read(store, [ranges[0], (ranges[1][0], -1)], stamp_at=RECORD)


def test_file_store_run_crossing_a_segment_boundary(tmp_path: Path) -> None:
    """The file store reads any range inside one file, also one ending at the file's end (a
    BLANK's bytes here); two such ranges, touching at the boundary, form a run that no single
    file holds, which is read range by range. (Records never touch across files: an entry
    header lies between any two bodies.)"""
    store = open_file_store(f"{tmp_path}/s")
    try:
        entries = [store.append(1, bytes([i]) * 900) for i in range(10)]
        store.set_committed_index(store.end_index)
        assert entries[-1].pos > SMALL_SEGMENT
        ranges = [(SMALL_SEGMENT - 100, 100), (SMALL_SEGMENT, 100)]
        assert _read(store, ranges) == _reference(store, ranges)
        with pytest.raises(IndexOutOfRangeError, match="cross the end of segment"):
            store.read_bodies([SMALL_SEGMENT - 100], [200])
        with pytest.raises(IndexOutOfRangeError, match="cross the end of segment"):
            store.read_bodies([0, SMALL_SEGMENT - 100], [100, 200])
    finally:
        store.close()


def test_refused_ranges_raise_what_read_body_raises_for_the_first(
    make_store: StoreFactory,
) -> None:
    store = make_store()
    ranges = _fill(store, 40)
    end = ranges[-1][0] + RECORD
    with pytest.raises(IndexOutOfRangeError):
        _read(store, [*ranges[:8], (end, 10)])  # past the written log
    with pytest.raises(IndexOutOfRangeError):
        _read(store, [*ranges[:8], (ranges[-1][0], RECORD + 1)])  # runs past it
    with pytest.raises(IndexOutOfRangeError):
        _read(store, [ranges[0], (ranges[1][0], -1), ranges[2]])  # a negative size
    # Retention deletes the first segment files: those ranges are compacted.
    begin = store.reset_begin(store.end_index)
    assert begin > 0
    first_kept = store.positions(begin, begin)[0] + HEADER_SIZE
    gone = [r for r in ranges if r[0] < first_kept]
    kept = [r for r in ranges if r[0] >= first_kept]
    assert gone
    assert kept
    assert _read(store, kept) == _reference(store, kept)
    with pytest.raises(IndexCompactedError):
        _read(store, gone[-3:] + kept[:5])
    with pytest.raises(IndexCompactedError):
        _read(store, [gone[0], (end, 10)])  # the first range refused decides
    with pytest.raises(IndexOutOfRangeError):
        _read(store, [(end, 10), gone[0]])
    store.close()
    with pytest.raises(StoreClosedError):
        _read(store, kept)
    with pytest.raises(StoreClosedError):
        store.read_bodies([], [])


def test_gather_buffer_is_reused_and_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reads of different sizes through the store's gather buffer never see each other's
    bytes, and a read larger than the buffer's limit still works (with a buffer of its own)."""
    monkeypatch.setattr(ledger_store_module, "_SCRATCH_MAX_BYTES", 10 * RECORD)
    store: LedgerStore = open_file_store(f"{tmp_path}/s")
    try:
        ranges = _fill(store, 10)
        for picked in (ranges[:8], ranges[:3], ranges[20:21], ranges, ranges[5:9], ranges[:10]):
            assert _read(store, picked, stamp_at=0) == b"".join(
                p.to_bytes(8, "big") + store.read_body(p + 8, s - 8) for p, s in picked
            )
        assert len(store._scratch) == 10 * RECORD  # grown to the largest read within the limit
    finally:
        store.close()


def test_reads_return_bytes_not_views(make_store: StoreFactory) -> None:
    """The result must outlive the read: retention may delete the file it came from."""
    store = make_store()
    ranges = _fill(store, 40)
    data = _read(store, ranges[:6])
    assert type(data) is bytes
    store.reset_begin(store.end_index)
    assert data == b"".join(bytes([r]) * RECORD for r in range(6))


def test_entries_are_unaffected(make_store: StoreFactory) -> None:
    store = make_store()
    _fill(store, 5)
    before: list[Entry] = store.read_range(0, 1 << 20)
    _read(store, [(before[1].pos + HEADER_SIZE, 2 * RECORD)], stamp_at=0)
    assert store.read_range(0, 1 << 20) == before
