"""ConsumeQueue: units across files, reopen, crash recovery, truncation, retention, repeats."""

from __future__ import annotations

import os
import struct
from typing import TYPE_CHECKING

import pytest

from ledgermq.broker.storage.consume_queue import (
    BLANK_SIZE,
    UNIT_SIZE,
    ConsumeQueue,
    CqUnit,
    queue_directory,
)
from ledgermq.errors import CorruptLogError, InvalidMessageError, StoreClosedError

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

UPF = 4  # units per file: every few puts cross a file boundary
BLANK = CqUnit(0, BLANK_SIZE, 0)


def phy(q: int) -> int:
    """A physical offset for queue offset q: increasing, like a real commit log's."""
    return 48 + q * 1000


def unit(q: int) -> CqUnit:
    return CqUnit(phy(q), 100 + q, q * 7 - 3)


@pytest.fixture
def root(tmp_path: Path) -> str:
    return str(tmp_path)


@pytest.fixture
def opened(root: str) -> Iterator[list[ConsumeQueue]]:
    queues: list[ConsumeQueue] = []
    yield queues
    for q in queues:
        q.close()


def open_queue(root: str, opened: list[ConsumeQueue], **kwargs: int) -> ConsumeQueue:
    kwargs.setdefault("units_per_file", UPF)
    queue = ConsumeQueue(root, "TopicA", 3, **kwargs)
    opened.append(queue)
    return queue


def fill(queue: ConsumeQueue, start: int, stop: int) -> None:
    for q in range(start, stop):
        u = unit(q)
        assert queue.put(q, *u)


def files(queue: ConsumeQueue) -> list[str]:
    return sorted(os.listdir(queue.directory))


def reopen(root: str, opened: list[ConsumeQueue], queue: ConsumeQueue) -> ConsumeQueue:
    queue.close()
    return open_queue(root, opened)


def last_file(queue: ConsumeQueue) -> str:
    return os.path.join(queue.directory, files(queue)[-1])


def test_layout_is_rocketmq_s(root: str, opened: list[ConsumeQueue]) -> None:
    queue = open_queue(root, opened)
    fill(queue, 0, 6)
    queue.flush()
    assert queue.directory == os.path.join(root, "consumequeue", "TopicA", "3")
    assert files(queue) == [f"{0:020d}", f"{UPF * UNIT_SIZE:020d}"]
    with open(os.path.join(queue.directory, files(queue)[1]), "rb") as f:
        raw = f.read()
    assert len(raw) == UPF * UNIT_SIZE
    assert struct.unpack_from(">qiq", raw, 20) == tuple(unit(5))  # unit 5 = 2nd of file 2


def test_put_get_read_across_files(root: str, opened: list[ConsumeQueue]) -> None:
    queue = open_queue(root, opened)
    assert (queue.min_offset, queue.max_offset) == (0, 0)
    assert queue.get(0) is None
    assert queue.read(0, 32) == []
    fill(queue, 0, 11)
    assert (queue.min_offset, queue.max_offset) == (0, 11)
    assert [queue.get(q) for q in range(11)] == [unit(q) for q in range(11)]
    assert queue.get(11) is None
    assert queue.get(-1) is None
    assert queue.read(0, 32) == [unit(q) for q in range(11)]
    assert queue.read(3, 6) == [unit(q) for q in range(3, 9)]  # crosses two boundaries
    assert queue.read(5, 1) == [unit(5)]
    assert queue.read(10, 5) == [unit(10)]
    assert queue.read(11, 5) == []
    assert queue.read(2, 0) == []
    assert queue.last_phy_offset == phy(10)
    assert queue.max_phy_offset == phy(10) + unit(10).size
    assert len(files(queue)) == 3


def columns(units: list[CqUnit]) -> tuple[tuple[int, ...], ...]:
    return tuple(zip(*units, strict=True)) if units else ((), (), ())


