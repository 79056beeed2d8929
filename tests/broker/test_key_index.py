"""KeyIndex: add and query, collisions, re-dispatch, reopen, torn tail, truncation, retention."""

from __future__ import annotations

import gc
import os
import shutil
import struct
import tempfile
import tracemalloc
from typing import TYPE_CHECKING
from zlib import crc32

import pytest
from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from ledgermq.broker.storage import key_index as key_index_module
from ledgermq.broker.storage.key_index import HEADER_SIZE, RECORD_SIZE, KeyIndex, key_hash
from ledgermq.errors import CorruptLogError, StoreClosedError

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

RPF = 4  # records per file


@pytest.fixture
def opened() -> Iterator[list[KeyIndex]]:
    indexes: list[KeyIndex] = []
    yield indexes
    for index in indexes:
        index.close()


def open_index(tmp_path: Path, opened: list[KeyIndex], rpf: int = RPF) -> KeyIndex:
    index = KeyIndex(str(tmp_path), records_per_file=rpf)
    opened.append(index)
    return index


def reopen(tmp_path: Path, opened: list[KeyIndex], index: KeyIndex) -> KeyIndex:
    index.close()
    return open_index(tmp_path, opened)


def phy(i: int) -> int:
    return 48 + i * 500


def add_messages(index: KeyIndex, start: int, stop: int) -> None:
    """Message i has keys "k<i>", "even"/"odd" and a unique id; stored at time 1000 + i."""
    for i in range(start, stop):
        keys = [f"k{i}", "even" if i % 2 == 0 else "odd", f"uniq-{i}"]
        index.add("T", keys, phy(i), 1000 + i)


def files(index: KeyIndex) -> list[str]:
    return sorted(os.listdir(index.directory))


def test_key_hash_is_stable() -> None:
    assert key_hash("T", "k") == key_hash("T", "k")
    assert key_hash("T", "k") != key_hash("U", "k")
    # Pinned: the hash is part of the on-disk format.
    assert key_hash("TopicTest", "KEY1") == int.from_bytes(
        __import__("hashlib").blake2b(b"TopicTest#KEY1", digest_size=8).digest(), "big", signed=True
    )


def test_add_and_query(tmp_path: Path, opened: list[KeyIndex]) -> None:
    index = open_index(tmp_path, opened)
    assert index.query("T", "k1", 10) == []
    add_messages(index, 0, 10)
    assert index.record_count == 30
    assert len(files(index)) == 8  # 30 records, 4 per file
    assert index.query("T", "k3", 10) == [phy(3)]
    assert index.query("T", "uniq-7", 10) == [phy(7)]
    assert index.query("T", "even", 10) == [phy(i) for i in (8, 6, 4, 2, 0)]  # newest first
    assert index.query("T", "even", 2) == [phy(8), phy(6)]
    assert index.query("T", "odd", 10, begin_ts=1003, end_ts=1007) == [phy(7), phy(5), phy(3)]
    assert index.query("T", "even", 0) == []
    assert index.query("U", "k3", 10) == []  # topic is part of the key
    assert index.last_phy_offset == phy(9)


def test_empty_and_duplicate_keys(tmp_path: Path, opened: list[KeyIndex]) -> None:
    index = open_index(tmp_path, opened)
    assert index.add("T", ["", "a", "a", ""], 48, 1) == 1
    assert index.add("T", [], 100, 1) == 0
    assert index.query("T", "a", 10) == [48]


