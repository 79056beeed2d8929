"""The dispatcher over entries holding one record or a batch's records (storage.commitlog)."""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import TYPE_CHECKING

import pytest

from ledgermq.broker.state.metadata import BrokerMetadata
from ledgermq.broker.state.timer_table import TIMER_TOPIC
from ledgermq.broker.storage.append_group import pack_entries
from ledgermq.broker.storage.commitlog import CHANNEL_MESSAGES, CHANNEL_METADATA, CommitLog
from ledgermq.broker.storage.consume_queue_store import ConsumeQueueStore
from ledgermq.broker.storage.dispatcher import Dispatcher
from ledgermq.broker.storage.key_index import KeyIndex
from ledgermq.broker.storage.quarantine import QUARANTINE_FILE, QuarantineLog
from ledgermq.clock import SystemClock
from ledgermq.errors import StoreClosedError
from ledgermq.ledger.server import AppendResult
from ledgermq.store.memory_store import MemoryLedgerStore
from ledgermq.wire.message import decode_records, encode_properties, encode_record, encode_records

if TYPE_CHECKING:
    from pathlib import Path


def _items(n: int, tag: str) -> list[tuple[bytes, int, str]]:
    return [
        (
            f"{tag}-{i}".encode() * (i + 1),
            i,
            encode_properties({"TAGS": tag, "KEYS": f"{tag}k{i} shared", "UNIQ_KEY": f"{tag}U{i}"}),
        )
        for i in range(n)
    ]


def _records(topic: str, queue_id: int, first: int, items: list[tuple[bytes, int, str]]) -> bytes:
    blob, _ = encode_records(
        topic=topic, queue_id=queue_id, items=items, first_queue_offset=first,
        born_timestamp=1, born_host=("10.0.0.1", 5), store_timestamp=7,
        store_host=("10.0.0.2", 6),
    )  # fmt: skip
    return blob


class _Ledger:
    def __init__(self, store: MemoryLedgerStore) -> None:
        self.store = store


def test_multi_record_entries_give_one_unit_and_index_records_per_message(tmp_path: Path) -> None:
    store = MemoryLedgerStore()
    single = encode_record(
        topic="T", queue_id=0, body=b"alone", properties=encode_properties({"KEYS": "solo"}),
        born_timestamp=1, born_host=("10.0.0.1", 5), store_timestamp=7,
        store_host=("10.0.0.2", 6), queue_offset=0,
    )  # fmt: skip
    batch_a = _records("T", 0, 1, _items(4, "a"))
    batch_b = _records("T", 1, 0, _items(3, "b"))
    entries = store.append_batch(1, [single, batch_a, batch_b], CHANNEL_MESSAGES)
    store.set_committed_index(entries[-1].index)
    queues = ConsumeQueueStore(str(tmp_path))
    keys = KeyIndex(str(tmp_path))
    dispatcher = Dispatcher(
        store, queues, keys, BrokerMetadata(), SystemClock(), start_index=entries[0].index
    )
    assert dispatcher.catch_up() == 3
    commitlog = CommitLog(_Ledger(store))  # type: ignore[arg-type]

    q0 = queues.find("T", 0)
    q1 = queues.find("T", 1)
    assert q0 is not None
    assert q1 is not None
    assert (q0.max_offset, q1.max_offset) == (5, 3)
    units = q0.read(0, 10)
    assert units[0].phy_offset == entries[0].pos + 48
    assert units[1].phy_offset == entries[1].pos + 48
    # Records of a batch follow each other inside the entry body.
    for before, after in itertools.pairwise(units[1:]):
        assert after.phy_offset == before.phy_offset + before.size
    assert units[-1].phy_offset + units[-1].size == entries[2].pos
    read = decode_records(
        commitlog.read_records([u.phy_offset for u in units], [u.size for u in units])
    )
    assert [m.body for m in read] == [b"alone"] + [b for b, _, _ in _items(4, "a")]
    assert [m.queue_offset for m in read] == list(range(5))
    assert [m.commit_log_offset for m in read] == [u.phy_offset for u in units]
    assert commitlog.record_size(units[3].phy_offset) == units[3].size
    # The k-th record of a batch alone, by its offset.
    (third,) = decode_records(commitlog.read_record(units[3].phy_offset, units[3].size))
    assert third.body == _items(4, "a")[2][0]
    assert third.commit_log_offset == units[3].phy_offset
    # Key index: KEYS and UNIQ_KEY of every record of every entry.
    assert keys.query("T", "ak2", 8) == [units[3].phy_offset]
    assert keys.query("T", "bU1", 8) == [q1.read(1, 1)[0].phy_offset]
    assert keys.query("T", "solo", 8) == [units[0].phy_offset]
    assert len(keys.query("T", "shared", 16)) == 7
    # Re-dispatching (from a checkpoint) changes nothing.
    count = keys.record_count
    dispatcher.next_index = entries[0].index
    assert dispatcher.catch_up() == 3
    assert keys.record_count == count
    assert q0.max_offset == 5
    keys.close()
    queues.close()


