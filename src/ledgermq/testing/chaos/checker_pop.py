"""Rules 8 to 10 of the chaos checker: what the POP group saw (README, "POP, the contract").

A POP message is a slot, ``(queue, offset)``: the broker keeps POP state per queue offset, so a
producer's retry stored at two slots is two messages to the group.

8. **An acknowledged ack is final.** A delivery whose ack was answered OK is not delivered to
   the group again once that answer came: a receive *invoked* after the answer must not hand
   the slot out (one invoked before it ran concurrently with the ack and may), and the slot
   never lands in the group's ``%DLQ%``. The broker answers an ack only once its entry is
   committed, so this holds across failovers: a new master goes on from the committed POP
   table. An ack refused or of unknown outcome promises nothing (at-least-once).
9. **Nothing is lost to the group.** Every message a producer had acknowledged (minus those
   retention deleted on some replica, which the POP service settles as gone, as rule 1 counts
   them) is delivered to the group at least once by the end, or is in its ``%DLQ%``; a slot
   delivered ``retryMaxTimes`` times and never acked (no ack of it answered OK or of unknown
   outcome) is in the ``%DLQ%`` by the end, and none is delivered more times than that.
10. **Attempts never go backwards.** Of two deliveries of one slot, one answered before the
    other was invoked, the later has the higher attempt: each delivery the broker answered is
    committed, so the next one counts it (an equal attempt means the first was forgotten).

Pure functions over a ``History``, like ``checker.py``, which calls ``check_pop`` only for runs
that had a POP group (``History.pop_max_attempts`` > 0).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from itertools import combinations
from typing import TYPE_CHECKING

from ledgermq.testing.chaos.history import Outcome

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledgermq.testing.chaos.history import History, PopAck, PopDelivery

__all__ = ["PopCounts", "check_pop"]

Slot = tuple[int, int]
MessageKey = tuple[int, int]


@dataclass
class PopCounts:
    """The POP rows of the report."""

    deliveries: int = 0
    redeliveries: int = 0
    """Deliveries with an attempt above 1."""
    acks_ok: int = 0
    acks_refused: int = 0
    acks_unknown: int = 0
    after_ack: int = 0
    """Deliveries invoked after an ack of their slot was answered OK (rule 8: must be 0)."""
    dead_letters: int = 0
    undelivered: int = 0
    """Acknowledged sends never delivered to the group nor dead-lettered (rule 9)."""
    bad_attempts: int = 0
    """Attempt numbers that went backwards or repeated (rule 10) or passed retryMaxTimes."""


def check_pop(history: History, violate: Callable[[str], None]) -> PopCounts:
    """Rules 8 to 10 (module docstring) on ``history``; the counts of the report."""
    counts = PopCounts(deliveries=len(history.pop_deliveries))
    counts.redeliveries = sum(1 for d in history.pop_deliveries if d.attempt > 1)
    counts.acks_ok = sum(1 for a in history.pop_acks if a.outcome is Outcome.OK)
    counts.acks_refused = sum(1 for a in history.pop_acks if a.outcome is Outcome.FAILED)
    counts.acks_unknown = sum(1 for a in history.pop_acks if a.outcome is Outcome.UNKNOWN)
    counts.dead_letters = len(history.pop_dead_letters)
    by_slot: dict[Slot, list[PopDelivery]] = defaultdict(list)
    for delivery in history.pop_deliveries:
        by_slot[(delivery.queue, delivery.offset)].append(delivery)
    acks: dict[Slot, list[PopAck]] = defaultdict(list)
    for ack in history.pop_acks:
        acks[(ack.queue, ack.offset)].append(ack)
    dead = _dead_slots(history, by_slot)
    counts.after_ack = _check_final_acks(by_slot, acks, dead, violate)
    counts.bad_attempts = _check_attempts(by_slot, history.pop_max_attempts, violate)
    counts.undelivered = _check_delivered(history, by_slot, acks, dead, violate)
    return counts


def _dead_slots(history: History, by_slot: dict[Slot, list[PopDelivery]]) -> set[Slot]:
    """The slots of the dead letters: by the id of the message a letter copies, else by its
    (producer, seq) when the group got that message at one slot only."""
    slot_of_id = {d.msg_id: (d.queue, d.offset) for d in history.pop_deliveries if d.msg_id}
    slots_of_key: dict[MessageKey, set[Slot]] = defaultdict(set)
    for slot, found in by_slot.items():
        slots_of_key[(found[0].producer, found[0].seq)].add(slot)
    dead: set[Slot] = set()
    for letter in history.pop_dead_letters:
        at = slot_of_id.get(letter.origin_msg_id)
        if at is None and len(slots_of_key[(letter.producer, letter.seq)]) == 1:
            at = next(iter(slots_of_key[(letter.producer, letter.seq)]))
        if at is not None:
            dead.add(at)
    return dead


def _check_final_acks(
    by_slot: dict[Slot, list[PopDelivery]],
    acks: dict[Slot, list[PopAck]],
    dead: set[Slot],
    violate: Callable[[str], None],
) -> int:
    """Rule 8; the deliveries that broke it."""
    bad = 0
    for slot, slot_acks in sorted(acks.items()):
        answered = [a.complete_ms for a in slot_acks if a.outcome is Outcome.OK]
        if not answered:
            continue
        first_ok = min(answered)
        where = f"queue {slot[0]} offset {slot[1]}"
        for delivery in by_slot.get(slot, []):
            if delivery.invoke_ms > first_ok:
                bad += 1
                violate(
                    f"POP: {where} (producer {delivery.producer} seq {delivery.seq}) was "
                    f"delivered again (attempt {delivery.attempt}, receive invoked at "
                    f"{delivery.invoke_ms / 1000:.1f} s) after its ack was answered OK at "
                    f"{first_ok / 1000:.1f} s"
                )
        if slot in dead:
            bad += 1
            violate(f"POP: {where} is in the group's %DLQ% although its ack was answered OK")
    return bad


def _check_attempts(
    by_slot: dict[Slot, list[PopDelivery]], max_attempts: int, violate: Callable[[str], None]
) -> int:
    """Rule 10, and no attempt above ``max_attempts``; the deliveries that broke it."""
    bad = 0
    for slot, deliveries in sorted(by_slot.items()):
        where = f"POP: queue {slot[0]} offset {slot[1]}"
        ordered = sorted(deliveries, key=lambda d: d.invoke_ms)
        for before, after in combinations(ordered, 2):
            if before.complete_ms < after.invoke_ms and after.attempt <= before.attempt:
                bad += 1
                how = "went backwards" if after.attempt < before.attempt else "repeated"
                violate(
                    f"{where}: the delivery attempt {how}: {before.attempt} answered at "
                    f"{before.complete_ms / 1000:.1f} s, then {after.attempt} at "
                    f"{after.complete_ms / 1000:.1f} s"
                )
        over = [d for d in deliveries if max_attempts and d.attempt > max_attempts]
        if over:
            bad += len(over)
            violate(
                f"{where}: delivered at attempt {max(d.attempt for d in over)}, past "
                f"retryMaxTimes {max_attempts} (it belongs in the %DLQ%)"
            )
    return bad


def _check_delivered(
    history: History,
    by_slot: dict[Slot, list[PopDelivery]],
    acks: dict[Slot, list[PopAck]],
    dead: set[Slot],
    violate: Callable[[str], None],
) -> int:
    """Rule 9; the acknowledged sends that never reached the group."""
    delivered = {(d.producer, d.seq) for d in history.pop_deliveries}
    delivered |= {(letter.producer, letter.seq) for letter in history.pop_dead_letters}
    expired = history.expired_messages()
    missing = 0
    for op in history.sends:
        key = (op.producer, op.seq)
        if op.outcome is Outcome.OK and key not in delivered and key not in expired:
            delivered.add(key)  # one violation per message, whatever its attempts
            missing += 1
            violate(
                f"POP: acknowledged producer {op.producer} seq {op.seq} (queue {op.queue} "
                f"offset {op.offset}) never reached the POP group nor its %DLQ%"
            )
    for slot, deliveries in sorted(by_slot.items()):
        last = max(d.attempt for d in deliveries)
        settled = any(a.outcome is not Outcome.FAILED for a in acks.get(slot, []))
        out_of_attempts = history.pop_max_attempts and last >= history.pop_max_attempts
        if out_of_attempts and not settled and slot not in dead:
            missing += 1
            violate(
                f"POP: queue {slot[0]} offset {slot[1]} was delivered {last} times "
                f"(retryMaxTimes) and never acked, but is not in the group's %DLQ%"
            )
    return missing
