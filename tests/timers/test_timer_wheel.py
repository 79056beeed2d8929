"""The replicated timer wheel (src/ledgermq/broker/timers/wheel.py): its rules, one scenario each,
and a 10 000-timer run through a driver that ticks every 100 ms."""

from __future__ import annotations

import json
import random

import pytest

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


def fire(wheel: TimerWheel, now_ms: int, limit: int = 1000) -> list[int]:
    """One tick of a leader: plan, apply Firing, (put the messages), apply Fired."""
    firing = wheel.plan_fire(now_ms, limit)
    assert wheel.apply_all(firing) == [TimerOutcome.APPLIED] * len(firing)
    ids = [f.timer_id for f in firing]
    assert wheel.apply_all([Fired(t) for t in ids]) == [TimerOutcome.APPLIED] * len(ids)
    return ids


def test_timers_fire_at_their_due_time_in_due_order_never_before() -> None:
    wheel = TimerWheel()
    wheel.apply_all([Scheduled(1, 5_500), Scheduled(2, 5_000), Scheduled(3, 9_000)])
    assert wheel.next_due_ms() == 5_000
    assert fire(wheel, 4_999) == []
    assert fire(wheel, 5_499) == [2]  # same one-second slot as timer 1, which is not due yet
    assert fire(wheel, 10_000) == [1, 3]
    assert len(wheel) == 0
    assert wheel.next_due_ms() is None


def test_ties_fire_by_id_and_limit_bounds_a_tick() -> None:
    wheel = TimerWheel()
    wheel.apply_all([Scheduled(t, 1_000) for t in (9, 3, 5, 7)])
    assert fire(wheel, 1_000, limit=3) == [3, 5, 7]
    assert fire(wheel, 1_000, limit=3) == [9]


def test_recall_cancels_a_pending_timer_and_is_too_late_once_firing() -> None:
    wheel = TimerWheel()
    wheel.apply_all([Scheduled(1, 1_000), Scheduled(2, 1_000)])
    assert wheel.apply(Recalled(1, 500)) is TimerOutcome.APPLIED
    assert wheel.apply(Recalled(1, 600)) is TimerOutcome.NOT_FOUND
    (firing,) = wheel.plan_fire(1_000, 10)
    assert wheel.apply(firing) is TimerOutcome.APPLIED
    assert wheel.apply(Recalled(2, 1_001)) is TimerOutcome.TOO_LATE
    assert wheel.apply(Fired(2)) is TimerOutcome.APPLIED
    assert wheel.apply(Recalled(2, 1_002)) is TimerOutcome.NOT_FOUND


def test_a_recall_applied_before_a_planned_firing_wins() -> None:
    """Rule 3: the log order decides; the refused Firing means nothing was put."""
    wheel = TimerWheel()
    wheel.apply(Scheduled(1, 1_000))
    (firing,) = wheel.plan_fire(2_000, 10)
    assert wheel.apply(Recalled(1, 1_999)) is TimerOutcome.APPLIED
    assert wheel.apply(firing) is TimerOutcome.NOT_FOUND
    assert wheel.firing() == []


def test_firing_is_refused_before_the_due_time_and_twice() -> None:
    wheel = TimerWheel()
    wheel.apply(Scheduled(1, 1_000))
    assert wheel.apply(Firing(1, 999)) is TimerOutcome.STALE
    assert wheel.apply(Firing(1, 1_000)) is TimerOutcome.APPLIED
    assert wheel.apply(Firing(1, 1_000)) is TimerOutcome.STALE
    assert wheel.apply(Scheduled(1, 5_000)) is TimerOutcome.DUPLICATE
    assert wheel.apply(Fired(1)) is TimerOutcome.APPLIED
    assert wheel.apply(Fired(1)) is TimerOutcome.NOT_FOUND
    assert wheel.apply(Scheduled(1, 5_000)) is TimerOutcome.APPLIED  # finished: the id is free


def test_a_master_dying_between_firing_and_fired_leaves_the_work_to_the_next() -> None:
    log: list[TimerRecord] = [Scheduled(1, 1_000), Scheduled(2, 1_000)]
    old = TimerWheel()
    old.apply_all(log)
    firing = old.plan_fire(1_000, 10)
    log += firing  # committed; the old master put message 1 (or not) and died before Fired
    new = TimerWheel()
    assert new.apply_all(log) == [TimerOutcome.APPLIED] * 4
    assert new.firing() == [1, 2]  # put again (a possible duplicate, never a loss)
    assert new.plan_fire(5_000, 10) == []  # and not planned twice
    assert new.apply_all([Fired(1), Fired(2)]) == [TimerOutcome.APPLIED] * 2


