"""What a pull reads (``PullService.read`` over ``CommitLog.read_records``), against the
reference: one ``read_record`` per ConsumeQueue unit, chosen unit by unit as RocketMQ's
``getMessage`` does (blanks skipped, tags filtered, at least one message, then up to
``maxMsgBytes``).

The store is a real ``LedgerStore`` with 4 KiB data files, holding batches (records back to
back in one entry) and single messages, so a pull spans runs of contiguous records, several
files and, after retention, deleted ones.
"""

from __future__ import annotations

import asyncio
import random
from types import SimpleNamespace
from typing import TYPE_CHECKING

import pytest

from ledgermq.broker.remoting.pull import PullProcessor, pull_code
from ledgermq.broker.service.pull import PullService
from ledgermq.broker.storage.commitlog import BODY_OFFSET, CHANNEL_MESSAGES, CommitLog
from ledgermq.broker.storage.consume_queue import BLANK_SIZE, ConsumeQueue
from ledgermq.errors import IndexCompactedError, IndexOutOfRangeError
from ledgermq.messaging.consuming import Delivered, PullOutcome, PullQuery, QueueRef
from ledgermq.store import LedgerStore
from ledgermq.wire import MQRequestCode, MQResponseCode, RemotingCommand
from ledgermq.wire.headers import PullMessageRequestHeader
from ledgermq.wire.message import decode_records, encode_records

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

TAGS = (11, 22, 33)
"""Tags codes the units get, in turn."""


class _Ledger:
    def __init__(self, store: LedgerStore) -> None:
        self.store = store


class Setup:
    """A store, a commit log over it, one ConsumeQueue and a PullService reading them."""

    def __init__(self, tmp: Path) -> None:
        self.store = LedgerStore.open(tmp / "store", data_segment_bytes=4096, background=False)
        self.queue = ConsumeQueue(str(tmp), "T", 0)
        self.commitlog = CommitLog(_Ledger(self.store))  # type: ignore[arg-type]
        state = SimpleNamespace(
            queues=SimpleNamespace(find=lambda topic, queue_id: self.queue),
            is_master=True,
            commitlog=self.commitlog,
        )
        self.pull = PullService(state)  # type: ignore[arg-type]
        self.next_offset = 0

    def append(self, count: int, gap: int = 0) -> None:
        """One entry of ``count`` records (a batch; a single message for 1), queue offsets from
        ``next_offset + gap`` (a gap is filled with blank units)."""
        first = self.next_offset + gap
        items = [
            (f"body-{first + i}".encode() * (1 + (first + i) % 3), 0, "") for i in range(count)
        ]
        blob, starts = encode_records(
            topic="T", queue_id=0, items=items, first_queue_offset=first, born_timestamp=1,
            born_host=("10.0.0.1", 5), store_timestamp=7, store_host=("10.0.0.2", 6),
        )  # fmt: skip
        (entry,) = self.store.append_batch(1, [blob], CHANNEL_MESSAGES)
        self.store.set_committed_index(entry.index)
        for i, (start, stop) in enumerate(zip(starts, [*starts[1:], len(blob)], strict=True)):
            q = first + i
            assert self.queue.put(q, entry.pos + BODY_OFFSET + start, stop - start, TAGS[q % 3])
        self.next_offset = first + count

    def read(
        self,
        offset: int,
        max_nums: int = 32,
        max_bytes: int = 4 << 20,
        tags: frozenset[int] | None = None,
    ) -> Delivered:
        return self.pull.read("T", 0, offset, max_nums, max_bytes, tags)

    def reference(
        self,
        offset: int,
        max_nums: int = 32,
        max_bytes: int = 4 << 20,
        tags: frozenset[int] | None = None,
    ) -> tuple[int, int, bytes, int]:
        """(code, next offset, body, count) as the pull read before it read in bulk."""
        wanted: list[tuple[int, int]] = []
        total = 0
        next_offset = offset
        for phy, size, tags_code in self.queue.read(offset, max_nums):
            if size == BLANK_SIZE:
                next_offset += 1
                continue
            if total + size > max_bytes and wanted:
                break
            next_offset += 1
            if tags is not None and tags_code not in tags:
                continue
            wanted.append((phy, size))
            total += size
        try:
            records = [self.commitlog.read_record(phy, size) for phy, size in wanted]
        except IndexCompactedError:
            return MQResponseCode.PULL_RETRY_IMMEDIATELY, offset, b"", 0
        except IndexOutOfRangeError:
            return MQResponseCode.PULL_NOT_FOUND, offset, b"", 0
        if not records:
            return MQResponseCode.PULL_RETRY_IMMEDIATELY, next_offset, b"", 0
        return MQResponseCode.SUCCESS, next_offset, b"".join(records), len(records)

    def close(self) -> None:
        self.queue.close()
        self.store.close()


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    s = Setup(tmp_path)
    yield s
    s.close()