def test_pack_entries_and_physical_offsets() -> None:
    blob = _records("T", 0, 0, _items(6, "p"))
    _, starts = encode_records(
        topic="T", queue_id=0, items=_items(6, "p"), first_queue_offset=0, born_timestamp=1,
        born_host=("10.0.0.1", 5), store_timestamp=7, store_host=("10.0.0.2", 6),
    )  # fmt: skip
    assert pack_entries(blob, starts, len(blob)) == ([blob], [0])
    sizes = [b - a for a, b in zip(starts, [*starts[1:], len(blob)], strict=True)]
    limit = sizes[0] + sizes[1] + sizes[2]
    bodies, firsts = pack_entries(blob, starts, limit)
    assert b"".join(bodies) == blob
    assert all(len(body) <= limit for body in bodies)
    assert firsts[0] == 0
    assert len(bodies) == len(firsts) > 1
    # A record larger than the limit gets an entry of its own (the ledger refuses it).
    bodies, firsts = pack_entries(blob, starts, 1)
    assert firsts == list(range(6))

    positions = [1000 + 100 * i for i in range(len(firsts))]
    result = AppendResult(0, len(firsts) - 1, 1, positions)
    offsets = CommitLog.physical_offsets(result, starts, firsts)
    assert offsets == [1000 + 100 * i + 48 for i in range(6)]


def _record(topic: str, queue_id: int, queue_offset: int, body: bytes) -> bytes:
    return encode_record(
        topic=topic, queue_id=queue_id, body=body, properties=encode_properties({"KEYS": "k"}),
        born_timestamp=1, born_host=("10.0.0.1", 5), store_timestamp=7,
        store_host=("10.0.0.2", 6), queue_offset=queue_offset,
    )  # fmt: skip


def _poisoned_log() -> tuple[MemoryLedgerStore, int]:
    """A log whose entries 2-4 cannot be applied on any replica (issue 25), between good ones:
    returns the store and its first index."""
    store = MemoryLedgerStore()
    first = store.append(1, _record("T", 0, 0, b"before"), CHANNEL_MESSAGES).index
    # A message for a topic that cannot be a queue directory (a group named orders.v1).
    store.append(1, _record("%DLQ%orders.v1", 0, 0, b"poison"), CHANNEL_MESSAGES)
    # One entry, three records: the middle one's queue id is negative; the others are fine.
    mixed = _record("T", 0, 1, b"a") + _record("T", -1, 0, b"bad") + _record("U", 0, 0, b"c")
    store.append(1, mixed, CHANNEL_MESSAGES)
    # A metadata op that does not apply, and one that is not an op at all.
    store.append(1, b'{"offsets":[1,2],"op":"delay_offsets"}', CHANNEL_METADATA)
    store.append(1, b"[not an op", CHANNEL_METADATA)
    last = store.append(1, _record("T", 0, 2, b"after"), CHANNEL_MESSAGES).index
    store.set_committed_index(last)
    return store, first


