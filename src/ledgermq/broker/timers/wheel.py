"""Timer (delay) messages as a pure, replicated state machine: a timer wheel driven by records.

Theory of operation (issue 16 section 3, "Timer / delay"). A RocketMQ 5 producer may give any
message a ``delivery_timestamp``; the broker keeps it out of its topic until then, and
``RecallMessage`` with the send's recall handle cancels it while it waits. The message itself is
stored at once (in a system timer topic, as RocketMQ's ``rmq_sys_wheel_timer``); this model is
the index that says which stored messages are due, and it must survive a failover like the
messages do.

A timer goes through three states::

    Scheduled --> pending --Firing--> firing --Fired--> (gone)
                     |
                  Recalled --> (gone)

1. Only records change the state (``TimerRecord``), and ``apply`` reads nothing but the record
   and the state: no clock. A replica that applies the same records holds the same wheel, so a
   new master rebuilds it by replay (or snapshot plus replay). Time enters as the ``at_ms`` the
   leader wrote into a record.
2. The leader decides with ``plan_fire(now_ms, limit)``: the due pending timers, oldest due time
   first (ties by id), never one before its due time. It proposes their ``Firing`` records; once
   those are applied it puts each message into its real topic, then proposes ``Fired``.
3. Why two steps: a recall must never report success for a message that will still be
   delivered. ``Firing`` is the point of no return, decided in log order: a ``Recalled`` applied
   before it wins (``Firing`` is refused, nothing was put); one applied after it is refused
   (``TOO_LATE``). And a master that dies between ``Firing`` and ``Fired`` leaves the timer in
   ``firing``: the next master puts those messages again (``firing()``) and proposes ``Fired``:
   a message may be delivered twice across a failover, never lost, never after a recall.
4. Ids are the scheduler's (the timer message's commit-log offset is unique and at hand). An id
   that is pending or firing cannot be scheduled again (``DUPLICATE``).

The wheel: slots of ``slot_ms`` (RocketMQ's ``timerPrecisionMs``, 1 s) keyed by the absolute slot
number ``due_ms // slot_ms``, so slots never wrap around and there are no overflow rounds; a
sorted index of the non-empty slots stands in for the wheel's cursor. ``plan_fire`` looks only at
slots up to now's and stops at ``limit``, so its cost is the due timers' (plus a bisection), not
the pending ones': with 10 000 timers pending, a tick that fires 10 costs 10.
(``tests/timers`` drives 10 000 timers through a 100 ms tick and checks each fires within 1 s
of its due time.) Scheduling or removing a timer whose slot is new or empties costs an insertion
into that index (a list): a memory move over the non-empty slots, cheap at these sizes.
"""

from __future__ import annotations

import bisect
import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypeAlias

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "DEFAULT_SLOT_MS",
    "Fired",
    "Firing",
    "Recalled",
    "Scheduled",
    "TimerOutcome",
    "TimerRecord",
    "TimerWheel",
    "decode_timer_record",
    "encode_timer_record",
]

DEFAULT_SLOT_MS: Final = 1000
"""RocketMQ's default ``timerPrecisionMs``."""


@dataclass(frozen=True, slots=True)
class Scheduled:
    """Timer ``timer_id`` is due at ``due_ms`` (epoch milliseconds, the delivery timestamp)."""

    timer_id: int
    due_ms: int


@dataclass(frozen=True, slots=True)
class Firing:
    """The leader, at ``at_ms`` (>= the due time), starts delivering ``timer_id`` (rule 3)."""

    timer_id: int
    at_ms: int


@dataclass(frozen=True, slots=True)
class Fired:
    """The message of ``timer_id`` is in its real topic: the timer is finished."""

    timer_id: int


@dataclass(frozen=True, slots=True)
class Recalled:
    """RecallMessage: cancel ``timer_id`` if it is still pending."""

    timer_id: int
    at_ms: int


TimerRecord: TypeAlias = Scheduled | Firing | Fired | Recalled