def _fill(setup: Setup) -> None:
    rng = random.Random(3)
    setup.append(4)
    for _ in range(30):
        setup.append(rng.choice((1, 1, 3, 8)), gap=rng.choice((0, 0, 0, 0, 2)))


def _as_tuple(result: Delivered) -> tuple[int, int, bytes, int]:
    return pull_code(result.outcome), result.next_offset, result.stored, result.count


def test_a_pull_reads_what_one_read_per_record_read(setup: Setup) -> None:
    _fill(setup)
    assert setup.store.positions(0, setup.store.end_index)[-1] > 3 * 4096  # several files
    result = setup.read(0, 1024)
    assert pull_code(result.outcome) == MQResponseCode.SUCCESS
    assert _as_tuple(result) == setup.reference(0, 1024)
    messages = decode_records(result.stored)
    real = [u for u in setup.queue.read(0, 1024) if u.size != BLANK_SIZE]
    assert result.count == len(messages) == len(real)
    assert [m.commit_log_offset for m in messages] == [u.phy_offset for u in real]
    assert [m.queue_offset for m in messages] == [
        q for q, u in enumerate(setup.queue.read(0, 1024)) if u.size != BLANK_SIZE
    ]
    assert result.next_offset == setup.queue.max_offset


def test_random_pulls_match_the_reference(setup: Setup) -> None:
    _fill(setup)
    rng = random.Random(11)
    end = setup.queue.max_offset
    for _ in range(300):
        offset = rng.randrange(end)
        max_nums = rng.choice((1, 2, 5, 32, 1024))
        max_bytes = rng.choice((1, 100, 400, 1500, 4 << 20))
        tags = rng.choice((None, None, frozenset({11}), frozenset({22, 33}), frozenset({99})))
        assert _as_tuple(setup.read(offset, max_nums, max_bytes, tags)) == setup.reference(
            offset, max_nums, max_bytes, tags
        ), (offset, max_nums, max_bytes, tags)


def test_max_bytes_cuts_the_pull_but_returns_at_least_one(setup: Setup) -> None:
    setup.append(8)
    sizes = [u.size for u in setup.queue.read(0, 8)]
    result = setup.read(0, 8, max_bytes=sizes[0] + sizes[1] + sizes[2])
    assert (result.count, result.next_offset) == (3, 3)
    result = setup.read(0, 8, max_bytes=sizes[0] + sizes[1] + sizes[2] - 1)
    assert (result.count, result.next_offset) == (2, 2)
    result = setup.read(0, 8, max_bytes=1)
    assert (result.count, result.next_offset) == (1, 1)
    assert len(result.stored) == sizes[0]


def test_filtered_and_blank_units_are_skipped(setup: Setup) -> None:
    setup.append(6)
    setup.append(3, gap=4)
    result = setup.read(0, 32, tags=frozenset({22}))
    assert [m.queue_offset for m in decode_records(result.stored)] == [1, 4, 10]
    assert result.next_offset == 13
    # Nothing wanted (tags nobody has): go on past what was looked at, without a read.
    setup.store.close()
    result = setup.read(0, 32, tags=frozenset({99}))
    assert (pull_code(result.outcome), result.next_offset, result.count) == (
        MQResponseCode.PULL_RETRY_IMMEDIATELY,
        13,
        0,
    )


def test_messages_removed_by_retention_ask_for_a_retry(setup: Setup) -> None:
    _fill(setup)
    setup.store.reset_begin(setup.store.end_index)
    assert setup.store.begin_index > 0
    result = setup.read(0, 1024)
    assert (pull_code(result.outcome), result.next_offset, result.stored) == (
        MQResponseCode.PULL_RETRY_IMMEDIATELY,
        0,
        b"",
    )
    begin = setup.store.begin_index
    log_start = setup.store.positions(begin, begin)[0]
    units = setup.queue.read(0, 1024)
    first_kept = next(
        q for q, u in enumerate(units) if u.size != BLANK_SIZE and u.phy_offset >= log_start
    )
    result = setup.read(first_kept, 1024)
    assert pull_code(result.outcome) == MQResponseCode.SUCCESS
    assert _as_tuple(result) == setup.reference(first_kept, 1024)