def test_an_entry_that_cannot_be_applied_is_quarantined_and_dispatch_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 25: applying a committed entry must never fail on every replica. An invalid
    topic, a negative queue id, a metadata op that does not apply: each is quarantined (an
    ERROR line naming the index, a durable record) and the rest of the log, and of the batch,
    is indexed."""
    store, first = _poisoned_log()
    queues = ConsumeQueueStore(str(tmp_path))
    keys = KeyIndex(str(tmp_path))
    metadata = BrokerMetadata()
    log = QuarantineLog.in_root(str(tmp_path))
    dispatcher = Dispatcher(
        store, queues, keys, metadata, SystemClock(), start_index=first, quarantine=log
    )
    with caplog.at_level(logging.ERROR):
        assert dispatcher.catch_up() == 6
    assert dispatcher.failure is None
    q0 = queues.find("T", 0)
    u0 = queues.find("U", 0)
    assert q0 is not None
    assert u0 is not None
    assert (q0.max_offset, u0.max_offset) == (3, 1)
    assert queues.find("%DLQ%orders.v1", 0) is None
    assert [(i.index, i.record, i.topic) for i in log.items()] == [
        (first + 1, 0, "%DLQ%orders.v1"),
        (first + 2, 1, "T"),
        (first + 3, -1, ""),
        (first + 4, -1, ""),
    ]
    assert "may contain only the characters" in log.items()[0].reason
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert any(f"record 0 of entry {first + 1}" in m and "%DLQ%orders.v1" in m for m in errors)
    assert log.total == 4
    keys.close()
    queues.close()

    # A restart re-dispatches from an older checkpoint: the same items, recorded once, read
    # back from the file.
    queues = ConsumeQueueStore(str(tmp_path))
    queues.load()
    keys = KeyIndex(str(tmp_path))
    again = QuarantineLog.in_root(str(tmp_path))
    assert [i.index for i in again.items()] == [i.index for i in log.items()]
    dispatcher = Dispatcher(
        store, queues, keys, BrokerMetadata(), SystemClock(), start_index=first, quarantine=again
    )
    assert dispatcher.catch_up() == 6
    assert again.total == 4
    with open(tmp_path / QUARANTINE_FILE, encoding="utf-8") as file:
        assert len(file.readlines()) == 4
    keys.close()
    queues.close()


def test_a_local_store_failure_still_stops_dispatch(tmp_path: Path) -> None:
    """What is local to one replica (its queue files) is not quarantined: the other replicas
    applied the entry, so this one must stop (fail-stop) rather than skip it."""
    store = MemoryLedgerStore()
    entry = store.append(1, _record("T", 0, 0, b"x"), CHANNEL_MESSAGES)
    queues = ConsumeQueueStore(str(tmp_path))
    keys = KeyIndex(str(tmp_path))
    dispatcher = Dispatcher(
        store, queues, keys, BrokerMetadata(), SystemClock(), start_index=entry.index
    )
    failures: list[BaseException] = []
    dispatcher.on_failure = failures.append
    queues.get_or_create("T", 0)
    queues.close()

    async def main() -> None:
        store.set_committed_index(entry.index)
        dispatcher.on_commit(entry.index)
        for _ in range(3):
            await asyncio.sleep(0)

    asyncio.run(main())
    assert len(failures) == 1
    assert isinstance(failures[0], StoreClosedError)
    assert len(dispatcher.quarantine) == 0
    keys.close()


def test_a_timer_record_the_timer_table_refuses_is_quarantined(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The timer table's callbacks run inside dispatch too: one that raises for a record
    quarantines that record (its queue unit is written) and dispatch goes on."""
    store = MemoryLedgerStore()
    first = store.append(1, _record(TIMER_TOPIC, 0, 0, b"timer"), CHANNEL_MESSAGES).index
    last = store.append(1, _record("T", 0, 0, b"next"), CHANNEL_MESSAGES).index
    store.set_committed_index(last)
    queues = ConsumeQueueStore(str(tmp_path))
    keys = KeyIndex(str(tmp_path))
    metadata = BrokerMetadata()

    def refuse(index: int, offset: int, record: bytes) -> None:
        raise KeyError("a timer record of a newer format")

    monkeypatch.setattr(metadata.timers, "on_timer_record", refuse)
    dispatcher = Dispatcher(store, queues, keys, metadata, SystemClock(), start_index=first)
    assert dispatcher.catch_up() == 2
    assert [(i.index, i.record, i.topic) for i in dispatcher.quarantine.items()] == [
        (first, 0, TIMER_TOPIC)
    ]
    assert dispatcher.quarantine.items()[0].reason.startswith("timer table")
    queue = queues.find("T", 0)
    assert queue is not None
    assert queue.max_offset == 1
    keys.close()
    queues.close()


