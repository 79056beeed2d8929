"""One behaviour, two stores: every test here runs against LedgerStore and MemoryLedgerStore."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledgermq.errors import (
    DiskFullError,
    EntryTooLargeError,
    InconsistentLogError,
    IndexCompactedError,
    IndexOutOfRangeError,
    StoreClosedError,
    StoreError,
)
from ledgermq.store import Entry, EntryType, LogStore, MemoryLedgerStore
from ledgermq.store.entry_format import HEADER_SIZE, MIN_BLANK_LEN

from .conftest import SMALL_SEGMENT, StoreFactory


def test_empty_store(make_store: StoreFactory) -> None:
    store = make_store()
    assert (store.begin_index, store.end_index, store.end_term, store.committed_index) == (
        -1,
        -1,
        -1,
        -1,
    )
    assert store.read_range(0, 1000) == []
    with pytest.raises(IndexOutOfRangeError):
        store.get(0)


def test_append_get_and_read_range(make_store: StoreFactory) -> None:
    store = make_store()
    first = store.append(1, b"first")
    batch = store.append_batch(2, [b"a", b"bb", b"ccc"], channel=7)
    assert first.index == 0
    assert [e.index for e in batch] == [1, 2, 3]
    assert all(e.channel == 7 and e.term == 2 for e in batch)
    assert (store.begin_index, store.end_index, store.end_term) == (0, 3, 2)
    assert store.get(0) == first
    assert store.get(2) == batch[1]
    assert store.term_at(3) == 2
    assert store.read_range(1, 10_000) == batch
    # max_bytes bounds the total; at least one entry always comes back
    assert store.read_range(1, batch[0].size + batch[1].size) == batch[:2]
    assert store.read_range(1, 1) == batch[:1]
    assert store.read_range(4, 1000) == []


def test_bounds(make_store: StoreFactory) -> None:
    store = make_store()
    store.append_batch(1, [b"x"] * 3)
    for bad in (-1, 3, 100):
        with pytest.raises(IndexOutOfRangeError):
            store.get(bad)
    with pytest.raises(IndexOutOfRangeError):
        store.read_range(5, 100)


def test_blank_rollover(make_store: StoreFactory) -> None:
    """spec section 10.1 #3: an entry that would leave < 8 bytes starts the next segment."""
    store = make_store()
    body_len = 1000 - HEADER_SIZE  # 1000-byte entries
    entries = store.append_batch(1, [b"x" * body_len] * 4)
    assert [e.pos for e in entries] == [0, 1000, 2000, 3000]
    # 96 bytes remain in segment 0: an entry of 88 bytes leaves exactly 8 and stays
    fits = store.append(1, b"y" * (SMALL_SEGMENT - 4000 - MIN_BLANK_LEN - HEADER_SIZE))
    assert fits.pos == 4000
    assert fits.pos + fits.size == SMALL_SEGMENT - MIN_BLANK_LEN
    rolled = store.append(1, b"z")
    assert rolled.pos == SMALL_SEGMENT
    assert store.get(rolled.index).body == b"z"
    assert store.read_range(0, 1 << 20)[-1] == rolled


def test_truncating_an_entry_that_opened_a_segment_ends_the_log_before_its_blank(
    make_store: StoreFactory, tmp_path: Path
) -> None:
    """The log ends where the last kept entry ends, so a leader's next entry, which may fit in
    the space the BLANK took, goes where the leader put it; also after a reopen. Before the
    fix the store kept the removed entry's position as its end and refused the leader's entry
    as misplaced (a simulation seed with 4 KiB segments found it)."""
    store = make_store()
    kept = store.append_batch(1, [b"x" * (1000 - HEADER_SIZE)] * 4)  # ends at 4000
    rolled = store.append(1, b"r" * 500)  # does not fit: BLANK at 4000, entry at 4096
    assert rolled.pos == SMALL_SEGMENT
    store.truncate_from(rolled.index)
    assert store.write_pos == kept[-1].pos + kept[-1].size == 4000
    leader = MemoryLedgerStore(data_segment_bytes=SMALL_SEGMENT)
    leader.append_batch(1, [b"x" * (1000 - HEADER_SIZE)] * 4)
    small = leader.append(2, b"s" * 20)  # fits before the segment's end on the leader
    assert small.pos == 4000
    store.append_entries([small])
    assert store.get(small.index) == small
    if isinstance(store, MemoryLedgerStore):
        return
    directory = store.directory  # type: ignore[attr-defined]
    store.close()
    from ledgermq.store import LedgerStore

    with LedgerStore.open(directory, data_segment_bytes=SMALL_SEGMENT) as reopened:
        assert reopened.get(small.index) == small
        assert reopened.write_pos == small.pos + small.size


