"""AppendGroup: the puts of one loop pass share entries, and each gets its own records' offsets."""

from __future__ import annotations

import asyncio
import functools
from typing import TYPE_CHECKING, Any, cast

import pytest

from ledgermq.broker.storage.append_group import AppendGroup, AppendRefusedError
from ledgermq.broker.storage.commitlog import BODY_OFFSET
from ledgermq.errors import LedgerMQError, NotLeaderError
from ledgermq.ledger.server import AppendResult

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Sequence

    from ledgermq.broker.storage.commitlog import CommitLog


class FakeCommitLog:
    """Entries land back to back at ``ENTRY_HEADER + body`` each; appends are recorded."""

    def __init__(self, max_entry_bytes: int, refuse: LedgerMQError | None = None) -> None:
        self.max_entry_bytes = max_entry_bytes
        self.refuse = refuse
        self.appends: list[list[bytes]] = []
        self.futures: list[asyncio.Future[AppendResult]] = []
        self.end = 1000

    def submit_messages(self, bodies: Sequence[bytes]) -> asyncio.Future[AppendResult]:
        if self.refuse is not None:
            raise self.refuse
        self.appends.append(list(bodies))
        positions = []
        for body in bodies:
            positions.append(self.end)
            self.end += BODY_OFFSET + len(body)
        future: asyncio.Future[AppendResult] = asyncio.get_running_loop().create_future()
        future.set_result(AppendResult(0, len(bodies) - 1, 1, positions))
        self.futures.append(future)
        return future


def records(*sizes: int, fill: int = 0) -> tuple[bytes, list[int]]:
    """Concatenated fake records of the given sizes (record i made of byte fill + i)."""
    blob = b"".join(bytes([fill + i]) * size for i, size in enumerate(sizes))
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    return blob, starts


def in_loop(test: Callable[[], Coroutine[Any, Any, None]]) -> Callable[[], None]:
    """Run an async test in a fresh event loop (the suite has no async plugin)."""

    @functools.wraps(test)
    def run() -> None:
        asyncio.run(test())

    return run


def group_of(log: FakeCommitLog) -> AppendGroup:
    return AppendGroup(cast("CommitLog", log))


def stored(log: FakeCommitLog, offset: int, size: int) -> bytes:
    """The bytes at physical ``offset`` of the fake log."""
    base = 1000
    for bodies in log.appends:
        for body in bodies:
            start = base + BODY_OFFSET
            if start <= offset < start + len(body):
                return body[offset - start : offset - start + size]
            base = start + len(body)
    raise AssertionError(f"nothing stored at {offset}")


@in_loop
async def test_puts_of_one_pass_share_one_entry_and_get_their_own_offsets() -> None:
    log = FakeCommitLog(max_entry_bytes=10_000)
    group = group_of(log)
    a_blob, a_starts = records(100, fill=10)
    b_blob, b_starts = records(30, 40, fill=20)
    c_blob, c_starts = records(7, fill=30)
    futures = [
        group.add(a_blob, a_starts, lambda: None),
        group.add(b_blob, b_starts, lambda: None),
        group.add(c_blob, c_starts, lambda: None),
    ]
    offsets = await asyncio.gather(*futures)
    assert log.appends == [[a_blob + b_blob + c_blob]]
    assert offsets == [
        [1000 + BODY_OFFSET],
        [1000 + BODY_OFFSET + 100, 1000 + BODY_OFFSET + 130],
        [1000 + BODY_OFFSET + 170],
    ]
    assert stored(log, offsets[1][1], 40) == bytes([21]) * 40


@in_loop
async def test_puts_of_later_passes_make_later_appends() -> None:
    log = FakeCommitLog(max_entry_bytes=10_000)
    group = group_of(log)
    first = await group.add(*records(50), lambda: None)
    second = await group.add(*records(60), lambda: None)
    assert len(log.appends) == 2
    assert second[0] == first[0] + 50 + BODY_OFFSET


