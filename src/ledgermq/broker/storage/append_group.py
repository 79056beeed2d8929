"""Group commit on the master: the message appends of one event-loop pass share ledger entries.

Why: on this broker's budget most of a single send's cost is per ledger entry, not per byte: the
Raft proposal, the entry's header, index record and CRCs, its share of a PUSH and the
follower's decode and append, the commit bookkeeping, the dispatcher's pass. A batch send
already pays it once for the whole batch (``commitlog``'s module docstring). Sixteen producers
sending one message each paid it sixteen times, although their sends reach the master in the
same few event-loop passes and are replicated and committed together anyway. ``AppendGroup``
collects the records every ``MessageWriter.put`` of one pass encodes and proposes them as one
append, packed into as few entries as ``maxBodyBytes`` allows, so single sends cost what a
batch costs per message. Latency does not change: the entries of one pass were pushed, synced
and committed together before as well; the proposal moves by one loop pass at most.

What stays as it was:
- Queue offsets are assigned when a message is encoded, and records enter the group in that
  order, so log order is still queue-offset order.
- Every record still starts at its own physical offset (the k-th record of an entry at the
  entry's position + 48 + its offset in the body), so message ids, the dispatcher and every
  reader by offset are unchanged; a replica never needs to know how a record was grouped.
- One put's records are never split between appends: a batch is still stored or refused as a
  whole. A put larger than an entry spills into entries of its own, as ``pack_entries`` says.
- A refusal (not the leader, transfer in progress, too many pending, disk full) reaches every
  put of the group, which gives its queue offsets back; an append that fails after it reached
  the log is "outcome unknown" for all of them alike.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ledgermq.broker.storage.commitlog import BODY_OFFSET
from ledgermq.errors import LedgerMQError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ledgermq.broker.storage.commitlog import CommitLog
    from ledgermq.ledger.server import AppendResult

__all__ = ["AppendGroup", "AppendRefusedError", "pack_entries"]

_log = logging.getLogger(__name__)


class AppendRefusedError(LedgerMQError):
    """The ledger refused the group's append before anything reached the log (``cause`` says
    why); the put's queue offsets were given back."""

    def __init__(self, cause: LedgerMQError) -> None:
        super().__init__(str(cause))
        self.cause = cause


@dataclass(slots=True)
class _Put:
    """One ``MessageWriter.put`` waiting in the group."""

    blob: bytes
    starts: list[int]
    give_back: Callable[[], None]
    on_done: Callable[[list[int] | BaseException], None]
    segments: list[tuple[int, int, int, int]] = field(default_factory=list)
    """(entry number in the append, base, first record, stop record): record ``r`` of the put
    lies at ``base + starts[r]`` in the body of that entry."""


