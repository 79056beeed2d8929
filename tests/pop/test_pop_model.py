"""Model-based test of ``broker.pop.PopQueue`` (STYLE.md 7.13.1 L4): hypothesis drives random
receives, acks, re-arms, dead-letterings, concurrent plans and clock jumps against ``Reference``,
a brute-force model of the same contract written without the real one's structure (no low
watermark, no records, no plans: a status per message, and every receive scans from offset 0).

After every step: both agree message by message, the applied records replayed on a fresh queue
(and a snapshot through JSON) give the same state, and the FIFO and at-most-max-attempts rules
hold. The consumer group's settings change now and then (FIFO on or off, max attempts up or
down), as ``subgroup-update`` changes them under a backlog.

The FIFO ordering rule, checked directly at every receive: in a FIFO group, a message of a
message group is handed out only if every earlier message of its group is done (acknowledged or
dead-lettered) or handed out before it in the same receive; so a consumer that processes what
it receives in order sees each group in order, a message left unacknowledged comes back before
any of its successors, and a dead-lettered one lets the group move on. And what a group has out
is a run of its oldest messages.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    rule,
)

from ledgermq.broker.pop import (
    DeadLettered,
    DeadLetterReason,
    Delivered,
    Outcome,
    PopQueue,
    PopRecord,
    PopSettings,
    ReceiptHandle,
    decode_record,
    encode_record,
)

GROUPS = st.sampled_from(["a", "b", None])
# times drawn partly from a few round values, so that a timer ending exactly "now" (the boundary
# of every visibility rule) comes up often, not once in a million draws
DURATIONS_MS = st.one_of(st.sampled_from([0, 1, 1_000, 2_000]), st.integers(0, 2_500))


@dataclass
class Flight:
    seq: int
    attempt: int
    until_ms: int


class Reference:
    """The POP contract of issue 16, the plainest way: a status per offset."""

    def __init__(self, fifo: bool, max_attempts: int) -> None:
        self.fifo = fifo
        self.max_attempts = max_attempts
        self.groups: list[str | None] = []
        self.done: set[int] = set()
        self.flights: dict[int, Flight] = {}
        self.counter = 0

    def _blocked_groups(self, now_ms: int) -> set[str | None]:
        """FIFO: the groups with a message out and still invisible."""
        if not self.fifo:
            return set()
        blocked = {self.groups[o] for o, f in self.flights.items() if f.until_ms > now_ms}
        return blocked - {None}

    def receive(
        self, now_ms: int, max_messages: int, invisible_ms: int
    ) -> tuple[list[tuple[int, int, int]], list[int]]:
        """(offset, attempt, seq) of each delivery, and the offsets dead-lettered."""
        deliveries: list[tuple[int, int, int]] = []
        dead: list[int] = []
        blocked = self._blocked_groups(now_ms)
        for offset in range(len(self.groups)):
            if len(deliveries) == max_messages:
                break
            if offset in self.done or (self.fifo and self.groups[offset] in blocked):
                continue
            flight = self.flights.get(offset)
            if flight is not None and flight.until_ms > now_ms:
                continue
            if flight is not None and flight.attempt >= self.max_attempts:
                self.done.add(offset)
                del self.flights[offset]
                dead.append(offset)
                continue
            attempt = 1 if flight is None else flight.attempt + 1
            self.flights[offset] = Flight(self.counter, attempt, now_ms + invisible_ms)
            deliveries.append((offset, attempt, self.counter))
            self.counter += 1
        return deliveries, dead

    def _settle(self, handle: ReceiptHandle) -> Outcome:
        if handle.offset in self.done:
            return Outcome.ALREADY_DONE
        flight = self.flights.get(handle.offset)
        if flight is None or flight.seq != handle.seq:
            return Outcome.INVALID_HANDLE
        del self.flights[handle.offset]
        self.done.add(handle.offset)
        return Outcome.APPLIED

    def ack(self, handle: ReceiptHandle) -> Outcome:
        return self._settle(handle)

    def forward(self, handle: ReceiptHandle) -> Outcome:
        return self._settle(handle)

    def change(self, handle: ReceiptHandle, now_ms: int, invisible_ms: int) -> Outcome:
        if handle.offset in self.done:
            return Outcome.ALREADY_DONE
        flight = self.flights.get(handle.offset)
        if flight is None or flight.seq != handle.seq:
            return Outcome.INVALID_HANDLE
        self.flights[handle.offset] = Flight(self.counter, flight.attempt, now_ms + invisible_ms)
        self.counter += 1
        return Outcome.APPLIED


class PopMachine(RuleBasedStateMachine):
    handles = Bundle("handles")

    def __init__(self) -> None:
        super().__init__()
        self.queue = PopQueue()
        self.reference = Reference(False, 1)
        self.now_ms = 1_000
        self.log: list[str] = []  # every applied record, JSON-encoded as it would be replicated
        self.initial = PopSettings()
        self.most_attempts = 1  # the highest max_attempts the group has had
        # handles of deliveries made while the group was FIFO: the ordering rule is theirs
        # (deliveries made before a change to FIFO are out already, in any order)
        self.ordered_seqs: set[int] = set()
        self.acked: set[int] = set()
        self.deliveries: dict[int, int] = {}  # offset -> times handed out

    @initialize(fifo=st.booleans(), max_attempts=st.integers(1, 4))
    def setup(self, fifo: bool, max_attempts: int) -> None:
        self.initial = PopSettings(fifo=fifo, max_attempts=max_attempts)
        self.queue = PopQueue(self.initial)
        self.reference = Reference(fifo, max_attempts)
        self.most_attempts = max_attempts

    def apply(self, records: list[PopRecord]) -> list[Outcome]:
        outcomes = self.queue.apply_all(records)
        for record, outcome in zip(records, outcomes, strict=True):
            if outcome is Outcome.APPLIED:
                self.log.append(json.dumps(encode_record(record)))
        return outcomes

    def plan_receive(self, max_messages: int, invisible_ms: int) -> list[PopRecord]:
        return self.queue.plan_receive(
            now_ms=self.now_ms,
            end_offset=len(self.reference.groups),
            max_messages=max_messages,
            invisible_ms=invisible_ms,
            group_of=self.reference.groups.__getitem__,
        )

    def check_receive(
        self, records: list[PopRecord], max_messages: int, invisible_ms: int
    ) -> list[ReceiptHandle]:
        delivered = [r for r in records if isinstance(r, Delivered)]
        dead = [r for r in records if isinstance(r, DeadLettered)]
        assert all(r.reason is DeadLetterReason.MAX_ATTEMPTS for r in dead)
        expected, expected_dead = self.reference.receive(self.now_ms, max_messages, invisible_ms)
        assert [(r.offset, r.attempt, r.seq) for r in delivered] == expected
        assert [r.offset for r in dead] == expected_dead
        for r in delivered:
            assert r.offset not in self.acked, "an acknowledged message was delivered again"
            self.deliveries[r.offset] = self.deliveries.get(r.offset, 0) + 1
            assert self.deliveries[r.offset] <= self.most_attempts
            if self.queue.settings.fifo:
                self.ordered_seqs.add(r.seq)
        if self.queue.settings.fifo:
            self.assert_in_group_order(delivered)
        return [ReceiptHandle(r.offset, r.seq) for r in delivered]

    def assert_in_group_order(self, delivered: list[Delivered]) -> None:
        """The FIFO ordering rule for one receive's deliveries (module docstring)."""
        groups = self.reference.groups
        before: set[int] = set()
        for record in delivered:
            group = groups[record.offset]
            if group is not None:
                earlier = [o for o in range(record.offset) if groups[o] == group]
                pending = [o for o in earlier if not self.queue.is_done(o) and o not in before]
                assert not pending, (group, record.offset, pending)
            before.add(record.offset)

    @rule(fifo=st.booleans(), max_attempts=st.integers(1, 4))
    def change_settings(self, fifo: bool, max_attempts: int) -> None:
        settings = PopSettings(fifo=fifo, max_attempts=max_attempts)
        self.queue.reconfigure(settings)
        self.reference.fifo, self.reference.max_attempts = fifo, max_attempts
        self.most_attempts = max(self.most_attempts, max_attempts)
        self.log.append(json.dumps({"settings": [fifo, max_attempts]}))

    @rule(groups=st.lists(GROUPS, min_size=1, max_size=4))
    def publish(self, groups: list[str | None]) -> None:
        self.reference.groups.extend(groups)

    @rule(ms=DURATIONS_MS)
    def advance_clock(self, ms: int) -> None:
        self.now_ms += ms

    @rule(target=handles, max_messages=st.integers(1, 4), invisible_ms=DURATIONS_MS)
    def receive(self, max_messages: int, invisible_ms: int) -> object:
        records = self.plan_receive(max_messages, invisible_ms)
        assert self.apply(records) == [Outcome.APPLIED] * len(records)
        return multiple(*self.check_receive(records, max_messages, invisible_ms))

    @rule(target=handles, max_messages=st.integers(1, 4), invisible_ms=DURATIONS_MS)
    def two_receives_planned_together(self, max_messages: int, invisible_ms: int) -> object:
        """Two leaders' worth of plans on one state: the second may not hand anything out."""
        first = self.plan_receive(max_messages, invisible_ms)
        second = self.plan_receive(max_messages, invisible_ms)
        assert first == second
        assert self.apply(first) == [Outcome.APPLIED] * len(first)
        outcomes = self.apply(second)
        for record, outcome in zip(second, outcomes, strict=True):
            if isinstance(record, Delivered):
                assert outcome is Outcome.STALE
            else:
                assert outcome is Outcome.ALREADY_DONE
        return multiple(*self.check_receive(first, max_messages, invisible_ms))

    @rule(handle=handles)
    def ack(self, handle: ReceiptHandle) -> None:
        expected = self.reference.ack(handle)
        assert self.queue.check(handle) is expected
        (outcome,) = self.apply([self.queue.plan_ack(handle)])
        assert outcome is expected
        if outcome is Outcome.APPLIED:
            self.acked.add(handle.offset)

    @rule(target=handles, handle=handles, invisible_ms=DURATIONS_MS)
    def change_invisible(self, handle: ReceiptHandle, invisible_ms: int) -> object:
        record = self.queue.plan_change_invisible(
            handle, now_ms=self.now_ms, invisible_ms=invisible_ms
        )
        (outcome,) = self.apply([record])
        assert outcome is self.reference.change(handle, self.now_ms, invisible_ms)
        if outcome is not Outcome.APPLIED:
            return multiple()
        new = ReceiptHandle(handle.offset, record.new_seq)
        if handle.seq in self.ordered_seqs:
            self.ordered_seqs.add(new.seq)
        assert self.queue.check(handle) is Outcome.INVALID_HANDLE
        assert self.queue.check(new) is Outcome.APPLIED
        return new

    @rule(handle=handles)
    def forward_to_dead_letter(self, handle: ReceiptHandle) -> None:
        record = self.queue.plan_forward_to_dead_letter(handle, now_ms=self.now_ms)
        (outcome,) = self.apply([record])
        assert outcome is self.reference.forward(handle)

    @invariant()
    def agrees_with_the_reference(self) -> None:
        for offset in range(len(self.reference.groups)):
            assert self.queue.is_done(offset) == (offset in self.reference.done), offset
            flight, expected = self.queue.delivery(offset), self.reference.flights.get(offset)
            if expected is None:
                assert flight is None, offset
            else:
                assert flight is not None, offset
                assert (flight.seq, flight.attempt, flight.invisible_until_ms) == (
                    expected.seq,
                    expected.attempt,
                    expected.until_ms,
                )

    @invariant()
    def replaying_the_log_rebuilds_the_state(self) -> None:
        """What a new master does after a failover: same records, same state."""
        rebuilt = PopQueue(self.initial)
        for line in self.log:
            entry = json.loads(line)
            if "settings" in entry:
                fifo, max_attempts = entry["settings"]
                rebuilt.reconfigure(PopSettings(fifo=fifo, max_attempts=max_attempts))
            else:
                assert rebuilt.apply(decode_record(entry)) is Outcome.APPLIED
        assert rebuilt.snapshot() == self.queue.snapshot()
        restored = PopQueue.from_snapshot(json.loads(json.dumps(self.queue.snapshot())))
        assert restored.snapshot() == self.queue.snapshot()

    @invariant()
    def fifo_groups_have_a_run_of_their_oldest_out(self) -> None:
        if not self.queue.settings.fifo:
            return
        groups = self.reference.groups
        for offset, flight in self.queue.in_flight().items():
            group = groups[offset]
            if group is None or flight.seq not in self.ordered_seqs:
                continue
            earlier = [o for o in range(offset) if groups[o] == group]
            assert all(
                self.queue.is_done(o) or self.queue.delivery(o) is not None for o in earlier
            ), (group, offset)


PopMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestPopModel = PopMachine.TestCase
