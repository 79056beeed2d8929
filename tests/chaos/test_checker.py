"""The chaos checker on synthetic histories: valid ones pass, each broken promise fails."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledgermq.testing.chaos.checker import (
    check,
    format_report,
    recoveries,
    unavailability_windows,
)
from ledgermq.testing.chaos.history import (
    FaultRecord,
    History,
    LiveRead,
    OffsetOp,
    Outcome,
    ReadMessage,
    SendOp,
    message_body,
    parse_body,
)

if TYPE_CHECKING:
    from pathlib import Path

NODES = ("n0", "n1", "n2")


def ok(producer: int, seq: int, queue: int, offset: int, at: float = 0.0) -> SendOp:
    return SendOp(producer, seq, at, at + 5, Outcome.OK, queue, offset)


def healthy() -> History:
    """Two producers, two queues, every send acknowledged and everywhere, consumed once."""
    history = History(seed=7, queues=2)
    history.sends = [
        ok(0, 0, 0, 0, 0),
        ok(1, 0, 1, 0, 10),
        ok(0, 1, 1, 1, 20),
        ok(1, 1, 0, 1, 30),
        SendOp(0, 2, 40, 3040, Outcome.UNKNOWN, error="timeout"),
        SendOp(1, 2, 50, 60, Outcome.FAILED, error="no route"),
    ]
    reads = [ReadMessage(op.queue, op.offset, op.producer, op.seq) for op in history.sends[:4]]
    history.replica_reads = {node: list(reads) for node in NODES}
    history.consumed = [*reads, reads[0]]
    history.faults = [FaultRecord("kill9", ("n1",), 5, 25)]
    return history


def test_a_healthy_history_is_valid() -> None:
    report = check(healthy())
    assert report.valid, report.violations
    assert (report.acks, report.failed, report.unknown, report.duplicates) == (4, 1, 1, 1)
    assert report.faults == {"kill9": 1}
    table = format_report(report)
    assert "VALID" in table
    assert "kill9 1" in table


def test_an_ack_missing_on_one_replica_fails() -> None:
    history = healthy()
    history.replica_reads["n2"] = history.replica_reads["n2"][1:]
    report = check(history)
    assert not report.valid
    assert report.lost == 1
    assert "n2 has nothing" in report.violations[0]


def test_an_ack_at_another_offset_fails() -> None:
    history = healthy()
    moved = [ReadMessage(0, 5, 0, 0) if r.seq == 0 and r.producer == 0 else r for r in
             history.replica_reads["n0"]]  # fmt: skip
    history.replica_reads = {node: list(moved) for node in NODES}
    report = check(history)
    assert report.lost == 1
    assert "queue 0 offset 0" in report.violations[0]


def test_replicas_that_disagree_fail() -> None:
    history = healthy()
    history.replica_reads["n1"] = [*history.replica_reads["n1"], ReadMessage(0, 2, 1, 9)]
    history.replica_reads["n2"] = [*history.replica_reads["n2"], ReadMessage(0, 2, 0, 9)]
    report = check(history)
    assert not report.valid
    assert any("disagree at queue 0 offset 2" in v for v in report.violations)


def test_an_overwritten_slot_fails() -> None:
    """The bug chaos exists for: an ack for a message another master later overwrote."""
    history = healthy()
    history.sends.append(ok(0, 3, 0, 2, 60))
    for node in NODES:
        history.replica_reads[node].append(ReadMessage(0, 2, 1, 3))
    report = check(history)
    assert report.lost == 1
    assert "has producer 1 seq 3" in report.violations[0]


def test_per_producer_order_within_a_queue() -> None:
    history = History(seed=1, queues=1)
    history.sends = [ok(0, 0, 0, 1), ok(0, 1, 0, 0)]
    reads = [ReadMessage(0, 1, 0, 0), ReadMessage(0, 0, 0, 1)]
    history.replica_reads = {node: list(reads) for node in NODES}
    history.consumed = list(reads)
    report = check(history)
    assert report.violation_count == 1
    assert "not after seq 0" in report.violations[0]


def test_an_ack_never_consumed_fails() -> None:
    history = healthy()
    history.consumed = history.consumed[1:-1]
    report = check(history)
    assert report.not_consumed == 1
    assert "never reached the consumer" in report.violations[0]


def test_a_problem_of_the_cluster_fails() -> None:
    history = healthy()
    history.problems.append("no master of broker-a within 30 s after healing")
    report = check(history)
    assert report.violations == ["no master of broker-a within 30 s after healing"]


def test_a_replica_that_cannot_be_read_fails() -> None:
    history = healthy()
    history.replica_errors["n1"] = "connection refused"
    assert not check(history).valid
    history.replica_reads = {}
    history.replica_errors = {}
    assert "no replica was read" in check(history).violations[0]


def test_failed_and_unknown_sends_are_accounted_for() -> None:
    history = healthy()
    for node in NODES:
        history.replica_reads[node] += [ReadMessage(1, 5, 0, 2), ReadMessage(0, 6, 1, 2)]
    report = check(history)
    assert not report.valid  # the unknown one may be stored; the refused one may not
    assert report.violation_count == 1
    assert (
        "producer 1 seq 2 was refused (no route) but stored at queue 0 offset 6"
        in (report.violations[0])
    )
    assert (report.unknown_stored, report.failed_stored) == (1, 1)


def test_unavailability_windows() -> None:
    sends = [ok(0, 0, 0, 0, 0), SendOp(0, 1, 10, 3010, Outcome.UNKNOWN), ok(0, 2, 3010, 1, 3010)]
    assert unavailability_windows(sends) == [(5.0, 3015.0)]
    assert unavailability_windows([]) == []


def test_recovery_is_the_time_from_a_heal_to_the_next_ack() -> None:
    sends = [ok(0, 0, 0, 0, 0), ok(0, 1, 0, 1, 4000), ok(0, 2, 0, 2, 9000)]
    late = FaultRecord("disk-full", ("n2",), 1000, 3000)
    again = FaultRecord("pause", ("n0",), 5000, 6000)
    last = FaultRecord("kill9", ("n1",), 9500, 9900)
    assert recoveries([late, again, last], sends) == [(late, 1005), (again, 3005), (last, None)]
    history = healthy()
    history.sends = sends
    history.faults = [late, again, last]
    history.replica_reads = {node: [ReadMessage(0, i, 0, i) for i in range(3)] for node in NODES}
    history.consumed = history.replica_reads["n0"]
    report = check(history)
    assert report.valid, report.violations  # a fault the run ended on is counted, not failed
    assert report.recovery_ms == {"disk-full": 1005, "pause": 3005}
    assert report.unrecovered == ["kill9 n1 at 9.5 s"]
    table = format_report(report)
    assert "disk-full 1.0 s, pause 3.0 s; no ack after: kill9 n1 at 9.5 s" in table


def test_reads_during_faults_must_be_of_sent_messages_at_their_final_slots() -> None:
    history = healthy()
    history.live_reads = [LiveRead(12.0, 0, 0, 0, 0), LiveRead(13.0, 1, 1, 0, 1)]
    report = check(history)
    assert report.valid, report.violations
    assert (report.live_reads, report.bad_reads) == (2, 0)
    history.live_reads += [
        LiveRead(14.0, 0, 2, 5, 5),  # nobody sent it
        LiveRead(15.0, 0, 6, 1, 2),  # refused
        LiveRead(16.0, 0, 1, 0, 1),  # acknowledged at queue 1 offset 1
        LiveRead(17.0, 1, 7, 0, 2),  # unknown outcome, read, then gone: a dirty read
    ]
    report = check(history)
    assert report.bad_reads == 4
    shown = "\n".join(report.violations)
    assert "producer 5 seq 5 at queue 0 offset 2 at 0.0 s: a message no producer sent" in shown
    assert "producer 1 seq 2 at queue 0 offset 6 at 0.0 s: a send that was refused" in shown
    assert "acknowledged at queue 1 offset 1" in shown
    assert "after healing that slot holds nothing (a dirty read)" in shown


def test_retention_on_one_replica_expires_a_prefix_and_loses_nothing() -> None:
    """A full disk makes a replica's store delete its oldest segments: below the first offset
    it still holds, a missing message is expired there, not lost, while another replica holds
    it; a message retention deleted on every replica is counted as unverifiable, not as
    checked, and the report says the disks were too small."""
    history = healthy()
    history.replica_reads["n2"] = [r for r in history.replica_reads["n2"] if r.offset >= 1]
    history.replica_first = {"n2": {0: 1, 1: 1}}
    history.live_reads = [LiveRead(1.0, 0, 0, 0, 0)]  # read before n2 deleted it
    report = check(history)
    assert report.valid, report.violations
    assert report.expired == 2  # producer 0 seq 0 and producer 1 seq 0, on n2
    assert history.expired_messages() == {(0, 0), (1, 0)}
    history.replica_reads["n2"] = history.replica_reads["n2"][1:]  # a hole above the first
    assert not check(history).valid
    history = healthy()
    for node in NODES:
        history.replica_reads[node] = [r for r in history.replica_reads[node] if r.offset >= 1]
        history.replica_first[node] = {0: 1, 1: 1}
    history.live_reads = [LiveRead(1.0, 0, 0, 0, 0)]
    report = check(history)
    assert report.lost == 0
    assert report.unverifiable == 2  # expired everywhere: nothing left to check them against
    assert report.unverifiable_reads == 1
    assert report.valid, report.violations
    assert "too small" in format_report(report)
    report.faults["disk-full"] = 3
    assert "every store force-cleaned its oldest segments" in format_report(report)
    # a hole above every replica's first offset is still a loss
    for node in NODES:
        history.replica_reads[node] = history.replica_reads[node][1:]
    assert check(history).lost >= 1


def test_a_message_is_judged_by_all_of_its_attempts() -> None:
    """A retry after an unknown outcome: the first attempt landed too (stored twice, counted);
    a refused attempt of a message whose other attempt was acknowledged is no violation."""
    history = healthy()
    history.sends += [
        SendOp(0, 3, 100, 3100, Outcome.UNKNOWN, error="timeout", attempt=0),
        SendOp(0, 3, 3200, 3210, Outcome.FAILED, error="no route", attempt=1),
        SendOp(0, 3, 3300, 3310, Outcome.OK, 1, 3, attempt=2),
    ]
    for node in NODES:
        history.replica_reads[node] += [ReadMessage(1, 2, 0, 3), ReadMessage(1, 3, 0, 3)]
    history.consumed += [ReadMessage(1, 2, 0, 3)]
    history.live_reads = [LiveRead(3000, 1, 2, 0, 3)]  # the first attempt, read at its slot
    report = check(history)
    assert report.valid, report.violations
    assert (report.retries, report.stored_twice, report.unknown_stored) == (2, 1, 0)
    assert any(
        line.split() == ["retried", "attempts", "2"] for line in format_report(report).splitlines()
    )


def test_an_orderly_producer_stays_in_one_queue() -> None:
    history = healthy()
    history.sends = [
        SendOp(2, 0, 0, 5, Outcome.OK, 1, 0, mode="orderly"),
        SendOp(2, 1, 10, 15, Outcome.OK, 0, 0, mode="orderly"),
    ]
    reads = [ReadMessage(1, 0, 2, 0), ReadMessage(0, 0, 2, 1)]
    history.replica_reads = {node: list(reads) for node in NODES}
    history.consumed = reads
    report = check(history)
    assert report.violations == [
        "orderly producer 2 (one sharding key) was acknowledged in queues 0, 1"
    ]


def test_with_two_groups_an_orderly_key_may_move_while_a_group_has_no_master() -> None:
    """The key is hashed over the writable queues: with a group without master it maps to a
    queue of the other group (RocketMQ's selector), and back after; counted, not failed."""
    history = History(seed=1, queues=1)
    history.sends = [
        SendOp(2, 0, 0, 5, Outcome.OK, 3, 0, mode="orderly"),
        SendOp(2, 1, 10, 15, Outcome.OK, 1003, 0, mode="orderly"),
        SendOp(2, 2, 20, 25, Outcome.OK, 3, 1, mode="orderly"),
    ]
    history.replica_groups = {"n0": 0, "bn0": 1}
    history.replica_reads = {
        "n0": [ReadMessage(3, 0, 2, 0), ReadMessage(3, 1, 2, 2)],
        "bn0": [ReadMessage(1003, 0, 2, 1)],
    }
    history.consumed = [ReadMessage(0, 0, 2, seq) for seq in range(3)]
    report = check(history)
    assert report.valid, report.violations
    assert report.orderly_moves == 2
    history.replica_reads["bn0"] = []  # broker-b's replica lost its message: still caught
    assert check(history).lost == 1


def commit(queue: int, offset: int, at: float, outcome: Outcome = Outcome.OK) -> OffsetOp:
    return OffsetOp("commit", queue, at, at + 10, outcome, offset)


def query(queue: int, offset: int, at: float) -> OffsetOp:
    return OffsetOp("query", queue, at, at + 10, Outcome.OK, offset)


def test_committed_offsets_never_go_backwards() -> None:
    history = healthy()
    history.offset_ops = [
        query(0, 0, 0),
        commit(0, 5, 100),
        query(0, 5, 105),  # overlaps the commit: either answer is right
        commit(0, 9, 200, Outcome.UNKNOWN),
        query(0, 9, 300),  # an unknown commit may have landed
        commit(1, 3, 100),
    ]
    history.final_offsets = {0: 9, 1: 3}
    report = check(history)
    assert report.valid, report.violations
    assert (report.offset_commits, report.offset_queries, report.bad_offsets) == (2, 3, 0)

    history.offset_ops += [query(0, 4, 400), query(0, 12, 500)]
    history.final_offsets = {0: 9, 1: 2}
    report = check(history)
    assert report.bad_offsets == 3
    assert report.violations == [
        (
            "queue 0: the committed offset went backwards: a query at 0.4 s answered 4 after "
            "a commit of 5 was acknowledged"
        ),
        (
            "queue 0: a query at 0.5 s answered offset 12, which no commit invoked before it "
            "carried (highest: 9)"
        ),
        (
            "queue 1: an acknowledged offset commit of 3 was lost: the group's offset after "
            "healing is 2"
        ),
    ]
    rows = [" ".join(line.split()) for line in format_report(report).splitlines()]
    assert "offset commits, queries (bad) 2, 5 (3)" in rows


def test_bodies_and_history_files_round_trip(tmp_path: Path) -> None:
    assert parse_body(message_body(3, 42, pad=10)) == (3, 42)
    assert parse_body(b"other") is None
    assert parse_body(b"chaos:x:1:") is None
    history = healthy()
    history.notes.append("loopback")
    history.problems.append("no master")
    history.replica_errors["n9"] = "gone"
    history.live_reads = [LiveRead(1.5, 0, 0, 0, 0)]
    history.offset_ops = [commit(0, 1, 2.0), query(0, 1, 3.0)]
    history.final_offsets = {0: 1, 1: -1}
    history.replica_first = {"n1": {0: 5, 2: 7}}
    history.replica_groups = {"n0": 0, "n1": 0, "n2": 0}
    path = tmp_path / "history.jsonl"
    history.write_jsonl(path)
    again = History.read_jsonl(path)
    assert again == history
