"""POP consumption of one message queue by one consumer group, as a pure state machine.

Theory of operation (issue 16 section 2; spec protocol-remoting-and-grpc.md section 3.5).

What it models. A consume queue is a sequence of messages at offsets 0, 1, 2, ...; RocketMQ 5's
POP hands them out without a consumer-side offset: ``ReceiveMessage`` makes messages invisible to
other receivers for ``invisible_duration``, each under a receipt handle; ``AckMessage`` settles
one message, in any order; a message not acknowledged in time comes back with ``delivery_attempt
+ 1``; ``ChangeInvisibleDuration`` re-arms the timer under a new handle; after the group's
maximum attempts an expired message goes to the dead-letter queue instead of coming back.

State (all of it; ``snapshot`` and ``from_snapshot`` carry exactly this):

- ``low``: every offset below is done (acknowledged or dead-lettered). It is what a classic
  consumer offset would be, and the queue's POP checkpoint.
- done offsets at or above ``low`` (acks out of order); ``low`` moves up over them.
- the deliveries of messages handed out and not done: handle ``seq``, ``attempt``, invisible-until
  time, message group. Expired deliveries stay here until the message is handed out again,
  acknowledged or dead-lettered: an expired message is *visible*, not yet redelivered.
- ``next_seq``: the handle counter. Every delivery and every re-arm takes a fresh number, so a
  handle names one delivery and dies with it (the old handle of a re-armed or redelivered
  message is invalid, as RocketMQ's is).

Rules.

1. Only records change the state (``records.py``), and ``apply`` reads nothing but the record and
   the state: the state is a deterministic function of the applied records, and a new master
   rebuilds it by replaying them (or loading a snapshot and replaying the rest). Time enters
   only as the ``at_ms`` a leader wrote into a record, never as the applying replica's clock.
2. Decisions are ``plan_*`` functions: pure, they take the clock as an argument (``now_ms``) and
   return records without changing anything. The leader proposes them; ``apply`` on every
   replica then agrees on the ``Outcome``.
3. A record planned against a state that has moved on is refused (``Outcome.STALE``), not
   half-applied. Records that hand out a new handle carry a ``seq`` from ``next_seq``, which
   only grows, so of two receives planned against the same state only the first to be applied
   takes effect; acks and dead-letterings take no number, and can only make more messages
   eligible, so a planned delivery that an ack overtook stays right (or is refused because its
   own message is done).
4. An acknowledgement is accepted while its handle is the message's latest, even after the
   invisible time ran out, as long as nobody has received the message again: that settles the
   message without a duplicate. A handle of a message already done answers ``ALREADY_DONE``
   (a retried ack whose reply was lost); any other handle ``INVALID_HANDLE``.
5. FIFO (``PopSettings.fifo``, the consumer group's ``fifo`` setting): a message group with a
   message handed out and still invisible gets nothing; otherwise a receive hands out the
   group's messages that are not done from its oldest on, in order (expired ones again with
   attempt + 1), as many as it may. So what a group has out is always a run of its oldest
   messages, handed out together (RocketMQ's orderly POP hands out a batch of a queue and
   locks the queue until the batch is acknowledged or its time is up; here the lock is the
   group's, so groups sharing a queue do not wait for each other), and an unacknowledged
   message comes back, first of its group, before anything after it is handed out; a message
   dead-lettered at its last attempt lets the group go on. Messages without a group
   (``group_of`` answers None) are not ordered; the service answers a group of its own for them
   when it wants them ordered. A non-FIFO group ignores message groups altogether.
6. Dead letters: a receive that finds an expired message already delivered ``max_attempts``
   times plans ``DeadLettered`` for it instead of a delivery; the service copies the message to
   ``%DLQ%<group>`` and then proposes the record (a crash between copies it twice, never loses
   it). ``ForwardMessageToDeadLetterQueue`` is the same with a valid handle.

7. Settings may change (``reconfigure``, from the op that carries the group's new settings):
   FIFO on, deliveries made before have their group asked again (``group_of``); FIFO off,
   groups are ignored at once; max attempts lowered, a delivery already past the new maximum
   goes to the dead letters when it expires. So ``attempt`` may exceed ``max_attempts`` there.

The at-least-once contract that follows: a message is handed out again only after its invisible
time has passed without an ack, at most ``max_attempts`` times, and an ack that was applied
(committed, so it survives a failover) settles it for good; an ack that loses the race with a
redelivery is refused and the message is delivered again.

What it does not do: read messages (``group_of`` tells it a message's group), filter by tag or
SQL (the service acknowledges filtered-out messages), retention (offsets below the queue's
minimum), long polling, or the wire format of handles. Cost: a receive walks the offsets from
``low`` (done ones skipped); with a large backlog behind a stuck FIFO group that walk is long.
TODO(16): an index of eligible offsets when the service layer shows it matters.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final

from ledgermq.broker.pop.records import (
    Acked,
    DeadLettered,
    DeadLetterReason,
    Delivered,
    InvisibilityChanged,
    PopRecord,
    ReceiptHandle,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = ["DEFAULT_MAX_ATTEMPTS", "InFlight", "Outcome", "PopQueue", "PopSettings"]

DEFAULT_MAX_ATTEMPTS: Final = 16
"""RocketMQ 5's default ``maxDeliveryAttempts`` of a consumer group (subscription group config)."""


