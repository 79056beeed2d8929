"""Crash recovery: clean restarts, torn tails repaired, damage before the tail refused.

Scenario numbers refer to spec-replication-storage.md section 10.2.
"""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import pytest

from ledgermq.errors import CorruptLogError, StoreLockedError
from ledgermq.store import Entry, LedgerStore
from ledgermq.store.checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from ledgermq.store.entry_format import HEADER_SIZE
from ledgermq.store.layout import segment_name

from .conftest import SMALL_INDEX_ENTRIES, SMALL_SEGMENT, open_file_store


def build(path: Path, count: int, body_len: int = 100, **kwargs: object) -> list[Entry]:
    with open_file_store(path, **kwargs) as store:
        entries = [store.append(1 + i // 7, b"%d:" % i + b"x" * body_len) for i in range(count)]
        store.set_committed_index(count // 2)
    return entries


def data_file(path: Path, pos: int) -> tuple[Path, int]:
    """The data segment file holding log position ``pos`` and the offset in it."""
    base = pos - pos % SMALL_SEGMENT
    return path / "data" / segment_name(base), pos - base


def index_file(path: Path, index: int) -> tuple[Path, int]:
    record_pos = index * 32
    seg = SMALL_INDEX_ENTRIES * 32
    base = record_pos - record_pos % seg
    return path / "index" / segment_name(base), record_pos - base


def patch(file: Path, offset: int, data: bytes) -> None:
    with open(file, "r+b") as f:
        f.seek(offset)
        f.write(data)


def read_all(store: LedgerStore) -> list[Entry]:
    return store.read_range(store.begin_index, 1 << 30) if store.end_index >= 0 else []


def test_clean_restart(tmp_path: Path) -> None:
    """#6: everything comes back, committed index from the checkpoint."""
    entries = build(tmp_path, 100)
    with open_file_store(tmp_path) as store:
        assert (store.begin_index, store.end_index) == (0, 99)
        assert store.end_term == entries[-1].term
        assert store.committed_index == 50
        assert store.write_pos == entries[-1].pos + entries[-1].size
        assert read_all(store) == entries
        assert store.recovery.repairs == []
        assert store.append(99, b"more").index == 100


def corrupt_header(field_offset: int, fmt: str, value: int):
    def apply(path: Path, entry: Entry) -> None:
        file, off = data_file(path, entry.pos)
        patch(file, off + field_offset, struct.pack(fmt, value))

    return apply


def zero_header(path: Path, entry: Entry) -> None:
    file, off = data_file(path, entry.pos)
    patch(file, off, bytes(HEADER_SIZE))


def flip_body(path: Path, entry: Entry) -> None:
    file, off = data_file(path, entry.pos)
    with open(file, "r+b") as f:
        f.seek(off + HEADER_SIZE + 3)
        byte = f.read(1)[0]
        f.seek(off + HEADER_SIZE + 3)
        f.write(bytes([byte ^ 0x10]))


TORN_TAILS = {
    "zeroed header": zero_header,
    "size past the segment end": corrupt_header(4, ">i", SMALL_SEGMENT * 4),
    "pos not where it sits": corrupt_header(24, ">q", 12345),
    "bodyLen disagrees with size": corrupt_header(44, ">i", 7),
    "torn body behind a valid header": flip_body,
    "term lower than the previous": corrupt_header(16, ">q", 0),
    "index gap": corrupt_header(8, ">q", 77),
    "channel changed (chain CRC)": corrupt_header(32, ">i", 5),
}


@pytest.mark.parametrize("damage", TORN_TAILS.values(), ids=TORN_TAILS.keys())
def test_torn_last_entry_is_repaired(tmp_path: Path, damage) -> None:
    """#7, #10, #11: the last entry is dropped, a copy kept, the next append reuses its place."""
    entries = build(tmp_path, 10)
    damage(tmp_path, entries[-1])
    with open_file_store(tmp_path) as store:
        assert store.end_index == 8
        assert read_all(store) == entries[:9]
        assert len(store.recovery.repairs) == 1
        assert "repaired torn tail" in store.recovery.repairs[0]
        assert store.write_pos == entries[8].pos + entries[8].size
        again = store.append(5, b"again")
        assert (again.index, again.pos) == (9, entries[9].pos)
    assert any((tmp_path / "repair").iterdir())
    with open_file_store(tmp_path) as store:  # the repair itself is durable and final
        assert store.end_index == 9
        assert store.recovery.repairs == []


@pytest.mark.parametrize("damage", TORN_TAILS.values(), ids=TORN_TAILS.keys())
def test_damage_before_the_tail_refuses_to_open(tmp_path: Path, damage) -> None:
    """Damage followed by durable data is not repaired: open fails, naming file and position."""
    entries = build(tmp_path, 10)
    damage(tmp_path, entries[5])
    file, off = data_file(tmp_path, entries[5].pos)
    with pytest.raises(CorruptLogError) as info:
        open_file_store(tmp_path)
    assert info.value.path == str(file)
    assert info.value.pos == off
    assert str(file) in str(info.value)
    # refusing changed nothing: the damage is still there for an operator to inspect
    with pytest.raises(CorruptLogError):
        open_file_store(tmp_path)


def test_lost_index_tail_is_rebuilt(tmp_path: Path) -> None:
    """#8: index records 7..9 zeroed; recovery rewrites them from the data."""
    entries = build(tmp_path, 10)
    for i in (7, 8, 9):
        file, off = index_file(tmp_path, i)
        patch(file, off, bytes(32))
    with open_file_store(tmp_path) as store:
        assert store.recovery.index_records_rewritten == 3
        assert store.get(9) == entries[9]


def test_index_mismatch_is_rewritten(tmp_path: Path) -> None:
    """#9: a wrong term in index record 5 is rewritten from the data."""
    entries = build(tmp_path, 10)
    file, off = index_file(tmp_path, 5)
    patch(file, off + 24, struct.pack(">q", 99))
    with open_file_store(tmp_path) as store:
        assert store.recovery.index_records_rewritten == 1
        assert read_all(store) == entries


def test_start_segment_selection_walks_back(tmp_path: Path) -> None:
    """#12: a bad index record at the third-last segment's first entry moves the start back."""
    entries = build(tmp_path, 150)
    segments = sorted((tmp_path / "data").iterdir())
    assert len(segments) >= 5
    third_last_base = int(segments[-3].name)
    first_of_third_last = next(e for e in entries if e.pos == third_last_base)
    file, off = index_file(tmp_path, first_of_third_last.index)
    patch(file, off + 24, struct.pack(">q", 99))
    with open_file_store(tmp_path) as store:
        assert store.recovery.index_records_rewritten == 1
        assert read_all(store) == entries
        assert store.recovery.entries_scanned > 150 - first_of_third_last.index


def test_catastrophic_damage_far_from_the_tail_refuses(tmp_path: Path) -> None:
    """#13: the first entry of the third-last segment is damaged; data follows; refuse."""
    entries = build(tmp_path, 150)
    third_last_base = int(sorted((tmp_path / "data").iterdir())[-3].name)
    victim = next(e for e in entries if e.pos == third_last_base)
    flip_body(tmp_path, victim)
    with pytest.raises(CorruptLogError, match="body CRC mismatch"):
        open_file_store(tmp_path)


def test_damage_before_the_scanned_segments_is_caught_on_read(tmp_path: Path) -> None:
    """Entries before the start segment are trusted at open and verified on every read."""
    entries = build(tmp_path, 150)
    flip_body(tmp_path, entries[1])
    with open_file_store(tmp_path) as store:
        assert store.get(0) == entries[0]
        with pytest.raises(CorruptLogError, match="body CRC mismatch"):
            store.get(1)
        with pytest.raises(CorruptLogError):
            store.read_range(0, 1 << 20)
        assert store.get(2) == entries[2]


def test_checkpoint_clamp(tmp_path: Path) -> None:
    """#14: a committed index beyond the log is clamped; a missing checkpoint means -1."""
    build(tmp_path, 91)
    write_checkpoint(str(tmp_path), Checkpoint(end_index=120, committed_index=120))
    with open_file_store(tmp_path) as store:
        assert store.committed_index == 90
    os.remove(tmp_path / "checkpoint")
    with open_file_store(tmp_path) as store:
        assert store.committed_index == -1
    assert read_checkpoint(str(tmp_path)).committed_index == -1


def test_garbled_checkpoint_is_ignored(tmp_path: Path) -> None:
    build(tmp_path, 5)
    (tmp_path / "checkpoint").write_bytes(b"\xff\xfe garbage")
    with open_file_store(tmp_path) as store:
        assert store.end_index == 4
        assert store.committed_index == -1


def test_truncate_then_crash_does_not_resurrect(tmp_path: Path) -> None:
    """#17: truncation is durable; a copy taken right after it (a crash) ends at 5."""
    source = tmp_path / "live"
    crash = tmp_path / "crash"
    store = open_file_store(source)
    store.append_batch(1, [b"e%d" % i for i in range(11)])
    store.truncate_from(6)
    shutil.copytree(source, crash)  # the files as a crash right now would leave them
    store.close()
    with open_file_store(crash) as recovered:
        assert recovered.end_index == 5


def test_log_ending_close_to_a_segment_end_reopens(tmp_path: Path) -> None:
    """The last entry leaves 36 bytes (< a header, >= a BLANK): the end is clean, not torn."""
    with open_file_store(tmp_path) as store:
        first = store.append(1, b"x" * (SMALL_SEGMENT - 48 - 36))
    assert first.pos + first.size == SMALL_SEGMENT - 36
    with open_file_store(tmp_path) as store:
        assert store.end_index == 0
        assert store.recovery.repairs == []
        rolled = store.append(1, b"next")
        assert rolled.pos == SMALL_SEGMENT
    with open_file_store(tmp_path) as store:
        assert store.read_range(0, 1 << 20) == [first, rolled]


def test_segment_of_the_wrong_size_refuses(tmp_path: Path) -> None:
    build(tmp_path, 150)
    first = min((tmp_path / "data").iterdir())
    with open(first, "r+b") as f:
        f.truncate(100)
    with pytest.raises(CorruptLogError, match="expected 4096"):
        open_file_store(tmp_path)


def test_missing_middle_segment_refuses(tmp_path: Path) -> None:
    """#4: a hole in the segment list."""
    build(tmp_path, 150)
    os.remove(sorted((tmp_path / "data").iterdir())[2])
    with pytest.raises(CorruptLogError, match="not contiguous"):
        open_file_store(tmp_path)


def test_cut_last_segment_is_extended_and_repaired(tmp_path: Path) -> None:
    entries = build(tmp_path, 30)
    last = max((tmp_path / "data").iterdir())
    cut_at = entries[-1].pos - int(last.name) + 20  # inside the last entry's header
    with open(last, "r+b") as f:
        f.truncate(cut_at)
    with open_file_store(tmp_path) as store:
        assert store.end_index == 28
        assert os.path.getsize(last) == SMALL_SEGMENT


def test_other_process_cannot_open_an_open_store(tmp_path: Path) -> None:
    with open_file_store(tmp_path), pytest.raises(StoreLockedError):
        open_file_store(tmp_path)
