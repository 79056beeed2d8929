"""Model-based test of ``broker.timers.TimerWheel`` (STYLE.md 7.13.1 L4) against ``Reference``:
a dict of timers and a sort on every tick, instead of slots and an index. After every step the
two agree, the log replays (and the snapshot restores) to the same wheel, and no timer has
started firing before its due time or after a successful recall."""

from __future__ import annotations

import json

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from ledgermq.broker.timers import (
    Fired,
    Firing,
    Recalled,
    Scheduled,
    TimerOutcome,
    TimerRecord,
    TimerWheel,
    decode_timer_record,
    encode_timer_record,
)

IDS = st.integers(0, 12)
# partly round values, so that "due exactly now" and slot edges come up often
DURATIONS_MS = st.one_of(st.sampled_from([0, 1, 99, 100, 1_000]), st.integers(0, 3_000))


class Reference:
    def __init__(self) -> None:
        self.pending: dict[int, int] = {}
        self.firing: dict[int, int] = {}

    def schedule(self, timer_id: int, due_ms: int) -> TimerOutcome:
        if timer_id in self.pending or timer_id in self.firing:
            return TimerOutcome.DUPLICATE
        self.pending[timer_id] = due_ms
        return TimerOutcome.APPLIED

    def due(self, now_ms: int, limit: int) -> list[int]:
        return [t for d, t in sorted((d, t) for t, d in self.pending.items() if d <= now_ms)][
            :limit
        ]

    def recall(self, timer_id: int) -> TimerOutcome:
        if timer_id in self.firing:
            return TimerOutcome.TOO_LATE
        if self.pending.pop(timer_id, None) is None:
            return TimerOutcome.NOT_FOUND
        return TimerOutcome.APPLIED


class TimerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.wheel = TimerWheel()
        self.reference = Reference()
        self.now_ms = 10_000
        self.log: list[str] = []
        self.recalled: set[int] = set()  # recalled and not scheduled again since

    @initialize(slot_ms=st.sampled_from([1, 100, 1_000]))
    def setup(self, slot_ms: int) -> None:
        self.wheel = TimerWheel(slot_ms)

    def apply(self, record: TimerRecord) -> TimerOutcome:
        outcome = self.wheel.apply(record)
        if outcome is TimerOutcome.APPLIED:
            self.log.append(json.dumps(encode_timer_record(record)))
        return outcome

    @rule(timer_id=IDS, delay_ms=st.integers(-1_000, 5_000))
    def schedule(self, timer_id: int, delay_ms: int) -> None:
        due_ms = max(0, self.now_ms + delay_ms)
        outcome = self.apply(Scheduled(timer_id, due_ms))
        assert outcome is self.reference.schedule(timer_id, due_ms)
        if outcome is TimerOutcome.APPLIED:
            self.recalled.discard(timer_id)

    @rule(ms=DURATIONS_MS)
    def advance_clock(self, ms: int) -> None:
        self.now_ms += ms

    @rule(limit=st.integers(1, 5))
    def tick(self, limit: int) -> None:
        firing = self.wheel.plan_fire(self.now_ms, limit)
        assert [f.timer_id for f in firing] == self.reference.due(self.now_ms, limit)
        for record in firing:
            assert record.timer_id not in self.recalled
            assert self.apply(record) is TimerOutcome.APPLIED
            self.reference.firing[record.timer_id] = self.reference.pending.pop(record.timer_id)

    @precondition(lambda self: bool(self.reference.firing))
    @rule(data=st.data())
    def finish(self, data: st.DataObject) -> None:
        timer_id = data.draw(st.sampled_from(sorted(self.reference.firing)))
        assert self.apply(Fired(timer_id)) is TimerOutcome.APPLIED
        del self.reference.firing[timer_id]

    @rule(timer_id=IDS)
    def recall(self, timer_id: int) -> None:
        outcome = self.apply(Recalled(timer_id, self.now_ms))
        assert outcome is self.reference.recall(timer_id)
        if outcome is TimerOutcome.APPLIED:
            self.recalled.add(timer_id)

    @rule(timer_id=IDS, limit=st.integers(1, 5))
    def recall_overtakes_a_planned_tick(self, timer_id: int, limit: int) -> None:
        """A plan made, then a recall applied first: the plan's Firing for it is refused."""
        firing = self.wheel.plan_fire(self.now_ms, limit)
        self.recall(timer_id)
        for record in firing:
            outcome = self.apply(record)
            if record.timer_id == timer_id and timer_id in self.recalled:
                assert outcome is TimerOutcome.NOT_FOUND
            else:
                assert outcome is TimerOutcome.APPLIED
                self.reference.firing[record.timer_id] = self.reference.pending.pop(record.timer_id)

    @rule(timer_id=IDS, early_ms=st.integers(1, 1_000))
    def early_firing_is_refused(self, timer_id: int, early_ms: int) -> None:
        due_ms = self.wheel.due_ms(timer_id)
        if due_ms is not None:
            assert self.wheel.apply(Firing(timer_id, due_ms - early_ms)) is TimerOutcome.STALE

    @invariant()
    def agrees_with_the_reference(self) -> None:
        assert {t: self.wheel.due_ms(t) for t in self.reference.pending} == self.reference.pending
        assert len(self.wheel) == len(self.reference.pending)
        assert self.wheel.firing() == sorted(self.reference.firing)
        expected_next = min(self.reference.pending.values(), default=None)
        assert self.wheel.next_due_ms() == expected_next

    @invariant()
    def the_log_and_the_snapshot_rebuild_the_wheel(self) -> None:
        rebuilt = TimerWheel(self.wheel.slot_ms)
        records = [decode_timer_record(json.loads(line)) for line in self.log]
        assert rebuilt.apply_all(records) == [TimerOutcome.APPLIED] * len(records)
        assert rebuilt.snapshot() == self.wheel.snapshot()
        restored = TimerWheel.from_snapshot(json.loads(json.dumps(self.wheel.snapshot())))
        assert restored.snapshot() == self.wheel.snapshot()


TimerMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestTimerModel = TimerMachine.TestCase
