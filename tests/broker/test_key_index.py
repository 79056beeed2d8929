"""KeyIndex: add and query, collisions, re-dispatch, reopen, torn tail, truncation, retention."""

from __future__ import annotations

import os
import struct
from typing import TYPE_CHECKING
from zlib import crc32

import pytest

from ledgermq.broker import key_index as key_index_module
from ledgermq.broker.key_index import RECORD_SIZE, KeyIndex, key_hash
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


@pytest.mark.parametrize("damage", ["zero", "torn", "garbage", "backwards"])
def test_torn_tail_is_dropped(tmp_path: Path, opened: list[KeyIndex], damage: str) -> None:
    index = open_index(tmp_path, opened)
    add_messages(index, 0, 3)  # 9 records: files hold 4, 4, 1
    index.flush()
    last = os.path.join(index.directory, files(index)[-1])
    index.close()
    with open(last, "r+b") as f:  # record 8 (uniq-2 of message 2) is damaged
        if damage == "zero":
            f.write(bytes(RECORD_SIZE))
        elif damage == "torn":
            f.seek(16)
            f.write(bytes(8))
        elif damage == "garbage":
            f.write(os.urandom(RECORD_SIZE * 3))
        else:
            body = struct.pack(">qqq", key_hash("T", "uniq-2"), phy(1), 1002)
            f.write(body + struct.pack(">I", crc32(body)))
    index = open_index(tmp_path, opened)
    assert index.record_count == 8
    assert index.query("T", "uniq-2", 10) == []
    assert index.query("T", "k2", 10) == [phy(2)]
    with open(last, "rb") as f:
        assert f.read() == bytes(RECORD_SIZE * RPF)  # zeroed
    add_messages(index, 2, 3)  # re-dispatch restores the missing key only
    assert index.record_count == 9
    assert index.query("T", "uniq-2", 10) == [phy(2)]
    assert index.query("T", "k2", 10) == [phy(2)]


def test_wrong_file_size_is_refused(tmp_path: Path, opened: list[KeyIndex]) -> None:
    index = open_index(tmp_path, opened)
    add_messages(index, 0, 1)
    index.close()
    with pytest.raises(CorruptLogError, match="key index file is 112 bytes, expected 140"):
        open_index(tmp_path, opened, rpf=5)


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