def test_units_past_the_log_are_not_found(setup: Setup) -> None:
    setup.append(3)
    end = setup.store.write_pos
    assert setup.queue.put(3, end + BODY_OFFSET, 200, 11)  # a unit the log does not hold
    result = setup.read(0, 32)
    assert (pull_code(result.outcome), result.next_offset, result.stored) == (
        MQResponseCode.PULL_NOT_FOUND,
        0,
        b"",
    )
    assert _as_tuple(result) == setup.reference(0, 32)


def test_read_records_fills_in_physical_offsets_and_handles_odd_units(setup: Setup) -> None:
    setup.append(5)
    units = setup.queue.read(0, 5)
    offsets, sizes = [u.phy_offset for u in units], [u.size for u in units]
    body = setup.commitlog.read_records(offsets, sizes)
    assert body == b"".join(
        setup.commitlog.read_record(o, s) for o, s in zip(offsets, sizes, strict=True)
    )
    assert [m.commit_log_offset for m in decode_records(body)] == offsets
    assert setup.commitlog.read_records([], []) == b""
    # Ranges too short to be records (a damaged unit): what read_record makes of them.
    odd = setup.commitlog.read_records([offsets[0], offsets[1]], [10, sizes[1]])
    assert odd == setup.commitlog.read_record(offsets[0], 10) + setup.commitlog.read_record(
        offsets[1], sizes[1]
    )


def test_a_pull_answers_in_the_contracts_shape_with_its_records_as_stored(setup: Setup) -> None:
    """Issue 26 item 1: a pull's answer is the messaging contract's ``Delivered`` for both
    doors; the records stay as stored (the remoting door's body, never decoded on the way)
    and become ``Delivery`` values only when a door asks (``deliveries``)."""
    _fill(setup)
    result = setup.read(0, 8)
    assert type(result) is Delivered
    assert (result.outcome, result.messages) == (PullOutcome.FOUND, ())
    stored = decode_records(result.stored)
    assert result.count == len(stored) > 0
    deliveries = result.deliveries()
    assert [d.record.queue_offset for d in deliveries] == [m.queue_offset for m in stored]
    assert all(d.receipt_handle == "" and d.invisible_ms == 0 for d in deliveries)

    class Service:
        async def pull(self, request: object) -> Delivered:
            return result

    header = PullMessageRequestHeader("G", "T", 0, 0)
    command = RemotingCommand(MQRequestCode.PULL_MESSAGE, 1)
    answer = asyncio.run(PullProcessor(Service()).process(command, header))  # type: ignore[arg-type]
    assert answer.code == MQResponseCode.SUCCESS
    assert answer.body is result.stored  # the stored bytes themselves
    assert answer.ext_fields["nextBeginOffset"] == str(result.next_offset)


def test_the_remoting_pull_asks_the_service_in_the_contracts_terms() -> None:
    """Issue 26 item 1: the remoting door translates PULL_MESSAGE's header into the messaging
    contract's ``PullQuery`` (the gRPC door's request too): the SUBSCRIPTION, SUSPEND and
    COMMIT_OFFSET flags decide its expression, wait and commit; no subscription at all leaves
    the group's registered one to the service (expression None)."""
    asked: list[PullQuery] = []

    class Service:
        async def pull(self, query: PullQuery) -> Delivered:
            asked.append(query)
            return Delivered(PullOutcome.NOT_FOUND, (), query.offset)

    door = PullProcessor(Service())  # type: ignore[arg-type]
    command = RemotingCommand(MQRequestCode.PULL_MESSAGE, 1)
    headers = [
        PullMessageRequestHeader("G", "T", 2, 7, 16, 1 | 2 | 4, 5, 900, None, None, "TAG", 64),
        PullMessageRequestHeader("G", "T", 2, 7, 16, 0, 5, 900, None),
        PullMessageRequestHeader("G", "T", 2, 7, 16, 0, 5, 900, "a || b", None, "TAG"),
    ]
    for header in headers:
        answer = asyncio.run(door.process(command, header))
        assert (answer.code, answer.ext_fields["nextBeginOffset"]) == (
            MQResponseCode.PULL_NOT_FOUND,
            "7",
        )
    assert all(type(q) is PullQuery and q.queue == QueueRef("T", "", 2) for q in asked)
    shapes = [(q.expression, q.poll_ms, q.commit_offset, q.max_bytes) for q in asked]
    assert shapes == [("*", 900, 5, 64), (None, 0, None, None), ("a || b", 0, None, None)]