class AppendGroup:
    """Collects the record blobs of one loop pass and appends them together (module docstring)."""

    def __init__(self, commitlog: CommitLog) -> None:
        self._commitlog = commitlog
        self._puts: list[_Put] = []
        self._flush_handle: asyncio.Handle | None = None

    def add(
        self, blob: bytes, starts: list[int], give_back: Callable[[], None]
    ) -> asyncio.Future[list[int]]:
        """Append the concatenated records ``blob`` (record ``i`` at ``starts[i]``) with the
        rest of this pass; the future gives their physical offsets once committed.

        The future fails with ``AppendRefusedError`` after ``give_back`` ran when the ledger
        refused the append, and with the ledger's error when the outcome is unknown.
        """
        future: asyncio.Future[list[int]] = asyncio.get_running_loop().create_future()

        def settle(outcome: list[int] | BaseException) -> None:
            if future.done():  # its sender gave up (connection closed): nothing to answer
                return
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)

        self.add_callback(blob, starts, give_back, settle)
        return future

    def add_callback(
        self,
        blob: bytes,
        starts: list[int],
        give_back: Callable[[], None],
        on_done: Callable[[list[int] | BaseException], None],
    ) -> None:
        """``add`` for the send path, without a future: ``on_done`` is called once, with the
        physical offsets or the error, straight from the append's completion (a future and
        its awaiting coroutine cost a loop pass and a task each)."""
        put = _Put(blob, starts, give_back, on_done)
        if _largest_record(blob, starts) > self._commitlog.max_entry_bytes:
            # The ledger will refuse it: alone, so that the refusal is its own. The group so
            # far goes first, to keep log order equal to queue-offset order.
            self._flush()
            self._submit([put])
            return
        self._puts.append(put)
        if self._flush_handle is None:
            self._flush_handle = asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        puts, self._puts = self._puts, []
        if puts:
            self._submit(puts)

    def _submit(self, puts: list[_Put]) -> None:
        bodies = self._pack(puts)
        try:
            appended = self._commitlog.submit_messages(bodies)
        except LedgerMQError as exc:
            # Nothing reached the log: the offsets go back, the latest first, so every queue
            # ends where its earliest put of this group began.
            for put in reversed(puts):
                put.give_back()
            refused = AppendRefusedError(exc)
            for put in puts:
                _call(put, refused)
            return
        appended.add_done_callback(lambda done: _settle(puts, done))

    def _pack(self, puts: Sequence[_Put]) -> list[bytes]:
        """The entry bodies of the group; fills in every put's ``segments``."""
        limit = self._commitlog.max_entry_bytes
        bodies: list[bytes] = []
        current: list[bytes] = []
        current_bytes = 0

        def close_current() -> None:
            nonlocal current, current_bytes
            if current:
                bodies.append(current[0] if len(current) == 1 else b"".join(current))
                current, current_bytes = [], 0

        for put in puts:
            size = len(put.blob)
            if size <= limit:
                if current_bytes + size > limit:
                    close_current()
                put.segments = [(len(bodies), current_bytes, 0, len(put.starts))]
                current.append(put.blob)
                current_bytes += size
                continue
            close_current()
            pieces, firsts = pack_entries(put.blob, put.starts, limit)
            stops = [*firsts[1:], len(put.starts)]
            for piece, first, stop in zip(pieces, firsts, stops, strict=True):
                put.segments.append((len(bodies), -put.starts[first], first, stop))
                bodies.append(piece)
        close_current()
        return bodies


def _largest_record(blob: bytes, starts: Sequence[int]) -> int:
    ends = [*starts[1:], len(blob)]
    return max(end - start for start, end in zip(starts, ends, strict=True))


def _settle(puts: Sequence[_Put], appended: asyncio.Future[AppendResult]) -> None:
    """Give every put of the group its physical offsets, or the append's error."""
    if appended.cancelled():
        cancelled = asyncio.CancelledError("the ledger closed before the append completed")
        for put in puts:
            _call(put, cancelled)
        return
    error = appended.exception()
    if error is not None:
        for put in puts:
            _call(put, error)
        return
    positions = appended.result().positions
    for put in puts:
        offsets: list[int] = []
        starts = put.starts
        for entry, base, first, stop in put.segments:
            origin = positions[entry] + BODY_OFFSET + base
            offsets.extend([origin + start for start in starts[first:stop]])
        _call(put, offsets)


def _call(put: _Put, outcome: list[int] | BaseException) -> None:
    """One put's callback; its failure is logged and must not keep the others unanswered."""
    try:
        put.on_done(outcome)
    except Exception:  # noqa: BLE001 - one put's bug must not leave the group unanswered
        _log.exception("a send's completion callback failed")


def pack_entries(blob: bytes, starts: list[int], limit: int) -> tuple[list[bytes], list[int]]:
    """Split concatenated records into ledger entry bodies of at most ``limit`` bytes each.

    Returns the bodies and, for each, the number of its first record. Used for a put larger than
    one entry: a batch of many tiny messages, whose records outgrow its send body, spills into
    further entries. A record larger than ``limit`` gets an entry of its own, which the ledger
    then refuses.
    """
    if len(blob) <= limit:
        return [blob], [0]
    bodies: list[bytes] = []
    firsts: list[int] = []
    ends = [*starts[1:], len(blob)]
    first = 0
    for i, end in enumerate(ends):
        if end - starts[first] > limit and i > first:
            bodies.append(blob[starts[first] : starts[i]])
            firsts.append(first)
            first = i
    bodies.append(blob[starts[first] :])
    firsts.append(first)
    return bodies, firsts
