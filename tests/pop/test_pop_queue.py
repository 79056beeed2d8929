"""The POP model's rules, one scenario each (src/ledgermq/broker/pop/queue.py, rules 1-7)."""

from __future__ import annotations

import json

import pytest

from ledgermq.broker.pop import (
    Acked,
    DeadLettered,
    DeadLetterReason,
    Delivered,
    InvisibilityChanged,
    Outcome,
    PopQueue,
    PopRecord,
    PopSettings,
    ReceiptHandle,
    decode_record,
    encode_record,
)

INVISIBLE_MS = 30_000


def no_groups(offset: int) -> str | None:
    return None


def receive(
    queue: PopQueue,
    now_ms: int,
    end_offset: int,
    max_messages: int = 32,
    groups: list[str | None] | None = None,
    invisible_ms: int = INVISIBLE_MS,
) -> list[PopRecord]:
    """Plan a receive, apply it (all of it must apply), return its records."""
    records = queue.plan_receive(
        now_ms=now_ms,
        end_offset=end_offset,
        max_messages=max_messages,
        invisible_ms=invisible_ms,
        group_of=groups.__getitem__ if groups is not None else no_groups,
    )
    assert queue.apply_all(records) == [Outcome.APPLIED] * len(records)
    return records


def handles(records: list[PopRecord]) -> list[ReceiptHandle]:
    return [ReceiptHandle(r.offset, r.seq) for r in records if isinstance(r, Delivered)]


def offsets(records: list[PopRecord]) -> list[int]:
    return [r.offset for r in records if isinstance(r, Delivered)]


def test_receive_hands_out_unique_handles_and_hides_the_messages() -> None:
    queue = PopQueue()
    first = receive(queue, 0, end_offset=3, max_messages=2)
    assert offsets(first) == [0, 1]
    assert all(isinstance(r, Delivered) and r.attempt == 1 for r in first)
    assert all(isinstance(r, Delivered) and r.invisible_until_ms == INVISIBLE_MS for r in first)
    second = receive(queue, 1, end_offset=3)
    assert offsets(second) == [2]
    assert len(set(handles(first + second))) == 3
    assert receive(queue, INVISIBLE_MS - 1, end_offset=3) == []


def test_acks_out_of_order_settle_each_message_and_move_low_over_a_run() -> None:
    queue = PopQueue()
    h0, h1, h2 = handles(receive(queue, 0, end_offset=3))
    assert queue.apply(queue.plan_ack(h2)) is Outcome.APPLIED
    assert queue.low == 0
    assert queue.apply(queue.plan_ack(h0)) is Outcome.APPLIED
    assert queue.low == 1
    assert queue.apply(queue.plan_ack(h1)) is Outcome.APPLIED
    assert queue.low == 3
    assert receive(queue, 10 * INVISIBLE_MS, end_offset=3) == []


def test_an_unacked_message_comes_back_with_the_next_attempt_and_a_new_handle() -> None:
    queue = PopQueue()
    (old,) = handles(receive(queue, 0, end_offset=1))
    (again,) = receive(queue, INVISIBLE_MS, end_offset=1)
    assert isinstance(again, Delivered)
    assert (again.offset, again.attempt) == (0, 2)
    assert again.seq != old.seq
    assert queue.check(old) is Outcome.INVALID_HANDLE
    assert queue.apply(queue.plan_ack(old)) is Outcome.INVALID_HANDLE
    assert queue.apply(queue.plan_ack(ReceiptHandle(0, again.seq))) is Outcome.APPLIED


def test_an_ack_after_expiry_counts_while_nobody_received_the_message_again() -> None:
    queue = PopQueue()
    (handle,) = handles(receive(queue, 0, end_offset=1))
    assert queue.check(handle) is Outcome.APPLIED  # expired at INVISIBLE_MS, not redelivered
    assert queue.apply(queue.plan_ack(handle)) is Outcome.APPLIED
    assert receive(queue, 2 * INVISIBLE_MS, end_offset=1) == []


def test_a_retried_ack_of_a_settled_message_is_already_done() -> None:
    queue = PopQueue()
    (handle,) = handles(receive(queue, 0, end_offset=1))
    assert queue.apply(queue.plan_ack(handle)) is Outcome.APPLIED
    assert queue.apply(queue.plan_ack(handle)) is Outcome.ALREADY_DONE
    assert queue.check(ReceiptHandle(5, 0)) is Outcome.INVALID_HANDLE  # never delivered


