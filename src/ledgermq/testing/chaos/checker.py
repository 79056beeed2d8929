"""The judge of a chaos run: pure functions from a ``History`` to a ``Report``.

It checks what a replicated log promises to a producer, after the cluster was healed:

1. **No lost acknowledgement.** Every send acknowledged at ``(queue, offset)`` is at exactly that
   ``(queue, offset)`` on *every* replica of its broker group (each is read directly, not
   through the master; ``History.holds_queue``).
   The one way a replica may drop it is retention: under disk pressure (a full disk) the
   store deletes its oldest segments whatever their age (spec-replication-storage 1.14), and
   the replica then starts the queue at a later offset (``History.replica_first``). A message
   below that offset on a replica is *expired* there, counted, not lost, as long as another
   replica still holds it at its slot (retention deletes a prefix; a bug that loses entries
   leaves holes or tails that no replica's first offset explains). A message that retention
   deleted on *every* replica of its group can no longer be checked: it is counted apart
   ("expired everywhere, unverifiable") and the run says that its disks were too small for its
   volume (``--disk-mib``). A long run on the 128 MiB default disks deletes most of its history
   this way: the one-hour soak of 2026-11-26 wrote 1.4 GB through them.
2. **One message per slot.** No two replicas disagree on the message at a ``(queue, offset)``
   (two different messages at one slot means two masters wrote it, one of them unsafely).
3. **Per-producer order.** A producer sends one request at a time, so within one queue its
   acknowledged messages have offsets that grow with their sequence numbers; an orderly
   producer's messages (one sharding key) are all in one queue.
4. **Delivery.** Every acknowledged message reaches the consumer group; duplicates are counted,
   not failed (delivery is at-least-once).
5. **Accounting.** Failed and unknown sends are counted with how many of them were stored
   anyway. An unknown one may be stored or not; a *failed* one that was stored is a violation:
   the workload calls a send failed only when nothing can have been stored (no connection, no
   route, a refusal code the broker answers before anything reaches the log;
   ``workload.classify``), so a stored one means a refusal that was not one.
6. **Reads during faults** and 7. **offsets never go backwards**: the pull reader's record,
   judged by ``checker_reads``.
8. to 10. **POP**: an ack answered OK is final, nothing acknowledged is lost to the POP group
   (delivered or dead-lettered), delivery attempts never go backwards; judged by
   ``checker_pop`` for runs with a POP group.

The checker never talks to a cluster, so it is tested on synthetic histories, including ones
that must fail (tests/chaos/test_checker.py).
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from itertools import pairwise
from typing import TYPE_CHECKING

from ledgermq.testing.chaos.checker_pop import PopCounts, check_pop
from ledgermq.testing.chaos.checker_reads import check_live_reads, check_offsets
from ledgermq.testing.chaos.history import Outcome

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from ledgermq.testing.chaos.history import FaultRecord, History, ReadMessage, SendOp

__all__ = ["Report", "check", "format_report", "recoveries", "unavailability_windows"]

MAX_SHOWN = 20
"""Violations listed one by one; the rest are counted."""
UNAVAILABLE_GAP_MS = 1000.0
"""A stretch this long without any acknowledged send is an unavailability window."""

Slot = tuple[int, int]
MessageKey = tuple[int, int]


@dataclass
class Report:
    """The counts of the result table, and every violation as a sentence."""

    acks: int = 0
    failed: int = 0
    failed_stored: int = 0
    unknown: int = 0
    unknown_stored: int = 0
    lost: int = 0
    """Acknowledged messages missing (or misplaced) on at least one replica."""
    not_consumed: int = 0
    consumed: int = 0
    duplicates: int = 0
    """Deliveries to the consumer beyond the first of each message."""
    stored_twice: int = 0
    """Messages stored at more than one slot (a retry after an unknown outcome)."""
    expired: int = 0
    """(Acknowledged message, replica) pairs that retention deleted on that replica."""
    unverifiable: int = 0
    """Acknowledged messages that retention deleted on every replica of their group: nothing
    is left to check them against (rule 1)."""
    unverifiable_reads: int = 0
    """Pull reader reads of slots that retention deleted on every replica (rule 6)."""
    orderly_moves: int = 0
    """Times an orderly producer's key moved to another queue (two groups, one without a
    master: ``_check_orderly``)."""
    retries: int = 0
    """Attempts after the first of one message (a ``single`` producer's own retries)."""
    replicas: int = 0
    live_reads: int = 0
    """Messages the pull reader got while the faults happened."""
    bad_reads: int = 0
    """Of those, phantom or dirty reads (``checker_reads`` rule 6)."""
    offset_commits: int = 0
    """Offset commits the broker acknowledged."""
    offset_queries: int = 0
    """Offset queries the broker answered."""
    bad_offsets: int = 0
    """Offset answers that went backwards or named an offset never committed; lost commits."""
    pop: PopCounts | None = None
    """The POP group's counts (rules 8 to 10); None when the run had none."""
    faults: dict[str, int] = field(default_factory=dict)
    windows: list[tuple[float, float]] = field(default_factory=list)
    recovery_ms: dict[str, float] = field(default_factory=dict)
    """Fault kind -> the longest time from a heal to the next acknowledged send: how long the
    cluster took to serve writes again once a fault of that kind was undone."""
    unrecovered: list[str] = field(default_factory=list)
    """Faults after whose heal no send was acknowledged any more (the run ended first, or the
    cluster never came back), as ``kind nodes at S s``."""
    violations: list[str] = field(default_factory=list)
    violation_count: int = 0

    @property
    def valid(self) -> bool:
        return self.violation_count == 0

    def violate(self, sentence: str) -> None:
        self.violation_count += 1
        if len(self.violations) < MAX_SHOWN:
            self.violations.append(sentence)


def _slots(reads: Iterable[ReadMessage], report: Report, node: str) -> dict[Slot, MessageKey]:
    """``(queue, offset) -> (producer, seq)`` of one replica; a slot read twice with two
    different messages is a violation on its own."""
    slots: dict[Slot, MessageKey] = {}
    for read in reads:
        slot, key = (read.queue, read.offset), (read.producer, read.seq)
        old = slots.setdefault(slot, key)
        if old != key:
            report.violate(f"{node} serves two messages at queue {slot[0]} offset {slot[1]}")
    return slots


def unavailability_windows(
    sends: Sequence[SendOp], gap_ms: float = UNAVAILABLE_GAP_MS
) -> list[tuple[float, float]]:
    """Stretches of at least ``gap_ms`` between the workload's first invoke and last
    completion in which no send was acknowledged: ``[(start_ms, end_ms), ...]``."""
    if not sends:
        return []
    begin = min(op.invoke_ms for op in sends)
    end = max(op.complete_ms for op in sends)
    acked = sorted(op.complete_ms for op in sends if op.outcome is Outcome.OK)
    windows = []
    previous = begin
    for moment in [*acked, end]:
        if moment - previous >= gap_ms:
            windows.append((previous, moment))
        previous = max(previous, moment)
    return windows


def recoveries(
    faults: Sequence[FaultRecord], sends: Sequence[SendOp]
) -> list[tuple[FaultRecord, float | None]]:
    """Each fault with the ms from its heal to the first acknowledgement completed after it
    (None when none came). Acknowledgements during the fault do not count: a master whose
    follower is cut off keeps committing with the other one, but the fault's own replica has
    to come back too, which ``check`` verifies by reading every replica at the end."""
    acked = sorted(op.complete_ms for op in sends if op.outcome is Outcome.OK)
    found: list[tuple[FaultRecord, float | None]] = []
    for fault in faults:
        later = bisect.bisect_left(acked, fault.end_ms)
        found.append((fault, acked[later] - fault.end_ms if later < len(acked) else None))
    return found


def check(history: History) -> Report:
    """Judge ``history`` (module docstring); the report says what held and what did not."""
    report = Report()
    report.faults = dict(Counter(fault.kind for fault in history.faults))
    report.windows = unavailability_windows(history.sends)
    _measure_recovery(history, report)
    for problem in history.problems:
        report.violate(problem)
    for node, error in sorted(history.replica_errors.items()):
        report.violate(f"replica {node} could not be read after healing: {error}")

    replicas = {
        node: _slots(reads, report, node) for node, reads in sorted(history.replica_reads.items())
    }
    report.replicas = len(replicas)
    if not replicas:
        report.violate("no replica was read: nothing can be checked")

    _check_agreement(replicas, report)

    stored: dict[MessageKey, set[Slot]] = defaultdict(set)
    for slots in replicas.values():
        for slot, key in slots.items():
            stored[key].add(slot)
    report.stored_twice = sum(1 for slots in stored.values() if len(slots) > 1)

    acked = _check_sends(history, replicas, stored, report)
    _check_order(acked, report)
    _check_orderly(acked, report, len(set(history.replica_groups.values())))

    _check_reader(history, replicas, report)
    if history.pop_max_attempts:
        report.pop = check_pop(history, report.violate)

    # 4. delivery to the consumer group
    deliveries = Counter((read.producer, read.seq) for read in history.consumed)
    report.consumed = sum(deliveries.values())
    report.duplicates = sum(count - 1 for count in deliveries.values())
    expired = history.expired_messages()
    for op in acked:
        if (op.producer, op.seq) not in deliveries and (op.producer, op.seq) not in expired:
            report.not_consumed += 1
            report.violate(
                f"acknowledged producer {op.producer} seq {op.seq} never reached the consumer"
            )
    return report


def _check_sends(
    history: History,
    replicas: dict[str, dict[Slot, MessageKey]],
    stored: dict[MessageKey, set[Slot]],
    report: Report,
) -> list[SendOp]:
    """Rules 1 and 5, attempt by attempt; the acknowledged attempts.

    A message is judged by all of its attempts (a ``single`` producer retries one of unknown
    outcome): a refused attempt of a stored message is a violation only when every attempt of
    it was refused, and an unknown one counts as "stored anyway" only when no attempt of it was
    acknowledged."""
    attempts: dict[MessageKey, list[SendOp]] = defaultdict(list)
    for op in history.sends:
        attempts[(op.producer, op.seq)].append(op)
    acked: list[SendOp] = []
    for op in history.sends:
        key = (op.producer, op.seq)
        report.retries += op.attempt > 0
        if op.outcome is Outcome.FAILED:
            report.failed += 1
            if key in stored and all(a.outcome is Outcome.FAILED for a in attempts[key]):
                report.failed_stored += 1
                report.violate(
                    f"producer {op.producer} seq {op.seq} was refused ({op.error}) but stored "
                    f"at {', '.join(f'queue {q} offset {o}' for q, o in sorted(stored[key]))}"
                )
            continue
        if op.outcome is Outcome.UNKNOWN:
            report.unknown += 1
            if key in stored and all(a.outcome is not Outcome.OK for a in attempts[key]):
                report.unknown_stored += 1
            continue
        report.acks += 1
        acked.append(op)
        slot = (op.queue, op.offset)
        missing = []
        holders = {n: held for n, held in replicas.items() if history.holds_queue(n, op.queue)}
        expired = [n for n in holders if history.expired(n, op.queue, op.offset)]
        report.expired += len(expired)
        if expired and len(expired) == len(holders):
            report.unverifiable += 1
            continue
        for node, slots in holders.items():
            found = slots.get(slot)
            if found is None and node in expired:
                continue
            if found != key:
                what = "nothing" if found is None else f"producer {found[0]} seq {found[1]}"
                missing.append(f"{node} has {what}")
        if missing:
            report.lost += 1
            report.violate(
                f"acknowledged producer {op.producer} seq {op.seq} at queue {op.queue} offset "
                f"{op.offset} (acked at {op.complete_ms / 1000:.1f} s): {'; '.join(missing)}"
            )
    return acked


def _check_orderly(acked: Sequence[SendOp], report: Report, groups: int) -> None:
    """Rule 3b: an orderly producer's sharding key maps all of its messages to one queue.

    The client hashes the key over the writable queues (RocketMQ's selector), so with two
    broker groups the key moves while one group has no master and comes back after: counted
    (``orderly_moves``), not failed. With one group the queue set never changes (no master,
    no queue at all), and a second queue is a violation."""
    used: dict[int, list[int]] = defaultdict(list)
    for op in sorted(acked, key=lambda op: op.seq):
        if op.mode == "orderly" and (not used[op.producer] or used[op.producer][-1] != op.queue):
            used[op.producer].append(op.queue)
    for producer, queues in sorted(used.items()):
        if len(queues) > 1 and groups > 1:
            report.orderly_moves += len(queues) - 1
        elif len(queues) > 1:
            report.violate(
                f"orderly producer {producer} (one sharding key) was acknowledged in queues "
                f"{', '.join(map(str, sorted(set(queues))))}"
            )


def _measure_recovery(history: History, report: Report) -> None:
    for fault, recovery in recoveries(history.faults, history.sends):
        if recovery is None:
            where = ",".join(fault.nodes)
            report.unrecovered.append(f"{fault.kind} {where} at {fault.start_ms / 1000:.1f} s")
        else:
            longest = max(report.recovery_ms.get(fault.kind, 0.0), recovery)
            report.recovery_ms[fault.kind] = longest


def _check_reader(
    history: History, replicas: dict[str, dict[Slot, MessageKey]], report: Report
) -> None:
    """Rules 6 and 7: the pull reader's reads and offsets, during the faults."""
    report.live_reads = len(history.live_reads)
    report.bad_reads, report.unverifiable_reads = check_live_reads(
        history, replicas, report.violate
    )
    answered = [op for op in history.offset_ops if op.outcome is Outcome.OK]
    report.offset_commits = sum(1 for op in answered if op.kind == "commit")
    report.offset_queries = len(answered) - report.offset_commits
    report.bad_offsets = check_offsets(history, report.violate)


def _check_agreement(replicas: dict[str, dict[Slot, MessageKey]], report: Report) -> None:
    """Rule 2: replicas agree slot by slot (a slot only some replicas have is rule 1's)."""
    merged: dict[Slot, dict[MessageKey, list[str]]] = defaultdict(lambda: defaultdict(list))
    for node, slots in replicas.items():
        for slot, key in slots.items():
            merged[slot][key].append(node)
    for slot, keys in sorted(merged.items()):
        if len(keys) > 1:
            shown = "; ".join(
                f"producer {k[0]} seq {k[1]} on {', '.join(nodes)}" for k, nodes in keys.items()
            )
            report.violate(f"replicas disagree at queue {slot[0]} offset {slot[1]}: {shown}")


def _check_order(acked: Sequence[SendOp], report: Report) -> None:
    """Rule 3: per producer and queue, offsets grow with sequence numbers."""
    by_stream: dict[tuple[int, int], list[SendOp]] = defaultdict(list)
    for op in acked:
        by_stream[(op.producer, op.queue)].append(op)
    for (producer, queue), ops in sorted(by_stream.items()):
        ops.sort(key=lambda op: op.seq)
        for before, after in pairwise(ops):
            if after.offset <= before.offset:
                report.violate(
                    f"producer {producer} queue {queue}: seq {after.seq} acknowledged at "
                    f"offset {after.offset}, not after seq {before.seq} at {before.offset}"
                )


def _pop_rows(pop: PopCounts | None) -> list[tuple[str, str]]:
    if pop is None:
        return []
    return [
        ("POP deliveries (redeliveries)", f"{pop.deliveries} ({pop.redeliveries})"),
        (
            "POP acks ok, refused, unknown",
            f"{pop.acks_ok}, {pop.acks_refused}, {pop.acks_unknown}",
        ),
        ("POP delivered after an ok ack", str(pop.after_ack)),
        ("POP dead letters", str(pop.dead_letters)),
        ("POP acked, never delivered", str(pop.undelivered)),
        ("POP attempts backwards / too many", str(pop.bad_attempts)),
    ]


def format_report(report: Report) -> str:
    """The result table, then the violations (the first ``MAX_SHOWN``)."""
    down = sum(end - start for start, end in report.windows)
    longest = max((end - start for start, end in report.windows), default=0.0)
    faults = ", ".join(f"{kind} {count}" for kind, count in sorted(report.faults.items()))
    recovered = ", ".join(
        f"{kind} {ms / 1000:.1f} s" for kind, ms in sorted(report.recovery_ms.items())
    )
    if report.unrecovered:
        recovered += f"; no ack after: {', '.join(report.unrecovered)}"
    rows = [
        ("acknowledged", str(report.acks)),
        ("failed (stored anyway)", f"{report.failed} ({report.failed_stored})"),
        ("unknown outcome (stored)", f"{report.unknown} ({report.unknown_stored})"),
        ("retried attempts", str(report.retries)),
        ("orderly key moved queues", str(report.orderly_moves)),
        ("lost acknowledged", str(report.lost)),
        ("stored at two slots", str(report.stored_twice)),
        ("expired by retention (replicas)", str(report.expired)),
        (
            "expired everywhere (unverifiable)",
            f"{report.unverifiable} acknowledged, {report.unverifiable_reads} reads",
        ),
        ("replicas read", str(report.replicas)),
        ("consumed (duplicates)", f"{report.consumed} ({report.duplicates})"),
        ("acked, never consumed", str(report.not_consumed)),
        ("read during faults (bad)", f"{report.live_reads} ({report.bad_reads})"),
        (
            "offset commits, queries (bad)",
            f"{report.offset_commits}, {report.offset_queries} ({report.bad_offsets})",
        ),
        *_pop_rows(report.pop),
        ("faults", faults or "none"),
        (
            "unavailability windows",
            f"{len(report.windows)}, {down / 1000:.1f} s in all, longest {longest / 1000:.1f} s",
        ),
        ("longest recovery after heal", recovered or "no fault healed"),
        ("result", "VALID" if report.valid else f"INVALID: {report.violation_count} violations"),
    ]
    width = max(len(name) for name, _ in rows)
    lines = [f"{name:<{width}}  {value}" for name, value in rows]
    if report.unverifiable:
        why = (
            "the disk-full faults filled each replica's disk in turn and every store "
            "force-cleaned its oldest segments (or --disk-mib was too small for the volume)"
            if report.faults.get("disk-full")
            else "the disks were too small for this run's volume (--disk-mib)"
        )
        lines.append(
            f"note: retention deleted {report.unverifiable} acknowledged messages on every "
            f"replica, so they could not be checked: {why}"
        )
    if report.violations:
        lines.append("violations:")
        lines += [f"  - {sentence}" for sentence in report.violations]
        hidden = report.violation_count - len(report.violations)
        if hidden > 0:
            lines.append(f"  ... and {hidden} more")
    return "\n".join(lines)
