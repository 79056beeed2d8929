"""Rules 6 and 7 of the chaos checker: what the pull reader saw while the faults happened.

6. **No phantom or dirty reads.** Every message the reader got during the run is one a producer
   sent and was not told was refused, and the healed cluster holds it at the very queue offset
   it was read at (where it was acknowledged, if it was). Only committed entries may be visible
   (DESIGN.md, "Only committed data is visible to consumers"), and a committed entry never
   changes: a read of a message that later vanished or moved was a read of uncommitted data
   (a replica where retention deleted the slot is not asked; where it deleted the slot on
   every replica, the read is counted as unverifiable).
7. **Committed consumer offsets never go backwards.** The broker answers an offset commit once
   the ledger committed it, so the acknowledged value survives any failover: a query invoked
   after the acknowledgement answers at least that offset, and so does the query made after
   healing. A query never answers an offset that no commit invoked before it carried (a phantom
   offset).

Pure functions over a ``History``, like ``checker.py``, which calls them.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from typing import TYPE_CHECKING

from ledgermq.testing.chaos.history import Outcome

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ledgermq.testing.chaos.history import History, OffsetOp, SendOp

__all__ = ["check_live_reads", "check_offsets"]

Slot = tuple[int, int]
MessageKey = tuple[int, int]


def check_live_reads(
    history: History,
    replicas: Mapping[str, Mapping[Slot, MessageKey]],
    violate: Callable[[str], None],
) -> tuple[int, int]:
    """Rule 6 against the replicas as read after healing; the numbers of bad reads and of
    reads no replica can confirm any more (retention deleted the slot everywhere)."""
    attempts: dict[MessageKey, list[SendOp]] = defaultdict(list)
    for op in history.sends:
        attempts[(op.producer, op.seq)].append(op)
    bad = unverifiable = 0
    for read in history.live_reads:
        key, slot = (read.producer, read.seq), (read.queue, read.offset)
        where = f"queue {read.queue} offset {read.offset} at {read.at_ms / 1000:.1f} s"
        sent = attempts.get(key, [])
        outcomes = {op.outcome for op in sent}
        acked_at = {(op.queue, op.offset) for op in sent if op.outcome is Outcome.OK}
        holders = [
            slots
            for node, slots in replicas.items()
            if history.holds_queue(node, read.queue)
            and not history.expired(node, read.queue, read.offset)
        ]
        held = {slots.get(slot) for slots in holders}
        problem = ""
        if not sent:
            problem = "a message no producer sent (a phantom)"
        elif outcomes == {Outcome.FAILED}:
            problem = f"a send that was refused ({sent[0].error})"
        elif acked_at and Outcome.UNKNOWN not in outcomes and slot not in acked_at:
            queue, offset = min(acked_at)
            problem = f"acknowledged at queue {queue} offset {offset}"
        elif not holders and replicas:
            unverifiable += 1
        elif held != {key}:
            shown = ", ".join(
                "nothing" if found is None else f"producer {found[0]} seq {found[1]}"
                for found in sorted(held, key=lambda k: (-1, -1) if k is None else k)
            )
            problem = f"after healing that slot holds {shown} (a dirty read)"
        if problem:
            bad += 1
            violate(f"the pull reader read producer {key[0]} seq {key[1]} at {where}: {problem}")
    return bad, unverifiable


def check_offsets(history: History, violate: Callable[[str], None]) -> int:
    """Rule 7; the number of offset answers that broke it."""
    by_queue: dict[int, list[OffsetOp]] = defaultdict(list)
    for op in history.offset_ops:
        by_queue[op.queue].append(op)
    bad = 0
    for queue, ops in sorted(by_queue.items()):
        commits = [op for op in ops if op.kind == "commit"]
        acked = [op for op in commits if op.outcome is Outcome.OK]
        # Prefix maxima over commits sorted by time, so each query is two binary searches
        # instead of two scans: an hour's soak holds ~10^5 commits and ~10^4 queries.
        floors = _prefix_max(sorted((op.complete_ms, op.offset) for op in acked))
        ceilings = _prefix_max(sorted((op.invoke_ms, op.offset) for op in commits))
        for query in (op for op in ops if op.kind == "query" and op.outcome is Outcome.OK):
            floor = _max_before(floors, query.invoke_ms)
            ceiling = _max_before(ceilings, query.complete_ms)
            ceiling = 0 if ceiling is None else ceiling
            at = f"{query.invoke_ms / 1000:.1f} s"
            if floor is not None and query.offset < floor:
                bad += 1
                violate(
                    f"queue {queue}: the committed offset went backwards: a query at {at} "
                    f"answered {query.offset} after a commit of {floor} was acknowledged"
                )
            elif query.offset > ceiling:
                bad += 1
                violate(
                    f"queue {queue}: a query at {at} answered offset {query.offset}, which no "
                    f"commit invoked before it carried (highest: {ceiling})"
                )
        highest = max((op.offset for op in acked), default=None)
        final = history.final_offsets.get(queue, -1)
        if highest is not None and final < highest:
            bad += 1
            violate(
                f"queue {queue}: an acknowledged offset commit of {highest} was lost: the "
                f"group's offset after healing is {final}"
            )
    return bad


def _prefix_max(points: list[tuple[float, int]]) -> tuple[list[float], list[int]]:
    """(times, running maxima of the values) of ``points`` sorted by time."""
    times: list[float] = []
    maxima: list[int] = []
    best: int | None = None
    for when, value in points:
        best = value if best is None else max(best, value)
        times.append(when)
        maxima.append(best)
    return times, maxima


def _max_before(prefix: tuple[list[float], list[int]], moment: float) -> int | None:
    """The largest value of the points strictly before ``moment``; None if there are none."""
    times, maxima = prefix
    i = bisect.bisect_left(times, moment)
    return maxima[i - 1] if i else None