def test_change_invisible_rearms_under_a_new_handle_and_keeps_the_attempt() -> None:
    queue = PopQueue()
    (old,) = handles(receive(queue, 0, end_offset=1))
    change = queue.plan_change_invisible(old, now_ms=10_000, invisible_ms=60_000)
    assert queue.apply(change) is Outcome.APPLIED
    new = ReceiptHandle(0, change.new_seq)
    assert queue.check(old) is Outcome.INVALID_HANDLE
    assert queue.check(new) is Outcome.APPLIED
    assert receive(queue, 69_999, end_offset=1) == []  # the old timer (30 s) no longer applies
    (back,) = receive(queue, 70_000, end_offset=1)
    assert isinstance(back, Delivered)
    assert back.attempt == 2
    # the same change again: its handle is gone
    assert queue.apply(change) is Outcome.INVALID_HANDLE


def test_after_max_attempts_an_expired_message_is_dead_lettered_not_delivered() -> None:
    queue = PopQueue(PopSettings(max_attempts=2))
    receive(queue, 0, end_offset=2, max_messages=1)  # offset 0, attempt 1
    now = INVISIBLE_MS
    second = receive(queue, now, end_offset=2, max_messages=1)  # offset 0 again, attempt 2
    assert [(r.offset, r.attempt) for r in second if isinstance(r, Delivered)] == [(0, 2)]
    third = receive(queue, now + INVISIBLE_MS, end_offset=2, max_messages=1)
    dead = [r for r in third if isinstance(r, DeadLettered)]
    assert [(d.offset, d.reason) for d in dead] == [(0, DeadLetterReason.MAX_ATTEMPTS)]
    assert offsets(third) == [1]  # the dead letter did not take the receive's one place
    assert queue.is_done(0)
    assert 0 not in offsets(receive(queue, 10 * INVISIBLE_MS, end_offset=2))


def test_forward_to_dead_letter_settles_a_message_with_a_valid_handle() -> None:
    queue = PopQueue()
    (handle,) = handles(receive(queue, 0, end_offset=1))
    stale = ReceiptHandle(0, handle.seq + 100)
    assert queue.apply(queue.plan_forward_to_dead_letter(stale, now_ms=5)) is (
        Outcome.INVALID_HANDLE
    )
    forward = queue.plan_forward_to_dead_letter(handle, now_ms=5)
    assert forward.reason is DeadLetterReason.FORWARDED
    assert queue.apply(forward) is Outcome.APPLIED
    assert queue.is_done(0)


def test_fifo_a_group_gets_its_oldest_run_and_waits_for_it() -> None:
    groups: list[str | None] = ["a", "b", "a", None, "b", None, "a"]
    queue = PopQueue(PopSettings(fifo=True))
    first = receive(queue, 0, end_offset=3, groups=groups, max_messages=2)
    assert offsets(first) == [0, 1]  # the budget ends a's run: a0, b1
    a0, b1 = handles(first)
    assert queue.apply(queue.plan_ack(b1)) is Outcome.APPLIED
    # a has a0 out and invisible: nothing of a (not a2, not the later a6); b's run, the others
    second = receive(queue, 1, end_offset=7, groups=groups)
    assert offsets(second) == [3, 4, 5]
    # everything out expires unacknowledged but b4: a0 comes back first of a, with a2 and a6
    (b4,) = (h for h in handles(second) if h.offset == 4)
    assert queue.apply(queue.plan_ack(b4)) is Outcome.APPLIED
    retry = receive(queue, INVISIBLE_MS + 1, end_offset=7, groups=groups)
    assert [(r.offset, r.attempt) for r in retry if isinstance(r, Delivered)] == [
        (0, 2), (2, 1), (3, 2), (5, 2), (6, 1),
    ]  # fmt: skip
    assert queue.apply(queue.plan_ack(a0)) is Outcome.INVALID_HANDLE  # handed out again
    # a's run is out and invisible: nothing more of a, even once some of it is acknowledged
    (a2,) = (h for h in handles(retry) if h.offset == 2)
    assert queue.apply(queue.plan_ack(a2)) is Outcome.APPLIED
    assert offsets(receive(queue, INVISIBLE_MS + 2, end_offset=7, groups=groups)) == []


def test_a_non_fifo_group_ignores_message_groups() -> None:
    groups: list[str | None] = ["a", "a", "a"]
    queue = PopQueue(PopSettings(fifo=False))
    assert offsets(receive(queue, 0, end_offset=3, groups=groups)) == [0, 1, 2]