def test_terms_never_decrease(make_store: StoreFactory) -> None:
    store = make_store()
    store.append(5, b"x")
    with pytest.raises(InconsistentLogError):
        store.append(4, b"y")
    assert store.end_index == 0


def test_oversized_body_is_refused_and_nothing_is_written(make_store: StoreFactory) -> None:
    store = make_store(max_body_bytes=100)
    store.append(1, b"ok")
    with pytest.raises(EntryTooLargeError, match="101 bytes exceeds the maximum of 100"):
        store.append_batch(1, [b"a", b"x" * 101])
    assert store.end_index == 0
    assert store.append(1, b"next").index == 1


def test_body_larger_than_a_segment_is_refused(make_store: StoreFactory) -> None:
    store = make_store(max_body_bytes=1 << 20)
    with pytest.raises(EntryTooLargeError):
        store.append(1, b"x" * SMALL_SEGMENT)
    biggest = store.append(1, b"x" * (SMALL_SEGMENT - MIN_BLANK_LEN - HEADER_SIZE))
    assert store.get(biggest.index).size == SMALL_SEGMENT - MIN_BLANK_LEN


def test_truncate_from(make_store: StoreFactory) -> None:
    store = make_store()
    entries = store.append_batch(1, [b"%d" % i for i in range(10)])
    store.truncate_from(6)
    assert (store.end_index, store.end_term) == (5, 1)
    with pytest.raises(IndexOutOfRangeError):
        store.get(6)
    again = store.append(2, b"new")
    assert again.index == 6
    assert again.pos == entries[6].pos  # the truncated entry's place is reused
    store.truncate_from(11)  # past the end: nothing to do
    assert store.end_index == 6


def test_truncate_everything(make_store: StoreFactory) -> None:
    store = make_store()
    store.append_batch(1, [b"a", b"b"])
    store.truncate_from(0)
    assert (store.begin_index, store.end_index, store.end_term) == (-1, -1, -1)
    assert store.append(3, b"c").index == 0


def test_committed_entries_cannot_be_truncated(make_store: StoreFactory) -> None:
    store = make_store()
    store.append_batch(1, [b"a"] * 5)
    store.set_committed_index(3)
    with pytest.raises(InconsistentLogError, match="committed"):
        store.truncate_from(3)
    store.truncate_from(4)
    assert store.end_index == 3


def test_committed_index_is_monotonic_and_clamped(make_store: StoreFactory) -> None:
    store = make_store()
    store.append_batch(1, [b"a"] * 5)
    store.set_committed_index(2)
    store.set_committed_index(1)
    assert store.committed_index == 2
    store.set_committed_index(99)
    assert store.committed_index == 4


def fill_segments(store: LogStore, count: int) -> list[Entry]:
    """Append 1000-byte entries: four per 4 KiB segment."""
    return store.append_batch(1, [b"x" * (1000 - HEADER_SIZE)] * count)


def test_reset_begin_drops_whole_segments(make_store: StoreFactory) -> None:
    store = make_store()
    fill_segments(store, 12)  # segments hold 0-3, 4-7, 8-11
    store.set_committed_index(11)
    assert store.reset_begin(6) == 4
    assert store.begin_index == 4
    with pytest.raises(IndexCompactedError):
        store.get(3)
    assert store.get(4).index == 4
    assert store.reset_begin(2) == 4  # below begin: nothing to do


def test_reset_begin_never_drops_uncommitted_data(make_store: StoreFactory) -> None:
    store = make_store()
    fill_segments(store, 12)
    store.set_committed_index(5)
    with pytest.raises(StoreError, match="uncommitted"):
        store.reset_begin(9)
    assert store.begin_index == 0