def test_records_survive_json_and_malformed_ones_are_refused() -> None:
    records: list[TimerRecord] = [Scheduled(1, 2), Firing(3, 4), Fired(5), Recalled(6, 7)]
    for record in records:
        assert decode_timer_record(json.loads(json.dumps(encode_timer_record(record)))) == record
    bad_records: list[dict[str, object]] = [
        {"kind": "x"},
        {"kind": "fired"},
        {"kind": "fired", "timer_id": -1},
        {"kind": "fired", "timer_id": "1"},
        {"kind": "fired", "timer_id": 1, "at_ms": 2},
    ]
    for bad in bad_records:
        with pytest.raises(ValueError):
            decode_timer_record(bad)


def test_snapshot_round_trip_and_broken_snapshots() -> None:
    wheel = TimerWheel(slot_ms=100)
    wheel.apply_all([Scheduled(1, 50), Scheduled(2, 250), Scheduled(3, 900)])
    wheel.apply(wheel.plan_fire(60, 10)[0])
    snapshot = json.loads(json.dumps(wheel.snapshot()))
    restored = TimerWheel.from_snapshot(snapshot)
    assert restored.snapshot() == wheel.snapshot()
    assert restored.firing() == [1]
    assert [f.timer_id for f in restored.plan_fire(1_000, 10)] == [2, 3]
    with pytest.raises(ValueError, match="twice"):
        TimerWheel.from_snapshot(dict(snapshot, firing=[[2, 250]]))
    with pytest.raises(ValueError, match="not a timer wheel snapshot"):
        TimerWheel.from_snapshot({"slot_ms": 1})
    with pytest.raises(ValueError, match="slot_ms"):
        TimerWheel(slot_ms=0)


@pytest.mark.parametrize("failover_at_ms", [None, 20_000])
def test_ten_thousand_timers_each_fire_within_a_second(failover_at_ms: int | None) -> None:
    """The issue's figure: 10 000 pending timers (a tenth recalled, a burst of 1 000 due in the
    same millisecond), a leader ticking every 100 ms with at most 500 firings a tick: every
    timer not recalled fires once, none early, none a second or more late, none recalled. With a
    failover, the new master rebuilds the wheel from the log (snapshot + the records since)."""
    rng = random.Random(20261125)
    due = {t: rng.randrange(0, 60_000) for t in range(9_000)}
    due.update(dict.fromkeys(range(9_000, 10_000), 30_000))
    recalled = set(rng.sample(sorted(due), 1_000))
    wheel = TimerWheel()
    log: list[TimerRecord] = [Scheduled(t, d) for t, d in due.items()]
    assert wheel.apply_all(log) == [TimerOutcome.APPLIED] * len(log)
    assert len(wheel) == 10_000
    recalls = sorted(recalled, key=due.__getitem__)
    fired_at: dict[int, int] = {}
    snapshot: dict[str, object] | None = None
    snapshot_index = 0
    for now_ms in range(0, 62_000, 100):
        # recalls arrive 50 ms before their timer is due
        while recalls and due[recalls[0]] - 50 <= now_ms:
            record = Recalled(recalls.pop(0), now_ms)
            assert wheel.apply(record) is TimerOutcome.APPLIED
            log.append(record)
        if now_ms == 10_000:
            snapshot, snapshot_index = json.loads(json.dumps(wheel.snapshot())), len(log)
        if now_ms == failover_at_ms:
            assert snapshot is not None
            wheel = TimerWheel.from_snapshot(snapshot)
            assert wheel.apply_all(log[snapshot_index:]) == [TimerOutcome.APPLIED] * (
                len(log) - snapshot_index
            )
        firing = wheel.plan_fire(now_ms, 500)
        assert wheel.apply_all(firing) == [TimerOutcome.APPLIED] * len(firing)
        done = [Fired(f.timer_id) for f in firing]
        assert wheel.apply_all(done) == [TimerOutcome.APPLIED] * len(done)
        log += firing
        log += done
        for f in firing:
            assert f.timer_id not in fired_at, "fired twice"
            fired_at[f.timer_id] = now_ms
    assert len(wheel) == 0
    assert wheel.firing() == []
    assert set(fired_at) == set(due) - recalled
    lateness = [fired_at[t] - due[t] for t in fired_at]
    assert min(lateness) >= 0
    assert max(lateness) < 1_000