def test_read_columns_is_read_transposed(root: str, opened: list[ConsumeQueue]) -> None:
    """The PULL path's read: the same units as ``read``, as (offsets, sizes, tags codes)."""
    queue = open_queue(root, opened)
    assert queue.read_columns(0, 32) == ((), (), ())
    fill(queue, 0, 11)
    assert queue.put(14, *unit(14))  # offsets 11..13 are filled with blanks
    assert queue.read(11, 3) == [BLANK] * 3
    for start, count in ((0, 32), (3, 6), (5, 1), (10, 5), (12, 3), (14, 9), (15, 5), (2, 0)):
        assert queue.read_columns(start, count) == columns(queue.read(start, count))
    assert queue.read_columns(0, 32)[0] == tuple(u.phy_offset for u in queue.read(0, 32))
    assert queue.read_columns(0, 32)[1][11:14] == (BLANK_SIZE,) * 3
    assert len(queue.read_columns(0, 1000)[0]) == 15
    queue.correct_min_offset(phy(6))
    assert queue.min_offset == 6
    assert queue.read_columns(5, 4) == ((), (), ())
    assert queue.read_columns(6, 4) == columns([unit(q) for q in range(6, 10)])
    queue.close()
    with pytest.raises(StoreClosedError):
        queue.read_columns(6, 4)


def test_reopen_after_close(root: str, opened: list[ConsumeQueue]) -> None:
    queue = open_queue(root, opened)
    fill(queue, 0, 9)
    queue.flush()
    queue = reopen(root, opened, queue)
    assert (queue.min_offset, queue.max_offset) == (0, 9)
    assert queue.read(0, 100) == [unit(q) for q in range(9)]
    assert queue.last_phy_offset == phy(8)
    fill(queue, 9, 13)  # the file that holds offset 8 fills up, then a new one starts
    assert queue.read(7, 100) == [unit(q) for q in range(7, 13)]


def test_reopen_at_an_exact_file_boundary(root: str, opened: list[ConsumeQueue]) -> None:
    queue = open_queue(root, opened)
    fill(queue, 0, 2 * UPF)
    queue = reopen(root, opened, queue)
    assert queue.max_offset == 2 * UPF
    fill(queue, 2 * UPF, 2 * UPF + 1)
    assert queue.get(2 * UPF) == unit(2 * UPF)


def test_repeats_are_dropped(root: str, opened: list[ConsumeQueue]) -> None:
    queue = open_queue(root, opened)
    fill(queue, 0, 6)
    # Re-dispatch after a crash: the same units again, then the new ones.
    for q in range(3, 6):
        assert not queue.put(q, *unit(q))
    fill(queue, 6, 7)
    # A differing unit for an offset already written is dropped (and logged), not written.
    assert not queue.put(2, phy(2) + 1, 5, 5)
    assert queue.get(2) == unit(2)
    # A phy offset that does not advance at the next offset is a repeat too.
    assert not queue.put(7, phy(6), 10, 0)
    assert queue.max_offset == 7
    assert queue.read(0, 100) == [unit(q) for q in range(7)]


def test_bad_units_are_refused(root: str, opened: list[ConsumeQueue]) -> None:
    queue = open_queue(root, opened)
    for bad in [(0, -1, 10, 0), (0, 48, 0, 0), (0, 48, -5, 0), (0, 48, BLANK_SIZE, 0)]:
        with pytest.raises(ValueError, match="bad unit"):
            queue.put(*bad)
    assert queue.max_offset == 0


def test_gap_is_filled_with_blanks(root: str, opened: list[ConsumeQueue]) -> None:
    queue = open_queue(root, opened)
    fill(queue, 0, 3)
    assert queue.put(9, *unit(9))  # offsets 3..8 were lost: spans a whole file
    assert queue.max_offset == 10
    got = queue.read(0, 100)
    assert got == [unit(0), unit(1), unit(2)] + [BLANK] * 6 + [unit(9)]
    assert [u.is_blank for u in got].count(True) == 6
    queue.flush()
    queue = reopen(root, opened, queue)  # recovery scans through the blanks
    assert queue.read(0, 100) == got
    assert queue.bisect_offset(lambda p: p, phy(4)) == 9


def test_first_unit_past_zero_starts_the_queue_there(root: str, opened: list[ConsumeQueue]) -> None:
    queue = open_queue(root, opened)
    assert queue.put(1_000_001, *unit(1))  # e.g. a replica whose ledger starts late
    assert (queue.min_offset, queue.max_offset) == (1_000_001, 1_000_002)
    assert len(files(queue)) == 1  # only the file holding it, blanks before it
    assert queue.read(1_000_001, 5) == [unit(1)]
    assert queue.get(1_000_000) is None
    assert not queue.put(1_000_000, *unit(0))  # below min
    queue = reopen(root, opened, queue)
    assert (queue.min_offset, queue.max_offset) == (1_000_001, 1_000_002)