class TimerOutcome(enum.Enum):
    """What ``apply`` made of a record, the same on every replica."""

    APPLIED = "applied"
    NOT_FOUND = "not_found"
    """No such timer pending (or firing, for ``Fired``): unknown, finished or recalled."""
    DUPLICATE = "duplicate"
    """``Scheduled`` for an id that is pending or firing."""
    TOO_LATE = "too_late"
    """``Recalled`` for a timer already firing: the message will be delivered."""
    STALE = "stale"
    """``Firing`` for a timer not due at the record's time, or already firing."""


class TimerWheel:
    """Pending and firing timers; see the module docstring."""

    def __init__(self, slot_ms: int = DEFAULT_SLOT_MS) -> None:
        if slot_ms < 1:
            raise ValueError(f"slot_ms must be at least 1, got {slot_ms}")
        self.slot_ms = slot_ms
        #: Pending timers: id -> due time. Invariant: each id is in its slot below, only there.
        self._due: dict[int, int] = {}
        #: Pending timers by slot number (due_ms // slot_ms). Invariant: no empty slot.
        self._slots: dict[int, dict[int, int]] = {}
        #: The keys of ``_slots``, sorted: the wheel's cursor reads from the front.
        self._slot_index: list[int] = []
        #: Timers being delivered: id -> due time (rule 3). Disjoint from ``_due``.
        self._firing: dict[int, int] = {}

    # ------------------------------------------------------------------ queries

    def __len__(self) -> int:
        """Pending timers (firing ones not counted)."""
        return len(self._due)

    def due_ms(self, timer_id: int) -> int | None:
        """The due time of a pending timer, else None."""
        return self._due.get(timer_id)

    def firing(self) -> list[int]:
        """Timers between ``Firing`` and ``Fired``: a new master delivers these again."""
        return sorted(self._firing)

    def next_due_ms(self) -> int | None:
        """The earliest due time pending, for a driver that sleeps until then."""
        if not self._slot_index:
            return None
        return min(self._slots[self._slot_index[0]].values())

    # ------------------------------------------------------------------ decisions

    def plan_fire(self, now_ms: int, limit: int) -> list[Firing]:
        """``Firing`` records for up to ``limit`` pending timers due at ``now_ms``, by due time."""
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        now_slot = now_ms // self.slot_ms
        due: list[tuple[int, int]] = []
        for slot in self._slot_index:
            if slot > now_slot or len(due) >= limit:
                break
            # slots before now's are due whole; now's slot only up to now_ms
            due.extend(
                sorted((d, t) for t, d in self._slots[slot].items() if d <= now_ms)[
                    : limit - len(due)
                ]
            )
        return [Firing(timer_id, now_ms) for _, timer_id in due[:limit]]

    # ------------------------------------------------------------------ the one way to change

    def apply(self, record: TimerRecord) -> TimerOutcome:
        """Apply one record (rules 1, 3 and 4); never raises on a well-formed record."""
        if isinstance(record, Scheduled):
            if record.timer_id in self._due or record.timer_id in self._firing:
                return TimerOutcome.DUPLICATE
            self._add(record.timer_id, record.due_ms)
            return TimerOutcome.APPLIED
        if isinstance(record, Fired):
            if self._firing.pop(record.timer_id, None) is None:
                return TimerOutcome.NOT_FOUND
            return TimerOutcome.APPLIED
        if isinstance(record, Recalled):
            if record.timer_id in self._firing:
                return TimerOutcome.TOO_LATE
            if record.timer_id not in self._due:
                return TimerOutcome.NOT_FOUND
            self._remove(record.timer_id)
            return TimerOutcome.APPLIED
        # Firing
        if record.timer_id in self._firing:
            return TimerOutcome.STALE
        due_ms = self._due.get(record.timer_id)
        if due_ms is None:
            return TimerOutcome.NOT_FOUND
        if due_ms > record.at_ms:
            return TimerOutcome.STALE
        self._remove(record.timer_id)
        self._firing[record.timer_id] = due_ms
        return TimerOutcome.APPLIED

    def apply_all(self, records: Iterable[TimerRecord]) -> list[TimerOutcome]:
        return [self.apply(record) for record in records]

    def _add(self, timer_id: int, due_ms: int) -> None:
        slot = due_ms // self.slot_ms
        timers = self._slots.get(slot)
        if timers is None:
            timers = self._slots[slot] = {}
            bisect.insort(self._slot_index, slot)
        timers[timer_id] = due_ms
        self._due[timer_id] = due_ms

    def _remove(self, timer_id: int) -> None:
        slot = self._due.pop(timer_id) // self.slot_ms
        timers = self._slots[slot]
        del timers[timer_id]
        if not timers:
            del self._slots[slot]
            del self._slot_index[bisect.bisect_left(self._slot_index, slot)]

    # ------------------------------------------------------------------ snapshots

    def snapshot(self) -> dict[str, object]:
        """The whole state as a JSON-able object (sorted, so equal wheels encode equally)."""
        return {
            "slot_ms": self.slot_ms,
            "pending": sorted([t, d] for t, d in self._due.items()),
            "firing": sorted([t, d] for t, d in self._firing.items()),
        }

    @classmethod
    def from_snapshot(cls, snapshot: dict[str, object]) -> TimerWheel:
        """The wheel ``snapshot`` describes; ValueError if it is malformed."""
        slot_ms, pending, firing = (
            snapshot.get("slot_ms"),
            snapshot.get("pending"),
            snapshot.get("firing"),
        )
        if not (
            isinstance(slot_ms, int) and isinstance(pending, list) and isinstance(firing, list)
        ):
            # one error type for every malformed snapshot, whatever is wrong in it
            raise ValueError(f"not a timer wheel snapshot: {snapshot!r:.200}")  # noqa: TRY004
        try:
            pending_pairs = [(int(t), int(d)) for t, d in pending]
            firing_pairs = [(int(t), int(d)) for t, d in firing]
        except (TypeError, ValueError) as exc:
            raise ValueError(f"not a timer wheel snapshot: {exc}") from None
        ids = [t for t, _ in pending_pairs + firing_pairs]
        if len(set(ids)) != len(ids):
            raise ValueError("not a timer wheel snapshot: a timer id appears twice")
        wheel = cls(slot_ms)
        for timer_id, due_ms in pending_pairs:
            wheel._add(timer_id, due_ms)
        wheel._firing = dict(firing_pairs)
        return wheel