def test_rebuild_from_begins_the_log_again_at_a_leaders_oldest_entry(
    make_store: StoreFactory,
) -> None:
    """A follower whose log ends before its leader's oldest entry (issue 13 item 2): the whole
    log goes, committed entries too, and the log begins at the leader's entry and position."""
    leader = MemoryLedgerStore(data_segment_bytes=SMALL_SEGMENT)
    fill_segments(leader, 12)  # segments hold 0-3, 4-7, 8-11
    leader.set_committed_index(11)
    assert leader.reset_begin(9) == 8
    follower = make_store()
    fill_segments(follower, 3)
    follower.set_committed_index(2)
    with pytest.raises(InconsistentLogError, match="does not start a data segment"):
        follower.rebuild_from([leader.get(9)])
    assert follower.end_index == 2  # refused before anything was deleted
    follower.rebuild_from([leader.get(8)])
    assert (follower.begin_index, follower.end_index, follower.committed_index) == (8, 8, 8)
    assert follower.get(8) == leader.get(8)
    with pytest.raises(IndexCompactedError):
        follower.get(2)
    follower.append_entries(leader.read_range(9, 1 << 20))  # the chain continues from there
    assert [follower.get(i) for i in range(8, 12)] == [leader.get(i) for i in range(8, 12)]


def test_rebuild_from_survives_a_reopen(tmp_path: Path) -> None:
    from ledgermq.store import LedgerStore

    leader = MemoryLedgerStore(data_segment_bytes=SMALL_SEGMENT)
    fill_segments(leader, 12)
    leader.set_committed_index(11)
    leader.reset_begin(5)
    directory = str(tmp_path / "f")
    with LedgerStore.open(directory, data_segment_bytes=SMALL_SEGMENT) as follower:
        fill_segments(follower, 2)
        follower.rebuild_from(leader.read_range(4, 1 << 20))
    with LedgerStore.open(directory, data_segment_bytes=SMALL_SEGMENT) as reopened:
        assert (reopened.begin_index, reopened.end_index) == (4, 11)
        assert reopened.committed_index >= 4
        assert [reopened.get(i) for i in range(4, 12)] == leader.read_range(4, 1 << 20)


def test_replicated_append_copies_the_leader_byte_for_byte(make_store: StoreFactory) -> None:
    leader = MemoryLedgerStore(data_segment_bytes=SMALL_SEGMENT)
    entries = leader.append_batch(1, [b"x" * 900] * 6) + leader.append_batch(2, [b"y"] * 3)
    follower = make_store()
    follower.append_entries(entries[:4])
    follower.append_entries(entries[4:])
    assert follower.read_range(0, 1 << 20) == entries
    assert follower.end_term == 2


def test_replicated_append_refuses_a_diverging_entry(make_store: StoreFactory) -> None:
    leader = MemoryLedgerStore(data_segment_bytes=SMALL_SEGMENT)
    entries = leader.append_batch(1, [b"a", b"b", b"c"])
    follower = make_store()
    follower.append_batch(1, [b"a", b"B"])  # same index, term and size; different body
    with pytest.raises(InconsistentLogError, match="chain CRC"):
        follower.append_entries(entries[2:])
    with pytest.raises(InconsistentLogError, match="does not follow"):
        follower.append_entries(entries[:1])
    follower.truncate_from(1)
    follower.append_entries(entries[1:])
    assert follower.read_range(0, 1000) == entries


def test_entry_types(make_store: StoreFactory) -> None:
    store = make_store()
    noop = store.append(1, b"", entry_type=EntryType.NOOP)
    assert store.get(noop.index).entry_type is EntryType.NOOP


def test_disk_full_refuses_appends() -> None:
    store = MemoryLedgerStore()
    store.disk_full = True
    with pytest.raises(DiskFullError):
        store.append(1, b"x")


def test_closed_store_refuses_everything(make_store: StoreFactory) -> None:
    store = make_store()
    store.append(1, b"x")
    store.close()
    with pytest.raises(StoreClosedError):
        store.append(1, b"y")
    with pytest.raises(StoreClosedError):
        store.get(0)
    store.close()  # twice is fine


def test_positions_and_read_body_by_data_position(make_store: StoreFactory) -> None:
    store = make_store()
    entries = store.append_batch(1, [b"alpha", b"", b"gamma-gamma"])
    assert store.positions(0, 2) == [e.pos for e in entries]
    assert store.positions(1, 1) == [entries[1].pos]
    third = entries[2]
    assert store.read_body(third.pos + HEADER_SIZE, 11) == b"gamma-gamma"
    assert store.read_body(third.pos + HEADER_SIZE + 6, 5) == b"gamma"
    with pytest.raises(IndexOutOfRangeError):
        store.positions(0, 3)
    with pytest.raises(IndexOutOfRangeError):
        store.read_body(third.pos + HEADER_SIZE, 12)  # runs past the written log