class Outcome(enum.Enum):
    """What ``apply`` made of a record, the same on every replica; also ``check``'s answer."""

    APPLIED = "applied"
    """The record took effect (for ``check``: the handle is valid)."""
    INVALID_HANDLE = "invalid_handle"
    """No current delivery carries this handle: never handed out, or handed out again or
    re-armed since. gRPC ``INVALID_RECEIPT_HANDLE``."""
    ALREADY_DONE = "already_done"
    """The message was acknowledged or dead-lettered already: nothing to do. An ack may answer
    OK (the client retried after a lost reply)."""
    STALE = "stale"
    """Planned against a state that has moved on (another receive or re-arm was applied first,
    or the message is not due any more): plan again."""


@dataclass(frozen=True, slots=True)
class PopSettings:
    """The consumer group's settings that POP obeys (changed only by ``reconfigure``)."""

    fifo: bool = False
    """Deliver each message group in order, a run of its oldest messages at a time (rule 5)."""
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    """Deliveries before an expired message goes to the dead-letter queue; at least 1."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {self.max_attempts}")


@dataclass(frozen=True, slots=True)
class InFlight:
    """The current delivery of a message handed out and not done."""

    seq: int
    """Its handle's number. Invariant: below the queue's ``next_seq``."""
    attempt: int
    """How many times the message has been handed out (1 = once). Invariant: 1..max_attempts
    (above only after ``reconfigure`` lowered the maximum, rule 7)."""
    invisible_until_ms: int
    """When it becomes visible again (eligible for redelivery) if not acknowledged."""
    group: str | None
    """Its message group when the consumer group is FIFO, else None."""

    def handle(self, offset: int) -> ReceiptHandle:
        return ReceiptHandle(offset, self.seq)


class PopQueue:
    """POP state of one (consumer group, topic, queue); see the module docstring."""

    def __init__(self, settings: PopSettings | None = None) -> None:
        self.settings = settings or PopSettings()
        #: Every offset below is done. Invariant: ``low`` itself is not done.
        self.low = 0
        #: Done offsets above ``low`` (out-of-order acks). Invariant: all > ``low``.
        self._done: set[int] = set()
        #: Messages handed out and not done, by offset. Invariant: keys >= ``low``, not done.
        self._delivered: dict[int, InFlight] = {}
        #: The next handle number. Invariant: above every ``seq`` ever applied.
        self.next_seq = 0

    # ------------------------------------------------------------------ queries

    def is_done(self, offset: int) -> bool:
        """Whether the message at ``offset`` was acknowledged or dead-lettered."""
        return offset < self.low or offset in self._done

    def delivery(self, offset: int) -> InFlight | None:
        """The current delivery of the message at ``offset``, if handed out and not done."""
        return self._delivered.get(offset)

    def in_flight(self) -> dict[int, InFlight]:
        """Every delivery not done (expired ones included), by offset, in offset order."""
        return dict(sorted(self._delivered.items()))

    def check(self, handle: ReceiptHandle) -> Outcome:
        """Whether ``handle`` is valid now (``APPLIED``), or why not (rule 4)."""
        if self.is_done(handle.offset):
            return Outcome.ALREADY_DONE
        flight = self._delivered.get(handle.offset)
        if flight is None or flight.seq != handle.seq:
            return Outcome.INVALID_HANDLE
        return Outcome.APPLIED

    def reconfigure(self, settings: PopSettings) -> None:
        """Take the consumer group's changed settings (rule 7). Deterministic: the settings
        travel in the replicated op that calls this, never read from the replica's config."""
        self.settings = settings

    # ------------------------------------------------------------------ decisions

    def plan_receive(
        self,
        *,
        now_ms: int,
        end_offset: int,
        max_messages: int,
        invisible_ms: int,
        group_of: Callable[[int], str | None],
    ) -> list[PopRecord]:
        """The records of one receive: up to ``max_messages`` deliveries, oldest offset first.

        ``end_offset``: the queue's end (messages exist at offsets below it). ``group_of``: the
        message group of a message never handed out, asked only when the group is FIFO.
        Expired messages at their last attempt get ``DeadLettered`` records on the way (rule 6);
        they do not count towards ``max_messages``. Apply the records in the order given.
        """
        if max_messages < 1 or invisible_ms < 0:
            raise ValueError(
                f"need max_messages >= 1 and invisible_ms >= 0, got {max_messages}, {invisible_ms}"
            )
        fifo = self.settings.fifo
        records: list[PopRecord] = []
        seq = self.next_seq
        delivered = 0

        def group_at(offset: int, flight: InFlight | None) -> str | None:
            if not fifo:
                return None
            # A delivery made before the group became FIFO has no group recorded: ask.
            group = flight.group if flight is not None else None
            return group if group is not None else group_of(offset)

        # FIFO: a group with a message out and still invisible gets nothing (rule 5)
        blocked = {
            group_at(offset, flight)
            for offset, flight in self._delivered.items()
            if fifo and flight.invisible_until_ms > now_ms
        }
        blocked.discard(None)
        offset = self.low
        while offset < end_offset and delivered < max_messages:
            if offset in self._done:
                offset += 1
                continue
            flight = self._delivered.get(offset)
            group = group_at(offset, flight)
            if group is not None and group in blocked:
                offset += 1
                continue
            if flight is None:
                records.append(Delivered(offset, seq, 1, now_ms, now_ms + invisible_ms, group))
                seq += 1
                delivered += 1
            elif flight.invisible_until_ms > now_ms:
                pass  # in flight (not FIFO, or a group without one)
            elif flight.attempt >= self.settings.max_attempts:
                records.append(
                    DeadLettered(offset, flight.seq, now_ms, DeadLetterReason.MAX_ATTEMPTS)
                )
            else:
                records.append(
                    Delivered(offset, seq, flight.attempt + 1, now_ms, now_ms + invisible_ms, group)
                )
                seq += 1
                delivered += 1
            offset += 1
        return records

    def plan_ack(self, handle: ReceiptHandle) -> Acked:
        """The record of an ack; ``apply`` decides (``check`` answers early without a proposal)."""
        return Acked(handle.offset, handle.seq)

    def plan_change_invisible(
        self, handle: ReceiptHandle, *, now_ms: int, invisible_ms: int
    ) -> InvisibilityChanged:
        """The record that re-arms ``handle``'s delivery until ``now_ms + invisible_ms``."""
        if invisible_ms < 0:
            raise ValueError(f"invisible_ms must be >= 0, got {invisible_ms}")
        return InvisibilityChanged(
            handle.offset, handle.seq, self.next_seq, now_ms, now_ms + invisible_ms
        )

    def plan_forward_to_dead_letter(self, handle: ReceiptHandle, *, now_ms: int) -> DeadLettered:
        """ForwardMessageToDeadLetterQueue: the record that settles ``handle``'s message so."""
        return DeadLettered(handle.offset, handle.seq, now_ms, DeadLetterReason.FORWARDED)

    # ------------------------------------------------------------------ the one way to change

    def apply(self, record: PopRecord) -> Outcome:
        """Apply one record (rules 1 and 3); never raises on a record ``decode_record`` made."""
        if isinstance(record, Delivered):
            return self._apply_delivered(record)
        if self.is_done(record.offset):
            return Outcome.ALREADY_DONE
        flight = self._delivered.get(record.offset)
        if flight is None or flight.seq != record.seq:
            return Outcome.INVALID_HANDLE
        if isinstance(record, Acked):
            self._settle(record.offset)
            return Outcome.APPLIED
        if isinstance(record, InvisibilityChanged):
            if record.new_seq < self.next_seq or record.invisible_until_ms < record.at_ms:
                return Outcome.STALE
            self._delivered[record.offset] = replace(
                flight, seq=record.new_seq, invisible_until_ms=record.invisible_until_ms
            )
            self.next_seq = record.new_seq + 1
            return Outcome.APPLIED
        if record.reason is DeadLetterReason.MAX_ATTEMPTS and (
            flight.attempt < self.settings.max_attempts or flight.invisible_until_ms > record.at_ms
        ):
            return Outcome.STALE
        self._settle(record.offset)
        return Outcome.APPLIED

    def apply_all(self, records: Iterable[PopRecord]) -> list[Outcome]:
        """``apply`` each record in order."""
        return [self.apply(record) for record in records]

    def _apply_delivered(self, record: Delivered) -> Outcome:
        if (
            record.seq < self.next_seq
            or self.is_done(record.offset)
            or record.invisible_until_ms < record.at_ms
        ):
            return Outcome.STALE
        flight = self._delivered.get(record.offset)
        if flight is None:
            due = record.attempt == 1
        else:
            due = (
                flight.invisible_until_ms <= record.at_ms
                and record.attempt == flight.attempt + 1
                and flight.attempt < self.settings.max_attempts
            )
        if not due:
            return Outcome.STALE
        self._delivered[record.offset] = InFlight(
            record.seq, record.attempt, record.invisible_until_ms, record.group
        )
        self.next_seq = record.seq + 1
        return Outcome.APPLIED

    def _settle(self, offset: int) -> None:
        del self._delivered[offset]
        self._done.add(offset)
        while self.low in self._done:
            self._done.remove(self.low)
            self.low += 1

    # ------------------------------------------------------------------ snapshots

    def snapshot(self) -> dict[str, object]:
        """The whole state as a JSON-able object (sorted, so equal states encode equally)."""
        return {
            "fifo": self.settings.fifo,
            "max_attempts": self.settings.max_attempts,
            "low": self.low,
            "done": sorted(self._done),
            "next_seq": self.next_seq,
            "in_flight": [
                [offset, f.seq, f.attempt, f.invisible_until_ms, f.group]
                for offset, f in sorted(self._delivered.items())
            ],
        }

    @classmethod
    def from_snapshot(cls, snapshot: dict[str, object]) -> PopQueue:
        """The queue ``snapshot`` describes; ValueError if malformed or breaking an invariant."""
        fifo, max_attempts = snapshot.get("fifo"), snapshot.get("max_attempts")
        low, done, next_seq = snapshot.get("low"), snapshot.get("done"), snapshot.get("next_seq")
        in_flight = snapshot.get("in_flight")
        if not (
            isinstance(fifo, bool)
            and isinstance(max_attempts, int)
            and isinstance(low, int)
            and isinstance(next_seq, int)
            and isinstance(done, list)
            and isinstance(in_flight, list)
        ):
            # one error type for every malformed snapshot, whatever is wrong in it
            raise ValueError(f"not a POP queue snapshot: {snapshot!r:.200}")  # noqa: TRY004
        try:
            queue = cls(PopSettings(fifo=fifo, max_attempts=max_attempts))
            queue.low, queue.next_seq = low, next_seq
            queue._done = {int(o) for o in done}
            for offset, seq, attempt, until, group in in_flight:
                queue._delivered[int(offset)] = InFlight(
                    int(seq), int(attempt), int(until), None if group is None else str(group)
                )
        except (TypeError, ValueError) as exc:
            raise ValueError(f"not a POP queue snapshot: {exc}") from None
        queue._check_invariants()
        return queue

    def _check_invariants(self) -> None:
        """ValueError if the state breaks an invariant of the field comments."""
        problems = []
        if self.low in self._done or any(o <= self.low for o in self._done):
            problems.append("a done offset at or below low")
        if any(o < self.low or o in self._done for o in self._delivered):
            problems.append("a delivery of a done offset")
        if any(f.seq >= self.next_seq for f in self._delivered.values()):
            problems.append("a handle seq at or above next_seq")
        if any(f.attempt < 1 for f in self._delivered.values()):
            problems.append("an attempt below 1")
        if problems:
            raise ValueError("; ".join(problems))