_FIELDS: Final[dict[str, tuple[type[TimerRecord], tuple[str, ...]]]] = {
    "scheduled": (Scheduled, ("timer_id", "due_ms")),
    "firing": (Firing, ("timer_id", "at_ms")),
    "fired": (Fired, ("timer_id",)),
    "recalled": (Recalled, ("timer_id", "at_ms")),
}
_KIND_OF: Final = {cls: kind for kind, (cls, _) in _FIELDS.items()}


def encode_timer_record(record: TimerRecord) -> dict[str, int | str]:
    """The record as a flat JSON-able object, ``kind`` first (the metadata channel's form)."""
    kind = _KIND_OF[type(record)]
    encoded: dict[str, int | str] = {"kind": kind}
    for name in _FIELDS[kind][1]:
        encoded[name] = getattr(record, name)
    return encoded


def decode_timer_record(encoded: dict[str, object]) -> TimerRecord:
    """The record ``encode_timer_record`` made; ValueError for anything else."""
    kind = encoded.get("kind")
    if not isinstance(kind, str) or kind not in _FIELDS:
        raise ValueError(f"unknown timer record kind {kind!r}")
    cls, names = _FIELDS[kind]
    if set(encoded) != {"kind", *names}:
        raise ValueError(f"a {kind} record has the fields {sorted(names)}, got {sorted(encoded)}")
    values = []
    for name in names:
        value = encoded[name]
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
        values.append(value)
    return cls(*values)