def _dispatch_metadata(
    tmp_path: Path, bodies: list[bytes]
) -> tuple[BrokerMetadata, QuarantineLog, int]:
    """Dispatch ``bodies`` as metadata entries; the metadata, the quarantine and the first index."""
    store = MemoryLedgerStore()
    first = store.append(1, bodies[0], CHANNEL_METADATA).index
    for body in bodies[1:]:
        store.append(1, body, CHANNEL_METADATA)
    store.set_committed_index(first + len(bodies) - 1)
    queues = ConsumeQueueStore(str(tmp_path))
    keys = KeyIndex(str(tmp_path))
    metadata = BrokerMetadata()
    log = QuarantineLog.in_root(str(tmp_path))
    dispatcher = Dispatcher(
        store, queues, keys, metadata, SystemClock(), start_index=first, quarantine=log
    )
    assert dispatcher.catch_up() == len(bodies)
    assert dispatcher.failure is None
    keys.close()
    queues.close()
    return metadata, log, first


def test_an_op_of_a_newer_format_version_is_quarantined_naming_the_version(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 26 item 6: an op written by a newer release (``"v":2``) is not guessed at: it is
    quarantined with an ERROR line naming its version, never applied as if it were ours (before
    the ops were versioned, its offsets were applied), never a crash loop; dispatch goes on."""
    with caplog.at_level(logging.ERROR):
        metadata, log, first = _dispatch_metadata(
            tmp_path,
            [
                b'{"offsets":[["G","T",0,5]],"op":"commit_offsets"}',  # version 0
                b'{"offsets":[["G","T",0,9]],"op":"commit_offsets","v":2}',
                b'{"offsets":[["G","T",1,7]],"op":"commit_offsets","v":1}',
            ],
        )
    assert metadata.offsets == {("T", "G"): {0: 5, 1: 7}}
    assert [(i.index, i.record) for i in log.items()] == [(first + 1, -1)]
    assert "version 2 is newer than this release reads" in log.items()[0].reason
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert any(f"entry {first + 1}" in m and "version 2" in m for m in errors), errors


def test_an_unknown_or_mistyped_op_is_quarantined_not_skipped_silently(tmp_path: Path) -> None:
    """An op kind this release does not know, or a field of the wrong type, is quarantined
    (an operator finds it with 'ledgermq admin quarantined-entries'); before, the unknown
    kind was only a WARNING and the queue id "1" was applied as the number 1."""
    metadata, log, first = _dispatch_metadata(
        tmp_path,
        [
            b'{"op":"rename_topic","topic":"T"}',
            b'{"offsets":[["G","T","1",7]],"op":"commit_offsets"}',
            b'{"offsets":[["G","T",0,3]],"op":"commit_offsets"}',
        ],
    )
    assert metadata.offsets == {("T", "G"): {0: 3}}
    assert [i.index for i in log.items()] == [first, first + 1]
    assert "unknown metadata op 'rename_topic'" in log.items()[0].reason
    assert "[group, topic, queue id, offset]" in log.items()[1].reason