def test_fifo_dead_letters_a_group_head_and_moves_on() -> None:
    """Rule 5 with rule 6: a head that never gets acknowledged goes to the dead letters after
    its last attempt, and only then does its group's next message go out."""
    groups: list[str | None] = ["a", "a"]
    queue = PopQueue(PopSettings(fifo=True, max_attempts=2))
    assert offsets(receive(queue, 0, end_offset=1, groups=groups)) == [0]
    again = receive(queue, INVISIBLE_MS, end_offset=2, groups=groups, max_messages=1)
    assert [(r.offset, r.attempt) for r in again if isinstance(r, Delivered)] == [(0, 2)]
    last = receive(queue, 2 * INVISIBLE_MS, end_offset=2, groups=groups)
    assert [r.offset for r in last if isinstance(r, DeadLettered)] == [0]
    assert offsets(last) == [1]


def test_settings_change_under_a_backlog() -> None:
    """Rule 7: FIFO turned on orders what comes next, including the group of a message handed
    out before (asked again); FIFO turned off stops ordering at once; a lowered maximum sends an
    expired delivery past it to the dead letters, and the state still round-trips."""
    groups: list[str | None] = ["a", "a", "a", "a"]
    queue = PopQueue(PopSettings(fifo=False, max_attempts=3))
    first = receive(queue, 0, end_offset=1, groups=groups)  # offset 0 out, no group recorded
    queue.reconfigure(PopSettings(fifo=True, max_attempts=3))
    assert offsets(receive(queue, 1, end_offset=4, groups=groups)) == []  # a's head is out
    assert queue.apply(queue.plan_ack(handles(first)[0])) is Outcome.APPLIED
    assert offsets(receive(queue, 2, end_offset=4, groups=groups, max_messages=1)) == [1]
    queue.reconfigure(PopSettings(fifo=False, max_attempts=3))
    assert offsets(receive(queue, 3, end_offset=4, groups=groups)) == [2, 3]
    retried = receive(queue, 3 + INVISIBLE_MS, end_offset=4, groups=groups)
    assert [r.attempt for r in retried if isinstance(r, Delivered)] == [2, 2, 2]
    queue.reconfigure(PopSettings(fifo=False, max_attempts=1))
    restored = PopQueue.from_snapshot(json.loads(json.dumps(queue.snapshot())))
    assert restored.snapshot() == queue.snapshot()
    dead = receive(queue, 4 + 2 * INVISIBLE_MS, end_offset=4, groups=groups)
    assert [r.offset for r in dead if isinstance(r, DeadLettered)] == [1, 2, 3]
    assert queue.low == 4


def test_two_receives_planned_on_one_state_deliver_once() -> None:
    """Rule 3: the second plan to be applied is refused whole, on every replica alike."""
    queue = PopQueue()
    args = {
        "now_ms": 0,
        "end_offset": 4,
        "max_messages": 2,
        "invisible_ms": INVISIBLE_MS,
        "group_of": no_groups,
    }
    first, second = queue.plan_receive(**args), queue.plan_receive(**args)  # type: ignore[arg-type]
    assert first == second
    assert queue.apply_all(first) == [Outcome.APPLIED] * 2
    assert queue.apply_all(second) == [Outcome.STALE] * 2
    assert offsets(receive(queue, 1, end_offset=4)) == [2, 3]


def test_handle_numbers_never_go_back() -> None:
    """Rule 3: a record whose seq is below ``next_seq`` was planned on an older state."""
    queue = PopQueue()
    assert queue.apply(Delivered(0, 5, 1, 0, 10, None)) is Outcome.APPLIED
    assert queue.next_seq == 6
    assert queue.apply(Delivered(1, 3, 1, 0, 10, None)) is Outcome.STALE
    assert queue.apply(InvisibilityChanged(0, 5, 4, 0, 10)) is Outcome.STALE
    assert queue.apply(InvisibilityChanged(0, 5, 6, 20, 19)) is Outcome.STALE  # ends before
    assert queue.check(ReceiptHandle(0, 5)) is Outcome.APPLIED


