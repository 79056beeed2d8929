"""Quarantined entries: committed entries (or records of one) the dispatcher could not apply.

Applying a committed entry must never fail the same way on every replica: the entry is in the
log for good, so a replica that stops on it stops again after every restart, and so does every
other replica, and the group is gone (issue 25: a message for ``%DLQ%orders.v1``). When applying
fails because of the entry's *content* (a topic name that cannot be a queue directory, a record
that does not decode, a metadata op that does not apply), every replica fails alike, so every
replica can skip it alike and stay identical: the dispatcher *quarantines* it (one ERROR line, a
metric, a line here) and goes on with the next record.

This file keeps the list where an operator can read it (remoting admin request
``GET_QUARANTINED_ENTRIES``, ``ledgermq admin quarantined-entries``). It is derived data, like
the queues: re-dispatching an entry quarantines it again with the same key, which is recorded
once; a deleted file is rebuilt by re-dispatch only for entries after the dispatch checkpoint.

Layout: ``<storePathRootDir>/quarantine.jsonl``, one JSON object per line (``index``, ``record``,
``topic``, ``reason``, ``timeMs``), appended and fsynced once per dispatch pass that quarantined
something (``flush``: an admin should find them after a crash, and a run of bad records must not
cost the event loop one fsync each). A torn last line (a crash mid-write) is ignored on load.

Items are quarantined in log order (the dispatcher's), so once the oldest kept in memory are
forgotten (past ``MAX_KEPT``), any item at or before the newest forgotten one was recorded
already: a re-dispatch after a restart records nothing twice.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import Final

__all__ = ["QUARANTINE_FILE", "QuarantineLog", "QuarantinedEntry"]

_log = logging.getLogger(__name__)

QUARANTINE_FILE: Final = "quarantine.jsonl"
MAX_KEPT: Final = 10_000
"""Quarantined items kept in memory and answered to an admin (the newest); the file keeps all."""


@dataclass(frozen=True, slots=True)
class QuarantinedEntry:
    """One committed entry, or one record of it, that was skipped by the dispatcher."""

    index: int
    """Its ledger index."""
    record: int
    """Which record of the entry (0-based, in a batch entry), -1 for the whole entry."""
    topic: str
    """The record's topic as stored, "" when unknown (a metadata op, an undecodable entry)."""
    reason: str
    """Why it could not be applied (the error's text)."""
    time_ms: int
    """Wall-clock time this replica first quarantined it, ms since the epoch."""

    def to_object(self) -> dict[str, object]:
        return {
            "index": self.index,
            "record": self.record,
            "topic": self.topic,
            "reason": self.reason,
            "timeMs": self.time_ms,
        }

    @classmethod
    def from_object(cls, obj: object) -> QuarantinedEntry:
        """Raises ``ValueError`` / ``KeyError`` / ``TypeError`` for a malformed object."""
        if not isinstance(obj, dict):
            raise TypeError("a quarantined entry is a JSON object")
        return cls(
            int(obj["index"]),
            int(obj["record"]),
            str(obj["topic"]),
            str(obj["reason"]),
            int(obj["timeMs"]),
        )


class QuarantineLog:
    """The quarantined entries of one replica; ``path`` None keeps them in memory only."""

    def __init__(self, path: str | None = None) -> None:
        self.path = path
        self._items: dict[tuple[int, int], QuarantinedEntry] = {}
        self._forgotten_up_to: tuple[int, int] = (-1, -1)
        """The newest key no longer kept in memory (module docstring)."""
        self._unwritten: list[str] = []
        self.total = 0
        """Distinct items quarantined by this replica, ever (the metric)."""
        if path is not None and os.path.exists(path):
            self._load(path)

    @classmethod
    def in_root(cls, root: str) -> QuarantineLog:
        return cls(os.path.join(root, QUARANTINE_FILE))

    def _load(self, path: str) -> None:
        with open(path, encoding="utf-8") as file:
            for number, line in enumerate(file, 1):
                try:
                    item = QuarantinedEntry.from_object(json.loads(line))
                except (ValueError, KeyError, TypeError) as exc:
                    _log.warning("%s line %d is not a quarantined entry (%s); ignored",
                                 path, number, exc)  # fmt: skip
                    continue
                self._remember(item)

    def _remember(self, item: QuarantinedEntry) -> bool:
        key = (item.index, item.record)
        if key in self._items or key <= self._forgotten_up_to:
            return False
        self._items[key] = item
        self.total += 1
        if len(self._items) > MAX_KEPT:
            oldest = next(iter(self._items))
            del self._items[oldest]
            self._forgotten_up_to = max(self._forgotten_up_to, oldest)
        return True

    def add(self, index: int, record: int, topic: str, reason: str, now_ms: int) -> bool:
        """Record a quarantined item; False if it was already recorded (a re-dispatch). Its
        line reaches the file at the next ``flush``."""
        item = QuarantinedEntry(index, record, topic, reason, now_ms)
        if not self._remember(item):
            return False
        if self.path is not None:
            self._unwritten.append(json.dumps(item.to_object(), separators=(",", ":")) + "\n")
        return True

    def flush(self) -> None:
        """Append and fsync the lines of the items added since the last flush (if any).

        Raises ``OSError`` when the file cannot be written: that is this replica's disk, so
        the caller fails like any other local write failure."""
        if not self._unwritten or self.path is None:
            return
        data = "".join(self._unwritten).encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        self._unwritten.clear()

    def items(self, since_index: int = 0, limit: int = MAX_KEPT) -> list[QuarantinedEntry]:
        """The quarantined items with ``index >= since_index``, oldest first, at most
        ``limit``."""
        chosen = sorted(
            (item for item in self._items.values() if item.index >= since_index),
            key=lambda item: (item.index, item.record),
        )
        return chosen[: max(limit, 0)]

    def __len__(self) -> int:
        return len(self._items)
