"""ConsumeQueueStore: many queues, load at start, store-wide truncation and retention."""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

import pytest

from ledgermq.broker.storage.consume_queue import ConsumeQueue
from ledgermq.broker.storage.consume_queue_store import ConsumeQueueStore, QueueStats
from ledgermq.errors import InvalidMessageError, StoreClosedError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[list[ConsumeQueueStore]]:
    opened: list[ConsumeQueueStore] = []
    yield opened
    for store in opened:
        store.close()


def open_store(tmp_path: Path, stores: list[ConsumeQueueStore]) -> ConsumeQueueStore:
    store = ConsumeQueueStore(str(tmp_path), units_per_file=4)
    store.load()
    stores.append(store)
    return store


def populate(
    store: ConsumeQueueStore, topics: int = 5, queues: int = 4, per_queue: int = 6
) -> None:
    """Messages spread over queues in log order, as the dispatcher writes them."""
    phy = 48
    offsets: dict[tuple[str, int], int] = {}
    for i in range(topics * queues * per_queue):
        key = (f"topic{i % topics}", (i // topics) % queues)
        q = offsets.get(key, 0)
        store.get_or_create(*key).put(q, phy, 100, i)
        offsets[key] = q + 1
        phy += 148


def test_load_many_queues(tmp_path: Path, stores: list[ConsumeQueueStore]) -> None:
    store = open_store(tmp_path, stores)
    populate(store)
    before = store.stats()
    assert len(before) == 20
    assert before[0] == QueueStats("topic0", 0, 0, 6)
    max_phy = store.max_phy_offset()
    assert max_phy == 48 + 120 * 148 - 48
    store.flush_all()
    store.close()
    os.makedirs(os.path.join(store.directory, "topic0", "notaqueue"))
    os.makedirs(os.path.join(store.directory, "bad name"))
    store = open_store(tmp_path, stores)
    assert store.stats() == before
    assert store.topics() == [f"topic{i}" for i in range(5)]
    assert sorted(store.queues_of("topic3")) == [0, 1, 2, 3]
    assert store.max_phy_offset() == max_phy
    assert store.load() == 0  # everything already open
    queue = store.find("topic2", 1)
    assert queue is not None
    assert store.get_or_create("topic2", 1) is queue
    assert store.find("topic2", 9) is None
    assert store.find("nope", 0) is None


def test_truncate_and_expire_across_queues(tmp_path: Path, stores: list[ConsumeQueueStore]) -> None:
    store = open_store(tmp_path, stores)
    populate(store)
    limit = 48 + 100 * 148  # messages 100..119 are past the ledger's end
    assert store.truncate_dirty(limit) == 20
    assert sum(s.max_offset for s in store.stats()) == 100
    assert store.max_phy_offset() <= limit
    # Each queue got one message per 20 in log order: 0..59 expired = 3 per queue, not yet a
    # whole file of 4; 0..79 expired = 4 per queue, and each queue's first file goes.
    assert store.delete_expired(48 + 60 * 148) == 0
    assert {s.min_offset for s in store.stats()} == {3}
    assert store.delete_expired(48 + 80 * 148) == 20
    assert {(s.min_offset, s.max_offset) for s in store.stats()} == {(4, 5)}


def test_delete_topic(tmp_path: Path, stores: list[ConsumeQueueStore]) -> None:
    store = open_store(tmp_path, stores)
    populate(store, topics=2)
    assert store.delete_topic("topic1")
    assert store.topics() == ["topic0"]
    assert not os.path.exists(os.path.join(store.directory, "topic1"))
    assert not store.delete_topic("topic1")
    with pytest.raises(InvalidMessageError):
        store.delete_topic("../x")
    store.close()
    store = open_store(tmp_path, stores)
    assert store.topics() == ["topic0"]


def test_closed_store_refuses(tmp_path: Path, stores: list[ConsumeQueueStore]) -> None:
    store = open_store(tmp_path, stores)
    store.close()
    with pytest.raises(StoreClosedError):
        store.get_or_create("t", 0)
    with pytest.raises(StoreClosedError):
        store.flush_all()


def flush_all_racing(
    store: ConsumeQueueStore, monkeypatch: pytest.MonkeyPatch, loop_action: Callable[[], object]
) -> list[BaseException]:
    """Run ``store.flush_all()`` in a worker thread, as the broker's housekeeping does, and
    ``loop_action`` in this thread (standing in for the event loop) while the worker is inside
    its first ``fdatasync``: deterministic, not a matter of luck. Returns the worker's errors."""
    syncing = threading.Event()
    changed = threading.Event()
    real_fdatasync = os.fdatasync

    def fdatasync(fd: int) -> None:
        if threading.current_thread() is not threading.main_thread() and not syncing.is_set():
            syncing.set()
            assert changed.wait(10)
        real_fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    errors: list[BaseException] = []

    def housekeeping() -> None:
        try:
            store.flush_all()
        except BaseException as exc:  # noqa: BLE001 - returned to the test
            errors.append(exc)

    worker = threading.Thread(target=housekeeping)
    worker.start()
    try:
        assert syncing.wait(10)
        loop_action()
    finally:
        changed.set()
        worker.join(10)
    assert not worker.is_alive()
    return errors


def is_synced(queue: ConsumeQueue) -> bool:
    return not any(segment.dirty for segment in queue._log.segments)


def test_flush_all_in_a_thread_while_the_dispatcher_adds_queues(
    tmp_path: Path, stores: list[ConsumeQueueStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: RuntimeError: dictionary changed size during iteration, and the pass's flush,
    dispatch checkpoint and metadata snapshot were skipped."""
    store = open_store(tmp_path, stores)
    populate(store, topics=2, queues=2, per_queue=3)
    existing = list(store)

    def dispatch() -> None:  # a new queue of the topic being flushed, and new topics
        store.get_or_create("topic0", 7).put(0, 1 << 30, 100, 0)
        for i in range(3):
            store.get_or_create(f"new{i}", 0).put(0, 1 << 30, 100, 0)

    assert flush_all_racing(store, monkeypatch, dispatch) == []
    assert all(is_synced(queue) for queue in existing)


def test_flush_all_in_a_thread_while_a_topic_is_deleted(
    tmp_path: Path, stores: list[ConsumeQueueStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: OSError EBADF (a file closed under its fdatasync) or StoreClosedError."""
    store = open_store(tmp_path, stores)
    populate(store, topics=2, queues=2, per_queue=3)
    kept = list(store.queues_of("topic1").values())
    assert flush_all_racing(store, monkeypatch, lambda: store.delete_topic("topic0")) == []
    assert store.topics() == ["topic1"]
    assert all(is_synced(queue) for queue in kept)