def test_apply_refuses_a_delivery_that_is_not_due() -> None:
    """Apply checks the redelivery rule itself, against the record's at_ms, so a record from a
    planner with another view (or another version) cannot hand out a message twice."""
    queue = PopQueue(PopSettings(max_attempts=2))
    assert queue.apply(Delivered(0, 0, 1, 0, 100, None)) is Outcome.APPLIED
    assert queue.apply(Delivered(0, 1, 1, 0, 100, None)) is Outcome.STALE  # not a first delivery
    # not at its last attempt yet: no dead letter for max attempts
    assert queue.apply(DeadLettered(0, 0, 100, DeadLetterReason.MAX_ATTEMPTS)) is Outcome.STALE
    assert queue.apply(Delivered(0, 1, 2, 99, 200, None)) is Outcome.STALE  # not expired at 99
    assert queue.apply(Delivered(0, 1, 3, 100, 200, None)) is Outcome.STALE  # skips attempt 2
    assert queue.apply(Delivered(0, 1, 2, 100, 99, None)) is Outcome.STALE  # ends before it starts
    assert queue.apply(Delivered(0, 1, 2, 100, 200, None)) is Outcome.APPLIED
    assert queue.apply(Delivered(0, 2, 3, 200, 300, None)) is Outcome.STALE  # past max_attempts
    # dead-lettering for max attempts needs the last attempt expired, too
    assert queue.apply(DeadLettered(0, 1, 199, DeadLetterReason.MAX_ATTEMPTS)) is Outcome.STALE
    assert queue.apply(DeadLettered(0, 1, 200, DeadLetterReason.MAX_ATTEMPTS)) is Outcome.APPLIED


def test_a_redelivery_overtaken_by_an_ack_is_stale() -> None:
    queue = PopQueue()
    (handle,) = handles(receive(queue, 0, end_offset=1))
    (redelivery,) = queue.plan_receive(
        now_ms=INVISIBLE_MS,
        end_offset=1,
        max_messages=1,
        invisible_ms=INVISIBLE_MS,
        group_of=no_groups,
    )
    assert queue.apply(queue.plan_ack(handle)) is Outcome.APPLIED
    assert queue.apply(redelivery) is Outcome.STALE


def test_apply_never_uses_the_replicas_clock() -> None:
    """The same records on a replica "later" give the same state: only at_ms counts."""
    leader, follower = PopQueue(), PopQueue()
    records = receive(leader, 0, end_offset=2)
    records += receive(leader, INVISIBLE_MS, end_offset=2)
    assert follower.apply_all(records) == [Outcome.APPLIED] * len(records)
    assert follower.snapshot() == leader.snapshot()


def test_records_survive_json() -> None:
    records: list[PopRecord] = [
        Delivered(3, 7, 2, 1000, 31_000, "g"),
        Delivered(4, 8, 1, 1000, 31_000, None),
        Acked(3, 7),
        InvisibilityChanged(4, 8, 9, 2000, 62_000),
        DeadLettered(5, 1, 3000, DeadLetterReason.MAX_ATTEMPTS),
        DeadLettered(6, 2, 3000, DeadLetterReason.FORWARDED),
    ]
    for record in records:
        assert decode_record(json.loads(json.dumps(encode_record(record)))) == record


@pytest.mark.parametrize(
    "encoded",
    [
        {"kind": "nope"},
        {"kind": "acked", "offset": 1},
        {"kind": "acked", "offset": 1, "seq": -1},
        {"kind": "acked", "offset": 1, "seq": True},
        {"kind": "acked", "offset": 1, "seq": 2, "extra": 0},
        {"kind": "dead_lettered", "offset": 1, "seq": 2, "at_ms": 3, "reason": "bored"},
        {
            "kind": "delivered",
            "offset": 1,
            "seq": 2,
            "attempt": 1,
            "at_ms": 0,
            "invisible_until_ms": 5,
            "group": 7,
        },
    ],
)
def test_malformed_records_are_refused_by_decode(encoded: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        decode_record(encoded)


def test_receipt_handle_text_round_trip() -> None:
    handle = ReceiptHandle(12, 345)
    assert ReceiptHandle.parse(str(handle)) == handle
    for bad in ("12", "12.", ".3", "a.b", "1.2.3", "-1.2"):
        with pytest.raises(ValueError, match="not a receipt handle"):
            ReceiptHandle.parse(bad)


def test_snapshot_round_trip_and_broken_snapshots() -> None:
    queue = PopQueue(PopSettings(fifo=True, max_attempts=3))
    records = receive(queue, 0, end_offset=5, groups=["a", "b", "a", None, "c"])
    queue.apply(queue.plan_ack(handles(records)[1]))
    snapshot = json.loads(json.dumps(queue.snapshot()))
    assert PopQueue.from_snapshot(snapshot).snapshot() == queue.snapshot()
    broken = dict(snapshot, next_seq=0)
    with pytest.raises(ValueError, match="next_seq"):
        PopQueue.from_snapshot(broken)
    with pytest.raises(ValueError, match="not a POP queue snapshot"):
        PopQueue.from_snapshot({"low": 0})


def test_settings_and_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        PopSettings(max_attempts=0)
    with pytest.raises(ValueError, match="max_messages"):
        PopQueue().plan_receive(
            now_ms=0, end_offset=1, max_messages=0, invisible_ms=1, group_of=no_groups
        )