@pytest.mark.parametrize(
    "damage",
    ["zero_last", "partial_last", "garbage_after", "backwards", "zero_size"],
)
def test_recovery_of_a_torn_tail(root: str, opened: list[ConsumeQueue], damage: str) -> None:
    queue = open_queue(root, opened)
    fill(queue, 0, 7)  # last file holds 4, 5, 6
    queue.flush()
    path = last_file(queue)
    queue.close()
    with open(path, "r+b") as f:
        if damage == "zero_last":  # unit 6 never reached the disk
            f.seek(2 * UNIT_SIZE)
            f.write(bytes(UNIT_SIZE))
        elif damage == "partial_last":  # only the offset of unit 6 made it
            f.seek(2 * UNIT_SIZE + 8)
            f.write(bytes(12))
        elif damage == "garbage_after":  # unit 6 gone, garbage where unit 7 would be
            f.seek(2 * UNIT_SIZE)
            f.write(bytes(UNIT_SIZE) + os.urandom(UNIT_SIZE))
        elif damage == "backwards":  # unit 6 points before unit 5: not a real unit
            f.seek(2 * UNIT_SIZE)
            f.write(struct.pack(">qiq", phy(5) - 1, 10, 0))
        else:
            f.seek(2 * UNIT_SIZE + 8)
            f.write(struct.pack(">i", 0))
    queue = open_queue(root, opened)
    assert queue.max_offset == 6
    assert queue.read(0, 100) == [unit(q) for q in range(6)]
    assert queue.last_phy_offset == phy(5)
    with open(path, "rb") as f:  # the discarded bytes were zeroed
        assert f.read()[2 * UNIT_SIZE :] == bytes(2 * UNIT_SIZE)
    fill(queue, 6, 9)
    queue = reopen(root, opened, queue)
    assert queue.read(0, 100) == [unit(q) for q in range(9)]


def test_redispatch_fills_a_unit_lost_before_the_last_file(
    root: str, opened: list[ConsumeQueue]
) -> None:
    queue = open_queue(root, opened)
    fill(queue, 0, 10)
    path = os.path.join(queue.directory, files(queue)[1])  # units 4..7
    queue.close()
    with open(path, "r+b") as f:  # a power loss kept the later pages but not unit 5's
        f.seek(UNIT_SIZE)
        f.write(bytes(UNIT_SIZE))
    queue = open_queue(root, opened)
    assert queue.max_offset == 10
    for q in range(4, 10):  # re-dispatch from the checkpoint, which is before unit 5
        assert queue.put(q, *unit(q)) == (q == 5)
    assert queue.read(0, 100) == [unit(q) for q in range(10)]


def test_recovery_drops_blanks_whose_unit_was_lost(root: str, opened: list[ConsumeQueue]) -> None:
    queue = open_queue(root, opened)
    fill(queue, 0, 2)
    queue.put(9, *unit(9))  # blanks 2..8 span into files 2 and 3
    queue.flush()
    path = last_file(queue)  # holds 8 (blank) and 9
    queue.close()
    with open(path, "r+b") as f:
        f.seek(UNIT_SIZE)
        f.write(bytes(UNIT_SIZE))  # unit 9 lost
    queue = open_queue(root, opened)
    assert queue.max_offset == 2  # blanks are never the last unit
    assert queue.read(0, 100) == [unit(0), unit(1)]
    assert len(files(queue)) == 1
    assert queue.put(2, *unit(2))


def test_wrong_file_size_is_refused(root: str, opened: list[ConsumeQueue]) -> None:
    queue = open_queue(root, opened)
    fill(queue, 0, 6)
    path = last_file(queue)
    queue.close()
    with open(path, "r+b") as f:
        f.truncate(UNIT_SIZE * 3)
    with pytest.raises(CorruptLogError, match=r"is 60 bytes, expected 80.*Delete the directory"):
        open_queue(root, opened)
    with pytest.raises(CorruptLogError, match="expected 200"):
        open_queue(root, opened, units_per_file=10)  # opened with another file size


def test_truncate_dirty(root: str, opened: list[ConsumeQueue]) -> None:
    queue = open_queue(root, opened)
    fill(queue, 0, 11)
    assert queue.truncate_dirty(phy(11)) == 0  # nothing at or past it
    assert queue.truncate_dirty(phy(6) + 1) == 4  # removes 7..10
    assert queue.max_offset == 7
    assert queue.last_phy_offset == phy(6)
    assert len(files(queue)) == 2
    assert queue.read(0, 100) == [unit(q) for q in range(7)]
    queue = reopen(root, opened, queue)  # durable: the units do not come back
    assert queue.max_offset == 7
    fill(queue, 7, 9)
    assert queue.truncate_dirty(0) == 9
    assert (queue.min_offset, queue.max_offset) == (0, 0)
    assert queue.last_phy_offset == -1
    queue = reopen(root, opened, queue)
    assert (queue.min_offset, queue.max_offset) == (0, 0)
    fill(queue, 0, 2)