@in_loop
async def test_a_full_entry_starts_the_next_one_and_puts_are_never_split() -> None:
    log = FakeCommitLog(max_entry_bytes=100)
    group = group_of(log)
    blobs = [records(40, fill=10 * i) for i in range(1, 4)] + [records(30, 30, fill=50)]
    futures = [group.add(blob, starts, lambda: None) for blob, starts in blobs]
    offsets = await asyncio.gather(*futures)
    assert [len(b) for b in log.appends[0]] == [80, 100]  # 40+40 | 40+60: the pair stays whole
    for (blob, starts), put_offsets in zip(blobs, offsets, strict=True):
        ends = [*starts[1:], len(blob)]
        for offset, start, end in zip(put_offsets, starts, ends, strict=True):
            assert stored(log, offset, end - start) == blob[start:end]


@in_loop
async def test_a_put_larger_than_an_entry_spills_into_entries_of_its_own() -> None:
    log = FakeCommitLog(max_entry_bytes=100)
    group = group_of(log)
    small = records(20, fill=1)
    big = records(60, 60, 60, fill=10)
    futures = [group.add(*small, lambda: None), group.add(*big, lambda: None)]
    offsets = await asyncio.gather(*futures)
    assert [len(b) for b in log.appends[0]] == [20, 60, 60, 60]
    blob, starts = big
    for offset, start in zip(offsets[1], starts, strict=True):
        assert stored(log, offset, 60) == blob[start : start + 60]


@in_loop
async def test_a_record_larger_than_an_entry_is_refused_alone() -> None:
    class RefusesLarge(FakeCommitLog):
        def submit_messages(self, bodies: Sequence[bytes]) -> asyncio.Future[AppendResult]:
            if max(map(len, bodies)) > self.max_entry_bytes:
                raise NotLeaderError("too large")  # any refusal
            return super().submit_messages(bodies)

    log = RefusesLarge(max_entry_bytes=100)
    group = group_of(log)
    gave_back: list[str] = []
    before = group.add(*records(10), lambda: gave_back.append("before"))
    huge = group.add(*records(150), lambda: gave_back.append("huge"))
    after = group.add(*records(10), lambda: gave_back.append("after"))
    with pytest.raises(AppendRefusedError):
        await huge
    assert await before == [1000 + BODY_OFFSET]
    assert len(await after) == 1
    assert gave_back == ["huge"]
    assert [len(b) for bodies in log.appends for b in bodies] == [10, 10]


@in_loop
async def test_a_refusal_gives_back_every_put_latest_first() -> None:
    log = FakeCommitLog(max_entry_bytes=1000, refuse=NotLeaderError("not the leader"))
    group = group_of(log)
    gave_back: list[int] = []
    futures = [group.add(*records(10), functools.partial(gave_back.append, i)) for i in range(3)]
    results = await asyncio.gather(*futures, return_exceptions=True)
    assert all(isinstance(r, AppendRefusedError) for r in results)
    assert isinstance(cast("AppendRefusedError", results[0]).cause, NotLeaderError)
    assert gave_back == [2, 1, 0]


@in_loop
async def test_an_unknown_outcome_reaches_every_put_without_giving_back() -> None:
    class Fails(FakeCommitLog):
        def submit_messages(self, bodies: Sequence[bytes]) -> asyncio.Future[AppendResult]:
            future: asyncio.Future[AppendResult] = asyncio.get_running_loop().create_future()
            future.set_exception(LedgerMQError("timed out"))
            return future

    log = Fails(max_entry_bytes=1000)
    group = group_of(log)
    gave_back: list[int] = []
    futures = [group.add(*records(10), lambda: gave_back.append(1)) for _ in range(2)]
    results = await asyncio.gather(*futures, return_exceptions=True)
    assert [type(r) for r in results] == [LedgerMQError, LedgerMQError]
    assert gave_back == []


@in_loop
async def test_a_put_whose_sender_gave_up_does_not_disturb_the_others() -> None:
    log = FakeCommitLog(max_entry_bytes=1000)
    group = group_of(log)
    abandoned = group.add(*records(10), lambda: None)
    kept = group.add(*records(10), lambda: None)
    abandoned.cancel()
    assert await kept == [1000 + BODY_OFFSET + 10]
