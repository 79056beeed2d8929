"""The POP rules of the chaos checker (8 to 10, ``checker_pop``) on hand-made histories: a
healthy POP record passes, and each broken promise fails with a sentence that says which."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledgermq.testing.chaos.checker import check, format_report
from ledgermq.testing.chaos.history import (
    History,
    Outcome,
    PopAck,
    PopDeadLetter,
    PopDelivery,
    ReadMessage,
    SendOp,
)

if TYPE_CHECKING:
    from pathlib import Path

NODES = ("n0", "n1", "n2")
MAX_ATTEMPTS = 3


def deliver(
    producer: int, seq: int, queue: int, offset: int, at: float, attempt: int = 1
) -> PopDelivery:
    handle = f"{attempt} {int(at)} 4000 0 0 broker-a {queue} {offset}"
    return PopDelivery(0, at, at + 5, queue, offset, producer, seq, attempt, handle,
                       f"id-{queue}-{offset}")  # fmt: skip


def ack(d: PopDelivery, outcome: Outcome = Outcome.OK, after: float = 10.0) -> PopAck:
    at = d.complete_ms + after
    return PopAck(0, at, at + 5, d.queue, d.offset, d.producer, d.seq, d.handle, outcome)


def pop_history() -> History:
    """Three acknowledged sends; the group got each, acked the first at once, the second on
    its redelivery, and never acked the third, which went to the %DLQ% after 3 attempts."""
    history = History(seed=16, queues=1, pop_max_attempts=MAX_ATTEMPTS)
    history.sends = [SendOp(0, seq, seq, seq + 5, Outcome.OK, 0, seq) for seq in range(3)]
    reads = [ReadMessage(0, seq, 0, seq) for seq in range(3)]
    history.replica_reads = {node: list(reads) for node in NODES}
    history.consumed = list(reads)
    first = deliver(0, 0, 0, 0, 100)
    second = [deliver(0, 1, 0, 1, 100), deliver(0, 1, 0, 1, 4200, attempt=2)]
    third = [deliver(0, 2, 0, 2, 100 + 4100 * i, attempt=i + 1) for i in range(3)]
    history.pop_deliveries = [first, *second, *third]
    history.pop_acks = [
        ack(first),
        ack(second[0], Outcome.UNKNOWN, after=3000),  # a timeout: promises nothing
        ack(second[1]),
        ack(third[0], Outcome.FAILED, after=5000),  # stale by then: refused
    ]
    history.pop_dead_letters = [PopDeadLetter(0, 2, "id-0-2")]
    return history


def test_a_healthy_pop_record_is_valid_and_counted() -> None:
    report = check(pop_history())
    assert report.valid, report.violations
    assert report.pop is not None
    pop = report.pop
    assert (pop.deliveries, pop.redeliveries, pop.dead_letters) == (6, 3, 1)
    assert (pop.acks_ok, pop.acks_refused, pop.acks_unknown) == (2, 1, 1)
    assert (pop.after_ack, pop.undelivered, pop.bad_attempts) == (0, 0, 0)
    table = format_report(report)
    assert "POP deliveries (redeliveries)      6 (3)" in table
    assert "POP acks ok, refused, unknown      2, 1, 1" in table
    assert "POP delivered after an ok ack      0" in table


def test_a_run_without_a_pop_group_has_no_pop_rows() -> None:
    history = pop_history()
    history.pop_max_attempts = 0
    report = check(history)
    assert report.pop is None
    assert "POP" not in format_report(report)


def test_rule_8_a_delivery_after_an_ok_ack_fails() -> None:
    history = pop_history()
    first = history.pop_deliveries[0]
    history.pop_deliveries.append(deliver(0, 0, 0, 0, 9000, attempt=2))
    report = check(history)
    assert not report.valid
    assert report.pop is not None
    assert report.pop.after_ack == 1
    assert any(
        "queue 0 offset 0 (producer 0 seq 0) was delivered again (attempt 2" in v
        and f"answered OK at {(first.complete_ms + 15) / 1000:.1f} s" in v
        for v in report.violations
    ), report.violations


def test_rule_8_a_delivery_concurrent_with_the_ack_is_allowed() -> None:
    """A receive invoked before the ack was answered ran concurrently with it: at-least-once
    allows it (the broker may hand the message out again before the ack commits)."""
    history = pop_history()
    ok = history.pop_acks[0]
    history.pop_deliveries.append(
        PopDelivery(1, ok.complete_ms - 1, ok.complete_ms + 50, 0, 0, 0, 0, 2, "h", "id-0-0")
    )
    assert check(history).valid


def test_rule_8_an_acked_message_in_the_dlq_fails() -> None:
    history = pop_history()
    history.pop_dead_letters.append(PopDeadLetter(0, 0, "id-0-0"))
    report = check(history)
    assert not report.valid
    assert any("offset 0 is in the group's %DLQ% although its ack was answered OK" in v
               for v in report.violations)  # fmt: skip


def test_rule_9_an_acknowledged_send_never_delivered_fails() -> None:
    history = pop_history()
    history.pop_deliveries = [d for d in history.pop_deliveries if d.seq != 1]
    history.pop_acks = [a for a in history.pop_acks if a.seq != 1]
    report = check(history)
    assert not report.valid
    assert report.pop is not None
    assert report.pop.undelivered == 1
    assert any("producer 0 seq 1 (queue 0 offset 1) never reached the POP group" in v
               for v in report.violations)  # fmt: skip


def test_rule_9_a_dead_letter_counts_as_reached() -> None:
    """A message the group only saw in its %DLQ% (its deliveries' answers were lost) is not
    lost."""
    history = pop_history()
    history.pop_deliveries = [d for d in history.pop_deliveries if d.seq != 2]
    history.pop_acks = [a for a in history.pop_acks if a.seq != 2]
    assert check(history).valid


def test_rule_9_retention_deleted_messages_are_not_required() -> None:
    history = pop_history()
    history.pop_deliveries = [d for d in history.pop_deliveries if d.seq != 1]
    history.pop_acks = [a for a in history.pop_acks if a.seq != 1]
    history.replica_first = {"n1": {0: 2}}  # n1 deleted offsets 0 and 1
    assert check(history).valid


def test_rule_9_a_message_out_of_attempts_missing_from_the_dlq_fails() -> None:
    history = pop_history()
    history.pop_dead_letters = []
    report = check(history)
    assert not report.valid
    assert any("offset 2 was delivered 3 times (retryMaxTimes) and never acked, but is not "
               "in the group's %DLQ%" in v for v in report.violations)  # fmt: skip


def test_rule_9_an_unknown_ack_excuses_the_dlq() -> None:
    """An ack of unknown outcome may have taken effect: the message need not be in the DLQ."""
    history = pop_history()
    history.pop_dead_letters = []
    history.pop_acks.append(ack(history.pop_deliveries[-1], Outcome.UNKNOWN))
    assert check(history).valid


def test_rule_10_an_attempt_that_goes_backwards_fails() -> None:
    history = pop_history()
    history.pop_deliveries.append(deliver(0, 2, 0, 2, 20000, attempt=1))
    report = check(history)
    assert not report.valid
    assert report.pop is not None
    assert report.pop.bad_attempts >= 1
    assert any("offset 2: the delivery attempt went backwards: 3 answered" in v
               for v in report.violations)  # fmt: skip


def test_rule_10_a_repeated_attempt_fails_and_concurrent_ones_do_not() -> None:
    history = pop_history()
    history.pop_deliveries.append(deliver(0, 1, 0, 1, 8000, attempt=2))
    report = check(history)
    assert any("offset 1: the delivery attempt repeated: 2" in v for v in report.violations)
    overlapping = pop_history()
    second = overlapping.pop_deliveries[2]
    overlapping.pop_deliveries.append(
        PopDelivery(1, second.invoke_ms - 1, second.complete_ms + 1, 0, 1, 0, 1, 2, "h")
    )
    assert check(overlapping).valid, check(overlapping).violations


def test_rule_10_an_attempt_past_retry_max_times_fails() -> None:
    history = pop_history()
    history.pop_deliveries.append(deliver(0, 2, 0, 2, 20000, attempt=MAX_ATTEMPTS + 1))
    report = check(history)
    assert any("delivered at attempt 4, past retryMaxTimes 3" in v for v in report.violations)


def test_the_pop_record_round_trips_through_jsonl(tmp_path: Path) -> None:
    history = pop_history()
    history.write_jsonl(tmp_path / "history.jsonl")
    again = History.read_jsonl(tmp_path / "history.jsonl")
    assert again.pop_deliveries == history.pop_deliveries
    assert again.pop_acks == history.pop_acks
    assert again.pop_dead_letters == history.pop_dead_letters
    assert again.pop_max_attempts == MAX_ATTEMPTS
    assert check(again).valid
