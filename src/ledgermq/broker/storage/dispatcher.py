"""The dispatcher (RocketMQ's ReputMessageService): committed entries -> queues, index, metadata.

Runs on every replica, leader and followers alike, and reads **only committed** entries
(spec-broker.md section 3.7): consumers never see a message that a new leader could truncate,
and every replica builds the same ConsumeQueues and metadata from the same bytes.

For each committed entry, in log order:

- message records (channel MESSAGES; one, or a batch's, see ``commitlog``): for each record a
  ConsumeQueue unit at the queue offset the leader stamped in it, and its keys and unique id in
  the key index (added once per pass, in one write);
- a metadata change (channel METADATA): applied to ``BrokerMetadata``;
- a record of the timer topic, or the delivery of a firing timer: to the timer table
  (``broker.state.timer_table``), in the same order on every replica;
- anything else (the NOOP a new leader appends, entries of other channels): skipped.

**Quarantine: applying a committed entry never fails the same way on every replica.** The
entry is in the log for good and every replica applies the same bytes with the same code, so a
failure caused by the entry's *content* would stop every replica, at every restart: the whole
group, for good. Such a failure quarantines the record (or the whole entry when it cannot be
split into records, or a metadata op) instead: one ERROR line naming the ledger index and the
reason, the counter ``ledgermq_broker_quarantined_entries_total``, a line in
``quarantine.jsonl`` (``storage.quarantine``, read by ``ledgermq admin quarantined-entries``),
and dispatch goes on with the next record, so the rest of a batch is still indexed. Every
replica skips exactly the same records, so their queues, index and metadata stay identical.

The rule that tells them apart (``is_local_failure``): a failure of *this replica's* files
(``OSError``, including ENOSPC; ``StoreError``: a corrupt or closed local file, a full disk;
``MemoryError``) may not happen on the other replicas, and skipping the entry here would make
this replica differ from them: that stays a fail-stop (``on_failure``; the broker exits, a
supervisor restarts it, and it re-dispatches from its checkpoint once the disk is fixed).
Anything else raised while applying one record or op (an invalid topic name or queue id, a
record that does not decode, a metadata op or a timer record that does not apply) depends only
on the entry and the code, so it is deterministic across replicas, and is quarantined. (Across
replicas of one version: a release that changes what applies, say a stricter name rule, can
make replicas of two versions differ during a rolling upgrade; such a change must come with
the door refusing the same input first.)

Progress is made durable in two steps: queues and index are flushed, then the dispatch
checkpoint records the ledger index they cover; the metadata snapshot records its own index. On
start, dispatch resumes after the older of the two. Re-dispatching is harmless: a unit is
written at its queue offset (the same bytes again), the index ignores a (key, offset) it has,
and metadata entries at or below the snapshot's index are skipped.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Final

from ledgermq.broker.state.ops import decode_op
from ledgermq.broker.state.timer_table import TIMER_TOPIC
from ledgermq.broker.storage.commitlog import BODY_OFFSET, CHANNEL_MESSAGES, CHANNEL_METADATA
from ledgermq.broker.storage.quarantine import QuarantineLog
from ledgermq.errors import IndexCompactedError, MessageFormatError, StoreError
from ledgermq.store import EntryType
from ledgermq.wire.message import scan_dispatch_records

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledgermq.broker.state.metadata import BrokerMetadata
    from ledgermq.broker.storage.consume_queue_store import ConsumeQueueStore
    from ledgermq.broker.storage.key_index import KeyIndex
    from ledgermq.clock import Clock
    from ledgermq.store import Entry, LogStore

__all__ = ["Dispatcher", "is_local_failure"]

_log = logging.getLogger(__name__)

_READ_BYTES: Final = 4 << 20
"""Entry bytes read per store call."""
_ENTRIES_PER_PASS: Final = 20_000
"""Entries dispatched before yielding to the event loop (a long catch-up must not starve
heartbeats and requests)."""


def is_local_failure(exc: BaseException) -> bool:
    """Whether ``exc`` comes from this replica's own files or memory, not from the entry: its
    disk (``OSError``, ENOSPC), a corrupt, closed or full local store (``StoreError``), memory.
    Such a failure stops the broker; any other failure of applying an entry is the entry's
    (the module docstring says why) and quarantines it."""
    return isinstance(exc, (OSError, StoreError, MemoryError))


class Dispatcher:
    """Feeds committed entries to the queues, the key index and the metadata, in order."""

    def __init__(
        self,
        store: LogStore,
        queues: ConsumeQueueStore,
        keys: KeyIndex,
        metadata: BrokerMetadata,
        clock: Clock,
        *,
        start_index: int,
        quarantine: QuarantineLog | None = None,
    ) -> None:
        self._store = store
        self._queues = queues
        self._keys = keys
        self._metadata = metadata
        self._clock = clock
        self.next_index = start_index
        """The next ledger index to dispatch."""
        self._committed = store.committed_index
        self._scheduled = False
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self.on_arrival: Callable[[str, int, int], None] | None = None
        """Called with (topic, queue id, new max offset) after messages reach a queue: the
        replica's ``events.arrived`` (``broker.events``), which wakes held pulls and the rest."""
        self.on_progress: Callable[[], None] | None = None
        """Called after each pass (the role handler waits for dispatch to catch up)."""
        self.on_failure: Callable[[BaseException], None] | None = None
        """Called once when a pass fails: the queues no longer follow the log, and the broker
        must stop (fail-stop) rather than serve them."""
        self.failure: BaseException | None = None
        self.quarantine = quarantine if quarantine is not None else QuarantineLog()
        """The records and entries skipped because they cannot be applied on any replica."""

    # ------------------------------------------------------------------ progress
    @property
    def dispatched_index(self) -> int:
        return self.next_index - 1

    @property
    def caught_up(self) -> bool:
        """Everything committed locally has been dispatched (``dispatchBehindBytes() == 0``)."""
        return self.next_index > self._store.committed_index

    def on_commit(self, committed_index: int) -> None:
        """Commit listener of the ledger: schedule a pass."""
        self._committed = committed_index
        self._schedule()

    async def wait_dispatched(self, index: int) -> None:
        """Return once the entry at ``index`` has been dispatched (applied, for metadata)."""
        if self.next_index > index:
            return
        if self.failure is not None:
            raise self.failure
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((index, future))
        self._schedule()
        await future

    def _schedule(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._pass)

    # ------------------------------------------------------------------ dispatching
    def catch_up(self) -> int:
        """Dispatch everything committed now, synchronously (start-up); returns entries done."""
        done = 0
        while True:
            count = self._dispatch(1 << 62)
            if count == 0:
                return done
            done += count

    def _pass(self) -> None:
        self._scheduled = False
        if self.failure is not None:
            return  # stopped for good: the broker is shutting down
        try:
            count = self._dispatch(_ENTRIES_PER_PASS)
        except Exception as exc:  # noqa: BLE001 - reported, and the broker stops (on_failure)
            _log.exception("dispatch stopped at ledger index %d", self.next_index)
            self.failure = exc
            for _, future in self._waiters:
                if not future.done():
                    future.set_exception(exc)
            self._waiters.clear()
            if self.on_failure is not None:
                self.on_failure(exc)
            return
        if count >= _ENTRIES_PER_PASS:
            self._schedule()  # more to do: yield first
        if self._waiters:
            still = []
            for index, future in self._waiters:
                if self.next_index > index:
                    if not future.done():
                        future.set_result(None)
                else:
                    still.append((index, future))
            self._waiters = still
        if self.on_progress is not None:
            self.on_progress()

    def _dispatch(self, limit: int) -> int:
        store = self._store
        committed = store.committed_index
        done = 0
        while self.next_index <= committed and done < limit:
            try:
                entries = store.read_range(self.next_index, _READ_BYTES)
            except IndexCompactedError:
                # Retention removed entries this replica never dispatched (it was down longer
                # than fileReservedTime): those messages are gone; go on from the log's start.
                _log.error(
                    "entries from %d were deleted before they were dispatched; resuming at %d",
                    self.next_index,
                    store.begin_index,
                )
                self.next_index = store.begin_index
                continue
            arrivals: dict[tuple[str, int], int] = {}
            keys: list[tuple[str, list[str], int, int]] = []
            try:
                for entry in entries:
                    if entry.index > committed:
                        break
                    self._dispatch_entry(entry, arrivals, keys)
                    self.next_index = entry.index + 1
                    done += 1
            finally:
                if keys:
                    self._keys.add_many(keys)
            if self.on_arrival is not None:
                for (topic, queue_id), max_offset in arrivals.items():
                    self.on_arrival(topic, queue_id, max_offset)
        self.quarantine.flush()  # one fsync for the pass's quarantines, none for most passes
        return done

    def _dispatch_entry(
        self,
        entry: Entry,
        arrivals: dict[tuple[str, int], int],
        keys: list[tuple[str, list[str], int, int]],
    ) -> None:
        if entry.magic != EntryType.NORMAL:
            return
        if entry.channel == CHANNEL_MESSAGES:
            try:
                records = scan_dispatch_records(entry.body)
            except MessageFormatError as exc:
                self._quarantine(entry.index, -1, "", f"holds no valid message records: {exc}")
                return
            base = entry.pos + BODY_OFFSET
            queues = self._queues
            timers = self._metadata.timers
            for number, (
                pos,
                size,
                topic,
                queue_id,
                queue_offset,
                store_ts,
                tags_code,
                record_keys,
            ) in enumerate(records):
                offset = base + pos
                try:
                    queues.get_or_create(topic, queue_id).put(queue_offset, offset, size, tags_code)
                except Exception as exc:
                    if is_local_failure(exc):
                        raise
                    self._quarantine(entry.index, number, topic, str(exc))
                    continue
                if record_keys:
                    keys.append((topic, record_keys, offset, store_ts))
                arrivals[(topic, queue_id)] = queue_offset + 1
                # Timer messages: scheduled by their record, finished by their delivery's
                # (broker.state.timer_table); only a firing timer's unique key costs a decode.
                try:
                    if topic == TIMER_TOPIC:
                        timers.on_timer_record(
                            entry.index, offset, bytes(entry.body[pos : pos + size])
                        )
                    elif (
                        timers.firing_uniqs
                        and record_keys
                        and record_keys[-1] in timers.firing_uniqs
                    ):
                        timers.on_possible_delivery(
                            entry.index, bytes(entry.body[pos : pos + size])
                        )
                except Exception as exc:
                    if is_local_failure(exc):
                        raise
                    self._quarantine(entry.index, number, topic, f"timer table: {exc}")
        elif entry.channel == CHANNEL_METADATA:
            try:
                op = decode_op(entry.body)
                self._metadata.apply(entry.index, op, int(self._clock.wall_time_s() * 1000))
            except Exception as exc:
                if is_local_failure(exc):
                    raise
                self._quarantine(entry.index, -1, "", f"metadata op does not apply: {exc}")

    def _quarantine(self, index: int, record: int, topic: str, reason: str) -> None:
        """Skip what cannot be applied on any replica (the module docstring): log, count,
        record; the caller goes on with the next record."""
        what = f"entry {index}" if record < 0 else f"record {record} of entry {index}"
        if self.quarantine.add(index, record, topic, reason, int(self._clock.wall_time_s() * 1000)):
            _log.error(
                "quarantined %s (topic %r): %s; skipped on every replica, see "
                "'ledgermq admin quarantined-entries'", what, topic, reason,
            )  # fmt: skip