def test_collisions_return_both_messages(
    tmp_path: Path, opened: list[KeyIndex], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(key_index_module, "key_hash", lambda topic, key: 7)  # everything collides
    monkeypatch.setattr(key_index_module, "_use_c", False)  # the C loop hashes for itself
    index = open_index(tmp_path, opened)
    index.add("T", ["a"], 48, 1)
    index.add("T", ["b"], 200, 2)
    index.add("T", ["a", "b"], 400, 3)  # two keys, one hash: one record
    assert index.record_count == 3
    # The caller re-checks the key on each message: the index returns every candidate, once.
    assert index.query("T", "a", 10) == [400, 200, 48]


def test_redispatch_adds_nothing(tmp_path: Path, opened: list[KeyIndex]) -> None:
    index = open_index(tmp_path, opened)
    add_messages(index, 0, 6)
    count = index.record_count
    add_messages(index, 2, 6)  # the dispatcher restarts from an older checkpoint
    assert index.record_count == count
    add_messages(index, 6, 7)
    assert index.query("T", "k4", 10) == [phy(4)]
    assert index.query("T", "even", 10) == [phy(6), phy(4), phy(2), phy(0)]


def test_redispatch_completes_a_partly_indexed_message(
    tmp_path: Path, opened: list[KeyIndex]
) -> None:
    index = open_index(tmp_path, opened)
    index.add("T", ["a"], 48, 1)  # a crash left only the first key of the message
    assert index.add("T", ["a", "b"], 48, 1) == 1
    assert index.query("T", "b", 10) == [48]
    assert index.query("T", "a", 10) == [48]


def test_reopen(tmp_path: Path, opened: list[KeyIndex]) -> None:
    index = open_index(tmp_path, opened)
    add_messages(index, 0, 9)
    index.flush()
    index = reopen(tmp_path, opened, index)
    assert index.record_count == 27
    assert index.last_phy_offset == phy(8)
    assert index.query("T", "odd", 10) == [phy(i) for i in (7, 5, 3, 1)]
    add_messages(index, 9, 11)
    assert index.query("T", "odd", 1) == [phy(9)]


def item(h: int, phy_offset: int, ts: int, prev: int) -> bytes:
    body = struct.pack("<qqqi", h, phy_offset, ts, prev)
    return body + struct.pack("<I", crc32(body))


def items_at(index: KeyIndex) -> int:
    """File offset of item 1."""
    return HEADER_SIZE + index.slots_per_file * 4


@pytest.mark.parametrize("damage", ["zero", "torn", "garbage", "backwards"])
def test_torn_tail_is_dropped(tmp_path: Path, opened: list[KeyIndex], damage: str) -> None:
    index = open_index(tmp_path, opened)
    add_messages(index, 0, 3)  # 9 records: files hold 4, 4, 1; the last one never flushed
    last = os.path.join(index.directory, files(index)[-1])
    start = items_at(index)
    index.close()
    with open(last, "r+b") as f:  # record 8 (uniq-2 of message 2) is damaged
        f.seek(start)
        if damage == "zero":
            f.write(bytes(RECORD_SIZE))
        elif damage == "torn":
            f.seek(start + 16)
            f.write(bytes(8))
        elif damage == "garbage":
            f.write(os.urandom(RECORD_SIZE * 3))
        else:
            f.write(item(key_hash("T", "uniq-2"), phy(1), 1002, 0))
    index = open_index(tmp_path, opened)
    assert index.record_count == 8
    assert index.query("T", "uniq-2", 10) == []
    assert index.query("T", "k2", 10) == [phy(2)]
    with open(last, "rb") as f:
        f.seek(HEADER_SIZE)
        assert f.read() == bytes(index.file_bytes - HEADER_SIZE)  # slots and items zeroed
    add_messages(index, 2, 3)  # re-dispatch restores the missing key only
    assert index.record_count == 9
    assert index.query("T", "uniq-2", 10) == [phy(2)]
    assert index.query("T", "k2", 10) == [phy(2)]


def test_wrong_file_size_is_refused(tmp_path: Path, opened: list[KeyIndex]) -> None:
    index = open_index(tmp_path, opened)
    add_messages(index, 0, 1)
    index.close()
    with pytest.raises(CorruptLogError, match="key index file is 200 bytes, expected 232"):
        open_index(tmp_path, opened, rpf=5)


def test_wrong_geometry_is_refused(tmp_path: Path, opened: list[KeyIndex]) -> None:
    index = open_index(tmp_path, opened)  # 4 items, 2 slots: 64 + 8 + 128 bytes
    add_messages(index, 0, 1)
    index.flush()
    index.close()
    with pytest.raises(CorruptLogError, match="has 2 slots and 4 items, expected 10 and 3"):
        opened.append(KeyIndex(str(tmp_path), records_per_file=3, slots_per_file=10))


def test_truncate_dirty(tmp_path: Path, opened: list[KeyIndex]) -> None:
    index = open_index(tmp_path, opened)
    add_messages(index, 0, 10)
    assert index.truncate_dirty(phy(10)) == 0
    assert index.truncate_dirty(phy(6) + 1) == 9  # messages 7, 8, 9
    assert index.record_count == 21
    assert index.last_phy_offset == phy(6)
    assert index.query("T", "odd", 10) == [phy(i) for i in (5, 3, 1)]
    assert index.query("T", "k8", 10) == []
    index = reopen(tmp_path, opened, index)
    assert index.record_count == 21
    add_messages(index, 7, 8)  # the log continues differently after the cut
    assert index.query("T", "odd", 1) == [phy(7)]
    assert index.truncate_dirty(0) == 24
    assert (index.record_count, index.last_phy_offset) == (0, -1)
    assert index.query("T", "k0", 10) == []
    index = reopen(tmp_path, opened, index)
    assert index.record_count == 0


def test_retention(tmp_path: Path, opened: list[KeyIndex]) -> None:
    index = open_index(tmp_path, opened)
    add_messages(index, 0, 10)  # 30 records in 8 files
    assert index.delete_expired(phy(4)) == 3  # records 0..11 (messages 0..3) are in files 1-3
    assert len(files(index)) == 5
    assert index.record_count == 18
    assert index.query("T", "even", 10) == [phy(i) for i in (8, 6, 4)]
    assert index.query("T", "k3", 10) == []
    assert index.delete_expired(phy(5)) == 0  # message 4's records share a file with 5's
    assert index.query("T", "k4", 10) == []  # but they are hidden
    assert index.query("T", "k5", 10) == [phy(5)]
    assert index.delete_expired(phy(100)) == 4  # never the last file
    assert len(files(index)) == 1
    index = reopen(tmp_path, opened, index)
    assert index.record_count == 2
    add_messages(index, 10, 11)
    assert index.query("T", "k10", 10) == [phy(10)]


def test_closed_index_refuses(tmp_path: Path, opened: list[KeyIndex]) -> None:
    index = open_index(tmp_path, opened)
    index.close()
    index.close()
    with pytest.raises(StoreClosedError):
        index.add("T", ["a"], 48, 1)
    with pytest.raises(StoreClosedError):
        index.query("T", "a", 1)


def test_add_many_is_add_per_message(tmp_path: Path, opened: list[KeyIndex]) -> None:
    one = open_index(tmp_path / "one", opened)
    many = open_index(tmp_path / "many", opened)
    messages = [
        (
            "T",
            [f"k{i}", "even" if i % 2 == 0 else "odd", f"uniq-{i}", "", f"k{i}"],
            phy(i),
            1000 + i,
        )
        for i in range(11)
    ]
    expected = sum(one.add(*message) for message in messages)
    assert many.add_many(messages[:4]) + many.add_many(messages[4:]) == expected == 33
    for key in ("k3", "even", "odd", "uniq-10", "absent"):
        assert many.query("T", key, 20) == one.query("T", key, 20)
    assert (many.record_count, many.last_phy_offset) == (one.record_count, one.last_phy_offset)
    # Repeats (a re-dispatch) add nothing, even mixed with new messages; a partly indexed
    # message is completed, as by ``add``.
    assert many.add_many(messages[8:]) == 0
    more = [("T", ["k10", "late"], phy(10), 1010), ("T", ["k11"], phy(11), 1011)]
    assert many.add_many([*messages[5:], *more]) == 2
    assert many.query("T", "late", 5) == [phy(10)]
    assert many.query("T", "k11", 5) == [phy(11)]
    with pytest.raises(ValueError, match="must be >= 0"):
        many.add_many([("T", ["x"], -1, 0)])
    reopened = reopen(tmp_path / "many", opened, many)
    assert reopened.query("T", "uniq-7", 5) == [phy(7)]
    assert reopened.record_count == 35


# ---------------------------------------------------------------------- the on-disk hash table
def test_memory_does_not_grow_with_records(tmp_path: Path, opened: list[KeyIndex]) -> None:
    index = open_index(tmp_path, opened, rpf=50_000)
    messages = [("T", [f"k{i}", f"uniq-{i}"], phy(i), 1000 + i) for i in range(100_000)]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(0, len(messages), 64):
            index.add_many(messages[i : i + 64])
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert index.record_count == 200_000  # in 4 files
    assert grown < 64_000, f"{grown} bytes for 200,000 keys"  # the old dict: ~36 MB
    assert index.query("T", "uniq-12345", 5) == [phy(12345)]


def test_open_reads_only_the_last_file(
    tmp_path: Path, opened: list[KeyIndex], monkeypatch: pytest.MonkeyPatch
) -> None:
    index = open_index(tmp_path, opened, rpf=64)
    index.add_many([("T", [f"k{i}"], phy(i), 1000 + i) for i in range(64 * 40 + 10)])
    index.close()
    checked: list[int] = []

    def counting_crc32(data: bytes) -> int:
        checked.append(len(data))
        return crc32(data)

    monkeypatch.setattr(key_index_module, "crc32", counting_crc32)
    index = open_index(tmp_path, opened, rpf=64)
    assert index.record_count == 64 * 40 + 10
    assert len(checked) <= 41 + 11  # 41 headers, the 10 unflushed items and the end
    checked.clear()
    index.flush()
    index = reopen_with(tmp_path, opened, index, rpf=64)
    assert len(checked) <= 1 + 41 + 2  # flush's header; 41 headers, the count is trusted
    assert index.query("T", "k7", 5) == [phy(7)]
    assert index.query("T", "k2565", 5) == [phy(2565)]


def reopen_with(tmp_path: Path, opened: list[KeyIndex], index: KeyIndex, rpf: int) -> KeyIndex:
    index.close()
    return open_index(tmp_path, opened, rpf=rpf)


def test_queries_span_files_newest_first(tmp_path: Path, opened: list[KeyIndex]) -> None:
    index = open_index(tmp_path, opened, rpf=8)
    # "hot" in every message, across 13 files; timestamps 1000 + i.
    index.add_many([("T", ["hot", f"k{i}"], phy(i), 1000 + i) for i in range(50)])
    assert len(files(index)) == 13
    assert index.query("T", "hot", 100) == [phy(i) for i in range(49, -1, -1)]
    assert index.query("T", "hot", 3) == [phy(49), phy(48), phy(47)]
    assert index.query("T", "hot", 100, 1010, 1013) == [phy(i) for i in (13, 12, 11, 10)]
    assert index.query("T", "k0", 5) == [phy(0)]
    index = reopen_with(tmp_path, opened, index, rpf=8)
    assert index.query("T", "hot", 100, 1010, 1013) == [phy(i) for i in (13, 12, 11, 10)]
    index.delete_expired(phy(20))
    assert index.query("T", "hot", 100)[-1] == phy(20)


def test_timestamps_that_go_back_are_found(tmp_path: Path, opened: list[KeyIndex]) -> None:
    index = open_index(tmp_path, opened, rpf=4)
    index.add_many([("T", ["a"], phy(i), 2000 - i) for i in range(10)])  # a clock going back
    assert index.query("T", "a", 20, 1995, 1999) == [phy(i) for i in (5, 4, 3, 2, 1)]
    index = reopen_with(tmp_path, opened, index, rpf=4)
    assert index.query("T", "a", 20, 1990, 1992) == [phy(i) for i in (10 - 1, 8)]


def write_at(path: str, offset: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


@pytest.mark.parametrize("damage", ["crc", "forward-link", "self-link", "foreign-slot", "slot"])
def test_chain_corruption_stops_the_walk(
    tmp_path: Path, opened: list[KeyIndex], damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    index = open_index(tmp_path, opened, rpf=8)
    index.add_many([("T", ["a"], phy(i), 1000 + i) for i in range(5)])  # one chain: items 1..5
    index.flush()
    start = items_at(index)
    path = os.path.join(index.directory, files(index)[0])
    index.close()
    h = key_hash("T", "a")
    slots = index.slots_per_file
    if damage == "crc":
        write_at(path, start + 2 * RECORD_SIZE + 8, struct.pack("<q", phy(99)))  # item 3
    elif damage == "forward-link":  # item 3 links to item 5: a cycle, with a valid CRC
        write_at(path, start + 2 * RECORD_SIZE, item(h, phy(2), 1002, 5))
    elif damage == "self-link":
        write_at(path, start + 2 * RECORD_SIZE, item(h, phy(2), 1002, 3))
    elif damage == "foreign-slot":  # item 3 holds a hash of another slot
        other = next(x for x in range(1, 100) if (h + x) % slots != h % slots)
        write_at(path, start + 2 * RECORD_SIZE, item(h + other, phy(2), 1002, 2))
    else:  # the slot points past the file's items: rebuilt by recovery
        write_at(path, HEADER_SIZE + (h % slots) * 4, struct.pack("<I", 7))
    index = open_index(tmp_path, opened, rpf=8)
    found = index.query("T", "a", 10)
    if damage == "slot":
        assert found == [phy(i) for i in (4, 3, 2, 1, 0)]
    else:
        assert found == [phy(4), phy(3)]  # what came before the bad link, nothing made up
        assert "queries stop there" in caplog.text


def test_crash_slot_without_its_item(tmp_path: Path, opened: list[KeyIndex]) -> None:
    """A slot page reached the disk, the item's page did not: the old chain survives."""
    index = open_index(tmp_path, opened, rpf=8)
    index.add_many([("T", ["a"], phy(i), 1000 + i) for i in range(3)])
    index.flush()
    index.add("T", ["a"], phy(3), 1003)  # item 4, lost below
    start = items_at(index)
    path = os.path.join(index.directory, files(index)[0])
    index.close()
    write_at(path, start + 3 * RECORD_SIZE, bytes(RECORD_SIZE))
    index = open_index(tmp_path, opened, rpf=8)
    assert index.record_count == 3
    assert index.query("T", "a", 10) == [phy(2), phy(1), phy(0)]
    index.add("T", ["a"], phy(3), 1003)  # the re-dispatch
    assert index.query("T", "a", 10) == [phy(3), phy(2), phy(1), phy(0)]


def test_crash_item_without_its_slot(tmp_path: Path, opened: list[KeyIndex]) -> None:
    """An item reached the disk, its slot update did not: recovery replays it."""
    index = open_index(tmp_path, opened, rpf=8)
    index.add_many([("T", ["a"], phy(i), 1000 + i) for i in range(3)])
    index.flush()
    index.add_many([("T", ["a", "b"], phy(3), 1003)])
    path = os.path.join(index.directory, files(index)[0])
    index.close()
    slots = index.slots_per_file
    write_at(path, HEADER_SIZE + (key_hash("T", "a") % slots) * 4, struct.pack("<I", 3))
    index = open_index(tmp_path, opened, rpf=8)
    assert index.record_count == 5
    assert index.query("T", "a", 10) == [phy(3), phy(2), phy(1), phy(0)]
    assert index.query("T", "b", 10) == [phy(3)]


def test_truncate_inside_a_chain_keeps_older_items(tmp_path: Path, opened: list[KeyIndex]) -> None:
    index = open_index(tmp_path, opened, rpf=16)
    index.add_many([("T", ["a", f"k{i}"], phy(i), 1000 + i) for i in range(20)])  # 3 files
    assert index.truncate_dirty(phy(5)) == 30
    assert len(files(index)) == 1
    assert index.query("T", "a", 50) == [phy(i) for i in range(4, -1, -1)]
    index.add_many([("T", ["a"], phy(i) + 1, 2000 + i) for i in range(5, 7)])
    index = reopen_with(tmp_path, opened, index, rpf=16)
    assert index.query("T", "a", 3) == [phy(6) + 1, phy(5) + 1, phy(4)]
    assert index.record_count == 12


# ---------------------------------------------------------------------- model
class KeyIndexModel(RuleBasedStateMachine):
    """The index against a list of (topic#key, offset, timestamp), through reopen, truncation,
    retention and roll-over (3 items per file, 2 slots: long chains and many collisions)."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="keyidx-model-")
        self.index = KeyIndex(self.dir, records_per_file=3)
        self.items: list[tuple[str, int, int]] = []  # unique (key, phy) pairs
        self.next_phy = 0
        self.min_phy = 0

    def teardown(self) -> None:
        self.index.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(
        batch=st.lists(
            st.tuples(
                st.lists(st.sampled_from(["a", "b", "c", "d", ""]), max_size=3),
                st.integers(0, 2),
                st.integers(0, 50),
            ),
            max_size=6,
        )
    )
    def add_many(self, batch: list[tuple[list[str], int, int]]) -> None:
        messages = []
        for keys, gap, ts in batch:
            phy_offset = self.next_phy + gap
            self.next_phy = phy_offset + 1
            messages.append(("T", keys, phy_offset, ts))
            for key in dict.fromkeys(k for k in keys if k):
                self.items.append((key, phy_offset, ts))
        expected = sum(len({k for k in keys if k}) for _, keys, _, _ in messages)
        assert self.index.add_many(messages) == expected

    @rule(back=st.integers(1, 4))
    def redispatch(self, back: int) -> None:
        """Re-adding messages already indexed adds nothing."""
        for key, phy_offset, ts in self.items[-back:]:
            assert self.index.add("T", [key], phy_offset, ts) == 0

    @rule()
    def reopen(self) -> None:
        if random_bool(self.next_phy):
            self.index.flush()
        self.index.close()
        self.index = KeyIndex(self.dir, records_per_file=3)
        if self.min_phy:
            self.index.delete_expired(self.min_phy)

    @precondition(lambda self: self.items)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        # Never below retention: the ledger's end is never below its retained start.
        limit = data.draw(st.integers(self.min_phy, max(self.min_phy, self.next_phy)))
        kept = [i for i in self.items if i[1] < limit]
        assert self.index.truncate_dirty(limit) == len(self.items) - len(kept)
        self.items = kept
        self.next_phy = max(self.next_phy, limit)

    @rule(data=st.data())
    def expire(self, data: st.DataObject) -> None:
        self.min_phy = max(self.min_phy, data.draw(st.integers(0, self.next_phy)))
        self.index.delete_expired(self.min_phy)

    @invariant()
    def queries_match(self) -> None:
        for key in ("a", "b", "c", "d"):
            expected = [p for k, p, _ in reversed(self.items) if k == key and p >= self.min_phy]
            assert self.index.query("T", key, 100) == expected
            window = [
                p
                for k, p, ts in reversed(self.items)
                if k == key and p >= self.min_phy and 10 <= ts <= 30
            ]
            assert self.index.query("T", key, 2, 10, 30) == window[:2]
        last = self.items[-1][1] if self.items else -1
        if last >= self.min_phy or last == -1:
            assert self.index.last_phy_offset == last
        else:  # retention may have deleted the files of items below ``min_phy``
            assert self.index.last_phy_offset < self.min_phy


def random_bool(seed: int) -> bool:
    return seed % 2 == 0


TestKeyIndexModel = KeyIndexModel.TestCase
TestKeyIndexModel.settings = settings(
    max_examples=40,
    stateful_step_count=25,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