def test_truncate_dirty_takes_the_blanks_before_the_cut(
    root: str, opened: list[ConsumeQueue]
) -> None:
    queue = open_queue(root, opened)
    fill(queue, 0, 2)
    queue.put(5, *unit(5))
    assert queue.truncate_dirty(phy(5)) == 4
    assert queue.max_offset == 2
    fill(queue, 2, 4)  # re-dispatch need not leave the old gap
    assert queue.read(0, 10) == [unit(q) for q in range(4)]


def test_retention(root: str, opened: list[ConsumeQueue]) -> None:
    queue = open_queue(root, opened)
    fill(queue, 0, 11)
    queue.correct_min_offset(phy(2))
    assert queue.min_offset == 2
    assert queue.get(1) is None
    assert queue.read(0, 5) == []
    assert queue.read(2, 2) == [unit(2), unit(3)]
    assert len(files(queue)) == 3
    assert queue.delete_expired(phy(5) + 1) == 1  # file 0 (units 0..3) is wholly below 6
    assert queue.min_offset == 6
    assert files(queue)[0] == f"{UPF * UNIT_SIZE:020d}"
    queue.correct_min_offset(0)  # never moves back
    assert queue.min_offset == 6
    queue = reopen(root, opened, queue)
    assert queue.min_offset == 4  # the first unit on disk, until corrected again
    assert queue.delete_expired(phy(6)) == 0
    assert queue.min_offset == 6
    # Everything expires: the last file stays, so the queue keeps its end.
    assert queue.delete_expired(phy(100)) == 1
    assert (queue.min_offset, queue.max_offset) == (11, 11)
    assert len(files(queue)) == 1
    fill(queue, 11, 13)
    assert queue.read(11, 5) == [unit(11), unit(12)]


def test_put_after_everything_expired_skips_ahead(root: str, opened: list[ConsumeQueue]) -> None:
    queue = open_queue(root, opened)
    fill(queue, 0, 3)
    queue.delete_expired(phy(3))
    assert queue.put(50, *unit(50))  # empty queue: starts again at 50, old files go
    assert (queue.min_offset, queue.max_offset) == (50, 51)
    assert files(queue) == [f"{48 * UNIT_SIZE:020d}"]
    queue = reopen(root, opened, queue)
    assert (queue.min_offset, queue.max_offset) == (50, 51)


def test_bisect_offset(root: str, opened: list[ConsumeQueue]) -> None:
    queue = open_queue(root, opened)
    assert queue.bisect_offset(lambda p: p, 0) == 0
    fill(queue, 0, 10)
    queue.put(14, *unit(14))  # blanks 10..13
    calls: list[int] = []

    def timestamp(p: int) -> int:
        calls.append(p)
        return p // 10

    for q in [*range(10), 14]:
        assert queue.bisect_offset(timestamp, phy(q) // 10) == q
        assert queue.bisect_offset(timestamp, phy(q) // 10 - 1) == q
    assert queue.bisect_offset(timestamp, 0) == 0
    assert queue.bisect_offset(timestamp, phy(14) // 10 + 1) == 15
    assert 0 not in calls  # never called for a blank
    queue.correct_min_offset(phy(4))
    assert queue.bisect_offset(timestamp, 0) == 4


def test_closed_queue_refuses(root: str, opened: list[ConsumeQueue]) -> None:
    queue = open_queue(root, opened)
    fill(queue, 0, 2)
    queue.close()
    queue.close()
    with pytest.raises(StoreClosedError):
        queue.put(2, *unit(2))
    with pytest.raises(StoreClosedError):
        queue.read(0, 1)
    with pytest.raises(StoreClosedError):
        queue.get(0)
    with pytest.raises(StoreClosedError):
        queue.flush()


@pytest.mark.parametrize("topic", ["", "a/b", "..", "x" * 128, "t\0", "t p"])
def test_topic_names_that_are_not_directories_are_refused(root: str, topic: str) -> None:
    with pytest.raises(InvalidMessageError):
        ConsumeQueue(root, topic, 0)


def test_queue_directory() -> None:
    assert queue_directory("/r", "%RETRY%g", 7) == os.path.join(
        "/r", "consumequeue", "%RETRY%g", "7"
    )
