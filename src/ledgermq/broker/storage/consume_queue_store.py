"""Every ConsumeQueue of a broker, by topic and queue id (RocketMQ's ``consumeQueueTable``).

The store owns the queues' lifecycle: ``load`` opens what is on disk at start, the dispatcher
creates queues on first use with ``get_or_create``, and the whole-store operations of recovery
and retention (``truncate_dirty``, ``delete_expired``, ``flush_all``) run over all of them.

Start-up order, after RocketMQ's ``DefaultMessageStore.load`` and ``recover`` (spec-broker.md
sections 2.2, 2.3 and 3.2): ``load()``; then, if ``max_phy_offset()`` reaches the ledger's end,
``truncate_dirty(ledger end)``; then ``delete_expired(commit log min offset)``, which also sets
every queue's ``min_offset`` (it is not stored on disk).

Not thread-safe, like the queues themselves, with one exception: ``flush_all`` may run in a
worker thread (the broker's housekeeping) while the event loop's dispatcher adds queues and an
admin deletes a topic. It flushes a snapshot of the queues taken under ``_lock``, which every
change to the set of queues also takes (never during I/O), and skips a queue closed meanwhile.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from typing import TYPE_CHECKING, Final, NamedTuple

from ledgermq.broker.storage._files import make_dirs_durably
from ledgermq.broker.storage.consume_queue import (
    CONSUME_QUEUE_DIR,
    DEFAULT_UNITS_PER_FILE,
    ConsumeQueue,
    check_topic_name,
    is_topic_name,
)
from ledgermq.errors import StoreClosedError
from ledgermq.store.segment import fsync_directory

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["ConsumeQueueStore", "QueueStats"]

_log: Final = logging.getLogger("ledgermq.broker")


class QueueStats(NamedTuple):
    """One queue's offsets, for admin and statistics commands."""

    topic: str
    queue_id: int
    min_offset: int
    max_offset: int


class ConsumeQueueStore:
    """The ConsumeQueues under ``<root>/consumequeue``.

    Args:
        root: the store root (``storePathRootDir``).
        units_per_file: units per queue file, for every queue (default 300,000).
    """

    def __init__(self, root: str, units_per_file: int = DEFAULT_UNITS_PER_FILE) -> None:
        self.root: Final = root
        self.directory: Final = os.path.join(root, CONSUME_QUEUE_DIR)
        self.units_per_file: Final = units_per_file
        self._queues: dict[str, dict[int, ConsumeQueue]] = {}
        self._lock = threading.Lock()
        """Guards the set of queues in ``_queues`` (queues added or removed) against the
        snapshot ``flush_all`` takes in another thread; held for dict operations only."""
        self._closed = False

    def load(self) -> int:
        """Open every queue on disk that is not open yet; returns how many were opened.

        Directories whose names are not a topic or a queue id are skipped with a warning. A
        damaged queue file fails the load (``CorruptLogError`` names it).
        """
        self._check_open()
        make_dirs_durably(self.directory)
        opened = 0
        for topic in sorted(os.listdir(self.directory)):
            topic_dir = os.path.join(self.directory, topic)
            if not os.path.isdir(topic_dir):
                continue
            if not is_topic_name(topic):
                _log.warning("skipping %s: not a valid topic name", topic_dir)
                continue
            for name in sorted(os.listdir(topic_dir)):
                if not (name.isdigit() and name.isascii()) or str(int(name)) != name:
                    _log.warning("skipping %s: not a queue id", os.path.join(topic_dir, name))
                    continue
                if self.find(topic, int(name)) is None:
                    self._open(topic, int(name))
                    opened += 1
        return opened

    def get_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        """The queue for (``topic``, ``queue_id``), created (with its directory) if needed."""
        queue = self.find(topic, queue_id)
        if queue is None:
            self._check_open()
            check_topic_name(topic)
            queue = self._open(topic, queue_id)
        return queue

    def find(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        """The open queue for (``topic``, ``queue_id``), or None (call ``load`` at start)."""
        queues = self._queues.get(topic)
        return None if queues is None else queues.get(queue_id)

    def queues_of(self, topic: str) -> dict[int, ConsumeQueue]:
        """The queues of ``topic`` by queue id (a copy)."""
        return dict(self._queues.get(topic, {}))

    def topics(self) -> list[str]:
        """Topics that have at least one queue, sorted."""
        return sorted(self._queues)

    def __iter__(self) -> Iterator[ConsumeQueue]:
        for queues in self._queues.values():
            yield from queues.values()

    def stats(self) -> list[QueueStats]:
        """``(topic, queue_id, min_offset, max_offset)`` of every queue, sorted."""
        return sorted(QueueStats(q.topic, q.queue_id, q.min_offset, q.max_offset) for q in self)

    def max_phy_offset(self) -> int:
        """The end of the furthest message any queue references, -1 if none.

        RocketMQ's ``maxPhyOffsetOfConsumeQueue`` (spec-broker.md sections 2.2 and 2.5): compared
        with the ledger's end at start, and where dispatch would resume without a checkpoint.
        """
        return max((q.max_phy_offset for q in self), default=-1)

    def truncate_dirty(self, phy_offset_limit: int) -> int:
        """``ConsumeQueue.truncate_dirty`` on every queue; returns the units removed in all."""
        self._check_open()
        return sum(q.truncate_dirty(phy_offset_limit) for q in self)

    def delete_expired(self, min_phy_offset: int) -> int:
        """``ConsumeQueue.delete_expired`` on every queue; returns the files deleted in all."""
        self._check_open()
        return sum(q.delete_expired(min_phy_offset) for q in self)

    def flush_all(self) -> None:
        """Sync every queue's unflushed units to disk; safe in a thread (see the module).

        Every queue that existed when this was called is flushed (a queue added meanwhile holds
        only units dispatched after the caller's checkpoint was taken). A queue closed meanwhile
        is skipped: its topic was deleted, or the store is closing and syncs it itself.
        """
        self._check_open()
        with self._lock:
            queues = [q for by_id in self._queues.values() for q in by_id.values()]
        for queue in queues:
            try:
                queue.flush()
            except StoreClosedError:
                continue

    def delete_topic(self, topic: str) -> bool:
        """Close and delete every queue of ``topic``; False if it had none, open or on disk."""
        self._check_open()
        check_topic_name(topic)
        with self._lock:
            doomed = self._queues.pop(topic, {})
        for queue in doomed.values():
            queue.close()
        topic_dir = os.path.join(self.directory, topic)
        if not os.path.isdir(topic_dir):
            return False
        shutil.rmtree(topic_dir)
        fsync_directory(self.directory)
        _log.info("deleted the consume queues of topic %s", topic)
        return True

    def close(self) -> None:
        """Close every queue; idempotent."""
        self._closed = True
        with self._lock:
            queues = [q for by_id in self._queues.values() for q in by_id.values()]
            self._queues.clear()
        for queue in queues:
            queue.close()

    def _open(self, topic: str, queue_id: int) -> ConsumeQueue:
        queue = ConsumeQueue(self.root, topic, queue_id, self.units_per_file)
        with self._lock:
            self._queues.setdefault(topic, {})[queue_id] = queue
        return queue

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError("the consume queue store is closed")
